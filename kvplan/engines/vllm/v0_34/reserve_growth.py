"""G, torch's reservation growth over vLLM 0.34.0's KV-cache sizing steps, derived from the
allocation sequence of the eager forward and a model of torch's caching allocator.

What vLLM measures (v1/worker/gpu/warmup.py _measure_sizing_step, run_kv_cache_sizing_warmup):
torch's cache is emptied, then one sizing step runs, and G is the peak of torch's *reserved*
bytes over the step minus the reserved bytes before it (minus what the step keeps). It is the
larger of

* the full-budget step: T = max_num_batched_tokens tokens, no prompt logprobs, and
* the prompt-logprobs step (max_logprobs = 20): min(T, max_model_len) tokens, then the prompt
  logits in chunks of 1024 rows (v1/worker/gpu/sample/prompt_logprob.py
  compute_prompt_logprobs_with_chunking); when max_model_len >= T both are one step.

Reserved bytes grow with every tensor that finds no freed block large enough: the forward
reserves one segment per distinct activation of the first decoder layer (the embedding output,
the first RMSNorm's copy, qkv, the attention output, o_proj's output, gate_up, the activation
...), and the later layers reuse them. So G is not a multiple of the allocated peak P: a model
whose norms make fp32 temporaries (Gemma-2's GemmaRMSNorm: fp32 ``1 + w`` weight, which the
in-place vllm_c kernel refuses, so vllm/ir/ops/layernorm.py's native rms_norm runs) reserves
more segments than a Llama-like layer of the same P; a MoE layer (persistent fused-MoE
workspace) reserves fewer.

The allocator rules (torch's CUDACachingAllocator, expandable segments off, as vLLM 0.34.0
keeps them with the extensible KV cache, config/vllm.py): sizes round up to 512 B; blocks up to
1 MiB come from 2 MiB segments, up to 10 MiB from 20 MiB segments, larger ones from a segment
of their own rounded up to 2 MiB; a request takes the smallest free block that fits in its
pool and splits it when more than 1 MiB (small pool: 512 B) is left; freed neighbours merge.

The layer sequences (allocation and release order, from Python's reference lifetimes in
vLLM 0.34.0 model_executor/models/llama.py, mistral.py, qwen2.py, qwen3.py, qwen3_moe.py,
gemma2.py, all read for this; only Llama-3 (eager, fp8), Gemma-2 and Qwen3-MoE have starts; norms in
model_executor/layers/layernorm.py; the MoE output in fused_moe/modular_kernel.py apply) are
in ``_forward``, ``_attention`` and ``_mlp``. Small tensors (attention metadata, router logits, top-k ids) are left out:
they fit into the holes the large ones leave.

Checked (tests/data/vllm-0.34.0-h100, "GiB of torch reservation growth" at 0.01 GiB):
llama3-8b_eager 2.000 GiB (logged 2.0), llama3-8b_fp8_eager 2.062 (2.06), gemma2-9b_eager
2.438 (2.44), llama31-8b_kvoffload16 2.000 (2.0); llama3-8b_serve_graphs 1.000 (1.18: the eager
sequence under torch.compile, one start) and qwen3-30b-a3b_eager 0.900 (1.05), the two starts
whose only sizing step carries the prompt logprobs: 0.15-0.18 GiB the source reading did not
find (docs/versions.md names the starts that would place it). Other architectures and layer
kinds (MLA, Mamba / GDN hybrids, cross-attention, a shared-expert MoE; ``supported``) and TP > 1
return None there and keep activation.py's fitted ratio. Units: bytes (int).
"""

from __future__ import annotations

from kvplan.model.spec import LayerKind, ModelSpec

MiB = 1 << 20
# v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE: prompt-logits rows per chunk.
PROMPT_LOGPROB_CHUNK_ROWS = 1024
_SMALL_BLOCK = 1 * MiB   # torch kSmallSize: the small pool's largest request
_SMALL_SEGMENT = 2 * MiB  # kSmallBuffer
_MID_SEGMENT = 20 * MiB   # kLargeBuffer, for requests under kMinLargeAlloc (10 MiB)
_MIN_LARGE_ALLOC = 10 * MiB
_ROUND_LARGE = 2 * MiB    # kRoundLarge


