"""Flag recommendations for a Plan, each with a one-line reason and the numbers behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.capacity.estimate import Plan

GiB = 1 << 30


@dataclass(frozen=True)
class Recommendation:
    flag: str
    value: object
    reason: str


def recommendations(plan: Plan) -> list[Recommendation]:
    """What to pass to `vllm serve` and why, from the plan's own numbers (pure)."""
    eff = plan.effective
    out: list[Recommendation] = []
    mml = eff["max_model_len"]
    if not plan.fits:
        if plan.largest_max_model_len and plan.largest_max_model_len > 0:
            out.append(
                Recommendation(
                    "--max-model-len",
                    plan.largest_max_model_len,
                    f"the largest context whose one request fits the KV cache (asked {mml})",
                )
            )
        worst = plan.worst_stage.budget
        if worst.kv_cache_bytes <= 0 or not plan.largest_max_model_len:
            out.extend(_unblock(plan, worst))
        return out
    out.append(
        Recommendation(
            "--max-model-len",
            mml,
            "pin the context length kvplan sized; vLLM's default is the model's "
            f"{plan.spec.derived_max_model_len} tokens",
        )
    )
    if eff["kv_cache_dtype"] == "auto" and plan.gpu.fp8_supported and not plan.spec.is_hybrid:
        out.append(
            Recommendation(
                "--kv-cache-dtype",
                "fp8",
                f"halves KV bytes per token: about {plan.gpu_kv_cache_tokens * 2:,} tokens instead of "
                f"{plan.gpu_kv_cache_tokens:,} (small accuracy cost; check your evals)",
            )
        )
    stage = plan.stages[0].budget
    if stage.cudagraph_bytes and not stage.cudagraph_applied_bytes:
        used = stage.requested_bytes + stage.cudagraph_bytes
        if used > stage.total_bytes * 0.985:
            util = round(eff["gpu_memory_utilization"] - stage.cudagraph_bytes / stage.total_bytes, 3)
            if 0 < util <= 1:  # never a value vLLM (and kvplan) would refuse
                out.append(
                    Recommendation(
                        "--gpu-memory-utilization",
                        util,
                        f"CUDA graphs (~{stage.cudagraph_bytes / GiB:.2f} GiB) are captured outside the requested memory; "
                        "leave room for them",
                    )
                )
    return out


def _unblock(plan: Plan, b) -> list[Recommendation]:
    """Flags that would leave room for the KV cache when nothing is left: a higher
    --gpu-memory-utilization if that alone suffices, else the smallest larger TP whose weight
    share (about weights / k) would leave room; never a change that cannot help."""
    from kvplan.engines.vllm.v0_26.memory import NON_TORCH_MULTI_GPU_EXTRA, REDUNDANCY_BUFFER

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
    if b.requested_bytes > b.free_at_start_bytes:
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
            lowered = replan(plan.spec, plan.gpu, plan.args.model_copy(update={"gpu_memory_utilization": util}))
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
            if b.requested_bytes - b.weights_bytes / k - other - extra > b.requested_bytes * 0.05:
                out.append(
                    Recommendation(
                        "--pipeline-parallel-size",
                        pp,
                        f"weights take {b.weights_bytes / GiB:.1f} GiB per GPU; with --tensor-parallel-size 8 inside "
                        f"a node and {pp} pipeline stages across nodes each GPU holds about {b.weights_bytes / k / GiB:.1f} GiB",
                    )
                )
                if tp != 8:
                    out.append(Recommendation("--tensor-parallel-size", 8, "tensor parallelism within one 8-GPU node"))
            break
        if b.requested_bytes - b.weights_bytes / k - other - extra > b.requested_bytes * 0.05:
            out.append(
                Recommendation(
                    "--tensor-parallel-size",
                    new_tp,
                    f"weights take {b.weights_bytes / GiB:.1f} GiB of {b.requested_bytes / GiB:.1f} GiB requested per GPU; "
                    f"over {new_tp} GPUs each holds about {b.weights_bytes / k / GiB:.1f} GiB",
                )
            )
            break
    return out
