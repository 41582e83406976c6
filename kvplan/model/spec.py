"""What a model IS, as far as vLLM's memory planning cares: the typed ModelSpec.

A ModelSpec is parsed from a Hugging Face ``config.json`` (see ``kvplan.model.parse``) and is
engine-neutral: it says how many layers of which attention kind there are, their KV heads and head
sizes, the MoE and MLA shapes, the recurrent-state shapes of linear-attention/Mamba layers, the
checkpoint dtype and the quantization. What vLLM *does* with it (per-rank heads, page sizes,
grouping, weights as loaded) lives in ``kvplan.engines.vllm``.

All sizes are element counts (heads, dims, tokens); no bytes here except the optional
``checkpoint_bytes`` measured from safetensors headers.
"""

from __future__ import annotations

from enum import Enum
from functools import cached_property

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class LayerKind(str, Enum):
    """What one decoder layer keeps per token (or per sequence) in vLLM's KV cache."""

    FULL = "full_attention"  # K and V for every token
    SLIDING = "sliding_attention"  # K and V for the last `sliding_window` tokens
    CHUNKED = "chunked_attention"  # Llama-4 local attention: tokens of the current chunk
    MLA = "mla"  # one compressed latent (kv_lora_rank + rope dims) per token
    LINEAR = "linear_attention"  # Gated DeltaNet (Qwen3-Next): fixed recurrent state per sequence
    MAMBA = "mamba"  # Mamba-1/2 state per sequence (Jamba, Granite-4.0-H)
    NONE = "none"  # no KV cache (e.g. a KV-shared or encoder-only layer)


class ApproximationKind(str, Enum):
    """Why an estimate is not exact (ModelSpec.approximations): what kvplan assumed."""

    # the architecture has no kvplan family: sized as the generic decoder from the standard keys
    UNKNOWN_FAMILY = "unknown_family"
    # a family's rules, for an architecture name that family is not registered for
    UNREGISTERED_ARCHITECTURE = "unregistered_architecture"
    # the MLP assumed gated (gate, up and down projections) without a family saying so
    ASSUMED_MLP = "assumed_mlp"
    # a family kvplan has rules for, but whose rules leave a named part of vLLM's memory unmodelled
    PARTIAL_RULES = "partial_rules"
    # a memory term of vLLM's start the estimate does not model (a multimodal encoder's profile)
    UNMODELLED_MEMORY = "unmodelled_memory"
    # a bundled config snapshot that is not complete: keys it lacks take transformers' defaults
    PARTIAL_SNAPSHOT = "partial_snapshot"
    # a `vllm serve` flag the estimate was given that may change memory but that kvplan does not
    # model (kvplan/cli/serve_extras.py); the figures assume it is unset
    UNMODELLED_FLAG = "unmodelled_flag"


class Approximation(_Frozen):
    """One reason an estimate is approximate: ``kind`` for code, ``reason`` (one line) for people.

    An estimate with any is ``exact: false`` in every output (estimate JSON/table/serve, plan,
    check)."""

    kind: ApproximationKind
    reason: str


class AttentionShape(_Frozen):
    """Standard multi-head / grouped-query attention shape (whole model, before TP).

    Attributes:
        num_attention_heads: query heads.
        num_key_value_heads: KV heads (= query heads for MHA, fewer for GQA/MQA).
        head_dim: K head size in elements.
        head_dim_v: V head size in elements (equal to head_dim except a few models).
    """

    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    head_dim_v: int = Field(gt=0)


class MLAShape(_Frozen):
    """DeepSeek multi-head latent attention (MLA): one latent of
    ``kv_lora_rank + qk_rope_head_dim`` elements per token per layer, replicated on every TP rank."""

    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    qk_nope_head_dim: int = Field(ge=0)
    v_head_dim: int = Field(gt=0)
    q_lora_rank: int | None = None


class GatedDeltaNetShape(_Frozen):
    """Gated DeltaNet linear attention (Qwen3-Next): conv state + recurrent state per sequence."""

    num_k_heads: int = Field(gt=0)
    num_v_heads: int = Field(gt=0)
    head_k_dim: int = Field(gt=0)
    head_v_dim: int = Field(gt=0)
    conv_kernel: int = Field(gt=0)
    # Kimi Delta Attention (Kimi-Linear): the same state shapes (q, k and v short convs of
    # num_k_heads x head_k_dim channels each; a heads x head_dim x head_dim recurrent state), but
    # separate q/k/v projections, low-rank forget/output gates and fp32 conv weights
    kimi_delta: bool = False


