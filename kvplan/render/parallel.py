"""The multi-GPU layout of a Plan in every output format: the ``parallel`` section of the estimate
JSON, its lines in the table and the YAML's comments, and the launch line of every node.

Shown only for a layout beyond one TP/PP engine (data, expert or context parallel, several
nodes: capacity/ranks.py LayoutPlan.shown). Every number here depends on a rule restated from
vLLM's source and never run on multi-GPU hardware, and each format says so in the same words
(engines/vllm/rules.py MULTI_GPU_UNCHECKED).
"""

from __future__ import annotations

import shlex

from kvplan.capacity.estimate import Plan
from kvplan.engines.vllm.rules import MULTI_GPU_UNCHECKED

# Where the leader's address goes in a launch line: kvplan cannot know it.
LEADER_ADDRESS = "<LEADER_ADDRESS>"
# The per-node flags a launch line sets itself (dropped from the user's serve line first).
_NODE_FLAGS = {"--nnodes": 1, "-n": 1, "--node-rank": 1, "-r": 1, "--headless": 0,
               "--data-parallel-address": 1, "-dpa": 1, "--master-addr": 1}


def shown(plan: Plan) -> bool:
    """The plan has a multi-GPU layout to show (LayoutPlan.shown)."""
    return plan.parallel is not None and plan.parallel.shown


def launch_lines(plan: Plan, command: str) -> list[dict]:
    """One ``{"node_rank", "headless", "command"}`` per node: the serve line ``command``
    (render/serve.py serve_command) with ``--nnodes N
    --node-rank K`` (``--headless`` on every node but the first: vLLM entrypoints/cli/serve.py
    run_headless starts no API server there) and the leader's address, ``--data-parallel-address``
    with data parallel, ``--master-addr`` without (config/parallel.py): the one the user gave,
    else LEADER_ADDRESS. One node: the serve line as it is."""
    world = plan.parallel.world if plan.parallel is not None else None
    if world is None or world.nnodes <= 1:
        return [{"node_rank": 0, "headless": False, "command": command}]
    toks = shlex.split(command)
    base, i = [], 0
    while i < len(toks):
        width = _NODE_FLAGS.get(toks[i].split("=", 1)[0])
        if width is None:
            base.append(toks[i])
            i += 1
        else:
            i += 1 + (width if "=" not in toks[i] else 0)
    address = "--data-parallel-address" if world.dp > 1 else "--master-addr"
    given = plan.args.data_parallel_address if world.dp > 1 else plan.args.master_addr
    leader = given or LEADER_ADDRESS  # the user's address when the serve line named it
    out = []
    for k in range(world.nnodes):
        line = [*base, "--nnodes", str(world.nnodes), "--node-rank", str(k), *(["--headless"] if k else []),
                 address, leader]
        out.append({"node_rank": k, "headless": bool(k), "command": shlex.join(line).replace(
            shlex.quote(LEADER_ADDRESS), LEADER_ADDRESS)})
    return out


def _fraction(c) -> str:
    return f"1/{c.expert_shards} of every expert" if c.expert_shards > 1 else "every expert whole"


def parallel_section(plan: Plan, command: str) -> dict | None:
    """The estimate JSON's ``parallel`` object (None when not shown): the layout, every rank
    class (one GPU of each: bytes, blocks), every DP engine's pool as it logs it, the cluster
    totals, each node's launch line and the evidence label (MULTI_GPU_UNCHECKED)."""
    if not shown(plan):
        return None
    lp = plan.parallel
    w = lp.world
    return {
        "tensor_parallel_size": w.tp,
        "pipeline_parallel_size": w.pp,
        "data_parallel_size": w.dp,
        "prefill_context_parallel_size": w.pcp,
        "decode_context_parallel_size": w.dcp,
        "expert_parallel": w.uses_ep,
        "expert_parallel_size": w.expert_group if w.uses_ep else None,
        "num_experts": w.num_experts,
        "num_redundant_experts": w.redundant,
        "gpus": w.gpus,
        "gpus_per_engine": w.engine_gpus,
        "nnodes": w.nnodes,
        "engines_per_node": w.data_parallel_size_local,
        "engines_independent": not w.is_moe,
        "rank_classes": [
            {
                "pipeline_rank": c.rank_class.pipeline_rank,
                "layers": [c.rank_class.layers.start, c.rank_class.layers.stop],
                "local_experts": c.rank_class.local_experts,
                "expert_shards": c.rank_class.expert_shards if w.is_moe else None,
                "gpus": c.rank_class.gpus,
                "weights_bytes": c.stage.budget.weights_bytes,
                "kv_cache_bytes": c.stage.budget.kv_cache_bytes,
                "num_gpu_blocks": c.stage.num_blocks,
                "binding": c is lp.binding,
            }
            for c in lp.classes
        ],
        "engines": [
            {
                "data_parallel_rank": e.index,
                "num_gpu_blocks": e.num_gpu_blocks,
                "gpu_kv_cache_tokens": e.gpu_kv_cache_tokens,
                "max_concurrency": round(e.max_concurrency, 2),
                "local_experts": e.local_experts,
            }
            for e in lp.engines
        ],
        "cluster": {
            "gpu_kv_cache_tokens": lp.cluster_kv_cache_tokens,
            "max_concurrency": round(lp.cluster_concurrency, 2),
        },
        "launch": launch_lines(plan, command),
        "evidence": MULTI_GPU_UNCHECKED,
    }


