"""vLLM 0.34.0's engine defaults: 0.33.0's (v0_33/defaults.py) except the block size, the
gpu_memory_utilization default and the KV-cache sizing mode they depend on.

Sources (vLLM 0.34.0):

* config/cache.py ``CacheConfig.DEFAULT_BLOCK_SIZE`` = 64 (0.33.0: 16). The block size is the
  attention backend's preferred one (platforms/interface.py update_block_size_for_backend,
  v1/attention/backend.py get_preferred_block_size: the default when the backend supports it,
  else its smallest kernel block). With 64: FLASH_ATTN (``MultipleOf(16)``), TRITON_ATTN,
  FLASHINFER (16/32/64), FLASH_ATTN_MLA (``MultipleOf(16)``), TRITON_MLA, FLASHMLA (64),
  FLASHINFER_MLA (32/64: 0.33.0 took 32 because it lacks 16) and the DeepSeek-V3.2 indexer (64)
  all give **64**. (CUTLASS_MLA keeps 128; kvplan's backend choice never picks it, as in 0.26.0.)
* config/cache.py ``gpu_memory_utilization`` default None and ``resolved_gpu_memory_utilization``:
  1.0 when the extensible KV cache is on, else ``DEFAULT_GPU_MEMORY_UTILIZATION`` = 0.92.
* config/vllm.py ``_resolve_extensible_kv_cache`` (called from VllmConfig.__post_init__): the
  extensible KV cache is on by default on CUDA and ROCm, and off when ``kv_cache_memory_bytes``
  or ``num_gpu_blocks_override`` is set, with elastic EP, with a KV connector that shares the
  cache through legacy CUDA IPC (LMCacheMPConnector: ``--kv-offloading-backend lmcache``), with a
  connector's custom memory pool, on ROCm with connectors that register the cache (NIXL, Mooncake
  ...), or when a FABRIC-exporting connector (NIXL) finds no IMEX channel. A failed VMM probe on
  any rank turns it off for all (executor/abstract.py disable_extensible_kv_cache, which restores
  the 0.92 default). Of these switches kvplan's engine arguments hold only
  ``--kv-cache-memory-bytes``; kvplan models no KV connector, elastic EP or block override.

Unchanged and reused: batch defaults (get_batch_defaults identical), prefix caching on for
hybrids, the max_num_batched_tokens clamp, dtype resolution, VLLM_ALLOW_LONG_MAX_MODEL_LEN.
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_33.defaults import (  # noqa: F401  (unchanged in 0.34.0)
    BIG_TIER_BYTES,
    LARGE_TIER_BYTES,
    USAGE_CONTEXTS,
    allow_long_max_model_len,
    batch_defaults,
    default_prefix_caching,
    resolve_dtype,
    resolve_max_num_batched_tokens,
)

DEFAULT_BLOCK_SIZE = 64  # config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE, vLLM 0.34.0
# config/cache.py DEFAULT_GPU_MEMORY_UTILIZATION: the estimate path's default (and EngineArgs').
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# config/cache.py resolved_gpu_memory_utilization: the default with the extensible KV cache.
EXTENSIBLE_GPU_MEMORY_UTILIZATION = 1.0


def default_block_size(*, uses_mla: bool, kv_cache_dtype: str, compute_capability: str | None,
                       sparse_mla_indexer: bool = False) -> int:
    """--block-size when the user gives none (tokens): 64 for every attention backend kvplan's
    rules pick in vLLM 0.34.0 (module docstring). Same arguments as
    v0_26.defaults.default_block_size, none of which changes the answer any more."""
    return DEFAULT_BLOCK_SIZE


def extensible_kv_cache(args) -> bool:
    """Whether vLLM 0.34.0 sizes the KV cache of a start with engine ``args`` (EngineArgs) with
    the extensible KV cache (measured after warm-up and CUDA-graph capture) rather than from the
    profiling estimate: on, unless --kv-cache-memory-bytes is set (config/vllm.py
    _resolve_extensible_kv_cache; the module docstring lists the switches kvplan cannot see)."""
    return args.kv_cache_memory_bytes is None


def utilization_given(args) -> bool:
    """The user set --gpu-memory-utilization (EngineArgs only holds the fields given; pydantic's
    ``model_fields_set``)."""
    return "gpu_memory_utilization" in getattr(args, "model_fields_set", {"gpu_memory_utilization"})


def resolved_gpu_memory_utilization(args) -> float:
    """The gpu_memory_utilization vLLM 0.34.0 uses for ``args`` (EngineArgs): the user's value,
    else 1.0 with the extensible KV cache and 0.92 without (config/cache.py
    resolved_gpu_memory_utilization). A fraction of total CUDA memory."""
    if utilization_given(args):
        return args.gpu_memory_utilization
    return EXTENSIBLE_GPU_MEMORY_UTILIZATION if extensible_kv_cache(args) else DEFAULT_GPU_MEMORY_UTILIZATION


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('engine/arg_utils.py', 'EngineArgs.get_batch_defaults'),
    ('engine/arg_utils.py', 'EngineArgs._set_default_max_num_seqs_and_batched_tokens_args'),
    ('config/cache.py', 'CacheConfig.DEFAULT_BLOCK_SIZE'),
    ('config/cache.py', 'CacheConfig.gpu_memory_utilization'),
    ('config/cache.py', 'CacheConfig.resolved_gpu_memory_utilization'),
    ('config/cache.py', 'CacheConfig.block_size'),
    ('config/vllm.py', 'VllmConfig._resolve_extensible_kv_cache'),
    ('config/vllm.py', 'VllmConfig.max_concurrent_batches'),
    ('config/model.py', '_resolve_auto_dtype'),
    ('platforms/cuda.py', '_get_backend_priorities'),
    ('platforms/interface.py', 'Platform.update_block_size_for_backend'),
    ('v1/attention/backend.py', 'AttentionBackend.get_preferred_block_size'),
    ('v1/attention/backends/flash_attn.py', 'FlashAttentionBackend.get_supported_kernel_block_sizes'),
    ('v1/executor/abstract.py', 'Executor.disable_extensible_kv_cache'),
)
