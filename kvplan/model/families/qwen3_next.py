"""Qwen3-Next: Gated DeltaNet linear attention with every ``full_attention_interval``-th layer
full (gated) attention, the Qwen MoE layout, qk-norm, and an attention output gate (q_proj also
produces the sigmoid gate, doubling its rows)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.families.qwen2 import qwen_moe
from kvplan.model.family import Family
from kvplan.model.spec import GatedDeltaNetShape, MoESpec


class Qwen3Next(Family):
    model_types = ("qwen3_next",)
    transformers_class = "Qwen3NextConfig"
    qwen_style_sliding_window = True
    attn_output_gate = True

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """Without ``layer_types``: every ``full_attention_interval``-th layer (default 4) full,
        the rest linear attention (transformers Qwen3NextConfig)."""
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        interval = c.int("full_attention_interval", default=4)
        if not c.has("full_attention_interval"):
            notes.append(
                "config.json has neither 'layer_types' nor 'full_attention_interval': transformers' "
                "Qwen3NextConfig default (every 4th layer full attention) used"
            )
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)], key

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        return qwen_moe(c, n_layers)

    def gdn(self, c: _Cfg) -> GatedDeltaNetShape | None:
        """The ``linear_*`` keys: key/value heads and head sizes, and the conv kernel."""
        return GatedDeltaNetShape(
            num_k_heads=c.int("linear_num_key_heads"),
            num_v_heads=c.int("linear_num_value_heads"),
            head_k_dim=c.int("linear_key_head_dim"),
            head_v_dim=c.int("linear_value_head_dim"),
            conv_kernel=c.int("linear_conv_kernel_dim"),
        )

    def qk_norm(self, c: _Cfg) -> bool:
        return True


QWEN3_NEXT = Qwen3Next()
