"""The multi-GPU layouts `kvplan plan` searches beyond replicating a TP x PP engine
(capacity/search.py): a MoE model's data parallel as vLLM shards its experts (with and without
expert parallel), and decode context parallel over an engine's TP ranks. Each layout is planned
by the estimate (capacity/estimate.py plan, the world of ranks in capacity/ranks.py); each
returns the options that meet the target.
"""

from __future__ import annotations

import math

from kvplan.capacity.search_option import Option
from kvplan.errors import KvplanError


def engine_capacity(p, workload):
    """(requests one engine serves, what binds it, the workload capacity or None)."""
    if workload is not None:
        cap = workload.capacity(p)
        return cap.requests, cap.binding, cap
    seqs = p.effective["max_num_seqs"]
    return min(p.max_concurrency, float(seqs)), ("kv_cache" if p.max_concurrency < seqs else "max_num_seqs"), None


def moe_dp_options(spec, gpu, args, env, target, dp_replicas: int, max_dp: int, price, gpus_per_node, workload,
                   expert_parallel: tuple[bool, ...] = (False, True)):
    """A MoE engine that needs ``dp_replicas`` copies as DP 1 engines, planned as vLLM runs
    ``--data-parallel-size``: experts sharded over TP x PCP x DP, without and with
    ``--enable-expert-parallel`` (capacity/ranks.py). For each, the smallest DP (2 ..
    ``dp_replicas``, at most ``max_dp``) whose engines together meet the target; every engine
    is the binding engine's (Plan.max_concurrency), so the count is conservative where EP splits
    experts unevenly. Layouts vLLM refuses (an expert intermediate that does not divide) are
    left out. ``expert_parallel``: the --enable-expert-parallel values to try. Returns a list
    of Option."""
    from kvplan.capacity.estimate import plan

    out = []
    for ep in expert_parallel:
        for dp in range(2, min(dp_replicas, max_dp) + 1):
            try:
                a = args.model_copy(update={"data_parallel_size": dp, "enable_expert_parallel": ep})
                p = plan(spec, gpu, a, env)
            except KvplanError:
                break
            if not p.fits:
                continue
            per_engine, binding, cap = engine_capacity(p, workload)
            if per_engine > 0 and per_engine * dp >= target.concurrency - 1e-9:
                out.append(Option(p, dp, per_engine, price, binding, target, gpus_per_node, cap))
                break
    return out


def dcp_size(spec, tp: int) -> int:
    """The largest --decode-context-parallel-size vLLM accepts on ``tp`` TP ranks (1 = none):
    MLA (one latent head, replicated on every TP rank) any divisor of TP, so TP itself; GQA/MHA
    only when TP > KV heads, at most TP // KV heads, dividing the query heads per KV head and TP
    (config/model.py, config/parallel.py; capacity/ranks.py validate). Sliding-window and hybrid
    models take none (only full-attention caches shard)."""
    from kvplan.model.spec import LayerKind

    kinds = {k for k in spec.layer_kinds if k != LayerKind.NONE}
    if tp <= 1 or not kinds <= {LayerKind.FULL, LayerKind.MLA}:
        return 1
    if spec.uses_mla:
        return tp
    kv, heads = spec.attention.num_key_value_heads, spec.attention.num_attention_heads
    if tp <= kv:
        return 1
    return max(d for d in range(1, tp // kv + 1) if tp % d == 0 and (heads // kv) % d == 0)


def dcp_options(spec, gpu, args, env, target, max_dp: int, price, gpus_per_node, workload):
    """The engine with decode context parallel over its TP ranks (dcp_size): the same GPUs,
    each request's KV tokens spread over dcp of them, so about dcp x the requests per engine.
    Replicated with --data-parallel-size for a dense model; a MoE model that would need more
    than one engine is left to moe_dp_options. Returns a list of at most one Option."""
    from kvplan.capacity.estimate import plan

    dcp = dcp_size(spec, args.tensor_parallel_size)
    if dcp <= 1:
        return []
    try:
        p = plan(spec, gpu, args.model_copy(update={"decode_context_parallel_size": dcp}), env)
    except KvplanError:
        return []
    if not p.fits:
        return []
    per_engine, binding, cap = engine_capacity(p, workload)
    if per_engine <= 0:
        return []
    dp = max(1, math.ceil(target.concurrency / per_engine - 1e-9))
    if dp > max_dp or (spec.moe is not None and dp > 1):
        return []
    return [Option(p, dp, per_engine, price, binding, target, gpus_per_node, cap)]
