"""vLLM 0.33.0's engine defaults: 0.26.0's (v0_26/defaults.py) except the batch defaults and
prefix caching for hybrid models.

Sources (vLLM 0.33.0): engine/arg_utils.py get_batch_defaults (a new >= 160 GiB tier; GB10 out of
the >= 70 GiB tier), _set_default_chunked_prefill_and_prefix_caching_args (prefix caching on by
default for hybrid models too). Unchanged and reused: gpu_memory_utilization 0.92, block size 16
and the MLA backend blocks on Hopper, the max_num_batched_tokens clamp, dtype resolution,
VLLM_ALLOW_LONG_MAX_MODEL_LEN.
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26.defaults import (  # noqa: F401  (unchanged in 0.33.0)
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    USAGE_CONTEXTS,
    allow_long_max_model_len,
    default_block_size,
    resolve_dtype,
    resolve_max_num_batched_tokens,
)
from kvplan.engines.vllm.v0_26 import defaults as _v026_defaults
from kvplan.model.spec import ModelSpec

GiB = 1 << 30

# NVML total memory from which vLLM 0.33.0 gives both `vllm serve` and the LLM class 16384
# batched tokens / 1024 sequences (B200, B300, GB200, MI300X-class). The H200's NVML total is
# 150,754,820,096 B (140.4 GiB): below it, so H200 starts keep 0.26.0's defaults.
LARGE_TIER_BYTES = 160 * GiB
BIG_TIER_BYTES = 70 * GiB


def batch_defaults(gpu_total_bytes: int, gpu_name: str, usage: str = "serve") -> tuple[int, int]:
    """Default (max_num_batched_tokens, max_num_seqs) before the max_model_len clamp.

    vLLM 0.33.0 arg_utils.get_batch_defaults: NVML total >= 160 GiB: 16384/1024 for both entry
    points; >= 70 GiB and neither A100 nor GB10: 8192/1024 for `vllm serve`, 16384/1024 for the LLM
    class; otherwise 2048/256 (serve) and 8192/256 (LLM). Name tests are vLLM's substring tests."""
    name = gpu_name.lower()
    if gpu_total_bytes >= LARGE_TIER_BYTES:
        return 16384, 1024
    big = gpu_total_bytes >= BIG_TIER_BYTES and "a100" not in name and "gb10" not in name.replace(" ", "")
    if usage == "llm":
        return (16384, 1024) if big else (8192, 256)
    return (8192, 1024) if big else (2048, 256)


def default_prefix_caching(spec: ModelSpec) -> bool:
    """Prefix caching when the user does not choose: on for every generative model in 0.33.0,
    hybrid (Mamba / GDN) models included (0.26.0: off for hybrids)."""
    return True


# The vLLM source this module restates: 0.26.0's table (the same functions, read in this version).
VLLM_SOURCES = _v026_defaults.VLLM_SOURCES
