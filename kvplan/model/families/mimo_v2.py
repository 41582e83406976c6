"""MiMo-V2-Flash (MiMoV2FlashForCausalLM): full and sliding-window attention layers with their
own shapes, a DeepSeek-style sigmoid-routed MoE.

Layers: ``hybrid_layer_pattern`` (one entry per layer, required: vLLM indexes it for every layer)
-- 1 = a sliding-window ("compressed softmax") layer, 0 = a full-attention layer. Full layers
have ``num_attention_heads`` / ``num_key_value_heads``, K head ``head_dim`` and V head
``v_head_dim`` (= head_dim when absent); sliding layers ``swa_num_attention_heads`` /
``swa_num_key_value_heads``, ``swa_head_dim`` / ``swa_v_head_dim`` and the window
``sliding_window_size`` (vLLM passes it as each sliding layer's own window; transformers'
``sliding_window`` = window + 1 is not what vLLM reads). K and V are packed in one page of
``head_dim + v_head_dim`` per KV head (the DiffKV attention backends). With
``add_swa_attention_sink_bias`` each sliding layer has one learned sink logit per query head (in
the model dtype); full layers never do.

Projections: QKVParallelLinear with V rows of v_head_dim (bias with ``attention_bias``), o_proj
without bias; RoPE of int(head_dim x ``partial_rotary_factor``) dims, one cache per distinct
theta (``rope_theta`` for full layers, ``swa_rope_theta`` for sliding ones).
Feed-forward: MoE on the layers where ``moe_layer_freq`` (a per-layer list) is true -- an int
``moe_layer_freq`` makes no layer MoE in vLLM -- with ``n_routed_experts`` gated experts of
``moe_intermediate_size``, top ``num_experts_per_tok``, and an always-present correction bias;
vLLM builds no shared expert (``n_shared_experts`` is not read). Other layers: a SwiGLU MLP of
``intermediate_size``. The router's fp32 dtype (``moe_router_dtype``) is the engine's quirk
(engines/vllm/v0_26/family_quirks.py).

Rule source: vLLM model_executor/models/mimo_v2.py (MiMoV2Attention,
MiMoV2FlashDecoderLayer is_compressed_softmax_layer / is_moe_layer, MiMoV2MoE, MiMoV2MLP);
the newer version's file builds the same shapes.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, AttentionShape, LayerKind, MoESpec


def _pattern(c: _Cfg, key: str, n_layers: int) -> list[bool]:
    """A per-layer 0/1 list (``hybrid_layer_pattern`` / ``moe_layer_freq``) as booleans.

    Raises:
        KvplanError: not a list of n_layers 0/1 entries (names the key)."""
    raw = c.raw(key)
    if not isinstance(raw, list) or len(raw) != n_layers or not all(v in (0, 1) and not isinstance(v, float) for v in raw):
        raise c.error(key, f"must list one 0/1 entry per layer ({n_layers}), got {_show(raw)}")
    return [bool(v) for v in raw]


class MiMoV2Flash(Family):
    model_types = ("mimo_v2_flash",)
    transformers_class = "MiMoV2FlashConfig"
    attention_bias_on_o = False
    reads_mlp_bias = False

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        if not c.has("hybrid_layer_pattern"):
            raise KvplanError(f"{c.where}: config.json is missing required key 'hybrid_layer_pattern' "
                              "(vLLM's MiMo-V2 reads it for every layer)")
        swa = _pattern(c, "hybrid_layer_pattern", n_layers)
        return [LayerKind.SLIDING if s else LayerKind.FULL for s in swa], "hybrid_layer_pattern"

    def sliding_window(self, c: _Cfg) -> int | None:
        if not any(c.raw("hybrid_layer_pattern") or ()):
            return None
        return c.int("sliding_window_size")

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        freq = c.raw("moe_layer_freq")
        if freq is None or isinstance(freq, int):
            return None, (False,) * n_layers  # vLLM is_moe_layer: only a per-layer list makes MoE layers
        layers = tuple(_pattern(c, "moe_layer_freq", n_layers))
        if not any(layers):
            return None, layers
        e = c.int("n_routed_experts")
        return MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("moe_intermediate_size"),
            router_bias=True,  # MiMoV2MoE.gate.e_score_correction_bias, whatever topk_method says
        ), layers

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """Per-layer attention shapes, the sliding layers' sinks, the RoPE caches."""
        swa = _pattern(c, "hybrid_layer_pattern", n_layers)

        def shape(prefix: str, heads_key: str, kv_key: str) -> AttentionShape:
            heads = c.int(heads_key)
            kv = c.int(kv_key)
            if heads % kv:
                raise c.error(kv_key, f"({kv}) must divide {heads_key} ({heads})")
            head_dim = c.int(f"{prefix}head_dim")
            return AttentionShape(num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                                  head_dim_v=c.int(f"{prefix}v_head_dim", default=head_dim))

        full = shape("", "num_attention_heads", "num_key_value_heads")
        sliding = shape("swa_", "swa_num_attention_heads", "swa_num_key_value_heads") if any(swa) else full
        theta = c.num("rope_theta", 1000000.0, gt=0.0)
        ropes = {(full.head_dim, theta)} if not all(swa) else set()
        if any(swa):
            ropes.add((sliding.head_dim, c.num("swa_rope_theta", theta, gt=0.0)))
        sinks = c.flag("add_swa_attention_sink_bias", False)
        return {
            "attention": full,
            "layer_attention": tuple(sliding if s else full for s in swa),
            "sink_layers": tuple(s and sinks for s in swa) if sinks else (),
            "rope_caches": len(ropes),
            "approximations": (Approximation(
                kind=ApproximationKind.PARTIAL_RULES,
                reason="MiMo-V2-Flash: the activation peak follows the full-attention layers' shape (the "
                       "sliding layers' wider KV projection is not modelled; no real start recorded yet)",
            ),),
        }


MIMO_V2_FLASH = MiMoV2Flash()