class _CachingAllocator:
    """The reserved-bytes behaviour of torch's caching allocator (module docstring)."""

    def __init__(self) -> None:
        self.segments: list[dict] = []  # {"small": bool, "blocks": [[offset, size, free], ...]}
        self.where: dict[str, tuple[int, int]] = {}
        self.reserved = 0
        self.peak_reserved = 0

    def malloc(self, name: str, nbytes: int) -> None:
        size = max(512, -(-nbytes // 512) * 512)
        small = size <= _SMALL_BLOCK
        best = None
        for si, seg in enumerate(self.segments):
            if seg["small"] != small:
                continue
            for bi, (_, bsize, free) in enumerate(seg["blocks"]):
                if free and bsize >= size and (best is None or bsize < best[2]):
                    best = (si, bi, bsize)
        if best is None:
            if small:
                seg_size = _SMALL_SEGMENT
            elif size < _MIN_LARGE_ALLOC:
                seg_size = _MID_SEGMENT
            else:
                seg_size = -(-size // _ROUND_LARGE) * _ROUND_LARGE
            self.segments.append({"small": small, "blocks": [[0, seg_size, True]]})
            self.reserved += seg_size
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            best = (len(self.segments) - 1, 0, seg_size)
        si, bi, _ = best
        blocks = self.segments[si]["blocks"]
        block = blocks[bi]
        rest = block[1] - size
        if rest >= 512 if small else rest > _SMALL_BLOCK:
            blocks.insert(bi + 1, [block[0] + size, rest, True])
            block[1] = size
        block[2] = False
        self.where[name] = (si, block[0])

    def free(self, name: str) -> None:
        si, offset = self.where.pop(name)
        blocks = self.segments[si]["blocks"]
        i = next(i for i, b in enumerate(blocks) if b[0] == offset)
        blocks[i][2] = True
        if i + 1 < len(blocks) and blocks[i + 1][2]:
            blocks[i][1] += blocks.pop(i + 1)[1]
        if i > 0 and blocks[i - 1][2]:
            blocks[i - 1][1] += blocks.pop(i)[1]


class _Trace:
    """An allocation sequence: ``new`` returns a tensor's name, ``drop`` releases names."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str, int]] = []
        self._n = 0

    def new(self, nbytes: int) -> str:
        self._n += 1
        name = f"t{self._n}"
        self.ops.append(("+", name, int(nbytes)))
        return name

    def drop(self, *names: str) -> None:
        self.ops.extend(("-", n, 0) for n in names)


def _rms_tail(tr: _Trace, src: str, t: int, h: int, act: int) -> str:
    """rms_norm's native temporaries over the fp32 tensor ``src`` (its square, the normalized and
    the weighted fp32 tensors), then the output in the activation dtype; ``src`` is released."""
    sq = tr.new(t * h * 4)
    tr.drop(sq)
    normed = tr.new(t * h * 4)
    weighted = tr.new(t * h * 4)
    tr.drop(normed)
    out = tr.new(t * h * act)
    tr.drop(weighted, src)
    return out


def _native_rms_norm(tr: _Trace, t: int, h: int, act: int) -> str:
    """vllm/ir/ops/layernorm.py rms_norm (native torch ops): an fp32 copy, then the temporaries
    of _rms_tail."""
    return _rms_tail(tr, tr.new(t * h * 4), t, h, act)


def _native_fused_add_rms_norm(tr: _Trace, t: int, h: int, act: int) -> tuple[str, str]:
    """ir/ops/layernorm.py fused_add_rms_norm (native): fp32 copies of x and the residual, their
    sum, the new residual, then rms_norm's temporaries over the sum. Returns (out, residual)."""
    x32, r32 = tr.new(t * h * 4), tr.new(t * h * 4)
    total = tr.new(t * h * 4)
    tr.drop(r32, x32)
    residual = tr.new(t * h * act)
    return _rms_tail(tr, total, t, h, act), residual


def _attention(tr: _Trace, spec: ModelSpec, t: int, act: int, fp8: bool) -> str:
    """qkv_proj, the q/k norms' outputs (Qwen3: RMSNorm over the per-head views), the attention
    output (v1 Attention allocates it), o_proj; qkv and the attention output are released when
    the module returns."""
    a = spec.attention
    q = a.num_attention_heads * a.head_dim
    kv = a.num_key_value_heads * a.head_dim
    h = spec.hidden_size
    quant = tr.new(t * h) if fp8 else None
    qkv = tr.new(t * (q + kv + a.num_key_value_heads * a.head_dim_v) * act)
    if quant:
        tr.drop(quant)
    normed = [tr.new(t * q * act), tr.new(t * kv * act)] if spec.qk_norm else []
    out = tr.new(t * a.num_attention_heads * a.head_dim_v * act)
    if fp8:
        quant = tr.new(t * a.num_attention_heads * a.head_dim_v)
    proj = tr.new(t * h * act)
    if fp8:
        tr.drop(quant)
    tr.drop(qkv, *normed, out)
    return proj


def _mlp(tr: _Trace, spec: ModelSpec, i: int, t: int, act: int, fp8: bool) -> str:
    """Dense MLP (gate_up, the gated activation, down_proj: llama.py LlamaMLP) or a MoE layer
    whose expert workspace is persistent (only the routed output is new: modular_kernel.py
    apply's ``output``)."""
    h = spec.hidden_size
    if spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]:
        return tr.new(t * h * act)
    inter = spec.intermediate_size
    quant = tr.new(t * h) if fp8 else None
    gate_up = tr.new(t * 2 * inter * act)
    if quant:
        tr.drop(quant)
    gated = tr.new(t * inter * act)
    tr.drop(gate_up)
    quant = tr.new(t * inter) if fp8 else None
    down = tr.new(t * h * act)
    if quant:
        tr.drop(quant)
    tr.drop(gated)
    return down


def _gemma_norms(spec: ModelSpec) -> bool:
    """GemmaRMSNorm (fp32 ``1 + w`` weight, so the native norms run): vLLM 0.34.0 gemma2.py."""
    return spec.architecture in ("Gemma2ForCausalLM",)


def supported(spec: ModelSpec) -> bool:
    """The layer sequences ``_forward`` restates cover ``spec``: full/sliding attention layers with
    a dense or a shared-expert-free MoE feed-forward (no MLA, Mamba, GDN, cross-attention)."""
    if spec.mla is not None or spec.is_hybrid or spec.layer_attention:
        return False
    if any(k not in (LayerKind.FULL, LayerKind.SLIDING) for k in spec.layer_kinds):
        return False
    if spec.moe is not None and spec.moe.shared_intermediate_size:
        return False
    if _gemma_norms(spec):
        return not spec.is_moe
    return spec.architecture in ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                 "Qwen3ForCausalLM", "Qwen3MoeForCausalLM")