class MambaShape(_Frozen):
    """Mamba-1 or Mamba-2 mixer: conv state + SSM state per sequence."""

    version: int = Field(ge=1, le=2)
    intermediate_size: int = Field(gt=0)  # d_inner = expand * hidden_size
    state_size: int = Field(gt=0)  # d_state
    conv_kernel: int = Field(gt=0)
    n_groups: int = Field(default=1, gt=0)  # Mamba-2 only
    num_heads: int = Field(default=0, ge=0)  # Mamba-2 only
    head_dim: int = Field(default=0, ge=0)  # Mamba-2 only
    chunk_size: int | None = None
    dt_rank: int | None = None  # Mamba-1 only
    use_conv_bias: bool = True
    use_bias: bool = False
    use_rms_norm: bool = False  # Mamba-1 RMSNorms on dt, B and C (Jamba; vLLM MambaMixer use_rms_norm)
    # Mamba-2's gated RMSNorm has a weight (d_inner); False where the config turns it off
    # (Falcon-H1 ``mamba_rms_norm`` false: vLLM Mixer2RMSNormGated registers no weight)
    gated_norm_weight: bool = True


class ShortConvShape(_Frozen):
    """LFM2's short convolution mixer: in_proj (hidden -> 3 x conv_dim: B, C, x gates), a
    depthwise causal conv of ``conv_kernel`` taps (``conv_L_cache``) and out_proj; its state per
    sequence is the last conv_kernel - 1 inputs (vLLM mamba_utils short_conv_state_shape)."""

    conv_dim: int = Field(gt=0)
    conv_kernel: int = Field(gt=1)
    bias: bool = False


class SharedBlocksShape(_Frozen):
    """Zamba2's shared transformer blocks: ``num_blocks`` attention + MLP blocks whose weights
    every hybrid layer reuses in turn (layer j of the hybrid layers uses block j mod num_blocks),
    each use with its own low-rank adapters and its own KV cache.

    Attributes:
        num_blocks: shared blocks (``num_mem_blocks``).
        input_size: width the attention reads (``attention_hidden_size``: the hidden state
            concatenated with the embeddings, 2 x hidden).
        adapter_rank: rank of each use's LoRA adapters (``adapter_rank``).
        attention_adapters: each use also adapts q, k and v (``use_shared_attention_adapter``).
        bias: the projections have biases (``add_bias_linear``).
    """

    num_blocks: int = Field(gt=0)
    input_size: int = Field(gt=0)
    adapter_rank: int = Field(gt=0)
    attention_adapters: bool = False
    bias: bool = False


class MoESpec(_Frozen):
    """Mixture-of-experts feed-forward shape.

    Attributes:
        num_experts: routed experts per MoE layer.
        top_k: experts per token.
        moe_intermediate_size: intermediate size of one routed expert.
        shared_intermediate_size: total intermediate size of the shared expert(s) (0 = none).
        shared_expert_gate: Qwen2-MoE style sigmoid gate on the shared expert.
        router_bias: the router has a bias (gpt-oss) or a correction bias (DeepSeek-V3).
        expert_bias: the expert projections have biases (gpt-oss).
    """

    num_experts: int = Field(gt=0)
    top_k: int = Field(gt=0)
    moe_intermediate_size: int = Field(gt=0)
    shared_intermediate_size: int = Field(default=0, ge=0)
    shared_expert_gate: bool = False
    router_bias: bool = False
    expert_bias: bool = False
    # the experts (and shared experts) are gated (w13 = gate + up, 2 x moe_intermediate_size rows);
    # False for a plain up/act/down expert (NemotronH's ReLU^2 experts)
    gated: bool = True


class QuantSpec(_Frozen):
    """Weight quantization, from the checkpoint's ``quantization_config`` or ``--quantization``.

    Attributes:
        method: vLLM's name: fp8, awq, gptq, compressed-tensors, mxfp4, bitsandbytes, ...
        bits: weight bits (4 or 8; 8 for fp8).
        group_size: elements per scale group (-1 = per channel).
        desc_act: GPTQ act-order (adds a g_idx per input channel).
        source: "checkpoint" (pre-quantized weights) or "runtime" (``--quantization`` on a bf16 config).
        block_size: fp8 block-wise scales, e.g. [128, 128] (DeepSeek-V3), else None (per tensor).
        kv_cache_fp8: the checkpoint declares an fp8 KV-cache scheme (llm-compressor).
        vllm_name: the method name vLLM itself reports when it differs from ``method``
            ("modelopt" for NVIDIA ModelOpt FP8 checkpoints, described by hf_quant_config.json).
    """

    method: str
    bits: int = Field(default=16, gt=0)
    group_size: int = -1
    desc_act: bool = False
    zero_point: bool = True
    source: str = "checkpoint"
    block_size: tuple[int, int] | None = None
    kv_cache_fp8: bool = False
    modules_to_not_convert: tuple[str, ...] = ()
    vllm_name: str | None = None


