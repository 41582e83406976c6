"""Which vLLM 0.33.0 model runner a model gets, and what CUDA graphs cost on it.

vLLM 0.33.0 config/vllm.py ``use_v2_model_runner``: the V2 runner (v1/worker/gpu/model_runner.py)
for every model (dense, MoE, hybrid, multimodal, pooling) unless VLLM_USE_V2_MODEL_RUNNER=0, no
Triton, or a feature the V2 runner lacks (suffix/custom-class speculative decoding, parallel
drafting, PP with the external launcher). kvplan models none of those, so: always V2. All 15 real
0.33.0 starts in tests/data/vllm-0.33.0-h200 report the V2 GPUModelRunner (MoE, MLA, GDN, Mamba-2 too).

CUDA graphs: the V2 runner now estimates its graph memory (v1/worker/gpu/cudagraph_utils.py
profile_cudagraph_memory: it captures every PIECEWISE graph and the two largest FULL graphs into a
throw-away pool, extrapolates the other FULL graphs at max(second sample, 1 MiB) each) and the
worker subtracts that estimate from the KV budget (gpu_worker.py determine_available_memory,
VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default). The estimate is taken *outside* the memory
profile, so its leftovers are not charged twice.

NOT CHECKED ON HARDWARE: no 0.33.0 start with CUDA graphs has been recorded. kvplan takes the
estimate to be the pool vLLM 0.26.0 captured (the same capture sizes on H200: 51 sizes up to 512;
v0_26/runner.py CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER, measured on 0.26.0) plus the
extrapolation's minimum for the FULL graphs it does not capture (49 x 1 MiB).
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26 import runner as _v026
from kvplan.engines.vllm.v0_26.runner import CUDAGRAPH_BASE_BYTES, CUDAGRAPH_BYTES_PER_LAYER
from kvplan.model.spec import ModelSpec

MiB = 1 << 20

# Capture sizes on H100/H200 with the defaults (config/vllm.py _set_cudagraph_sizes, ceiling 512
# off data-centre Blackwell): 51, of which the profile captures 2 FULL graphs for real.
DEFAULT_CAPTURE_SIZES = 51
FULL_GRAPH_PROFILING_SAMPLES = 2  # cudagraph_utils.py _FULL_GRAPH_PROFILING_SAMPLES
MIN_PER_GRAPH_BYTES = MiB  # cudagraph_utils.py _MIN_PER_GRAPH_BYTES


def uses_v2_runner(spec: ModelSpec) -> bool:
    """vLLM 0.33.0 runs every model kvplan models on the V2 runner."""
    return True


def cudagraph_bytes(spec: ModelSpec, *, enforce_eager: bool, num_layers: int) -> tuple[int, int]:
    """(graph memory vLLM reports, the estimate it subtracts from the KV budget), bytes per GPU.
    Source-derived, not checked on a 0.33.0 start (see the module docstring)."""
    if enforce_eager:
        return 0, 0
    captured = CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER * num_layers
    estimate = captured + (DEFAULT_CAPTURE_SIZES - FULL_GRAPH_PROFILING_SAMPLES) * MIN_PER_GRAPH_BYTES
    return captured, estimate


def cuda_graph_max_tokens(args, compute_capability: str | None = None) -> int:
    """The most scheduled tokens one step may hold and still replay a captured CUDA graph (0 under
    --enforce-eager): 0.26.0's rule with 0.33.0's default ceiling, 1024 on data-centre Blackwell
    (compute capability 10.x) and 512 elsewhere. Rule source: vLLM 0.33.0 config/vllm.py
    _set_cudagraph_sizes (default_max_graph_size)."""
    ceiling = 1024 if (compute_capability or "").startswith("10.") else 512
    return _v026.cuda_graph_max_tokens(args, ceiling=ceiling)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/vllm.py', 'VllmConfig.use_v2_model_runner'),
    ('config/vllm.py', 'VllmConfig._set_cudagraph_sizes'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_cudagraph_memory'),
    ('v1/worker/gpu/cudagraph_utils.py', '_FULL_GRAPH_PROFILING_SAMPLES'),
    ('v1/worker/gpu/cudagraph_utils.py', '_MIN_PER_GRAPH_BYTES'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
)
