"""What a recurrent (state-space / linear-attention) layer costs one engine step, per TP rank.

The layers of hybrid models that keep a fixed state per sequence instead of a KV cache: Mamba-1,
Mamba-2 (Nemotron-H, Granite-4.0-H, Jamba, Falcon-H1, Zamba2), Gated DeltaNet (Qwen3-Next,
Qwen3.5, Kimi-Linear's KDA) and LFM2's short convolutions. Their projections are ordinary weights
(counted with the dense weights by the version's weight rules); what is theirs alone:

* STATE TRAFFIC: a decode reads its state (conv rows + SSM / delta-rule state) and writes it back
  once per step; a prompt chunk reads the state it starts from and writes the state it ends at
  (one read + one write per request per step, whatever the chunk's length). The state bytes are
  the version's (kv_spec.mamba_state_bytes: vLLM mamba_utils.py MambaStateShapeCalculator).
* THE SCAN, in FLOPs per token:
    - Mamba-2 (SSD, vLLM's chunked scan, ``mamba_chunk_size`` Q, default 256: ops/ssd_*.py): per
      head of P channels and N state dims, the within-chunk quadratic form C B^T (Q x N per
      token, causal half) applied to X (Q x P, half) ~ Q (N + P) multiply-adds, plus the
      between-chunk state pass (state read into the output, state update) 2 N P:
      2 x [Q (N + P) + 2 N P] FLOPs per token per head.
    - Gated DeltaNet (the chunked gated delta rule of fla / FlashInfer, chunk C = 64): the
      within-chunk attention-like products ~ C (d_k + d_v) plus the WY/state passes ~ 2 d_k d_v
      (the delta rule reads the state for the prediction and writes the update):
      2 x [C (d_k + d_v) + 2 d_k d_v] FLOPs per token per value head.
    - Mamba-1 (sequential selective scan): ~ 3 d_inner N multiply-adds per token (dA, dB x, C h):
      6 d_inner N FLOPs.
    - short conv: a depthwise causal conv, 2 x conv_dim x kernel FLOPs per token.
  A decode (one token) runs the recurrent form: per head 2 x 2 N P (Mamba-2) or 2 x 3 d_k d_v
  (delta rule: prediction, correction, update), Mamba-1 as above, short conv as above.
  The FLOPs go over the attention rate (the activation dtype's tensor peak x matmul_fraction):
  the chunked scans run tensor-core GEMMs of chunk size; the sequential and recurrent forms are
  memory-bound on the state, which the traffic term covers.

UNCALIBRATED: no hybrid model is in any fit (tests/data/bench has none); every prediction of a
hybrid model says so (step_time.HYBRID_UNCALIBRATED).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.spec import LayerKind, ModelSpec

GDN_CHUNK = 64  # fla chunk_gated_delta_rule / FlashInfer GDN prefill chunk
MAMBA2_DEFAULT_CHUNK = 256  # vLLM ModelConfig mamba_chunk_size default when the config names none


@dataclass(frozen=True, slots=True)
class RecurrentCost:
    """Per-rank costs of a model's recurrent layers (0 for a model without any).

    Attributes:
        layers: recurrent mixers (a Falcon-H1 layer with attention and a parallel Mamba counts 1).
        state_bytes_per_request: bytes read + written per request per step, all such layers.
        prefill_flops_per_token / decode_flops_per_token: scan FLOPs per prompt / decode token,
            all such layers.
        kind: "mamba1", "mamba2", "gdn", "short_conv" (for labels).
    """

    layers: int = 0
    state_bytes_per_request: int = 0
    prefill_flops_per_token: float = 0.0
    decode_flops_per_token: float = 0.0
    kind: str = ""


def recurrent_layers(spec: ModelSpec) -> int:
    """Recurrent mixers of the model: layers of kind LINEAR or MAMBA, plus one per attention layer
    when every attention layer also runs a Mamba mixer (Falcon-H1 ``parallel_mamba``)."""
    n = sum(1 for k in spec.layer_kinds if k in (LayerKind.LINEAR, LayerKind.MAMBA))
    if spec.parallel_mamba:
        n += sum(1 for k in spec.layer_kinds if k in (LayerKind.FULL, LayerKind.SLIDING))
    return n


def _per_layer_flops(spec: ModelSpec, tp: int) -> tuple[float, float, str]:
    """(prefill, decode) scan FLOPs per token of ONE recurrent layer on one rank, and its kind."""
    if spec.gdn is not None:
        g = spec.gdn
        heads = max(g.num_v_heads // tp, 1)
        dk, dv = g.head_k_dim, g.head_v_dim
        return 2.0 * heads * (GDN_CHUNK * (dk + dv) + 2 * dk * dv), 2.0 * heads * 3 * dk * dv, "gdn"
    if spec.mamba is not None:
        m = spec.mamba
        if m.version == 2:
            heads = max(m.num_heads // tp, 1)
            q = m.chunk_size or MAMBA2_DEFAULT_CHUNK
            n, p = m.state_size, m.head_dim
            return 2.0 * heads * (q * (n + p) + 2 * n * p), 2.0 * heads * 2 * n * p, "mamba2"
        d_inner = m.intermediate_size // tp
        f = 6.0 * d_inner * m.state_size
        return f, f, "mamba1"
    if spec.short_conv is not None:
        s = spec.short_conv
        f = 2.0 * (s.conv_dim // tp) * s.conv_kernel
        return f, f, "short_conv"
    return 0.0, 0.0, ""


def recurrent_cost(spec: ModelSpec, tp: int, state_bytes_one_layer: int) -> RecurrentCost:
    """The RecurrentCost of ``spec`` on one of ``tp`` ranks, given one layer's state bytes on that
    rank (the version's kv_spec.mamba_state_bytes)."""
    n = recurrent_layers(spec)
    if not n:
        return RecurrentCost()
    pre, dec, kind = _per_layer_flops(spec, tp)
    return RecurrentCost(n, 2 * n * state_bytes_one_layer, n * pre, n * dec, kind)
