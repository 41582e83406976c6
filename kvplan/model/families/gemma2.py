"""Gemma-2 (Gemma2ForCausalLM): sliding and full attention alternate; four norms per layer
(pre/post attention, pre/post feed-forward); tied embeddings by default."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class Gemma2(Family):
    model_types = ("gemma2",)
    norms_per_layer = 4
    tie_word_embeddings_default = True

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """Without ``layer_types``: odd layers (1st, 3rd, ...) sliding, even ones full
        (transformers Gemma2Config)."""
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)], key


GEMMA2 = Gemma2()
