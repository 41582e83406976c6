"""What one decoder layer asks of vLLM 0.33.0's KV cache on one GPU.

Page sizes, KV dtypes, per-rank heads, recurrent state shapes: unchanged from 0.26.0
(v0_26/kv_spec.py; 0.33.0 v1/kv_cache_interface.py computes the same bytes through
num_heads x num_states x state_content_size). What changed for hybrid (Mamba / Gated-DeltaNet)
models, because prefix caching is now on for them by default (defaults.default_prefix_caching)
and the Mamba cache mode is then ``align`` (config/cache.py MambaCacheMode: "align" | "none"):

* Block size (platforms/interface.py _align_hybrid_block_size): align = max(smallest kernel
  block, block_size), lcm'd with the prefill-checkpoint alignment of the recurrent layers (64 for
  FlashInfer's GDN prefill kernel, v1/attention/backends/gdn_attn.py, which vLLM picks on Hopper
  and on Blackwell for head_k_dim 128; plain Mamba layers: none); the attention block is the
  smallest multiple of align whose page holds one recurrent state. Qwen3-Next-80B on one H200:
  64 x cdiv(1,097,728, 64 x 2,048) = 576 tokens (0.26.0: 544). Checked on
  qwen3-next-80b_fp8_eager (block_size 576).
* Pages one request holds per recurrent group (kv_cache_interface.py MambaSpec
  max_memory_usage_bytes, mode ``align``): 2 + speculative tokens + prefill-checkpoint blocks (1
  for GDN layers with FlashInfer prefill, 0 for Mamba): Qwen3-Next 3 per group, checked on the
  same record (max concurrency 3,792 / (57 + 3 x 3) = 57.45x, as logged).
* Sliding-window layers take the primary block size (Attention.get_kv_cache_spec,
  _largest_kernel_block_within with FlashAttention's MultipleOf(16)); 0.26.0 took 16.

kvplan assumes the default (prefix caching on) and FlashInfer GDN prefill; a start with
``--no-enable-prefix-caching`` or on an A100 (Triton GDN prefill) sizes as 0.26.0 did.
Units: tokens and bytes (int).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from kvplan.engines.vllm.v0_26.kv_spec import (  # noqa: F401  (unchanged)
    DTYPE_BYTES,
    KV_CACHE_DTYPES,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    LayerCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowSpec,
    _cdiv,
    attention_per_token_bytes,
    kv_dtype_bytes,
    kv_heads_per_rank,
    mamba_state_bytes,
    mla_per_token_bytes,
)
from kvplan.model.spec import LayerKind, ModelSpec

# Prefill-checkpoint alignment of FlashInfer's GDN prefill (gdn_attn.py
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT) and its checkpoint blocks per request.
GDN_CHECKPOINT_ALIGNMENT = 64
GDN_CHECKPOINT_BLOCKS = 1
# Mode ``align``: the running state page and the one being written (kv_cache_interface.py).
ALIGN_STATE_PAGES = 2


@dataclass(frozen=True)
class MambaAlignSpec(MambaSpec):
    """A Mamba-1/2 state in mode ``align``: 2 pages per request (no prefill checkpoints)."""

    kind: ClassVar[str] = "mamba"

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """2 + speculative tokens (0: kvplan models no speculative decoding)."""
        return ALIGN_STATE_PAGES


@dataclass(frozen=True)
class GDNAlignSpec(MambaSpec):
    """A Gated-DeltaNet state in mode ``align`` with FlashInfer prefill checkpoints: 3 pages."""

    kind: ClassVar[str] = "gdn"

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """2 + speculative tokens (0) + 1 prefill-checkpoint block."""
        return ALIGN_STATE_PAGES + GDN_CHECKPOINT_BLOCKS


SPEC_FOR_LAYER_KIND: dict[LayerKind, type[LayerCacheSpec]] = {
    LayerKind.FULL: FullAttentionSpec,
    LayerKind.MLA: MLAAttentionSpec,
    LayerKind.SLIDING: SlidingWindowSpec,
    LayerKind.CHUNKED: ChunkedLocalAttentionSpec,
    LayerKind.MAMBA: MambaAlignSpec,
    LayerKind.LINEAR: GDNAlignSpec,
}
CACHE_KINDS: dict[str, type[LayerCacheSpec]] = {c.kind: c for c in SPEC_FOR_LAYER_KIND.values()}


def hybrid_block_size(mamba_page: int, attn_tok: int, block_size: int, *, kernel_block_alignment: int = 16, gdn: bool) -> int:
    """The attention block size of a hybrid model in mode ``align`` (module docstring)."""
    align = max(kernel_block_alignment, block_size)
    if gdn:
        align = math.lcm(align, GDN_CHECKPOINT_ALIGNMENT)
    return max(block_size, align * _cdiv(mamba_page, align * attn_tok))


def layer_cache_specs(
    spec: ModelSpec,
    *,
    tensor_parallel_size: int,
    block_size: int,
    kv_dtype_bytes_: int,
    model_dtype_bytes: int,
    kernel_block_alignment: int = 16,
    mamba_cache_dtype_bytes: int | None = None,
) -> tuple[list[LayerCacheSpec], int]:
    """The KV-cache spec of every decoder layer on one rank, and the effective block size
    (same arguments as v0_26.kv_spec.layer_cache_specs)."""
    tp = tensor_parallel_size
    attn_tok = mla_per_token_bytes(spec, kv_dtype_bytes_) if spec.uses_mla else attention_per_token_bytes(spec, tp, kv_dtype_bytes_)
    effective_block = block_size
    mamba_page = 0
    if spec.is_hybrid:
        mamba_page = mamba_state_bytes(spec, tp, mamba_cache_dtype_bytes or model_dtype_bytes)
        gdn = any(k == LayerKind.LINEAR for k in spec.layer_kinds) and spec.gdn is not None
        effective_block = hybrid_block_size(
            mamba_page, attn_tok, block_size, kernel_block_alignment=kernel_block_alignment, gdn=gdn
        )
    attends = spec.is_hybrid and any(
        SPEC_FOR_LAYER_KIND.get(k, MambaSpec).stores_per_token_kv for k in spec.layer_kinds if k != LayerKind.NONE
    )
    out: list[LayerCacheSpec] = []
    for kind in spec.layer_kinds:
        cls = SPEC_FOR_LAYER_KIND.get(kind)
        if cls is None:
            continue
        if cls.one_state_block:
            page = attn_tok * effective_block if attends else mamba_page
            out.append(cls(effective_block, max(page, mamba_page)))
        elif cls is SlidingWindowSpec:
            sw_block = max(kernel_block_alignment, block_size)
            out.append(cls(sw_block, attn_tok * sw_block, sliding_window=spec.sliding_window, per_token_bytes=attn_tok))
        else:
            chunk = spec.attention_chunk_size if cls is ChunkedLocalAttentionSpec else None
            out.append(cls(effective_block, attn_tok * effective_block, chunk_size=chunk, per_token_bytes=attn_tok))
    return out, effective_block
