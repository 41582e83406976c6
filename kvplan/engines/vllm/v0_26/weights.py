"""Weight bytes one GPU holds after vLLM 0.26.0 loads a model ("Model loading took X GiB").

vLLM allocates each parameter per tensor-parallel rank: column-parallel projections split their
output dimension, row-parallel ones their input dimension, KV heads are replicated when TP
exceeds them, the vocabulary is padded to a multiple of 64 (vocab_parallel_embedding.py
DEFAULT_VOCAB_PADDING_SIZE) and split, norms and MoE routers are replicated. Buffers created at
load time count too (the RoPE cos/sin cache, MLA's W_UK/W_UV copies). Quantized layouts follow
vLLM's linear methods: fp8 (1 byte + fp32 scales), AWQ/GPTQ-Marlin (packed 4/8-bit + fp16 scales
+ zeros), MXFP4 experts (4-bit + e8m0 scale per 32), bitsandbytes.

Checked against "Model loading took ..." in ../shared/calibration/vllm-0.26.0-h200/*.json
(tests/test_calibration.py).
Units: bytes (int).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kvplan.engines.vllm.v0_26.family_quirks import GEMMA3_EXTRA_BYTES, QWEN2_BYTES_PER_LAYER, quirks  # noqa: F401
from kvplan.model.spec import LayerKind, ModelSpec, QuantSpec

VOCAB_PADDING = 64

# With an fp8 KV cache, "Model loading took" grows by ~1 MiB per attention layer:
# 14.99 vs 14.96 GiB for Llama-3-8B's 32 layers (calibration llama3-8b_eager_fp8kv vs
# llama3-8b_eager; +32 blocks of 1 MiB in num_gpu_blocks). Source in vLLM not identified.
FP8_KV_BYTES_PER_ATTENTION_LAYER = 1 << 20

# Per-family load-time extras (Qwen2 per layer, Gemma-3 once): family_quirks.py.
# MXFP4 experts (gpt-oss, vLLM's 'TRITON' MXFP4 backend on Hopper: triton_kernels swizzled
# layouts): 0.818 % over the 4-bit values + e8m0 scales, plus 116,275,639 B once per GPU. A
# two-point fit on the worker's exact model memory: gpt-oss-20b_eager 13,990,901,760 B (packed
# formula 13,791,316,096 B; 10,178,887,680 B of experts) and gpt-oss-120b_eager 65,961,363,456 B
# (65,345,223,808 B; 61,073,326,080 B of experts). Both exact; the fixed part is assumed per GPU
# (every pipeline stage, every tensor-parallel rank): TP/PP > 1 is unmeasured.
MXFP4_LAYOUT_OVERHEAD = 0.0081846
MXFP4_FIXED_BYTES = 116_275_639
# --quantization fp8 applied at load time to MoE experts: + num_experts x hidden x 4 B per MoE
# layer (calibration qwen3-next-80b_fp8_eager: 75.04 GiB logged vs 74.86 GiB packed).
FP8_ONLINE_MOE_BYTES_PER_EXPERT_ELEM = 4


def _pad(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass
class WeightTally:
    """Bytes by component for one rank (for the breakdown in --format json)."""

    parts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, n_bytes: int | float) -> None:
        self.parts[name] = self.parts.get(name, 0) + int(n_bytes)

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass(frozen=True)
class WeightContext:
    """Everything the weight layout depends on besides the ModelSpec."""

    tp: int
    dtype_bytes: int  # activation/param dtype (bf16/fp16 = 2)
    quant: QuantSpec | None
    machete: bool = False  # Hopper AWQ/GPTQ kernel: zero points kept as fp16, one per group and column


def _linear(ctx: WeightContext, k: int, n: int, *, bias: bool = False, quantizable: bool = True, n_shards: int = 1) -> int:
    """Bytes of one linear layer with input ``k`` and output ``n`` elements on this rank."""
    q = ctx.quant if quantizable else None
    bias_bytes = n * ctx.dtype_bytes if bias else 0
    if q is None or q.method in ("none",):
        return k * n * ctx.dtype_bytes + bias_bytes
    m = q.method
    if m == "fp8" or (m == "compressed-tensors" and q.bits == 8 and not q.zero_point):
        body = k * n  # 1 byte per weight
        if q.block_size:
            bn, bk = q.block_size
            scales = math.ceil(n / bn) * math.ceil(k / bk) * 4
        else:
            scales = 4 * n_shards  # one fp32 scale per logical weight (per tensor)
        return body + scales + bias_bytes
    if m in ("awq", "gptq") or (m == "compressed-tensors" and q.bits in (4, 8)):
        bits = q.bits
        g = q.group_size if q.group_size and q.group_size > 0 else k
        groups = max(1, math.ceil(k / g))
        qweight = k * n * bits // 8
        scales = groups * n * 2
        if not q.zero_point:
            zeros = 0
        elif ctx.machete and m == "awq":
            # MacheteLinearKernel (vLLM 0.26.0 on compute capability 9.x) stores -zp*scale in fp16:
            # record llama3.1-70b-awq_eager, 40,672,346,112 B (packed zeros would give 39.80e9).
            zeros = groups * n * 2
        else:
            zeros = groups * n * bits // 8
        g_idx = k * 4 if (m == "gptq" and q.desc_act) else 0
        return qweight + scales + zeros + g_idx + bias_bytes
    if m == "bitsandbytes":
        if q.bits == 4:
            return k * n // 2 + math.ceil(k * n / 64) * 4 + bias_bytes
        return k * n + n * 4 + bias_bytes
    if m == "mxfp4":
        # Only MoE experts are mxfp4 in gpt-oss; dense linears stay in the activation dtype.
        return k * n * ctx.dtype_bytes + bias_bytes
    return k * n * ctx.dtype_bytes + bias_bytes


def _experts(ctx: WeightContext, spec: ModelSpec, hidden: int, inter_rank: int, num_experts: int) -> int:
    """Bytes of the routed experts of one MoE layer on this rank (TP shards the intermediate)."""
    q = ctx.quant
    gate_up = 2 if spec.moe is None or spec.moe.gated else 1
    w13 = num_experts * hidden * gate_up * inter_rank
    w2 = num_experts * inter_rank * hidden
    biases = 0
    if spec.moe is not None and spec.moe.expert_bias:
        biases = num_experts * (2 * inter_rank + hidden) * (4 if q and q.method == "mxfp4" else ctx.dtype_bytes)
    if q is None:
        return (w13 + w2) * ctx.dtype_bytes + biases
    if q.method == "mxfp4":
        # 4-bit values + one e8m0 scale byte per 32 along the input dim, plus the layout overhead.
        return int(((w13 + w2) // 2 + (w13 + w2) // 32) * (1 + MXFP4_LAYOUT_OVERHEAD)) + biases
    if q.method == "fp8" or (q.method == "compressed-tensors" and q.bits == 8 and not q.zero_point):
        if q.block_size:
            bn, bk = q.block_size
            scales = num_experts * (
                math.ceil(2 * inter_rank / bn) * math.ceil(hidden / bk)
                + math.ceil(hidden / bn) * math.ceil(inter_rank / bk)
            ) * 4
        else:
            scales = num_experts * 2 * 4
        if q.source == "runtime":
            scales += num_experts * hidden * FP8_ONLINE_MOE_BYTES_PER_EXPERT_ELEM
        return w13 + w2 + scales + biases
    if q.method in ("awq", "gptq", "compressed-tensors"):
        bits = q.bits
        g = q.group_size if q.group_size and q.group_size > 0 else hidden

        def packed(k: int, n: int) -> int:
            groups = max(1, math.ceil(k / g))
            return k * n * bits // 8 + groups * n * 2 + (groups * n * bits // 8 if q.zero_point else 0)

        return num_experts * (packed(hidden, 2 * inter_rank) + packed(inter_rank, hidden)) + biases
    if q.method == "bitsandbytes":
        return (w13 + w2) * q.bits // 8 + biases
    return (w13 + w2) * ctx.dtype_bytes + biases


def _rope_cache_bytes(spec: ModelSpec, dtype_bytes: int) -> int:
    """The RoPE cos/sin cache buffer: [rows, rotary_dim] in the model dtype, once per distinct
    rotary module (vLLM caches them; rotary_embedding/base.py). YaRN builds original_max * factor rows."""
    if not spec.rotary_dim or not spec.rope_max_position:
        return 0
    if spec.rope_cache_dims:  # caches of differing widths (Gemma-4)
        return spec.rope_max_position * sum(spec.rope_cache_dims) * dtype_bytes
    return spec.rope_max_position * spec.rotary_dim * dtype_bytes * spec.rope_caches


def _shared_block_use(t: "WeightTally", ctx: WeightContext, spec: ModelSpec) -> None:
    """One hybrid layer's own weights beside the shared block it runs (vLLM 0.26.0 zamba2.py):
    the hidden x hidden ``linear`` (ReplicatedLinear) and its LoRA adapters -- the MLP's (A:
    hidden -> rank, B: rank -> 2 x intermediate) and, with attention adapters, q/k/v's (A: input
    -> rank, B: rank -> input); A gathers its output, so it is split by TP like B."""
    sb, h, tp = spec.shared_blocks, spec.hidden_size, ctx.tp
    t.add("hybrid_linear", _linear(WeightContext(1, ctx.dtype_bytes, ctx.quant, ctx.machete), h, h))
    r = sb.adapter_rank
    t.add("shared_adapters", _linear(ctx, h, r // tp) + _linear(ctx, r, 2 * spec.intermediate_size // tp, n_shards=2))
    if sb.attention_adapters:
        t.add("shared_adapters", 3 * (_linear(ctx, sb.input_size, r // tp) + _linear(ctx, r, sb.input_size // tp)))


def _shared_blocks(t: "WeightTally", ctx: WeightContext, spec: ModelSpec) -> None:
    """The shared transformer blocks, once each (vLLM 0.26.0 zamba2.py Zamba2AttentionDecoderLayer):
    qkv (input -> 3 x heads x head_dim, multi-head) and o_proj without biases, a GeLU-gated MLP
    (biases with ``add_bias_linear``), input_layernorm
    over the input width and pre_ff_layernorm over the hidden width."""
    sb, a, h, tp, db = spec.shared_blocks, spec.attention, spec.hidden_size, ctx.tp, ctx.dtype_bytes
    heads = a.num_attention_heads // tp
    ir = spec.intermediate_size // tp
    per_block = (
        _linear(ctx, sb.input_size, 3 * heads * a.head_dim, n_shards=3)  # no biases on the attention
        + _linear(ctx, heads * a.head_dim, h)
        + _linear(ctx, h, 2 * ir, bias=sb.bias, n_shards=2) + _linear(ctx, ir, h, bias=sb.bias)
        + (sb.input_size + h) * db
    )
    t.add("shared_blocks", sb.num_blocks * per_block)


def text_only(spec: ModelSpec, limit_mm_per_prompt: str | None) -> bool:
    """vLLM runs a multimodal model text-only: ``--limit-mm-per-prompt`` (normalized JSON of
    modality -> count, kvplan.engines.vllm.args) gives 0 for every modality its processor takes
    (``spec.mm_modalities``; an unnamed modality defaults to 999). Then the vision tower (and
    any buffers built with it, Qwen3-VL's deepstack inputs) is built on the meta device and holds
    no GPU memory, and no encoder is profiled or given an inputs_embeds buffer.

    Rule source: vLLM 0.26.0 model_executor/models/interfaces.py ``_mark_tower_model`` (its
    ``no_init_weights`` under ``torch.device("meta")`` when all the tower's modalities have limit
    0), config/multimodal.py ``get_limit_per_prompt`` (999 when unnamed), multimodal/registry.py
    ``supports_multimodal_inputs`` ("running in text-only mode").
    """
    if not spec.is_multimodal or not limit_mm_per_prompt:
        return False
    import json

    limits = json.loads(limit_mm_per_prompt)
    return all(limits.get(m, 999) == 0 for m in spec.mm_modalities)


def pp_layer_ranges(num_layers: int, pp: int) -> list[range]:
    """Decoder layers held by each pipeline stage (vLLM 0.26.0 distributed/utils.py get_pp_indices):
    equal shares; the remainder goes one each to the stages before the last."""
    per = num_layers // pp
    parts = [per] * pp
    rem = num_layers % pp
    for i in range(2, rem + 2):
        parts[-i] += 1
    out, start = [], 0
    for p in parts:
        out.append(range(start, start + p))
        start += p
    return out


def weight_bytes_per_rank(
    spec: ModelSpec,
    *,
    tensor_parallel_size: int,
    pipeline_rank: int = 0,
    pipeline_parallel_size: int = 1,
    dtype_bytes: int = 2,
    quant: QuantSpec | None = None,
    fp8_kv_cache: bool = False,
    machete: bool = False,
    max_num_batched_tokens: int = 0,
    expert_shards: int | None = None,
    local_experts: int | None = None,
) -> WeightTally:
    """Bytes of parameters and load-time buffers on one GPU (TP rank 0 of ``pipeline_rank``).

    Args:
        spec: the model.
        tensor_parallel_size / pipeline_parallel_size: the parallel layout.
        dtype_bytes: bytes of the run dtype (after --dtype resolution).
        quant: the effective quantization (checkpoint or --quantization), None for none.
        fp8_kv_cache: the KV cache is fp8 (adds vLLM's per-layer overhead).
        machete: AWQ runs on the Machete kernel (Hopper), which keeps fp16 zero points.
        max_num_batched_tokens: the scheduler's token budget, for buffers the model builds at
            load time with one row per token (DeepSeek-V3.2's top-k indices buffer).
        expert_shards: ways each routed expert's intermediate is split (None = TP; TP x PCP x DP
            under data parallel, 1 under expert parallel: fused_moe/config.py
            FusedMoEParallelConfig.make, capacity/ranks.py).
        local_experts: whole routed experts this GPU holds per MoE layer under expert parallel
            (None = every expert; expert_map_manager.py determine_expert_map).
    Returns:
        a WeightTally whose ``total`` is the predicted "Model loading took" bytes.
    Rule source: vLLM 0.26.0 model_executor/models/{llama,qwen2,qwen3,gemma2,mixtral,
    qwen3_moe,qwen3_next,deepseek_v2,gpt_oss,jamba,granitemoehybrid,opt}.py and
    model_executor/layers/{linear,vocab_parallel_embedding}.py.
    """
    tp = tensor_parallel_size
    ctx = WeightContext(tp=tp, dtype_bytes=dtype_bytes, quant=quant, machete=machete)
    t = WeightTally()
    h = spec.hidden_size
    a = spec.attention
    db = dtype_bytes
    ranges = pp_layer_ranges(spec.num_hidden_layers, pipeline_parallel_size)
    layers = ranges[pipeline_rank]
    first = pipeline_rank == 0
    last = pipeline_rank == pipeline_parallel_size - 1

    vocab_rows = _pad(spec.vocab_size, VOCAB_PADDING) // tp
    if first:
        t.add("embed_tokens", vocab_rows * h * db)
        if spec.learned_positions:
            t.add("embed_positions", spec.learned_positions * h * db)
    if last:
        if not spec.tie_word_embeddings or not first:
            t.add("lm_head", vocab_rows * h * db)
        if quirks(spec.model_type).lm_head_bias:
            t.add("lm_head", vocab_rows * db)
        t.add("norm", h * db * (2 if spec.norm_has_bias else 1))
    t.add("rotary_cache", _rope_cache_bytes(spec, db))

    q_heads = a.num_attention_heads // tp
    kv_heads = max(1, a.num_key_value_heads // tp)
    norm_bytes = h * db * (2 if spec.norm_has_bias else 1)

    for i in layers:
        kind = spec.layer_kinds[i]
        t.add("norms", spec.norms_per_layer * norm_bytes)
        if fp8_kv_cache and kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA):
            t.add("fp8_kv_overhead", FP8_KV_BYTES_PER_ATTENTION_LAYER)
        # --- token mixer ---
        if kind == LayerKind.MLA and spec.mla is not None:
            m = spec.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                t.add("attn", _linear(ctx, h, m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim))
                t.add("attn", m.q_lora_rank * db)  # q_a_layernorm
                t.add("attn", _linear(ctx, m.q_lora_rank, q_heads * qk))
            else:
                t.add("attn", _linear(ctx, h, q_heads * qk))
                t.add("attn", _linear(ctx, h, m.kv_lora_rank + m.qk_rope_head_dim))
            t.add("attn", m.kv_lora_rank * db)  # kv_a_layernorm
            t.add("attn", _linear(ctx, m.kv_lora_rank, q_heads * (m.qk_nope_head_dim + m.v_head_dim)))
            t.add("attn", _linear(ctx, q_heads * m.v_head_dim, h))
            # process_weights_after_loading keeps bf16 W_UK^T and W_UV copies of kv_b_proj
            # (views of it when unquantized: family_quirks.mla_bf16_absorbed_copies).
            if ctx.quant is not None or quirks(spec.model_type).mla_bf16_absorbed_copies:
                t.add("mla_absorbed", m.kv_lora_rank * q_heads * (m.qk_nope_head_dim + m.v_head_dim) * db)
            if i < len(spec.indexer_layers) and spec.indexer_layers[i] and m.q_lora_rank:
                # deepseek_v2.py Indexer: wq_b (replicated, quantized like the checkpoint),
                # wk_weights_proj (hidden -> head_dim + heads, never quantized), k_norm LayerNorm.
                d, n = spec.indexer_head_dim, spec.indexer_heads
                t.add("indexer", _linear(WeightContext(1, db, ctx.quant, ctx.machete), m.q_lora_rank, d * n))
                t.add("indexer", _linear(ctx, h, d + n, quantizable=False) + 2 * d * db)
        elif kind == LayerKind.FULL and spec.shared_blocks is not None:
            _shared_block_use(t, ctx, spec)
        elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
            if spec.layer_attention:
                # this layer's own heads and K/V head sizes (ModelSpec.layer_attention)
                a = spec.attention_of(i)
                q_heads = a.num_attention_heads // tp
                kv_heads = max(1, a.num_key_value_heads // tp)
            q_out = q_heads * a.head_dim * (2 if spec.attn_output_gate else 1)
            # QKVParallelLinear: V rows of head_dim_v (v_head_size; = head_dim for most models)
            qkv_out = q_out + kv_heads * (a.head_dim + a.head_dim_v)
            t.add("attn", _linear(ctx, h, qkv_out, bias=spec.qkv_bias, n_shards=3))
            t.add("attn", _linear(ctx, q_heads * a.head_dim_v, h))
            if spec.o_bias:
                t.add("attn", h * db)
            if spec.qk_norm and spec.qk_norm_across_heads:
                # one RMSNorm over all heads, replicated on every rank (olmoe.py q_norm/k_norm)
                t.add("attn", (a.num_attention_heads + a.num_key_value_heads) * a.head_dim * db)
            elif spec.qk_norm:
                t.add("attn", 2 * a.head_dim * db)
            if spec.attention_sinks:
                t.add("attn", q_heads * 4)
            if i < len(spec.sink_layers) and spec.sink_layers[i]:
                t.add("attn", q_heads * db)  # per-head sink logits in the model dtype (mimo_v2.py)
        elif kind == LayerKind.LINEAR and spec.gdn is not None and spec.gdn.kimi_delta:
            # Kimi Delta Attention (layers/mamba/gdn/kimi_gdn_linear_attn.py): column-parallel
            # q/k/v (hidden -> heads x head_dim each), replicated low-rank f_a/g_a (hidden ->
            # head_dim) into column-parallel f_b/g_b, b_proj (hidden -> heads), fp32 q/k/v
            # conv weights (never quantized), fp32 dt_bias (heads x head_dim) and A_log
            # (heads), the gated RMSNorm (head_dim), o_proj
            g = spec.gdn
            proj = g.num_v_heads * g.head_v_dim // tp
            t.add("linear_attn", 3 * _linear(ctx, h, proj))
            t.add("linear_attn", 2 * (_linear(ctx, h, g.head_v_dim) + _linear(ctx, g.head_v_dim, proj)))
            t.add("linear_attn", _linear(ctx, h, g.num_v_heads // tp))
            t.add("linear_attn", 3 * g.conv_kernel * proj * 4)
            t.add("linear_attn", proj * 4 + (g.num_v_heads // tp) * 4)
            t.add("linear_attn", g.head_v_dim * db)
            t.add("linear_attn", _linear(ctx, proj, h))
        elif kind == LayerKind.LINEAR and spec.gdn is not None:
            g = spec.gdn
            key_dim = g.num_k_heads * g.head_k_dim
            value_dim = g.num_v_heads * g.head_v_dim
            t.add("linear_attn", _linear(ctx, h, (2 * key_dim + 2 * value_dim) // tp, n_shards=4))
            t.add("linear_attn", _linear(ctx, h, (2 * g.num_v_heads) // tp, n_shards=2))
            conv_dim = (2 * key_dim + value_dim) // tp
            t.add("linear_attn", conv_dim * g.conv_kernel * db)
            t.add("linear_attn", 2 * (g.num_v_heads // tp) * 4)  # A_log, dt_bias (fp32)
            t.add("linear_attn", g.head_v_dim * db)  # gated RMSNorm
            t.add("linear_attn", _linear(ctx, value_dim // tp, h))
        if kind == LayerKind.MAMBA and spec.short_conv is not None:
            # LFM2 ShortConv (layers/mamba/short_conv.py): in_proj to 3 x conv_dim, the
            # depthwise conv (conv_dim x L_cache), out_proj; biases with conv_bias
            sc = spec.short_conv
            d = sc.conv_dim // tp
            t.add("short_conv", _linear(ctx, h, 3 * d, bias=sc.bias, n_shards=3))
            t.add("short_conv", _linear(ctx, sc.conv_kernel, d, bias=sc.bias, quantizable=False))
            t.add("short_conv", _linear(ctx, d, h, bias=sc.bias))
        # a Mamba layer's mixer, or the one beside a Falcon-H1 attention layer (parallel_mamba)
        if spec.mamba is not None and (kind == LayerKind.MAMBA or (spec.parallel_mamba and kind == LayerKind.FULL)):
            mb = spec.mamba
            d_in = mb.intermediate_size // tp
            if mb.version == 1:
                dt_rank = mb.dt_rank or math.ceil(h / 16)
                t.add("mamba", _linear(ctx, h, 2 * d_in, bias=mb.use_bias))
                t.add("mamba", d_in * mb.conv_kernel * db + (d_in * db if mb.use_conv_bias else 0))
                t.add("mamba", _linear(ctx, d_in, dt_rank + 2 * mb.state_size, quantizable=False))
                t.add("mamba", _linear(ctx, dt_rank, d_in, bias=True, quantizable=False))
                t.add("mamba", d_in * mb.state_size * 4 + d_in * 4)  # A, D (fp32)
                t.add("mamba", _linear(ctx, d_in, h, bias=mb.use_bias))
                if mb.use_rms_norm:
                    t.add("mamba", (dt_rank + 2 * mb.state_size) * db)
            else:
                n_groups = mb.n_groups + (0 if mb.n_groups % tp == 0 else tp - mb.n_groups)
                heads = mb.num_heads // tp
                gs = n_groups * mb.state_size // tp
                t.add("mamba", _linear(ctx, h, 2 * d_in + 2 * gs + heads, bias=mb.use_bias))
                conv_dim = d_in + 2 * gs
                t.add("mamba", conv_dim * mb.conv_kernel * db + (conv_dim * db if mb.use_conv_bias else 0))
                t.add("mamba", 3 * heads * 4)  # A, D, dt_bias (fp32)
                if mb.gated_norm_weight:
                    t.add("mamba", d_in * db)  # gated norm
                t.add("mamba", _linear(ctx, d_in, h, bias=mb.use_bias))
        # --- feed-forward ---
        if not spec.has_ffn(i):
            continue
        is_moe = spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]
        if is_moe:
            moe = spec.moe
            inter_rank = moe.moe_intermediate_size // (tp if expert_shards is None else expert_shards)
            held = moe.num_experts if local_experts is None else local_experts
            t.add("experts", _experts(ctx, spec, h, inter_rank, held))
            fq_r = quirks(spec.model_type)
            router_db = 4 if fq_r.router_fp32 else db
            bias_db = 4 if (fq_r.router_bias_fp32 or fq_r.router_fp32) else db
            t.add("router", h * moe.num_experts * router_db + (moe.num_experts * bias_db if moe.router_bias else 0))
            if spec.moe_router_extra_params:
                t.add("router", spec.moe_router_extra_params * db)
            if moe.shared_intermediate_size:
                si = moe.shared_intermediate_size // tp
                up = 2 * si if moe.gated else si
                t.add("shared_expert", _linear(ctx, h, up, n_shards=2 if moe.gated else 1) + _linear(ctx, si, h))
                if moe.shared_expert_gate:
                    t.add("shared_expert", h * db)
        elif spec.intermediate_size:
            ir = spec.intermediate_size // tp
            if spec.gated_mlp:
                t.add("mlp", _linear(ctx, h, 2 * ir, bias=spec.mlp_bias, n_shards=2) + _linear(ctx, ir, h))
                if spec.mlp_bias:
                    t.add("mlp", h * db)
            else:
                t.add("mlp", _linear(ctx, h, ir, bias=spec.mlp_bias) + _linear(ctx, ir, h))
                if spec.mlp_bias:
                    t.add("mlp", h * db)
    if spec.shared_blocks is not None and any(spec.layer_kinds[i] == LayerKind.FULL for i in layers):
        _shared_blocks(t, ctx, spec)
    fq = quirks(spec.model_type)
    if fq.extra_bytes_per_layer:
        t.add("vllm_extra", fq.extra_bytes_per_layer * len(layers))
    if fq.extra_bytes_first_stage and first:
        t.add("vllm_extra", fq.extra_bytes_first_stage)
    if len(layers) and spec.moe is not None and ctx.quant is not None and ctx.quant.method == "mxfp4":
        t.add("vllm_extra", MXFP4_FIXED_BYTES)
    if spec.vision_params and first:
        t.add("vision", spec.vision_params * db // max(1, tp))
    if any(spec.indexer_layers[i] for i in layers if i < len(spec.indexer_layers)):
        # deepseek_v2.py DeepseekV2Model: topk_indices_buffer, int32 [max_num_batched_tokens, index_topk]
        t.add("indexer_topk_buffer", max_num_batched_tokens * spec.indexer_topk * 4)
    return t


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('model_executor/layers/vocab_parallel_embedding.py', 'pad_vocab_size'),
    ('distributed/utils.py', 'get_pp_indices'),
    ('model_executor/models/interfaces.py', 'SupportsMultiModal._mark_tower_model'),
    ('config/multimodal.py', 'MultiModalConfig.get_limit_per_prompt'),
    ('model_executor/models/deepseek_v2.py', 'DeepseekV2Model.__init__'),
    ('model_executor/models/zamba2.py', 'Zamba2AttentionDecoderLayer.__init__'),
)
