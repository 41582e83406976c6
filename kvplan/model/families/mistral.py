"""Mistral (dense, the generic decoder) and Mixtral (every layer a MoE of ``num_local_experts``)."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class Mistral(Family):
    model_types = ("mistral",)


class Mixtral(Family):
    model_types = ("mixtral",)

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """Every layer routes to ``num_local_experts`` experts of ``intermediate_size``."""
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, (True,) * n_layers


MISTRAL = Mistral()
MIXTRAL = Mixtral()