class ModelSpec(_Frozen):
    """A decoder-only language model as vLLM sizes it (the text model of a multimodal config).

    Shapes are whole-model (before tensor parallelism); the engine splits them per rank.

    Attributes:
        name: repo id or path it came from (for messages).
        architecture: ``architectures[0]`` of config.json, e.g. ``LlamaForCausalLM``.
        model_type: ``model_type`` of the text config, e.g. ``llama``.
        layer_kinds: one LayerKind per decoder layer (len == num_hidden_layers).
        sliding_window: window in tokens for SLIDING layers.
        attention_chunk_size: chunk in tokens for CHUNKED layers (Llama 4).
        moe_layers: per layer, True where the feed-forward is a MoE.
        dtype: the checkpoint's torch dtype string (float32/float16/bfloat16).
        derived_max_model_len: vLLM's default ``--max-model-len`` for this config (rope scaling applied).
        checkpoint_bytes: total bytes of the checkpoint tensors vLLM loads, when known.
        checkpoint_params: (safetensors dtype, parameter count) pairs of those tensors, when known.
        checkpoint_tensors_visible: whether vLLM would see the checkpoint's tensors next to the
            config (False for a config-only directory: vLLM auto_gptq.maybe_update_config
            then finds no quantized layers and loads GPTQ weights unquantized).
        approximations: why the sizing is not exact (an architecture without a kvplan family,
            sized from the standard keys); empty when kvplan has rules for it (``exact``).
        notes: one-line warnings from parsing and from the source, for the plan's warnings: keys a
            partial config lacks (transformers defaults used), an architecture or quant_method
            kvplan has no rules for, checkpoint tensors ignored as incomplete.
        snapshot_notes: those of ``notes`` that say a bundled snapshot is partial (kvplan's own
            uncertainty, not the user's to fix: the estimate makes them notes, not warnings).

    The model is frozen and hashable, so planner results can be cached per spec.
    """

    name: str
    architecture: str
    model_type: str
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(ge=0)
    vocab_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    attention: AttentionShape
    layer_kinds: tuple[LayerKind, ...]
    # per layer, its attention shape where layers differ (MiMo-V2-Flash's sliding layers have
    # their own KV heads, Gemma-4's full layers their own head size); empty = ``attention`` on
    # every layer. Read through ``attention_of(i)``: KV bytes per token, pages, weights.
    layer_attention: tuple[AttentionShape, ...] = ()
    # per layer, whether its attention has learned per-head sink logits in the model dtype
    # (MiMo-V2-Flash's sliding layers); empty = none. gpt-oss's fp32 sinks are ``attention_sinks``.
    sink_layers: tuple[bool, ...] = ()
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    mla: MLAShape | None = None
    gdn: GatedDeltaNetShape | None = None
    mamba: MambaShape | None = None
    # no layer attends (vLLM's IsAttentionFree models: Mamba, Mamba-2): vLLM treats it as
    # attention-free, not hybrid (no hybrid block-size alignment, no prefix caching)
    attention_free: bool = False
    # Zamba2: the FULL layers are hybrid layers that run one of these shared blocks (weights
    # counted once per block) beside their own Mamba-2 mixer (``parallel_mamba``)
    shared_blocks: SharedBlocksShape | None = None
    # LFM2: the layers of kind MAMBA are short-convolution mixers of this shape (no Mamba shape)
    short_conv: ShortConvShape | None = None
    # each attention layer also runs a Mamba mixer (``mamba``) beside it, summed into the same
    # residual, with its own recurrent state: one extra cache layer per attention layer (Falcon-H1)
    parallel_mamba: bool = False
    # the dtype the config itself names for the recurrent (temporal/SSM) state (Qwen3.5
    # ``mamba_ssm_dtype``, NemotronH ``mamba_ssm_cache_dtype``); None when it names none. Whether
    # and how vLLM uses it is version-specific (engines/vllm/v0_XX/family_quirks.py).
    ssm_state_dtype: str | None = None
    moe: MoESpec | None = None
    # parameters per MoE layer beside the router matrix and its bias, in the model dtype
    # (Gemma-4's per-dimension router input scale and per-expert output scale: hidden + experts)
    moe_router_extra_params: int = Field(default=0, ge=0)
    # DeepSeek-V3.2 sparse-MLA lightning indexer: its key head size, heads, top-k tokens, and which
    # layers build one (each keeps its own per-token key cache beside the MLA latent); 0/() = none
    indexer_head_dim: int = 0
    indexer_heads: int = 0
    indexer_topk: int = 0
    indexer_layers: tuple[bool, ...] = ()
    moe_layers: tuple[bool, ...] = ()
    # per layer, whether it has a feed-forward (dense MLP or MoE) at all; empty = every layer has
    # one. NemotronH layers are one block each: a Mamba or attention layer has no feed-forward.
    ffn_layers: tuple[bool, ...] = ()
    dtype: str = "bfloat16"
    quantization: QuantSpec | None = None
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    derived_max_model_len: int = 2048
    # the largest --max-model-len vLLM takes without VLLM_ALLOW_LONG_MAX_MODEL_LEN when it is
    # above the default (longrope: the default is original_max_position_embeddings, the limit
    # max_position_embeddings); None = derived_max_model_len. See ``max_len_limit``.
    max_model_len_limit: int | None = None
    rope_max_position: int | None = None  # rows of the rotary cos/sin cache vLLM builds
    rope_caches: int = 1  # distinct rotary caches (Gemma-3: local + global)
    # the width of each distinct rotary cache where they differ (Gemma-4: 256 sliding, 512 full);
    # empty = ``rope_caches`` caches of ``rotary_dim``
    rope_cache_dims: tuple[int, ...] = ()
    rotary_dim: int | None = None
    attention_sinks: bool = False
    logit_softcapping: bool = False  # final_logit_softcapping (Gemma-2): tanh-capped logits
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    # q_norm/k_norm span all heads (num_heads x head_dim, num_kv_heads x head_dim), not one head (OLMoE)
    qk_norm_across_heads: bool = False
    norms_per_layer: int = 2
    norm_has_bias: bool = False  # LayerNorm with bias (OPT): 2 vectors per norm, not 1 (RMSNorm)
    attn_output_gate: bool = False  # q_proj also yields a sigmoid output gate: 2x its rows (Qwen3-Next)
    gated_mlp: bool = True
    learned_positions: int = 0  # rows of a learned position embedding (OPT), 0 for RoPE
    is_multimodal: bool = False
    vision_params: int = 0  # parameters of a vision tower vLLM also loads (approximate)
    # the modalities the multimodal processor takes (vLLM's supported_mm_limits): with every one
    # limited to 0 (--limit-mm-per-prompt) vLLM builds no tower (engines/vllm weights.text_only)
    mm_modalities: tuple[str, ...] = ("image", "video")
    checkpoint_bytes: int | None = None
    checkpoint_params: tuple[tuple[str, int], ...] | None = None
    checkpoint_tensors_visible: bool = True  # False: vLLM would find no safetensors (see load_spec)
    approximations: tuple[Approximation, ...] = ()
    notes: tuple[str, ...] = ()
    # the --hf-overrides JSON object (text) applied to the config before parsing (sources.load_spec);
    # the serve line carries it again so vLLM sizes the same config
    hf_overrides: str | None = None
    snapshot_notes: tuple[str, ...] = ()
    # the speculative draft --speculative-config pairs with this model (model/draft.py DraftModel,
    # attached by sources/draft.py), so that every re-plan keeps it; None = no draft model
    speculative_draft: "Any" = None

    @property
    def exact(self) -> bool:
        """kvplan has rules for every layer and weight of this architecture (no approximations)."""
        return not self.approximations

    @cached_property
    def is_hybrid(self) -> bool:
        """True when some layers keep a recurrent state (linear attention / Mamba) instead of KV."""
        return self.parallel_mamba or any(k in (LayerKind.LINEAR, LayerKind.MAMBA) for k in self.layer_kinds)

    @property
    def max_len_limit(self) -> int:
        """The largest --max-model-len vLLM accepts without VLLM_ALLOW_LONG_MAX_MODEL_LEN (tokens)."""
        return max(self.max_model_len_limit or 0, self.derived_max_model_len)

    def attention_of(self, i: int) -> AttentionShape:
        """The attention shape of layer ``i`` (``layer_attention`` where given, else ``attention``)."""
        return self.layer_attention[i] if self.layer_attention else self.attention

    @cached_property
    def per_layer_attention(self) -> bool:
        """Some layer's attention shape differs from ``attention`` (see ``layer_attention``)."""
        return any(a != self.attention for a in self.layer_attention)

    def has_ffn(self, i: int) -> bool:
        """Layer ``i`` has a feed-forward (see ``ffn_layers``)."""
        return not self.ffn_layers or self.ffn_layers[i]

    @cached_property
    def is_moe(self) -> bool:
        return self.moe is not None and any(self.moe_layers)

    @property
    def uses_mla(self) -> bool:
        return self.mla is not None

    def count(self, kind: LayerKind) -> int:
        """Number of decoder layers of one kind."""
        return sum(1 for k in self.layer_kinds if k == kind)
