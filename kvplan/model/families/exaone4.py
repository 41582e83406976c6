"""EXAONE-4.0 (Exaone4ForCausalLM): a Llama-shaped decoder whose norms sit after attention and
after the MLP (two RMSNorms per layer, no input norm), q/k RMSNorm per head, and, without
``layer_types``, every ``sliding_window_pattern``-th layer (default 4) full attention and the
rest sliding (``sliding_window``); without a ``sliding_window`` every layer is full attention.

Read from transformers 5.x Exaone4Config (the derived ``layer_types``) and vLLM (the default version)
model_executor/models/exaone4.py (Exaone4Attention: sliding window per ``layer_types`` entry,
q_norm/k_norm of head_dim; Exaone4DecoderLayer: post_attention / post_feedforward RMSNorms)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family

_DEFAULTS = {"vocab_size": 102400, "tie_word_embeddings": False}


class Exaone4(Family):
    model_types = ("exaone4",)
    transformers_class = "Exaone4Config"
    transformers_defaults = _DEFAULTS

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """As given; else (Exaone4Config) layer i sliding unless (i + 1) is a multiple of
        ``sliding_window_pattern``, all full when there is no window."""
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        if sliding_window is None:
            return ["full_attention"] * n_layers, key
        pattern = c.int("sliding_window_pattern", default=4)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)], key

    def qk_norm(self, c: _Cfg) -> bool:
        return True


EXAONE4 = Exaone4()
