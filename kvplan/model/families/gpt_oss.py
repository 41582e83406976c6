"""gpt-oss: sliding and full attention alternate (even layers sliding), attention sinks, q/k/v
and o biases, and every layer a MoE of ``num_local_experts`` with router and expert biases."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class GptOss(Family):
    model_types = ("gpt_oss",)
    attention_sinks = True
    qkv_bias = True
    o_bias = True

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)], key

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", "experts_per_token", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            router_bias=True,
            expert_bias=True,
        )
        return spec, (True,) * n_layers


GPT_OSS = GptOss()
