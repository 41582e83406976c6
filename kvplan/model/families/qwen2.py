"""Qwen2 and Qwen2-MoE, and the rules the Qwen families share.

transformers' Qwen config classes set ``sliding_window`` to None unless ``use_sliding_window``,
and, without ``layer_types``, make layers from ``max_window_layers`` on sliding. Qwen2 and
Qwen2-MoE always have q/k/v biases. The Qwen MoE layout (``num_experts``,
``decoder_sparse_step``, ``mlp_only_layers``, one gated shared expert) is shared with Qwen3-MoE
and Qwen3-Next.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class QwenWindowed(Family):
    """Qwen-style ``use_sliding_window``, and sliding layers from ``max_window_layers`` on."""

    qwen_style_sliding_window = True

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        max_window_layers = c.int("max_window_layers", default=n_layers, minimum=0)
        return [
            "sliding_attention" if sliding_window is not None and i >= max_window_layers else "full_attention"
            for i in range(n_layers)
        ], key


def qwen_moe(c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
    """Qwen MoE layout: ``num_experts`` routed experts of ``moe_intermediate_size`` in every
    ``decoder_sparse_step``-th layer not in ``mlp_only_layers``; a shared expert of
    ``shared_expert_intermediate_size`` with a sigmoid gate when that is > 0."""
    e = c.int("num_experts")
    step = c.int("decoder_sparse_step", default=1, minimum=0) or 1
    mlp_only = set(c.int_list("mlp_only_layers", minimum=0) or [])
    layers = tuple((i not in mlp_only) and e > 0 and (i + 1) % step == 0 for i in range(n_layers))
    shared = c.int("shared_expert_intermediate_size", default=0, minimum=0)
    spec = MoESpec(
        num_experts=e,
        top_k=c.int("num_experts_per_tok", maximum=e),
        moe_intermediate_size=c.int("moe_intermediate_size"),
        shared_intermediate_size=shared,
        shared_expert_gate=shared > 0,
    )
    return spec, layers


class Qwen2(QwenWindowed):
    model_types = ("qwen2",)
    qkv_bias = True


class Qwen2Moe(QwenWindowed):
    model_types = ("qwen2_moe",)
    qkv_bias = True

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        return qwen_moe(c, n_layers)


class QwenVLText(Family):
    """The text model of Qwen2-VL / Qwen2.5-VL: kvplan has no family for them (``known`` False:
    sized as a generic decoder, with the note) but reads their ``sliding_window`` the Qwen way."""

    model_types = ("qwen2_vl", "qwen2_5_vl")
    known = False
    qwen_style_sliding_window = True


QWEN2 = Qwen2()
QWEN2_MOE = Qwen2Moe()
QWEN_VL_TEXT = QwenVLText()