def _engine_groups(lp) -> list[tuple[str, object]]:
    """Engines with identical pools as ("engines 0-6", pool) / ("engine 7", pool): the figures
    the line prints, so engines whose GPUs hold different expert counts but take the same
    (world-group min) pool print as one."""
    groups: list[tuple[list[int], object]] = []
    for e in lp.engines:
        key = (e.num_gpu_blocks, e.gpu_kv_cache_tokens, round(e.max_concurrency, 2))
        if groups and groups[-1][1][0] == key:
            groups[-1][0].append(e.index)
        else:
            groups.append(([e.index], (key, e)))
    out = []
    for idx, (_, e) in groups:
        label = f"engine {idx[0]}" if len(idx) == 1 else f"engines {idx[0]}-{idx[-1]}"
        out.append((label, e))
    return out


def summary_lines(plan: Plan, command: str) -> list[str]:
    """The layout in plain lines (the table prints them; the YAML carries them as comments):
    GPUs, the expert split, each rank class, each engine's pool, the cluster, every node's
    launch line, and the evidence label."""
    if not shown(plan):
        return []
    lp = plan.parallel
    w = lp.world
    gib = 2**30
    shape = f"TP {w.tp} x PP {w.pp} x DP {w.dp}" + (f" x PCP {w.pcp}" if w.pcp > 1 else "")
    lines = [f"multi-GPU layout: {shape} = {w.gpus} GPUs ({w.engine_gpus} per engine"
             + (f", {w.nnodes} nodes" if w.nnodes > 1 else "") + ")"]
    if w.is_moe:
        if w.uses_ep:
            counts = sorted(set(w.experts_per_ep_rank), reverse=True)
            lines.append(f"expert parallel over {w.expert_group} GPUs: {w.num_experts} routed experts"
                         + (f" + {w.redundant} redundant" if w.redundant else "")
                         + " -> " + " or ".join(str(n) for n in counts) + " whole experts per GPU")
        else:
            lines.append(f"experts sharded over TP x PCP x DP = {w.expert_group} GPUs: each holds 1/{w.expert_group} "
                         "of every expert (no --enable-expert-parallel)")
    elif w.dp > 1:
        lines.append(f"{w.dp} independent engines (a dense model's DP ranks are each a DP 1 deployment)")
    if w.dcp > 1:
        lines.append(f"decode context parallel {w.dcp}: each request's KV tokens spread over {w.dcp} GPUs "
                     f"(the same blocks hold {w.dcp}x the tokens)")
    if w.pcp > 1:
        lines.append(f"prefill context parallel {w.pcp}: {w.pcp}x the GPUs, the KV cache replicated (no more capacity)")
    for c in lp.classes:
        rc = c.rank_class
        share = (f"{rc.local_experts} experts" if rc.local_experts is not None
                 else (_fraction(rc) if w.is_moe else "dense"))
        lines.append(
            f"  stage {rc.pipeline_rank} (layers {rc.layers.start}-{rc.layers.stop - 1}), {share}, {rc.gpus} GPU(s): "
            f"weights {c.stage.budget.weights_bytes / gib:.2f} GiB, KV cache {c.stage.budget.kv_cache_bytes / gib:.2f} GiB, "
            f"{c.stage.num_blocks:,} blocks" + ("  <- binds" if c is lp.binding else "")
        )
    for label, e in _engine_groups(lp):
        lines.append(f"  {label}: {e.num_gpu_blocks:,} blocks, {e.gpu_kv_cache_tokens:,} tokens, "
                     f"{e.max_concurrency:.2f}x concurrency (as each engine logs it)")
    # engines whose own workers differ (rank classes with different block counts) yet log one pool
    if len(lp.engines) > 1 and len({e.num_gpu_blocks for e in lp.engines}) == 1 \
            and len({c.stage.num_blocks for c in lp.classes}) > 1:
        lines.append("  every engine takes the smallest pool: the block count is the min over the whole world "
                     "group (the extensible KV cache), not each engine's own")
    lines.append(f"cluster: {len(lp.engines)} engine(s), {lp.cluster_kv_cache_tokens:,} tokens, "
                 f"{lp.cluster_concurrency:.2f} max-length requests at once")
    if w.nnodes > 1:
        for ln in launch_lines(plan, command):
            lines.append(f"node {ln['node_rank']}: {ln['command']}")
    lines.append(f"multi-GPU figures: {MULTI_GPU_UNCHECKED}")
    return lines


def print_parallel(plan: Plan, console, command: str) -> None:
    """The table's multi-GPU block (summary_lines; ``command`` the serve line); nothing for a
    plain engine."""
    from rich.text import Text

    for line in summary_lines(plan, command):
        console.print(Text(line), soft_wrap=True, highlight=False)
