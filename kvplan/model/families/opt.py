"""OPT: LayerNorm with bias, a plain (non-gated) fc1/fc2 MLP with biases, q/k/v and o biases,
learned positions (``max_position_embeddings`` + 2 rows) instead of RoPE, tied embeddings."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class OPT(Family):
    model_types = ("opt",)
    norm_has_bias = True
    gated_mlp = False
    tie_word_embeddings_default = True
    qkv_bias = True
    o_bias = True
    mlp_bias = True

    def learned_positions(self, c: _Cfg) -> int:
        """OPTLearnedPositionalEmbedding keeps an offset of 2 rows."""
        return c.int("max_position_embeddings", default=2048) + 2


OPT_FAMILY = OPT()