def _forward(tr: _Trace, spec: ModelSpec, t: int, act: int, fp8: bool) -> tuple[str, str]:
    """The embedding and the first two decoder layers (the second reuses the first's segments,
    so later layers add nothing). Returns the live (hidden, residual)."""
    h = spec.hidden_size
    hidden = tr.new(t * h * act)
    gemma = _gemma_norms(spec)
    if gemma:  # embed_input_ids scales the embedding by the normalizer: a second tensor
        scaled = tr.new(t * h * act)
        tr.drop(hidden)
        hidden = scaled
    residual = None
    for i in range(min(2, spec.num_hidden_layers)):
        if residual is None:
            residual = hidden
            hidden = _native_rms_norm(tr, t, h, act) if gemma else tr.new(t * h * act)
        elif gemma:
            out, new_res = _native_fused_add_rms_norm(tr, t, h, act)
            tr.drop(hidden, residual)
            hidden, residual = out, new_res
        # else: vllm_c fused_add_rms_norm works in place
        attn = _attention(tr, spec, t, act, fp8)
        tr.drop(hidden)
        hidden = attn
        if gemma:
            post = _native_rms_norm(tr, t, h, act)
            tr.drop(hidden)
            out, new_res = _native_fused_add_rms_norm(tr, t, h, act)
            tr.drop(post, residual)
            hidden, residual = out, new_res
        mlp = _mlp(tr, spec, i, t, act, fp8)
        tr.drop(hidden)
        hidden = mlp
        if gemma:
            post = _native_rms_norm(tr, t, h, act)
            tr.drop(hidden)
            hidden = post
    return hidden, residual


def _growth(ops) -> int:
    alloc = _CachingAllocator()
    for op, name, nbytes in ops:
        if op == "+":
            alloc.malloc(name, nbytes)
        else:
            alloc.free(name)
    return alloc.peak_reserved


def forward_growth_bytes(spec: ModelSpec, tokens: int, act: int, fp8_act_quant: bool) -> int:
    """Reserved-bytes growth of one eager forward over ``tokens`` tokens (bytes)."""
    tr = _Trace()
    _forward(tr, spec, tokens, act, fp8_act_quant)
    return _growth(tr.ops)


