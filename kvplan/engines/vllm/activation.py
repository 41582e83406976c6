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

# Fixed part of the profiled peak (buffers first touched in the pass), from the two
# max_num_batched_tokens points of Llama-3-8B: 1.72 GiB @16384 vs 0.88 GiB @8192
# (calibration llama3-8b_eager, llama3-8b_eager_mbt8k_seqs256): slope 110.1 kB/token,
# intercept ~0.04 GiB.
FIXED_BYTES = 40 * MiB

# Sampler: logits rows x vocab in fp32 plus the sampler's temporaries. Bytes per logit element.
# Bound from calibration: Llama-3-8B at 1024 rows x 128256 vocab never exceeded the 16384-token
# forward peak (llama3-8b_eager vs llama3-8b_eager_mbt16k), i.e. < 13.7 B per element.
SAMPLER_BYTES_PER_LOGIT = 12

# Gated DeltaNet (Qwen3-Next) layers: extra live bytes per token in the chunked delta-rule
# kernels beyond the projections, fitted on calibration qwen3-next-80b_fp8_eager (3.46 GiB peak).
GDN_EXTRA_ELEMENTS_PER_VALUE_DIM = 0.0

# torch.compile (no --enforce-eager) raises the profiled peak slightly: 1.78 vs 1.72 GiB on
# Llama-3-8B (calibration llama3-8b_default vs llama3-8b_eager) -> +3.5 %.
COMPILE_FACTOR = 1.035


@dataclass(frozen=True)
class ActivationEstimate:
    """Peak activation bytes and how it was composed (per GPU)."""

    peak_bytes: int
    forward_bytes: int
    sampler_bytes: int
    fixed_bytes: int
    per_token_bytes: int
    bound_by: str  # "forward" or "sampler"


def _layer_elements_per_token(spec: ModelSpec, i: int, tp: int) -> float:
    h = spec.hidden_size
    kind = spec.layer_kinds[i]
    base = 3.0 * h
    is_moe = spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]
    if is_moe:
        m = spec.moe
        ie = m.moe_intermediate_size / tp
        ffn = m.top_k * (3.0 * ie + h) + m.num_experts * 2.0  # + router logits (fp32 ~ 2 elements)
        if m.shared_intermediate_size:
            ffn = max(ffn, 3.0 * m.shared_intermediate_size / tp) + h
    elif spec.intermediate_size:
        ffn = 3.0 * spec.intermediate_size / tp if spec.gated_mlp else 2.0 * spec.intermediate_size / tp
    else:
        ffn = 0.0
    mixer = 0.0
    if kind == LayerKind.LINEAR and spec.gdn is not None:
        g = spec.gdn
        key_dim = g.num_k_heads * g.head_k_dim / tp
        value_dim = g.num_v_heads * g.head_v_dim / tp
        mixer = 2 * key_dim + 2 * value_dim + (2 * key_dim + value_dim) + value_dim * (1 + GDN_EXTRA_ELEMENTS_PER_VALUE_DIM)
    elif kind == LayerKind.MAMBA and spec.mamba is not None:
        d_in = spec.mamba.intermediate_size / tp
        mixer = 4.0 * d_in
    elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
        a = spec.attention
        q = a.num_attention_heads // tp * a.head_dim
        kv = max(1, a.num_key_value_heads // tp) * a.head_dim
        mixer = q + 2 * kv + a.num_attention_heads // tp * a.head_dim_v
    elif kind == LayerKind.MLA and spec.mla is not None:
        m = spec.mla
        heads = spec.attention.num_attention_heads // tp
        mixer = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) * 2 + m.kv_lora_rank + heads * m.v_head_dim
    return base + max(ffn, mixer)


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
    per_token_elems = max((_layer_elements_per_token(spec, i, tp) for i in idx), default=3.0 * spec.hidden_size)
    per_token = int(per_token_elems * act_dtype_bytes)
    forward = per_token * max_num_batched_tokens
    if not enforce_eager:
        forward = int(forward * COMPILE_FACTOR)
    sampler = 0
    if is_last_pp_rank:
        rows = min(max_num_batched_tokens, max_num_seqs)
        sampler = int(rows * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT)
    peak = max(forward, sampler) + FIXED_BYTES
    return ActivationEstimate(
        peak_bytes=peak,
        forward_bytes=forward,
        sampler_bytes=sampler,
        fixed_bytes=FIXED_BYTES,
        per_token_bytes=per_token,
        bound_by="forward" if forward >= sampler else "sampler",
    )
