"""Gemma (GemmaForCausalLM): the generic decoder with tied embeddings by default."""

from __future__ import annotations

from kvplan.model.family import Family


class Gemma(Family):
    model_types = ("gemma",)
    tie_word_embeddings_default = True


GEMMA = Gemma()
