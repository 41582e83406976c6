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

import re

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


# The largest CUDA-graph capture size when the user sets none (vLLM 0.26.0 config/vllm.py
# _set_cudagraph_sizes): twice the decode batch, at most 512 and at most the token budget.
MAX_CUDAGRAPH_CAPTURE_SIZE = 512


def cuda_graph_max_tokens(args, compute_capability: str | None = None, *, ceiling: int = MAX_CUDAGRAPH_CAPTURE_SIZE) -> int:
    """The most scheduled tokens one step may hold and still replay a captured CUDA graph, in
    tokens; 0 under --enforce-eager (no graphs). ``args``: EngineArgs; an unset --max-num-seqs or
    --max-num-batched-tokens is at least 256 / 512 under every 0.26.0 default, so it does not
    bind. ``compute_capability``: unused in 0.26.0 (one ceiling for every GPU); ``ceiling``: the
    default largest capture size (later versions pass theirs). Rule source: vLLM 0.26.0
    config/vllm.py _set_cudagraph_sizes
    (min(max_num_seqs x (1 + speculative tokens) x 2, 512, max_num_batched_tokens); kvplan models
    no speculative decoding)."""
    if getattr(args, "enforce_eager", False):
        return 0
    size = ceiling
    seqs = getattr(args, "max_num_seqs", None)
    mbt = getattr(args, "max_num_batched_tokens", None)
    if seqs:
        size = min(size, 2 * int(seqs))
    if mbt:
        size = min(size, int(mbt))
    return size

# --- routed experts: which (E, N, device) vLLM ships a tuned Triton fused-MoE config for --------
# vLLM 0.26.0 model_executor/layers/fused_moe/fused_moe.py get_config_file_name / get_moe_configs:
# the unquantized (bf16/fp16) Triton MoE kernel reads "E={E},N={N},device_name={device}.json" from
# fused_moe/configs/ (N = one expert's intermediate size per TP rank; device = the CUDA device name
# with spaces as "_", every H200 variant as "NVIDIA_H200"); without such a file it uses
# get_default_config's tiles. The (E, N) pairs per device, listed from that directory (141 files):
TUNED_UNQUANTIZED_MOE: dict[str, frozenset[tuple[int, int]]] = {
    "AMD_Instinct_MI300X": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 8192), (8, 14336), (8, 16384), (16, 1024), (60, 176), (60, 352), (60, 704), (60, 1408), (62, 128), (62, 256), (62, 512), (72, 192), (72, 384), (72, 768), (128, 1024), (160, 192)}),
    "AMD_Instinct_MI308X": frozenset({(128, 768)}),
    "AMD_Instinct_MI325X": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 8192), (8, 14336), (8, 16384)}),
    "NVIDIA_A100-SXM4-40GB": frozenset({(8, 1792), (8, 3584), (16, 1344)}),
    "NVIDIA_A100-SXM4-80GB": frozenset({(1, 1792), (1, 3584), (1, 7168), (1, 14336), (8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (16, 1344), (16, 1792), (16, 2688), (16, 3584), (16, 7168), (16, 14336), (64, 640), (64, 1280), (128, 192), (512, 64), (512, 128)}),
    "NVIDIA_A800-SXM4-80GB": frozenset({(64, 640), (64, 1280), (160, 192), (256, 64)}),
    "NVIDIA_B200": frozenset({(16, 1024), (32, 1408), (64, 1408), (128, 512), (128, 768), (128, 1856), (512, 64), (512, 128), (512, 256), (512, 512), (512, 672), (512, 1344)}),
    "NVIDIA_H100": frozenset({(16, 1024)}),
    "NVIDIA_H100_80GB_HBM3": frozenset({(1, 3072), (8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (16, 1344), (16, 1792), (16, 2688), (32, 1792), (62, 256), (62, 512), (64, 320), (64, 640), (64, 1280), (64, 1536), (72, 384), (72, 768), (128, 192), (128, 384), (128, 512), (128, 928), (128, 1856), (128, 2880), (256, 512), (512, 128), (512, 256), (512, 512)}),
    "NVIDIA_H20": frozenset({(64, 384), (64, 768), (64, 896), (64, 3072), (128, 96), (128, 192), (128, 384), (128, 768), (256, 256)}),
    "NVIDIA_H20-3e": frozenset({(128, 192), (128, 384), (160, 192), (160, 320), (512, 64), (512, 128), (512, 256), (512, 512)}),
    "NVIDIA_H200": frozenset({(8, 1792), (8, 2048), (8, 3584), (8, 4096), (8, 7168), (8, 14336), (16, 1024), (16, 2048), (64, 320), (64, 640), (64, 1280), (64, 2560), (128, 96), (128, 192), (128, 384), (128, 512), (128, 768), (128, 1024), (512, 64), (512, 128), (512, 256), (512, 512)}),
    "NVIDIA_L40S": frozenset({(8, 3584), (128, 928), (128, 1856)}),
}


def moe_config_device(reported_name: str) -> str:
    """The device name vLLM looks MoE configs up by: spaces and "/" as "_", any H200 as
    "NVIDIA_H200" (utils/platform_utils.py get_device_name_as_file_name; fused_moe.py
    get_config_file_name)."""
    name = re.sub(r"[\s/]+", "_", reported_name)
    return "NVIDIA_H200" if "H200" in name.split("_") else name


def has_tuned_moe_config(num_experts: int, n_per_rank: int, reported_name: str) -> bool:
    """vLLM ships a tuned unquantized Triton fused-MoE config for these experts on this device."""
    return (num_experts, n_per_rank) in TUNED_UNQUANTIZED_MOE.get(moe_config_device(reported_name), frozenset())


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/vllm.py', 'VllmConfig.use_v2_model_runner'),
    ('config/vllm.py', 'VllmConfig._set_cudagraph_sizes'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_run'),
    ('v1/worker/gpu_model_runner.py', 'GPUModelRunner.profile_run'),
    ('model_executor/layers/fused_moe/fused_moe.py', 'get_config_file_name'),
    ('model_executor/layers/fused_moe/fused_moe.py', 'get_moe_configs'),
    ('utils/platform_utils.py', 'get_device_name_as_file_name'),
)
