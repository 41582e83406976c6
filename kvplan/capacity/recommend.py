"""Flag recommendations for a Plan, each with a one-line reason and the numbers behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.capacity.estimate import Plan

GiB = 1 << 30


# What a recommendation is for (Recommendation.kind):
#   "fix": needed for vLLM to start (or to start without running out of memory);
#   "pin": makes vLLM size what kvplan sized (a value --max-model-len auto resolved to);
#   "option": raises the binding limit at a cost you choose to pay (not put in the serve line).
KINDS = ("fix", "pin", "option")


@dataclass(frozen=True)
class Recommendation:
    flag: str
    value: object
    reason: str
    kind: str = "fix"

    @property
    def in_serve_line(self) -> bool:
        """True when the serve line carries it (fixes and pins; options are listed only)."""
        return self.kind in ("fix", "pin")


def recommendations(plan: Plan) -> list[Recommendation]:
    """What to pass to `vllm serve` and why, from the plan's own numbers.

    Only flags that change something: a fix when vLLM would not start, else what raises the
    binding limit (the KV cache: an fp8 KV cache; max_num_seqs: a larger --max-num-seqs), each
    with the number it gives (re-planned, not guessed). Never a value equal to vLLM's default.
    """
    from kvplan.capacity.outcomes import StartOutcome

    eff = plan.effective
    out: list[Recommendation] = []
    mml = eff["max_model_len"]
    if not plan.fits:
        if plan.outcome is StartOutcome.CUDA_GRAPH_CAPTURE_OOM:
            out.extend(_graph_room(plan, "fix"))
            return out
        if plan.largest_max_model_len and plan.largest_max_model_len > 0:
            asked = (
                f"asked {mml}"
                if plan.args.max_model_len not in (None, -1)
                else f"the model's default {plan.spec.derived_max_model_len}"
            )
            out.append(
                Recommendation(
                    "--max-model-len",
                    plan.largest_max_model_len,
                    f"the largest context whose one request fits the KV cache ({asked})",
                )
            )
        worst = plan.worst_stage.budget
        if worst.kv_cache_bytes <= 0 or not plan.largest_max_model_len:
            out.extend(_unblock(plan, worst))
        return out
    if plan.args.max_model_len == -1 and mml != plan.spec.derived_max_model_len:
        out.append(
            Recommendation(
                "--max-model-len",
                mml,
                f"pin what --max-model-len auto resolved to here (vLLM's default is the model's "
                f"{plan.spec.derived_max_model_len} tokens)",
                kind="pin",
            )
        )
    out.extend(_graph_room(plan, "fix"))
    if plan.binding_limit == "kv_cache":
        rec = _fp8_kv(plan)
        if rec is not None:
            out.append(rec)
    else:
        rec = _more_seqs(plan)
        if rec is not None:
            out.append(rec)
    return out


def _replan(plan: Plan, **update):
    """The plan with some EngineArgs changed, or None when the planner refuses them."""
    from kvplan.errors import KvplanError
    from kvplan.capacity.estimate import plan as replan

    try:
        return replan(plan.spec, plan.gpu, plan.args.model_copy(update=update), plan.env)
    except (KvplanError, ValueError):
        return None


def _requests(p: Plan) -> int:
    """Max-length requests that run at once: the KV cache's count capped by max_num_seqs."""
    return min(math.floor(p.max_concurrency + 1e-9), p.effective["max_num_seqs"])


def _fp8_kv(plan: Plan) -> Recommendation | None:
    """--kv-cache-dtype fp8 when the KV cache binds, with the tokens and requests it gives."""
    eff = plan.effective
    if eff["kv_cache_dtype"] != "auto" or not plan.gpu.fp8_supported or plan.spec.is_hybrid:
        return None
    p = _replan(plan, kv_cache_dtype="fp8")
    if p is None or not p.fits or p.gpu_kv_cache_tokens <= plan.gpu_kv_cache_tokens:
        return None
    return Recommendation(
        "--kv-cache-dtype",
        "fp8",
        f"the KV cache binds: fp8 gives {p.gpu_kv_cache_tokens:,} tokens instead of {plan.gpu_kv_cache_tokens:,}, "
        f"{_requests(p):,} requests of {eff['max_model_len']:,} tokens at once instead of {_requests(plan):,} "
        "(small accuracy cost; check your evals)",
        kind="option",
    )


