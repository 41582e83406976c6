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

# Routed experts: vLLM 0.33.0's fused_moe/configs/ (147 unquantized files; lookup unchanged from
# 0.26.0: fused_moe.py get_config_file_name). See v0_26/runner.py.
TUNED_UNQUANTIZED_MOE: dict[str, frozenset[tuple[int, int]]] = {
    "AMD_Instinct_MI300X": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 8192), (8, 14336), (8, 16384), (16, 1024), (60, 176), (60, 352), (60, 704), (60, 1408), (62, 128), (62, 256), (62, 512), (72, 192), (72, 384), (72, 768), (128, 1024), (160, 192)}),
    "AMD_Instinct_MI308X": frozenset({(128, 768)}),
    "AMD_Instinct_MI325X": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 8192), (8, 14336), (8, 16384)}),
    "Intel(R)_Arc(TM)_Pro_B70_Graphics": frozenset({(64, 512), (64, 1024), (128, 384)}),
    "NVIDIA_A100-SXM4-40GB": frozenset({(8, 1792), (8, 3584), (16, 1344)}),
    "NVIDIA_A100-SXM4-80GB": frozenset({(1, 1792), (1, 3584), (1, 7168), (1, 14336), (8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (16, 1344), (16, 1792), (16, 2688), (16, 3584), (16, 7168), (16, 14336), (64, 640), (64, 1280), (128, 192), (512, 64), (512, 128)}),
    "NVIDIA_A100_80GB_PCIe": frozenset({(256, 512)}),
    "NVIDIA_A800-SXM4-80GB": frozenset({(64, 640), (64, 1280), (160, 192), (256, 64)}),
    "NVIDIA_B200": frozenset({(16, 1024), (32, 1408), (64, 1408), (128, 512), (128, 768), (128, 1856), (512, 64), (512, 128), (512, 256), (512, 512), (512, 672), (512, 1344)}),
    "NVIDIA_H100": frozenset({(16, 1024)}),
    "NVIDIA_H100_80GB_HBM3": frozenset({(1, 3072), (8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (16, 1344), (16, 1792), (16, 2688), (32, 1792), (62, 256), (62, 512), (64, 320), (64, 640), (64, 1280), (64, 1536), (72, 384), (72, 768), (128, 192), (128, 384), (128, 512), (128, 928), (128, 1856), (128, 2880), (256, 512), (512, 128), (512, 256), (512, 512)}),
    "NVIDIA_H20": frozenset({(64, 384), (64, 768), (64, 896), (64, 3072), (128, 96), (128, 192), (128, 384), (128, 768), (256, 256), (256, 512)}),
    "NVIDIA_H20-3e": frozenset({(128, 192), (128, 384), (160, 192), (160, 320), (512, 64), (512, 128), (512, 192), (512, 256), (512, 512)}),
    "NVIDIA_H200": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 14336), (16, 1024), (16, 2048), (64, 320), (64, 640), (64, 1280), (64, 2560), (128, 96), (128, 192), (128, 384), (128, 512), (128, 768), (128, 1024), (512, 64), (512, 128), (512, 256), (512, 512)}),
    "NVIDIA_L40S": frozenset({(8, 3584), (128, 928), (128, 1856)}),
}


def has_tuned_moe_config(num_experts: int, n_per_rank: int, reported_name: str) -> bool:
    """vLLM 0.33.0 ships a tuned unquantized Triton fused-MoE config for these experts on this device."""
    return (num_experts, n_per_rank) in TUNED_UNQUANTIZED_MOE.get(_v026.moe_config_device(reported_name), frozenset())


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/vllm.py', 'VllmConfig.use_v2_model_runner'),
    ('config/vllm.py', 'VllmConfig._set_cudagraph_sizes'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_cudagraph_memory'),
    ('v1/worker/gpu/cudagraph_utils.py', '_FULL_GRAPH_PROFILING_SAMPLES'),
    ('v1/worker/gpu/cudagraph_utils.py', '_MIN_PER_GRAPH_BYTES'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('model_executor/layers/fused_moe/fused_moe.py', 'get_config_file_name'),
    ('model_executor/layers/fused_moe/fused_moe.py', 'get_moe_configs'),
)
