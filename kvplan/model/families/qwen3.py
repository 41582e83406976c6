"""Qwen3 and Qwen3-MoE: the Qwen2 window rules, qk-norm, and ``attention_bias`` on q/k/v only
(their o_proj never has a bias)."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.families.qwen2 import QwenWindowed, qwen_moe
from kvplan.model.spec import MoESpec


class Qwen3(QwenWindowed):
    model_types = ("qwen3",)
    attention_bias_on_o = False

    def qk_norm(self, c: _Cfg) -> bool:
        return True


class Qwen3Moe(Qwen3):
    model_types = ("qwen3_moe",)

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        return qwen_moe(c, n_layers)


QWEN3 = Qwen3()
QWEN3_MOE = Qwen3Moe()
