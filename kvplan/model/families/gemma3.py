"""Gemma-3 (text model and the multimodal Gemma3ForConditionalGeneration): every
``sliding_window_pattern``-th layer full attention, the rest sliding; qk-norm; four norms per
layer; a local and a global rotary cache; rope scaling does not change the derived max length;
transformers' Gemma3TextConfig defaults for the keys the published config.json leaves out."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family

_DEFAULTS = {"vocab_size": 262208, "max_position_embeddings": 131072, "tie_word_embeddings": True}


class Gemma3(Family):
    model_types = ("gemma3_text", "gemma3")
    transformers_class = "Gemma3TextConfig"
    transformers_defaults = _DEFAULTS
    normally_omitted = frozenset(_DEFAULTS)
    rope_scaling_sets_max_len = False
    norms_per_layer = 4
    tie_word_embeddings_default = True
    rope_caches = 2

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """Without ``layer_types``: every ``sliding_window_pattern``-th layer (default 6) full."""
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        pattern = c.int("sliding_window_pattern", default=6)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)], key

    def qk_norm(self, c: _Cfg) -> bool:
        return True


GEMMA3 = Gemma3()