def _more_seqs(plan: Plan) -> Recommendation | None:
    """--max-num-seqs N when max_num_seqs binds: the most max-length requests the KV cache holds,
    re-planned with N (a larger max_num_seqs also raises the sampler's activation, so N may come
    down a little); None when no larger N keeps vLLM starting."""
    eff = plan.effective
    seqs = eff["max_num_seqs"]
    n = math.floor(plan.max_concurrency + 1e-9)
    for _ in range(4):
        if n <= seqs:
            return None
        update = {"max_num_seqs": n}
        if plan.args.max_num_batched_tokens is not None and plan.args.max_num_batched_tokens < n:
            return None  # the user's --max-num-batched-tokens is below it: vLLM refuses
        p = _replan(plan, **update)
        if p is None or not p.fits:
            return None
        if p.effective["max_num_batched_tokens"] < n:
            return None
        got = math.floor(p.max_concurrency + 1e-9)
        if got >= n:
            return Recommendation(
                "--max-num-seqs",
                n,
                f"max_num_seqs {seqs} binds: the KV cache holds {got:,} requests of {eff['max_model_len']:,} tokens, "
                f"so {n:,} run at once instead of {seqs:,}",
                kind="option",
            )
        n = got
    return None


def _graph_room(plan: Plan, kind: str) -> list[Recommendation]:
    """A --gpu-memory-utilization that leaves room for CUDA graphs beside the requested memory
    (graphs are captured after the KV cache is allocated, outside it, on the V2 runner; a full
    prefill then needs the activation memory again): the largest u with
    ceil(total * u) + graphs <= free at start, over all stages, rounded down to 0.001. Empty
    when graphs already fit or no such u is in (0, 1]."""
    worst = None
    for st in plan.stages:
        b = st.budget
        if not b.cudagraph_bytes or b.cudagraph_applied_bytes:
            continue
        if b.requested_bytes + b.cudagraph_bytes <= b.free_at_start_bytes:
            continue
        u = math.floor(1000 * (b.free_at_start_bytes - b.cudagraph_bytes) / b.total_bytes) / 1000
        if worst is None or u < worst[0]:
            worst = (u, b)
    if worst is None:
        return []
    u, b = worst
    if not 0 < u < plan.effective["gpu_memory_utilization"]:
        return []
    return [
        Recommendation(
            "--gpu-memory-utilization",
            u,
            f"CUDA graphs (~{b.cudagraph_bytes / GiB:.2f} GiB) are captured after the KV cache, outside the requested "
            f"memory; {u} leaves them room (or pass --enforce-eager to capture none)",
            kind=kind,
        )
    ]