def prompt_logprob_step_growth_bytes(spec: ModelSpec, tokens: int, act: int, fp8_act_quant: bool) -> int:
    """Reserved-bytes growth of the prompt-logprobs sizing step (bytes): the forward over
    ``tokens`` tokens, then one chunk of prompt logits [min(1024, tokens), vocab] in the
    activation dtype (logits_processor.py; Gemma-2's final softcapping divides, tanh's and
    multiplies into new tensors, two alive at once). The top-k scratch is small (not counted)."""
    tr = _Trace()
    _forward(tr, spec, tokens, act, fp8_act_quant)
    logits = tr.new(min(PROMPT_LOGPROB_CHUNK_ROWS, tokens) * spec.vocab_size * act)
    if spec.logit_softcapping:
        for _ in range(3):
            nxt = tr.new(min(PROMPT_LOGPROB_CHUNK_ROWS, tokens) * spec.vocab_size * act)
            tr.drop(logits)
            logits = nxt
    tr.drop(logits)
    return _growth(tr.ops)


def reserve_growth_bytes(
    spec: ModelSpec, *, tokens: int, max_model_len: int | None, act: int, fp8_act_quant: bool, last_pp_rank: bool = True
) -> int | None:
    """G of vLLM 0.34.0's sizing steps (bytes per GPU), or None where ``supported`` is False.

    Args: tokens: T = max_num_batched_tokens; max_model_len: the resolved --max-model-len (None:
    taken as >= T, the one-step case, which keeps more free); act: activation bytes (2);
    fp8_act_quant: the linears quantize their input to fp8 (one byte per element).
    Rule source: vLLM 0.34.0 v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup (module docstring).
    Raises nothing.
    """
    if not supported(spec):
        return None
    if not last_pp_rank:
        return forward_growth_bytes(spec, tokens, act, fp8_act_quant)
    if max_model_len is not None and max_model_len < tokens:
        return max(forward_growth_bytes(spec, tokens, act, fp8_act_quant),
                   prompt_logprob_step_growth_bytes(spec, max_model_len, act, fp8_act_quant))
    return prompt_logprob_step_growth_bytes(spec, tokens, act, fp8_act_quant)


# The vLLM 0.34.0 source this module restates, as (file under vllm/, qualified name) pairs,
# fingerprinted per release by benchmarks/vllm_fingerprints.py (docs/versions.md).
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu/warmup.py', 'run_kv_cache_sizing_warmup'),
    ('v1/worker/gpu/warmup.py', '_measure_sizing_step'),
    ('v1/worker/gpu/sample/prompt_logprob.py', 'compute_prompt_logprobs_with_chunking'),
    ('v1/worker/gpu/sample/logprob.py', 'compute_token_logprobs'),
    ('model_executor/layers/logits_processor.py', 'LogitsProcessor.forward'),
    ('model_executor/models/llama.py', 'LlamaDecoderLayer.forward'),
    ('model_executor/models/llama.py', 'LlamaAttention.forward'),
    ('model_executor/models/llama.py', 'LlamaMLP.forward'),
    ('model_executor/models/mistral.py', 'MistralAttention.forward'),
    ('model_executor/models/mistral.py', 'MistralDecoderLayer.forward'),
    ('model_executor/models/qwen2.py', 'Qwen2Attention.forward'),
    ('model_executor/models/qwen2.py', 'Qwen2DecoderLayer.forward'),
    ('model_executor/models/qwen3.py', 'Qwen3Attention.forward'),
    ('model_executor/models/qwen3.py', 'Qwen3DecoderLayer.forward'),
    ('model_executor/models/gemma2.py', 'Gemma2DecoderLayer.forward'),
    ('model_executor/models/gemma2.py', 'Gemma2Model.embed_input_ids'),
    ('model_executor/models/qwen3_moe.py', 'Qwen3MoeAttention.forward'),
    ('model_executor/models/qwen3_moe.py', 'Qwen3MoeDecoderLayer.forward'),
    ('model_executor/layers/layernorm.py', 'RMSNorm.forward_native'),
    ('model_executor/layers/layernorm.py', 'GemmaRMSNorm.forward_native'),
    ('ir/ops/layernorm.py', 'rms_norm'),
    ('ir/ops/layernorm.py', 'fused_add_rms_norm'),
    ('kernels/vllm_c.py', 'fused_add_rms_norm'),
    ('model_executor/layers/fused_moe/modular_kernel.py', 'FusedMoEKernelModularImpl.apply'),
)
