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

from kvplan.engines.vllm.v0_26.family_quirks import DEFAULT_V2_ARCHITECTURES
from kvplan.model.spec import ModelSpec

GiB = 1 << 30
MiB = 1 << 20


# Captured CUDA-graph pool (reported by vLLM, subtracted only on V1): 788,529,152 B with 4 layers
# (record llama3-4L_graphs_serve) and 1,050,673,152 B with 32 (llama3.1-8b_serve_defaults);
# 1,084,227,584 B for Qwen3-8B's 36 (qwen3-8b_graphs_32k); 0.99 GiB for Llama-3-8B (calibration
# llama3-8b_default): ~750 MB + 9.4 MB per layer (51 capture sizes, max 512).
CUDAGRAPH_BASE_BYTES = 750_000_000
CUDAGRAPH_BYTES_PER_LAYER = 9_400_000

# The V1 runner's profiled estimate, subtracted from the KV budget: 689,963,008 B on record
# qwen3-30b-a3b_graphs (48 MoE layers; 855,638,016 B captured). The only V1 start with graphs:
# kvplan uses it as a constant and says so.
CUDAGRAPH_V1_ESTIMATE_BYTES = 689_963_008


def uses_v2_runner(spec: ModelSpec) -> bool:
    """True when vLLM 0.26.0 picks the V2 model runner for this model by default."""
    if spec.is_hybrid:
        return False
    return spec.architecture in DEFAULT_V2_ARCHITECTURES or not spec.is_moe


def cudagraph_bytes(spec: ModelSpec, *, enforce_eager: bool, num_layers: int) -> tuple[int, int]:
    """(graph memory vLLM reports, the part it subtracts from the KV budget), bytes per GPU."""
    if enforce_eager:
        return 0, 0
    captured = CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER * num_layers
    if uses_v2_runner(spec):
        return captured, 0
    return captured, CUDAGRAPH_V1_ESTIMATE_BYTES
