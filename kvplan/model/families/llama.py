"""Llama (LlamaForCausalLM): the generic decoder, plus transformers' LlamaConfig defaults."""

from __future__ import annotations

from kvplan.model.family import Family


class Llama(Family):
    model_types = ("llama",)
    transformers_class = "LlamaConfig"
    transformers_defaults = {"vocab_size": 32000, "max_position_embeddings": 2048}


LLAMA = Llama()
