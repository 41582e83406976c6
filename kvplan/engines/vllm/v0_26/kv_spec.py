"""Bytes per KV-cache page for each layer kind, on one GPU (vLLM 0.26.0).

Restates, in our own structure, vllm/v1/kv_cache_interface.py (FullAttentionSpec,
SlidingWindowSpec, ChunkedLocalAttentionSpec, MLAAttentionSpec, MambaSpec),
vllm/model_executor/layers/attention/attention.py (get_kv_cache_spec),
vllm/model_executor/layers/mamba/mamba_utils.py (state shapes) and
vllm/platforms/interface.py (_align_hybrid_block_size).

A *page* is one block of ``block_size`` tokens of one layer. Units: tokens and bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

from kvplan.errors import KvplanError
from kvplan.engines.vllm.v0_26.family_quirks import quirks
from kvplan.model.spec import LayerKind, ModelSpec

DTYPE_BYTES = {
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}

KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class LayerCacheSpec:
    """What one decoder layer asks of the KV cache on one GPU; one subclass per layer-cache kind
    (vLLM v1/kv_cache_interface.py FullAttentionSpec, SlidingWindowSpec,
    ChunkedLocalAttentionSpec, MLAAttentionSpec, MambaSpec), each owning its rules: page size,
    bytes per token, blocks one request holds. SPEC_FOR_LAYER_KIND maps the model's LayerKind to
    its class; CACHE_KINDS maps the kind string (as JSON writes it) back to the class.

    Attributes:
        kind (class): "full" | "sliding" | "chunked" | "mla" | "mamba".
        block_size: tokens per page (for mamba: the attention block size it is aligned to).
        page_size_bytes: bytes of one page of this layer (padded where vLLM pads).
        sliding_window: tokens, for "sliding".
        chunk_size: tokens, for "chunked".
        per_token_bytes: bytes per token per layer (0 for mamba).
    Class attributes:
        stores_per_token_kv: KV grows with every token (attention kinds; not Mamba's state).
        bounded_per_sequence: the blocks one sequence keeps stop growing with its length
            (a window, a chunk, a state).
        one_state_block: one page per sequence whatever its length (Mamba).
        full_without_hybrid_manager: --disable-hybrid-kv-cache-manager turns it into full attention.
    """

    kind: ClassVar[str] = ""
    stores_per_token_kv: ClassVar[bool] = True
    bounded_per_sequence: ClassVar[bool] = False
    one_state_block: ClassVar[bool] = False
    full_without_hybrid_manager: ClassVar[bool] = False

    block_size: int
    page_size_bytes: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    per_token_bytes: int = 0

    def with_block_size(self, block_size: int) -> "LayerCacheSpec":
        """Same layer with a larger block (vLLM's unify_kv_cache_spec_page_size scaling)."""
        return replace(self, block_size=block_size, page_size_bytes=self.per_token_bytes * block_size)

    @staticmethod
    def blocks_per_request(
        max_model_len: int, max_in_flight_tokens: int, block_size: int, sliding_window: int | None, chunk_size: int | None
    ) -> int:
        """Blocks one request of ``max_model_len`` tokens holds at most in a group of this kind
        (vLLM kv_cache_interface.py max_memory_usage_bytes / page_size): full/MLA cdiv(len, block)."""
        return _cdiv(max_model_len, block_size)

    @staticmethod
    def skipped_blocks(tokens: int, block_size: int, sliding_window: int | None, chunk_size: int | None) -> int:
        """Blocks freed behind the window/chunk when ``tokens`` have KV (``tokens - 1`` computed):
        vLLM single_type_kv_cache_manager.py get_num_skipped_tokens // block_size. 0 here."""
        return 0

    @staticmethod
    def next_change(tokens: int, block_size: int, sliding_window: int | None, chunk_size: int | None) -> int:
        """The smallest token count > ``tokens`` where the held blocks may change (a new block)."""
        return ((tokens - 1) // block_size + 1) * block_size + 1


@dataclass(frozen=True)
class FullAttentionSpec(LayerCacheSpec):
    """Full attention: every token's K and V, for the whole request."""

    kind: ClassVar[str] = "full"


@dataclass(frozen=True)
class MLAAttentionSpec(LayerCacheSpec):
    """Multi-head latent attention: one latent (kv_lora_rank + rope dims) per token, not split by TP."""

    kind: ClassVar[str] = "mla"


@dataclass(frozen=True)
class SlidingWindowSpec(LayerCacheSpec):
    """Sliding-window attention: the last ``sliding_window`` tokens."""

    kind: ClassVar[str] = "sliding"
    bounded_per_sequence: ClassVar[bool] = True
    full_without_hybrid_manager: ClassVar[bool] = True

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """cdiv(min(window - 1 + in_flight, len), block) + 1 (SlidingWindowSpec.max_memory_usage_bytes)."""
        tokens = min(sliding_window - 1 + max_in_flight_tokens, max_model_len)
        return _cdiv(tokens, block_size) + 1

    @staticmethod
    def skipped_blocks(tokens, block_size, sliding_window, chunk_size):
        """Blocks wholly before the window (get_num_skipped_tokens: computed - window + 1)."""
        if not sliding_window:
            return 0
        return max(0, tokens - 1 - sliding_window + 1) // block_size

    @staticmethod
    def next_change(tokens, block_size, sliding_window, chunk_size):
        """A new block, or the window's start crossing a block boundary."""
        nxt = ((tokens - 1) // block_size + 1) * block_size + 1
        if sliding_window:
            w = sliding_window
            nxt = min(nxt, w + block_size if tokens < w else w + ((tokens - w) // block_size + 1) * block_size)
        return nxt


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(LayerCacheSpec):
    """Chunked local attention: the tokens of the current ``chunk_size`` chunk."""

    kind: ClassVar[str] = "chunked"
    bounded_per_sequence: ClassVar[bool] = True
    full_without_hybrid_manager: ClassVar[bool] = True

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """cdiv(min(chunk + in_flight, len), block) (ChunkedLocalAttentionSpec.max_memory_usage_bytes)."""
        tokens = min(chunk_size + max_in_flight_tokens, max_model_len)
        return _cdiv(tokens, block_size)

    @staticmethod
    def skipped_blocks(tokens, block_size, sliding_window, chunk_size):
        """Blocks of the chunks before the current one."""
        if not chunk_size:
            return 0
        return ((tokens - 1) // chunk_size) * chunk_size // block_size

    @staticmethod
    def next_change(tokens, block_size, sliding_window, chunk_size):
        """A new block, or a new chunk."""
        nxt = ((tokens - 1) // block_size + 1) * block_size + 1
        if chunk_size:
            nxt = min(nxt, ((tokens - 1) // chunk_size + 1) * chunk_size + 1)
        return nxt


@dataclass(frozen=True)
class MambaSpec(LayerCacheSpec):
    """A recurrent (Mamba / linear-attention) state: one page per sequence, any length."""

    kind: ClassVar[str] = "mamba"
    stores_per_token_kv: ClassVar[bool] = False
    bounded_per_sequence: ClassVar[bool] = True
    one_state_block: ClassVar[bool] = True

    def with_block_size(self, block_size: int) -> "LayerCacheSpec":
        """A state page does not scale with the block size."""
        return replace(self, page_size_bytes=self.page_size_bytes)

    @staticmethod
    def blocks_per_request(max_model_len, max_in_flight_tokens, block_size, sliding_window, chunk_size):
        """One state page."""
        return 1


# The one table from the model's layer kind to its cache class (LayerKind.NONE keeps no cache).
SPEC_FOR_LAYER_KIND: dict[LayerKind, type[LayerCacheSpec]] = {
    LayerKind.FULL: FullAttentionSpec,
    LayerKind.MLA: MLAAttentionSpec,
    LayerKind.SLIDING: SlidingWindowSpec,
    LayerKind.CHUNKED: ChunkedLocalAttentionSpec,
    LayerKind.MAMBA: MambaSpec,
    LayerKind.LINEAR: MambaSpec,
}
# kind string (JSON, KVCacheGroup.kind) -> class.
CACHE_KINDS: dict[str, type[LayerCacheSpec]] = {c.kind: c for c in SPEC_FOR_LAYER_KIND.values()}


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per KV element for ``--kv-cache-dtype`` (``auto`` = the model's activation dtype).

    Raises:
        KvplanError: unknown dtype (names --kv-cache-dtype).
    """
    if kv_cache_dtype == "auto":
        return DTYPE_BYTES[model_dtype]
    if kv_cache_dtype not in DTYPE_BYTES:
        raise KvplanError(
            f"--kv-cache-dtype: unsupported value {kv_cache_dtype!r}",
            hint="use one of: " + ", ".join(KV_CACHE_DTYPES),
        )
    return DTYPE_BYTES[kv_cache_dtype]


def kv_heads_per_rank(total_kv_heads: int, tensor_parallel_size: int) -> int:
    """KV heads held by one TP rank: split when TP divides them, else replicated (>= 1).

    vLLM 0.26.0 model_executor/layers/linear.py QKVParallelLinear and config/model.py
    get_num_kv_heads: max(1, total_kv_heads // tp)."""
    return max(1, total_kv_heads // tensor_parallel_size)


def ssm_state_dtype_bytes(spec: ModelSpec, conv_dtype_bytes: int) -> int:
    """Bytes per element of the recurrent (temporal/SSM) state with --mamba-ssm-cache-dtype auto:
    the conv state's unless the family's vLLM 0.26.0 config hook names another
    (family_quirks ``ssm_state_dtype_from_config`` / ``ssm_state_dtype_default``: Qwen3.5's
    ``mamba_ssm_dtype``, NemotronH's ``mamba_ssm_cache_dtype`` or float32)."""
    q = quirks(spec.model_type)
    if not q.ssm_state_dtype_from_config:
        return conv_dtype_bytes
    named = spec.ssm_state_dtype or q.ssm_state_dtype_default
    return DTYPE_BYTES[named] if named else conv_dtype_bytes


def mamba_state_bytes(spec: ModelSpec, tp: int, state_dtype_bytes: int, num_spec_tokens: int = 0,
                      ssm_dtype_bytes: int | None = None, short_conv_spec_rows: bool = False) -> int:
    """Bytes of one sequence's recurrent state in one linear-attention/Mamba layer on one rank.

    vLLM 0.26.0 mamba_utils.py MambaStateShapeCalculator: gated_delta_net_state_shape,
    mamba1_state_shape, mamba2_state_shape, short_conv_state_shape (LFM2),
    kda_state_shape (Kimi-Linear); the conv state uses ``state_dtype_bytes`` (the model
    dtype unless --mamba-cache-dtype), the SSM (temporal) state ``ssm_dtype_bytes`` (None = the
    same; see ssm_state_dtype_bytes). ``num_spec_tokens``: vLLM's num_speculative_tokens, whose
    rows the GDN and Mamba-2 conv states keep (conv_kernel - 1 + num_spec); the short-conv state
    keeps them only where ``short_conv_spec_rows`` (0.33.0 on; 0.26.0 short_conv_state_shape
    has none)."""
    sb = state_dtype_bytes if ssm_dtype_bytes is None else ssm_dtype_bytes
    if spec.gdn is not None:
        g = spec.gdn
        conv_dim = g.head_k_dim * g.num_k_heads * 2 + g.head_v_dim * g.num_v_heads
        # Kimi Delta Attention (kda_state_shape): the same shapes, but its conv state keeps no
        # rows for speculative tokens (num_spec is accepted and not used)
        spec_rows = 0 if g.kimi_delta else num_spec_tokens
        conv = (conv_dim // tp) * (g.conv_kernel - 1 + spec_rows)
        temporal = (g.num_v_heads // tp) * g.head_v_dim * g.head_k_dim
        return conv * state_dtype_bytes + temporal * sb
    if spec.mamba is not None:
        m = spec.mamba
        if m.version == 1:
            conv = (m.intermediate_size // tp) * (m.conv_kernel - 1)
            temporal = (m.intermediate_size // tp) * m.state_size
            return conv * state_dtype_bytes + temporal * sb
        n_groups = m.n_groups + (0 if m.n_groups % tp == 0 else tp - m.n_groups)
        conv_dim = m.intermediate_size + 2 * n_groups * m.state_size
        conv = (conv_dim // tp) * (m.conv_kernel - 1 + num_spec_tokens)
        temporal = (m.num_heads // tp) * m.head_dim * m.state_size
        return conv * state_dtype_bytes + temporal * sb
    if spec.short_conv is not None:
        # mamba_utils.py short_conv_state_shape: (conv_dim / tp, conv_kernel - 1), conv dtype
        sc = spec.short_conv
        rows = sc.conv_kernel - 1 + (num_spec_tokens if short_conv_spec_rows else 0)
        return (sc.conv_dim // tp) * rows * state_dtype_bytes
    raise KvplanError(f"{spec.name}: recurrent layers without a linear-attention or Mamba shape")


def attention_per_token_bytes(spec: ModelSpec, tp: int, dtype_bytes: int, layer: int | None = None) -> int:
    """K+V bytes one token takes in one standard attention layer on one rank: KV heads on the
    rank x (K head size + V head size) x bytes per element (vLLM 0.26.0 kv_cache_interface.py
    AttentionSpec.real_page_size_bytes, ``head_size + head_size_v``). ``layer``: that layer's own
    shape (ModelSpec.attention_of); None = the model-wide ``attention``."""
    a = spec.attention if layer is None else spec.attention_of(layer)
    heads = kv_heads_per_rank(a.num_key_value_heads, tp)
    return heads * (a.head_dim + a.head_dim_v) * dtype_bytes


def mla_per_token_bytes(spec: ModelSpec, dtype_bytes: int) -> int:
    """MLA latent bytes per token per layer: one head of kv_lora_rank + qk_rope_head_dim elements,
    not split by TP (vLLM 0.26.0 MLAAttentionSpec)."""
    assert spec.mla is not None
    return (spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim) * dtype_bytes


# DeepSeek-V3.2's indexer key cache: fp8 values plus one fp32 scale per 128 elements, stored as
# uint8, one head (vLLM 0.26.0 deepseek_v2.py Indexer: quant_block_size = 128 "TODO: get from
# config"; DeepseekV32IndexerCache.get_kv_cache_spec is an MLAAttentionSpec of num_kv_heads 1).
INDEXER_QUANT_BLOCK = 128
INDEXER_SCALE_BYTES = 4


def indexer_per_token_bytes(spec: ModelSpec) -> int:
    """Bytes per token of one layer's sparse-MLA indexer key cache (uint8: head_dim fp8 values
    + head_dim / 128 fp32 scales), whatever --kv-cache-dtype says; 0 without an indexer."""
    d = spec.indexer_head_dim
    return d + d // INDEXER_QUANT_BLOCK * INDEXER_SCALE_BYTES if d else 0


def hybrid_block_size(mamba_page: int, attn_tok: int, block_size: int, *, kernel_block_alignment: int = 16, gdn: bool) -> int:
    """The attention block size of a hybrid attention/recurrent model (tokens): the smallest
    multiple of max(kernel block, block_size) whose attention page holds one recurrent state
    (vLLM 0.26.0 platforms/interface.py _align_hybrid_block_size, without prefix caching;
    ``gdn`` does not change it here)."""
    align = max(kernel_block_alignment, block_size)
    needed = align * _cdiv(mamba_page, align * attn_tok)
    return max(block_size, needed)


def attention_free_block_size(block_size: int, max_model_len: int, *, enable_prefix_caching: bool) -> int:
    """The block size (tokens) of an attention-free model's state group (Mamba, Mamba-2 with no
    attention layer), as vLLM reports it: each Mamba layer's cache spec takes
    ``cache_config.mamba_block_size`` (model_executor/layers/mamba/abstract.py
    get_kv_cache_spec), which, when the user sets none, is ``max_model_len`` without prefix
    caching and ``block_size`` with it (vLLM 0.26.0 model_executor/models/config.py
    MambaModelConfig.verify_and_update_config; 0.33.0 the same). A state group holds one page per
    request whatever the block size, so only the reported figure changes. Checked on
    families/mamba-2.8b_eager (4,096 at --max-model-len 4096) and families/mamba-codestral-7b_eager
    (32,768)."""
    return block_size if enable_prefix_caching else max_model_len


def sliding_window_block_size(block_size: int, kernel_block_alignment: int) -> int:
    """A sliding layer's block (tokens): the smallest kernel block; unification scales it back up."""
    return kernel_block_alignment


def layer_cache_specs(
    spec: ModelSpec,
    *,
    tensor_parallel_size: int,
    block_size: int,
    kv_dtype_bytes_: int,
    model_dtype_bytes: int,
    kernel_block_alignment: int = 16,
    mamba_cache_dtype_bytes: int | None = None,
    spec_for_layer_kind: dict[LayerKind, type[LayerCacheSpec]] = SPEC_FOR_LAYER_KIND,
    hybrid_block: Callable[..., int] = hybrid_block_size,
    sliding_block: Callable[[int, int], int] = sliding_window_block_size,
    num_speculative_tokens: int = 0,
    short_conv_spec_rows: bool = False,
) -> tuple[list[LayerCacheSpec], int]:
    """The KV-cache spec of every decoder layer on one rank, and the effective block size.

    For hybrid attention/recurrent models the attention block size grows until one attention
    page holds a recurrent state, and the state page is padded to the attention page
    (vLLM 0.26.0 platforms/interface.py _align_hybrid_block_size, without prefix caching).

    Args:
        block_size: the requested/default ``--block-size`` (tokens).
        kv_dtype_bytes_: bytes per KV element (from --kv-cache-dtype).
        model_dtype_bytes: bytes per element of the activation dtype (recurrent states use it).
        kernel_block_alignment: smallest block the attention kernel supports (16 for FlashAttention).
        spec_for_layer_kind / hybrid_block / sliding_block: the version's hooks (its cache classes,
            its hybrid and sliding-window block sizes; a later version binds its own:
            rules.override).
        num_speculative_tokens: --speculative-config's num_speculative_tokens (0 without):
            the recurrent state's conv rows for them (mamba_state_bytes), which grow the state
            page and so a hybrid model's block size (vLLM 0.26.0 gdn/base.py, mamba_mixer2.py:
            ``num_spec``). short_conv_spec_rows: the version's short-conv rule (mamba_state_bytes).
    Returns:
        (one LayerCacheSpec per layer, effective block size in tokens)
    """
    tp = tensor_parallel_size
    attn_tok = (
        mla_per_token_bytes(spec, kv_dtype_bytes_)
        if spec.uses_mla
        else attention_per_token_bytes(spec, tp, kv_dtype_bytes_)
    )
    effective_block = block_size
    mamba_page = 0
    if spec.is_hybrid:
        state_bytes = mamba_cache_dtype_bytes or model_dtype_bytes
        mamba_page = mamba_state_bytes(spec, tp, state_bytes, num_spec_tokens=num_speculative_tokens,
                                       ssm_dtype_bytes=ssm_state_dtype_bytes(spec, state_bytes),
                                       short_conv_spec_rows=short_conv_spec_rows)
        gdn = any(k == LayerKind.LINEAR for k in spec.layer_kinds) and spec.gdn is not None
        if not spec.attention_free:
            # an attention-free model (IsAttentionFree, not IsHybrid) is not aligned: vLLM
            # platforms/interface.py aligns only when model_config.is_hybrid
            effective_block = hybrid_block(
                mamba_page, attn_tok, block_size, kernel_block_alignment=kernel_block_alignment, gdn=gdn
            )

    attends = spec.is_hybrid and any(
        spec_for_layer_kind.get(k, MambaSpec).stores_per_token_kv for k in spec.layer_kinds if k != LayerKind.NONE
    )
    out: list[LayerCacheSpec] = []
    model_attn_tok = attn_tok
    for i, kind in enumerate(spec.layer_kinds):
        cls = spec_for_layer_kind.get(kind)
        if cls is None:
            continue  # LayerKind.NONE keeps no cache.
        if spec.layer_attention and not spec.uses_mla:
            # this layer's own KV heads and K/V head sizes (MiMo-V2-Flash, Gemma-4)
            attn_tok = attention_per_token_bytes(spec, tp, kv_dtype_bytes_, layer=i)
        if cls.one_state_block:
            # The state page is padded to the attention page when attention layers share the pool.
            page = attn_tok * effective_block if attends else mamba_page
            out.append(cls(effective_block, max(page, mamba_page)))
        elif cls is SlidingWindowSpec:
            sw_block = sliding_block(block_size, kernel_block_alignment)
            out.append(cls(sw_block, attn_tok * sw_block, sliding_window=spec.sliding_window, per_token_bytes=attn_tok))
        else:
            chunk = spec.attention_chunk_size if cls is ChunkedLocalAttentionSpec else None
            out.append(cls(effective_block, attn_tok * effective_block, chunk_size=chunk, per_token_bytes=attn_tok))
    # Falcon-H1: each attention layer's parallel Mamba mixer is its own cache layer (vLLM
    # falcon_h1.py names it layer num_hidden_layers + i), after the per-layer specs
    attn_tok = model_attn_tok
    if spec.parallel_mamba:
        page = attn_tok * effective_block if attends else mamba_page
        state_cls = spec_for_layer_kind.get(LayerKind.MAMBA, MambaSpec)
        for kind in spec.layer_kinds:
            if kind == LayerKind.FULL:
                out.append(state_cls(effective_block, max(page, mamba_page)))
    # DeepSeek-V3.2: each indexer is its own cache layer (an MLAAttentionSpec with its page), so
    # the layers share one mixed group whose block costs the sum of pages (allocator.build_layout).
    idx_tok = indexer_per_token_bytes(spec)
    if idx_tok:
        for i, kind in enumerate(spec.layer_kinds):
            if kind == LayerKind.MLA and i < len(spec.indexer_layers) and spec.indexer_layers[i]:
                out.append(MLAAttentionSpec(effective_block, idx_tok * effective_block, per_token_bytes=idx_tok))
    return out, effective_block


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/kv_cache_interface.py', 'AttentionSpec'),
    ('v1/kv_cache_interface.py', 'FullAttentionSpec'),
    ('v1/kv_cache_interface.py', 'MLAAttentionSpec'),
    ('v1/kv_cache_interface.py', 'SlidingWindowSpec'),
    ('v1/kv_cache_interface.py', 'MambaSpec'),
    ('model_executor/layers/attention/attention.py', 'Attention.get_kv_cache_spec'),
    ('model_executor/layers/mamba/mamba_utils.py', 'MambaStateShapeCalculator'),
    ('model_executor/layers/linear.py', 'QKVParallelLinear.__init__'),
    ('platforms/interface.py', 'Platform._align_hybrid_block_size'),
    ('v1/core/single_type_kv_cache_manager.py', 'SlidingWindowManager.get_num_skipped_tokens'),
)
