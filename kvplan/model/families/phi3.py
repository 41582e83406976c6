"""Phi-3 (Phi3ForCausalLM): the generic decoder (longrope's original_max_position_embeddings is
read by the generic derived-length rule)."""

from __future__ import annotations

from kvplan.model.family import Family


class Phi3(Family):
    model_types = ("phi3",)


PHI3 = Phi3()
