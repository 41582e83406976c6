"""Flag recommendations for a Plan, each with a one-line reason and the numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.planner import Plan

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
            tp = eff["tensor_parallel_size"] * 2
            out.append(
                Recommendation(
                    "--tensor-parallel-size",
                    tp,
                    f"weights take {worst.weights_bytes / GiB:.1f} GiB of {worst.requested_bytes / GiB:.1f} GiB requested per GPU; "
                    "splitting over more GPUs frees memory for the KV cache",
                )
            )
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
            out.append(
                Recommendation(
                    "--gpu-memory-utilization",
                    util,
                    f"CUDA graphs (~{stage.cudagraph_bytes / GiB:.2f} GiB) are captured outside the requested memory; "
                    "leave room for them",
                )
            )
    return out
