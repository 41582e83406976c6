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
  for GDN layers with FlashInfer prefill and for every Mamba-2 layer, whose
  model_executor/layers/mamba/mamba_mixer2.py get_kv_cache_spec always asks for one with
  alignment 1; 0 for Mamba-1, mamba_mixer.py): Qwen3-Next 3 per group, checked on the same
  record (max concurrency 3,792 / (57 + 3 x 3) = 57.45x, as logged); Granite-4.0-H-Small
  (Mamba-2, 36 state layers in 9 groups of 4 beside 4 attention layers) 3 per group, checked on
  granite4h-small_eager (7,951 / (cdiv(32,768, 528) + 9 x 3) = 88.34x, as logged).
  The reported token count is int(max concurrency x max_model_len) (kv_cache_utils.py
  get_kv_cache_capacity), so it follows the same pages.
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

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import kv_spec as _v026
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
    attention_free_block_size,
    attention_per_token_bytes,
    kv_dtype_bytes,
    kv_heads_per_rank,
    mamba_state_bytes,
    mla_per_token_bytes,
    ssm_state_dtype_bytes,
)
from kvplan.model.spec import LayerKind

# Prefill-checkpoint alignment of FlashInfer's GDN prefill (gdn_attn.py
# FLASHINFER_GDN_CHECKPOINT_ALIGNMENT) and its checkpoint blocks per request.
GDN_CHECKPOINT_ALIGNMENT = 64
GDN_CHECKPOINT_BLOCKS = 1
# Mode ``align``: the running state page and the one being written (kv_cache_interface.py).
ALIGN_STATE_PAGES = 2
# Mamba-2 mixers export the block-boundary state from inside a prefill: one checkpoint page
# (model_executor/layers/mamba/mamba_mixer2.py get_kv_cache_spec).
MAMBA2_CHECKPOINT_BLOCKS = 1


@dataclass(frozen=True)
class MambaAlignSpec(MambaSpec):
    """A Mamba-1/2 state in mode ``align``: 2 pages per request (no prefill checkpoints)."""

    kind: ClassVar[str] = "mamba"

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """2 + speculative tokens (0: kvplan models no speculative decoding)."""
        return ALIGN_STATE_PAGES


@dataclass(frozen=True)
class Mamba2AlignSpec(MambaSpec):
    """A Mamba-2 state in mode ``align``: 2 pages + 1 prefill-checkpoint page per request
    (mamba_mixer2.py get_kv_cache_spec: num_prefill_checkpoint_blocks=1, alignment 1, so the
    block size gains no extra alignment)."""

    kind: ClassVar[str] = "mamba2"

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """2 + speculative tokens (0) + 1 prefill-checkpoint block."""
        return ALIGN_STATE_PAGES + MAMBA2_CHECKPOINT_BLOCKS


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
# Mamba-2 models: their MAMBA layers take the checkpointing class (MambaShape.version 2).
SPEC_FOR_LAYER_KIND_MAMBA2: dict[LayerKind, type[LayerCacheSpec]] = {
    **SPEC_FOR_LAYER_KIND, LayerKind.MAMBA: Mamba2AlignSpec
}
CACHE_KINDS: dict[str, type[LayerCacheSpec]] = {
    c.kind: c for c in (*SPEC_FOR_LAYER_KIND.values(), Mamba2AlignSpec)
}


def hybrid_block_size(mamba_page: int, attn_tok: int, block_size: int, *, kernel_block_alignment: int = 16, gdn: bool) -> int:
    """The attention block size of a hybrid model in mode ``align`` (module docstring)."""
    align = max(kernel_block_alignment, block_size)
    if gdn:
        align = math.lcm(align, GDN_CHECKPOINT_ALIGNMENT)
    return max(block_size, align * _cdiv(mamba_page, align * attn_tok))


def sliding_window_block_size(block_size: int, kernel_block_alignment: int) -> int:
    """A sliding layer's block (tokens): the primary block size, at least the kernel block
    (Attention.get_kv_cache_spec, _largest_kernel_block_within)."""
    return max(kernel_block_alignment, block_size)


_layer_cache_specs = override(
    _v026.layer_cache_specs,
    "0.26.0's layer_cache_specs with this version's hybrid and sliding-window block sizes, and "
    "the short-conv state's rows for speculative tokens (mamba_utils.py short_conv_state_shape: "
    "conv_kernel - 1 + num_spec).",
    short_conv_spec_rows=True,
    hybrid_block=hybrid_block_size,
    sliding_block=sliding_window_block_size,
)


def layer_cache_specs(spec, **kwargs):
    """The KV-cache spec of every decoder layer on one rank, and the effective block size in
    tokens (same arguments and returns as v0_26.kv_spec.layer_cache_specs): 0.26.0's rule with
    this version's ``align``-mode cache classes (Mamba-2 layers with their checkpoint page),
    hybrid block size and sliding-window block (module docstring).

    Raises:
        KvplanError: as v0_26.kv_spec.layer_cache_specs."""
    mamba2 = spec.mamba is not None and spec.mamba.version == 2
    kwargs.setdefault("spec_for_layer_kind", SPEC_FOR_LAYER_KIND_MAMBA2 if mamba2 else SPEC_FOR_LAYER_KIND)
    return _layer_cache_specs(spec, **kwargs)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/kv_cache_interface.py', 'AttentionSpec'),
    ('v1/kv_cache_interface.py', 'FullAttentionSpec'),
    ('v1/kv_cache_interface.py', 'MLAAttentionSpec'),
    ('v1/kv_cache_interface.py', 'SlidingWindowSpec'),
    ('v1/kv_cache_interface.py', 'MambaSpec'),
    ('config/cache.py', 'MambaCacheMode'),
    ('model_executor/layers/attention/attention.py', 'Attention.get_kv_cache_spec'),
    ('model_executor/layers/mamba/mamba_utils.py', 'MambaStateShapeCalculator'),
    ('model_executor/layers/mamba/mamba_mixer2.py', 'MambaMixer2.get_kv_cache_spec'),
    ('model_executor/layers/linear.py', 'QKVParallelLinear.__init__'),
    ('platforms/interface.py', 'Platform._align_hybrid_block_size'),
    ('v1/attention/backends/gdn_attn.py', 'GDNAttentionBackend'),
    ('v1/core/single_type_kv_cache_manager.py', 'SlidingWindowManager.get_num_skipped_tokens'),
)
