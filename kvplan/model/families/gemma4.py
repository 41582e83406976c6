"""Gemma-4 (Gemma4ForConditionalGeneration): sliding and full attention layers with their own
shapes, a dense MLP and a MoE side by side in every layer, and a vision tower.

Layers (``text_config``): ``layer_types`` (sliding_attention / full_attention; the last layer is
forced full, as transformers' Gemma4TextConfig does; without the key every 6th layer is full).
Sliding layers: ``num_key_value_heads`` of ``head_dim``, window ``sliding_window`` (halved + 1 with
``use_bidirectional_attention: "all"``). Full layers: ``global_head_dim`` (default 512) and, with
``attention_k_eq_v``, ``num_global_key_value_heads`` KV heads (transformers' per_layer_config,
which vLLM reads). A K=V layer's checkpoint has no v_proj, but vLLM builds the full
QKVParallelLinear and loads K into both slots, so its KV cache keeps K and V like any layer.
Attention: q/k per-head RMSNorms with weights (v_norm has none), biases with ``attention_bias``.
Feed-forward: a GeGLU MLP of ``intermediate_size`` on every layer and, when ``num_experts`` is
set (vLLM reads that, not ``enable_moe_block``), a MoE of ``num_experts`` GeGLU experts of
``moe_intermediate_size`` (top ``top_k_experts``) beside it, with a router whose input has a
per-dimension scale and whose output a per-expert scale; the dense MLP is sized as the MoE's
shared expert (the same gate_up / down shapes). Norms: 4 per layer, 7 with the MoE block.
RoPE: one cache per layer type, of head_dim rows wide for sliding layers and the full head for
"proportional" full layers (Gemma4RotaryEmbedding applies rotation to the whole head).
Vision: the transformers Gemma4 vision model vLLM builds itself (AutoModel.from_config) plus
the embedder's projection to the text width.

Refused (exit 2, naming the key) until kvplan has rules for them: KV-shared layers
(``num_kv_shared_layers`` > 0), per-layer input embeddings (``hidden_size_per_layer_input`` > 0),
an audio tower (``audio_config``), clipped vision linears. Whether a vLLM version starts it at
all is that version's (engines/vllm/v0_XX/family_quirks.py START_FAILURES: the oldest supported
version does not).

Rule source: the newer vLLM's model_executor/models/gemma4.py (Gemma4Attention, Gemma4DecoderLayer,
Gemma4Router), gemma4_mm.py (Gemma4MultimodalEmbedder, the vision tower),
layers/rotary_embedding/gemma4_rope.py; transformers 5.x configuration_gemma4.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, AttentionShape, LayerKind, MoESpec


class Gemma4(Family):
    model_types = ("gemma4", "gemma4_text")
    transformers_class = "Gemma4TextConfig"
    transformers_defaults = {"vocab_size": 262144, "max_position_embeddings": 131072}
    tie_word_embeddings_default = True
    rope_scaling_sets_max_len = False

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given = c.raw("layer_types")
        if given is None:
            given = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)]
        if isinstance(given, list) and given and given[-1] != "full_attention":
            notes.append("Gemma-4 'layer_types' ends with a sliding layer: transformers' Gemma4TextConfig "
                         "(which vLLM reads) forces the last layer to full attention, and so does kvplan")
            given = given[:-1] + ["full_attention"]
        return given, "layer_types"

    def sliding_window(self, c: _Cfg) -> int | None:
        window = c.int("sliding_window", default=512, minimum=0)
        if c.raw("use_bidirectional_attention") == "all":
            window = window // 2 + 1
        return window

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        if c.raw("num_experts") is None:
            return None, (False,) * n_layers
        e = c.int("num_experts")
        return MoESpec(
            num_experts=e,
            top_k=c.int("top_k_experts", maximum=e),
            moe_intermediate_size=c.int("moe_intermediate_size", "expert_intermediate_size"),
            shared_intermediate_size=c.int("intermediate_size"),  # the dense MLP beside the experts
        ), (True,) * n_layers

    def qk_norm(self, c: _Cfg) -> bool:
        return True

    def _full_shape(self, c: _Cfg, heads: int) -> AttentionShape:
        kv = c.int("num_key_value_heads")
        if c.flag("attention_k_eq_v", False) and c.raw("num_global_key_value_heads") is not None:
            kv = c.int("num_global_key_value_heads")
        if heads % kv:
            raise c.error("num_global_key_value_heads", f"({kv}) must divide num_attention_heads ({heads})")
        d = c.int("global_head_dim", default=512)
        return AttentionShape(num_attention_heads=heads, num_key_value_heads=kv, head_dim=d, head_dim_v=d)

    def _rope_width(self, c: _Cfg, layer_type: str, head_dim: int) -> int:
        rp = c.raw("rope_parameters")
        params = rp.get(layer_type) if isinstance(rp, dict) and isinstance(rp.get(layer_type), dict) else {}
        if params.get("rope_type") == "proportional":
            return head_dim  # gemma4_rope.py: the cache spans the whole head
        return int(head_dim * float(params.get("partial_rotary_factor", 1.0)))

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        for key in ("num_kv_shared_layers", "hidden_size_per_layer_input"):
            if c.int(key, default=0, minimum=0):
                raise c.error(key, f"is {c.int(key)}: kvplan has no rules yet for Gemma-4's "
                                   f"{'KV-shared layers' if key.startswith('num_kv') else 'per-layer input embeddings'}")
        kinds, _ = self.layer_types(c, n_layers, None, None, [])
        heads = c.int("num_attention_heads")
        kv = c.int("num_key_value_heads")
        d = c.int("head_dim", default=256)
        sliding = AttentionShape(num_attention_heads=heads, num_key_value_heads=kv, head_dim=d, head_dim_v=d)
        full = self._full_shape(c, heads)
        layer_attention = tuple(full if t == "full_attention" else sliding for t in kinds)
        widths = {("sliding_attention", self._rope_width(c, "sliding_attention", d))} if any(
            t != "full_attention" for t in kinds) else set()
        widths.add(("full_attention", self._rope_width(c, "full_attention", full.head_dim)))
        moe = c.raw("num_experts") is not None
        return {
            # Gemma4Router.scale (hidden) and per_expert_scale (experts) beside its projection
            "moe_router_extra_params": hidden + c.int("num_experts") if moe else 0,
            "attention": sliding,
            "layer_attention": layer_attention,
            "norms_per_layer": 7 if moe else 4,
            "rope_caches": len(widths),
            "rope_cache_dims": tuple(sorted(w for _, w in widths)),
            "rotary_dim": d,
            "approximations": (Approximation(
                kind=ApproximationKind.PARTIAL_RULES,
                reason="Gemma-4: the activation peak of its dense MLP + MoE block follows the MoE rule "
                       "(the dense branch beside it is sized as a shared expert; no real start recorded yet)",
            ),),
        }

    def vision_params(self, top: _Cfg, vc: _Cfg, text_hidden: int) -> int | None:
        """The Gemma-4 vision model (patch embedder with a 2-axis position table, pre-norm
        encoder layers with q/k norms and a GeGLU MLP) and the embedder's projection.

        Raises:
            KvplanError: an ``audio_config`` or clipped vision linears (no rules yet)."""
        if top.raw("audio_config") is not None:
            raise top.error("audio_config", "is set: kvplan has no rules yet for Gemma-4's audio tower")
        if vc.flag("use_clipped_linears", False):
            raise vc.error("use_clipped_linears", "is true: kvplan has no rules yet for clipped vision linears")
        h = vc.int("hidden_size")
        heads = vc.int("num_attention_heads")
        kv = vc.int("num_key_value_heads", default=heads)
        d = vc.int("head_dim", default=h // heads)
        inter = vc.int("intermediate_size")
        patch = vc.int("patch_size")
        bias = vc.flag("attention_bias", False)
        attn = h * (heads + 2 * kv) * d + heads * d * h + 2 * d + ((heads + 2 * kv) * d + h if bias else 0)
        layer = attn + 3 * h * inter + 4 * h
        embedder = 2 * vc.int("position_embedding_size") * h + 3 * patch * patch * h
        if not isinstance(vc.raw("num_hidden_layers"), int):
            raise vc.error("num_hidden_layers", f"must be an integer, got {_show(vc.raw('num_hidden_layers'))}")
        return embedder + vc.int("num_hidden_layers") * layer + h * text_hidden


GEMMA4 = Gemma4()
