"""vLLM 0.26.0's engine defaults (what `vllm serve` uses when a flag is not given).

Sources: vLLM 0.26.0 engine/arg_utils.py (get_batch_defaults,
_set_default_max_num_seqs_and_batched_tokens_args), config/cache.py (gpu_memory_utilization,
block_size), config/vllm.py (max_concurrent_batches, async scheduling), config/model.py
(_resolve_auto_dtype).
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.errors import KvplanError

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # config/cache.py, vLLM 0.26.0
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE; FlashAttention keeps it
GiB = 1 << 30

# usage context: "serve" = `vllm serve` (OPENAI_API_SERVER), "llm" = the offline LLM class.
USAGE_CONTEXTS = ("serve", "llm")


def batch_defaults(gpu_total_bytes: int, gpu_name: str, usage: str = "serve") -> tuple[int, int]:
    """Default (max_num_batched_tokens, max_num_seqs) before the max_model_len clamp.

    vLLM 0.26.0 arg_utils.get_batch_defaults: GPUs with >= 70 GiB that are not A100 get
    8192/1024 for `vllm serve` (16384/1024 for the LLM class); others 2048/256 (8192/256).
    The GPU name check is vLLM's substring test for "a100"."""
    big = gpu_total_bytes >= 70 * GiB and "a100" not in gpu_name.lower()
    if usage == "llm":
        return (16384, 1024) if big else (8192, 256)
    return (8192, 1024) if big else (2048, 256)


def resolve_max_num_batched_tokens(
    *,
    user_value: int | None,
    default: int,
    max_num_seqs: int,
    max_model_len: int,
    chunked_prefill: bool = True,
) -> int:
    """vLLM 0.26.0 _set_default_max_num_seqs_and_batched_tokens_args: a defaulted value is raised
    to max_model_len without chunked prefill and clamped to max_num_seqs * max_model_len."""
    if user_value is not None:
        return user_value
    value = default
    if not chunked_prefill:
        value = max(max_model_len, value)
    return min(max_num_seqs * max_model_len, value)


def resolve_dtype(requested: str, config_dtype: str, *, bf16_supported: bool = True) -> str:
    """``--dtype``: ``auto`` keeps the checkpoint dtype except float32, which runs as bfloat16
    (float16 on GPUs without bf16). vLLM 0.26.0 config/model.py _resolve_auto_dtype."""
    aliases = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}
    req = aliases.get(requested, requested)
    if req == "auto":
        if config_dtype == "float32":
            return "bfloat16" if bf16_supported else "float16"
        if config_dtype == "bfloat16" and not bf16_supported:
            return "float16"
        return config_dtype
    if req not in ("float16", "bfloat16", "float32"):
        raise KvplanError(f"--dtype: unsupported value {requested!r}", hint="use auto, bfloat16, float16 or float32")
    return req


def default_block_size(*, uses_mla: bool, kv_cache_dtype: str, compute_capability: str | None,
                       sparse_mla_indexer: bool = False) -> int:
    """--block-size when the user gives none: the preferred block of the attention backend vLLM
    0.26.0 picks (platforms/cuda.py _get_backend_priorities, AttentionBackend.get_preferred_block_size).

    Standard attention: FlashAttention / FlashInfer keep 16. MLA on Hopper: FLASH_ATTN_MLA (16) for
    bf16 KV, FLASHMLA (kernel block 64) for fp8 KV; on Blackwell FLASHINFER_MLA (32 or 64 -> 32);
    elsewhere TRITON_MLA (16). A DeepSeek-V3.2 sparse-MLA indexer: its DEEPSEEK_V32_INDEXER
    backend's 64 (platforms/interface.py update_block_size_for_backend; log
    families/dsv32-5L_eager "Setting kv cache block size to 64")."""
    if sparse_mla_indexer:
        return 64
    if not uses_mla:
        return DEFAULT_BLOCK_SIZE
    major = int(str(compute_capability or "9.0").split(".")[0])
    if major == 9:
        return 64 if kv_cache_dtype.startswith("fp8") else DEFAULT_BLOCK_SIZE
    if major == 10:
        return 32
    return DEFAULT_BLOCK_SIZE


def allow_long_max_model_len(env: Mapping[str, str] | None) -> bool:
    """vLLM 0.26.0 envs.py: VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" or "true" (any case,
    surrounding blanks ignored)."""
    if not env:
        return False
    return env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('engine/arg_utils.py', 'EngineArgs.get_batch_defaults'),
    ('engine/arg_utils.py', 'EngineArgs._set_default_max_num_seqs_and_batched_tokens_args'),
    ('config/cache.py', 'CacheConfig.gpu_memory_utilization'),
    ('config/cache.py', 'CacheConfig.block_size'),
    ('config/vllm.py', 'VllmConfig.max_concurrent_batches'),
    ('config/model.py', '_resolve_auto_dtype'),
    ('platforms/cuda.py', '_get_backend_priorities'),
    ('platforms/interface.py', 'Platform.update_block_size_for_backend'),
    ('v1/attention/backends/flash_attn.py', 'FlashAttentionBackend.get_preferred_block_size'),
    ('v1/attention/backends/flash_attn.py', 'FlashAttentionBackend.get_supported_kernel_block_sizes'),
)
