"""Peak activation memory of vLLM 0.26.0's profiling run, per GPU (the "peak activation" term).

What vLLM measures (v1/worker/gpu_worker.py determine_available_memory): the torch allocator's
``allocated_bytes.all.peak`` increase while it runs ``profile_run``: one forward pass over
``max_num_batched_tokens`` tokens (attention skipped on the V2 runner) and the sampler over
``min(max_num_batched_tokens, max_num_seqs)`` rows of logits. Nothing in that pass depends on
the number of layers: the peak is reached inside one decoder layer, where the live tensors are

  dense layer:  the layer input, the residual, the MLP input, gate_up [2*I/tp] and act [I/tp]
                -> (3*H + 3*I/tp) elements per token
  MoE layer:    the same three hidden-size tensors plus the fused-MoE workspaces per token and
                selected expert: gate_up [2*Ie/tp], activation [Ie/tp] and output [H]
                -> (3*H + top_k*(3*Ie/tp + H)) elements per token, + the router logits

The profile pass is the maximum of that forward peak and the sampler peak, plus a small fixed
part (buffers first allocated during the pass).

Every coefficient below names the measurement it was fitted on (../shared/calibration/
vllm-0.26.0-h200 and tests/data/vllm-0.26.0-h200 records). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.specs.model_spec import LayerKind, ModelSpec

GiB = 1 << 30
MiB = 1 << 20

# Fixed part of the profiled peak (buffers first touched in the pass: cuBLAS workspace etc.).
# From the exact non-KV bytes of two Llama-3-8B starts (requested - 150 MiB - fit_requested):
# 16384 tokens -> 18,149,368,320 B, 8192 tokens -> 17,243,386,368 B (calibration llama3-8b_eager,
# llama3-8b_eager_mbt8k_seqs256). With weights 16,062,619,648 B and non-torch 0.22 GiB, the
# activation is 1,850,525,471 B and 944,543,519 B: slope exactly 110,592 B/token = (3H + 3I) x 2,
# intercept 38,573,855 B.
FIXED_BYTES = 38_573_855

# Sampler stage: logits rows x vocab, fp32 copies and the sampler's temporaries, in bytes per
# logit element, while the forward's [tokens, hidden] output is still alive.
# Fitted on calibration gemma2-9b_eager (1024 rows x 256000 vocab, 1.89 GiB peak, the only start
# where the sampler exceeds the forward pass); consistent with Llama-3-8B, where 1024 x 128256
# logits stay below the 16384-token forward peak (llama3-8b_eager vs llama3-8b_eager_mbt16k).
SAMPLER_BYTES_PER_LOGIT = 7.2

# Gated DeltaNet (Qwen3-Next) layers: the chunked delta-rule kernels keep fp32 per-chunk states
# and copies of q/k/v; live bytes per token = 3 hidden-size bf16 tensors + GDN_FP32_VALUE_COPIES
# fp32 tensors of value_dim (= num_v_heads * head_v_dim / tp) elements. Fitted on calibration
# qwen3-next-80b_fp8_eager (3.46 GiB peak at 16384 tokens: (3.46 GiB - 40 MiB)/16384 - 3*2048*2 B
# = 211.6 kB = 12.9 x 4096 x 4 B).
GDN_FP32_VALUE_COPIES = 12.9

# torch.compile (no --enforce-eager) raises the profiled peak slightly: 1.78 vs 1.72 GiB on
# Llama-3-8B (calibration llama3-8b_default vs llama3-8b_eager) -> +3.5 %.
COMPILE_FACTOR = 1.035

# vLLM 0.26.0 dense MLPs written as `gate_up = ...; x = act(gate_up); x = down(x)` keep gate_up
# alive through down_proj (qwen2.py Qwen2MLP, gemma2.py, gemma3.py, deepseek_v2.py,
# qwen2_moe.py Qwen2MoeMLP); llama.py LlamaMLP rebinds x and frees it first. Peak per token:
# kept: 4H + 3I (layer input, residual, MLP input, gate_up, act, down out);
# freed: 3H + 3I. Calibration: qwen2.5-7b_eager 2.20 GiB vs llama-style 2.10 predicted.
MLP_KEEPS_GATE_UP = frozenset(
    {"qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "qwen3_next", "gemma2", "gemma3", "gemma3_text",
     "deepseek_v2", "deepseek_v3"}
)


@dataclass(frozen=True)
class ActivationEstimate:
    """Peak activation bytes and how it was composed (per GPU)."""

    peak_bytes: int
    forward_bytes: int
    sampler_bytes: int
    fixed_bytes: int
    per_token_bytes: int
    bound_by: str  # "forward" or "sampler"


def _layer_bytes_per_token(spec: ModelSpec, i: int, tp: int, act_bytes: int) -> float:
    """Live bytes per token at the peak inside decoder layer ``i`` (see module docstring)."""
    h = spec.hidden_size
    kind = spec.layer_kinds[i]
    is_moe = spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]
    if is_moe:
        m = spec.moe
        ie = m.moe_intermediate_size / tp
        # Modular fused-MoE workspaces (fused_moe/experts/triton_moe.py workspace_shapes):
        # ws13 = top_k * max(I, H), ws2 = top_k * max(2I, H), plus the router logits.
        ffn = m.top_k * (max(ie, h) + max(2 * ie, h)) + m.num_experts
        if m.shared_intermediate_size:
            ffn += h
        ffn_elems = 3.0 * h + ffn
    elif spec.intermediate_size:
        inter = spec.intermediate_size / tp
        if not spec.gated_mlp:
            ffn_elems = 3.0 * h + 2.0 * inter
        elif spec.model_type in MLP_KEEPS_GATE_UP:
            ffn_elems = 4.0 * h + 3.0 * inter
        else:
            ffn_elems = 3.0 * h + 3.0 * inter
    else:
        ffn_elems = 3.0 * h
    ffn_bytes = ffn_elems * act_bytes

    mixer_bytes = 0.0
    if kind == LayerKind.LINEAR and spec.gdn is not None:
        g = spec.gdn
        value_dim = g.num_v_heads * g.head_v_dim / tp
        mixer_bytes = 3.0 * h * act_bytes + GDN_FP32_VALUE_COPIES * value_dim * 4
    elif kind == LayerKind.MAMBA and spec.mamba is not None:
        d_in = spec.mamba.intermediate_size / tp
        mixer_bytes = (3.0 * h + 4.0 * d_in) * act_bytes
    elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
        a = spec.attention
        q = a.num_attention_heads // tp * a.head_dim
        kv = max(1, a.num_key_value_heads // tp) * a.head_dim
        mixer_bytes = (3.0 * h + q + 2 * kv + a.num_attention_heads // tp * a.head_dim_v) * act_bytes
    elif kind == LayerKind.MLA and spec.mla is not None:
        m = spec.mla
        heads = spec.attention.num_attention_heads // tp
        mixer_bytes = (
            3.0 * h + heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) * 2 + m.kv_lora_rank + heads * m.v_head_dim
        ) * act_bytes
    return max(ffn_bytes, mixer_bytes)


def activation_peak(
    spec: ModelSpec,
    *,
    tensor_parallel_size: int,
    act_dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool,
    is_last_pp_rank: bool = True,
    layers: range | None = None,
) -> ActivationEstimate:
    """Predict vLLM 0.26.0's "GiB for peak activation" on one GPU.

    Args:
        max_num_batched_tokens: tokens of the profiling forward pass.
        max_num_seqs: caps the sampler rows (min(tokens, seqs)).
        layers: the decoder layers this pipeline stage holds (default: all).
    Returns:
        ActivationEstimate (bytes).
    """
    tp = tensor_parallel_size
    idx = layers if layers is not None else range(spec.num_hidden_layers)
    per_token = int(
        max((_layer_bytes_per_token(spec, i, tp, act_dtype_bytes) for i in idx), default=3.0 * spec.hidden_size)
    )
    forward = per_token * max_num_batched_tokens
    if not enforce_eager:
        forward = int(forward * COMPILE_FACTOR)
    sampler = 0
    if is_last_pp_rank:
        rows = min(max_num_batched_tokens, max_num_seqs)
        sampler = int(rows * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT) + max_num_batched_tokens * spec.hidden_size * act_dtype_bytes
    peak = max(forward, sampler) + FIXED_BYTES
    return ActivationEstimate(
        peak_bytes=peak,
        forward_bytes=forward,
        sampler_bytes=sampler,
        fixed_bytes=FIXED_BYTES,
        per_token_bytes=per_token,
        bound_by="forward" if forward >= sampler else "sampler",
    )
