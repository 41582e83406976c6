"""Which vLLM 0.26.0 model runner a model gets, and what CUDA graphs cost on it.

vLLM 0.26.0 config/vllm.py ``use_v2_model_runner``: generate-only models that are not hybrid
and either not MoE or listed in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES run on the V2 runner;
the rest (most MoE and every hybrid model) on the V1 runner. The runner matters for memory:

* V2 (v1/worker/gpu/model_runner.py) skips attention in the profiling pass and its
  ``profile_cudagraph_memory`` returns 0, so CUDA graphs never reduce the KV budget.
* V1 (v1/worker/gpu_model_runner.py) captures throw-away graphs while profiling and, with
  VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (the default), subtracts that estimate.
"""

from __future__ import annotations

from kvplan.specs.model_spec import ModelSpec

GiB = 1 << 30
MiB = 1 << 20

DEFAULT_V2_ARCHITECTURES = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "GraniteMoeForCausalLM",
        "InklingForCausalLM",
        "InklingForConditionalGeneration",
        "LongcatFlashNgramForCausalLM",
        "Qwen2MoeForCausalLM",
    }
)

# Captured CUDA-graph pool on the V2 runner for a dense 8B model: "0.99 GiB for CUDAGraph memory"
# (calibration llama3-8b_default, 32 layers, max_num_seqs 1024). Graph memory grows with the
# number of captured pieces (one per layer in piecewise mode); scaled per layer from that run.
CUDAGRAPH_BYTES_PER_LAYER_V2 = int(0.99 * GiB / 32)

# V1 runner estimate subtracted from the budget (first capture + (n-1) x per-graph, 1 MiB floor).
# UNVERIFIED until a V1 start without --enforce-eager is recorded; per layer as above.
CUDAGRAPH_ESTIMATE_BYTES_PER_LAYER_V1 = int(0.99 * GiB / 32)


def uses_v2_runner(spec: ModelSpec) -> bool:
    """True when vLLM 0.26.0 picks the V2 model runner for this model by default."""
    if spec.is_hybrid:
        return False
    return spec.architecture in DEFAULT_V2_ARCHITECTURES or not spec.is_moe


def cudagraph_bytes(spec: ModelSpec, *, enforce_eager: bool, num_layers: int) -> tuple[int, int]:
    """(graph memory vLLM reports, the part it subtracts from the KV budget), bytes per GPU."""
    if enforce_eager:
        return 0, 0
    if uses_v2_runner(spec):
        return CUDAGRAPH_BYTES_PER_LAYER_V2 * num_layers, 0
    est = CUDAGRAPH_ESTIMATE_BYTES_PER_LAYER_V1 * num_layers
    return est, est