def _unblock(plan: Plan, b) -> list[Recommendation]:
    """Flags that would leave room for the KV cache when nothing is left: a higher
    --gpu-memory-utilization if that alone suffices, else the smallest larger TP whose weight
    share (about weights / k) would leave room; never a change that cannot help."""
    from kvplan.engines.vllm import versions

    mem = (plan.rules or versions.default()).memory
    NON_TORCH_MULTI_GPU_EXTRA, REDUNDANCY_BUFFER = mem.NON_TORCH_MULTI_GPU_EXTRA, mem.REDUNDANCY_BUFFER

    eff = plan.effective
    other = b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_applied_bytes
    util = eff["gpu_memory_utilization"]
    out: list[Recommendation] = []
    if b.kv_cache_memory_override:
        # --kv-cache-memory-bytes ignores the utilization; suggest vLLM's own "fully utilize gpu
        # memory" value (free memory at start minus everything else, minus 150 MiB), the smallest
        # over pipeline stages since every stage allocates the same KV size.
        room = min(st.budget.fill_gpu_kv_cache_memory_bytes for st in plan.stages)
        if room > 0:
            too_big = b.kv_cache_bytes > room
            out.append(
                Recommendation(
                    "--kv-cache-memory-bytes",
                    int(room),
                    (
                        f"{b.kv_cache_bytes / GiB:.1f} GiB of KV cache does not fit beside {b.weights_bytes / GiB:.1f} GiB "
                        f"of weights on this {b.total_bytes / GiB:.1f} GiB GPU"
                        if too_big
                        else f"{b.kv_cache_bytes / GiB:.2f} GiB of KV cache is too small for one "
                        f"{eff['max_model_len']}-token request"
                    )
                    + " (vLLM's own 'fully utilize gpu memory' figure)",
                )
            )
        return out
    if b.requested_bytes > b.free_at_start_bytes and b.checks_free_memory:
        util = math.floor(1000 * (b.free_at_start_bytes - (1 << 20)) / b.total_bytes) / 1000  # round down
        if not 0 < util <= 1:
            return out  # nothing is free at start-up: no utilization helps (never recommend one outside (0, 1])
        out.append(
            Recommendation(
                "--gpu-memory-utilization",
                util,
                f"vLLM refuses a request above the {b.free_at_start_bytes / GiB:.2f} GiB free at start-up",
            )
        )
        from kvplan.errors import KvplanError
        from kvplan.capacity.estimate import plan as replan

        try:
            lowered = replan(plan.spec, plan.gpu, plan.args.model_copy(update={"gpu_memory_utilization": util}), plan.env)
        except KvplanError:
            return out
        if not lowered.fits and lowered.largest_max_model_len:
            out.append(
                Recommendation(
                    "--max-model-len",
                    lowered.largest_max_model_len,
                    f"at --gpu-memory-utilization {util} the largest context whose one request fits",
                )
            )
        return out
    for target in (0.92, 0.95):
        if target > util and b.total_bytes * target - b.weights_bytes - other > b.total_bytes * 0.02:
            out.append(
                Recommendation(
                    "--gpu-memory-utilization",
                    target,
                    f"at {util} only {b.requested_bytes / GiB:.1f} GiB is requested; weights alone take "
                    f"{b.weights_bytes / GiB:.1f} GiB",
                )
            )
            return out
    heads = plan.spec.attention.num_attention_heads
    tp = eff["tensor_parallel_size"]
    extra = 0 if tp * eff["pipeline_parallel_size"] > 1 else NON_TORCH_MULTI_GPU_EXTRA  # NCCL buffers appear
    for k in (2, 4, 8, 16):
        new_tp = tp * k
        if heads % new_tp:
            continue
        if new_tp > 8:
            # tensor parallelism stays inside one node (8 GPUs); split further by pipeline stages
            pp = eff["pipeline_parallel_size"] * (new_tp // 8)
            share = _weights_per_gpu(plan, b, k, tensor_parallel_size=8, pipeline_parallel_size=pp)
            if share is not None and b.requested_bytes - share - other - extra > b.requested_bytes * 0.05:
                out.append(
                    Recommendation(
                        "--pipeline-parallel-size",
                        pp,
                        f"weights take {b.weights_bytes / GiB:.1f} GiB per GPU; with --tensor-parallel-size 8 inside "
                        f"a node and {pp} pipeline stages across nodes each GPU holds about {share / GiB:.1f} GiB",
                    )
                )
                if tp != 8:
                    out.append(Recommendation("--tensor-parallel-size", 8, "tensor parallelism within one 8-GPU node"))
            break
        share = _weights_per_gpu(plan, b, k, tensor_parallel_size=new_tp,
                                 pipeline_parallel_size=eff["pipeline_parallel_size"])
        if share is not None and b.requested_bytes - share - other - extra > b.requested_bytes * 0.05:
            out.append(
                Recommendation(
                    "--tensor-parallel-size",
                    new_tp,
                    f"weights take {b.weights_bytes / GiB:.1f} GiB of {b.requested_bytes / GiB:.1f} GiB requested per GPU; "
                    f"over {new_tp} GPUs each holds about {share / GiB:.1f} GiB",
                )
            )
            break
    return out


def _weights_per_gpu(plan: Plan, b, k: int, **parallel: int) -> float | None:
    """Weight bytes one GPU would hold with ``parallel`` (--tensor/--pipeline-parallel-size):
    about weights / k, the share of ``k`` times the GPUs; with --cpu-offload-gb the planner's
    own figure at that size instead (UVA offload moves up to that many GiB from every GPU, so
    the resident share is not weights / k: vLLM model_executor/offloader/uva.py). None when
    kvplan refuses that size."""
    costs = plan.worst_stage.addon_costs
    if costs is None or not getattr(costs, "weights", {}).get("cpu_offloaded"):
        return b.weights_bytes / k
    from kvplan.capacity.estimate import plan as replan
    from kvplan.errors import KvplanError

    try:
        wider = replan(plan.spec, plan.gpu, plan.args.model_copy(update=parallel), plan.env)
    except KvplanError:
        return None
    return float(max(st.budget.weights_bytes for st in wider.stages))
