"""Cohere Command-R (CohereForCausalLM, model_type ``cohere``) and Command-R7B / Command-A
(Cohere2ForCausalLM, ``cohere2``), both vLLM's commandr.py: a parallel block (attention and the
gated MLP both read one LayerNorm, weight only, no bias), no biases anywhere whatever the config
says, embeddings tied (vLLM asserts it), q/k LayerNorms over all heads (num_heads x head_dim and
num_kv_heads x head_dim) with ``use_qk_norm``; ``head_dim`` is hidden_size / num_attention_heads.

- ``cohere``: no sliding window (commandr.py builds every CohereConfig layer as full attention).
- ``cohere2``: each layer follows ``layer_types``; transformers' Cohere2Config derives it, when
  absent, from ``sliding_window_pattern`` (default 4): layer i sliding unless (i + 1) is a multiple
  of it, with ``sliding_window`` (default 4096).

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/commandr.py (CohereAttention: QKV/o bias=False,
v1 = isinstance(config, CohereConfig), per-layer sliding window from layer_types, q_norm/k_norm
param_shape (heads, head_dim); CohereDecoderLayer: one input_layernorm; CohereForCausalLM: assert
tie_word_embeddings) and transformers 5.x Cohere2Config. The q/k norms are split across
tensor-parallel ranks by vLLM (row_parallel_weight_loader) and replicated by kvplan's tally: at
TP > 1 kvplan counts (heads + kv heads) x head_dim x (1 - 1/TP) elements per layer too many."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class Cohere(Family):
    model_types = ("cohere",)
    transformers_class = "CohereConfig"
    transformers_defaults = {"vocab_size": 256000, "max_position_embeddings": 8192}
    tie_word_embeddings_default = True
    norms_per_layer = 1
    reads_attention_bias = False
    reads_mlp_bias = False

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def qk_norm(self, c: _Cfg) -> bool:
        return c.flag("use_qk_norm", False)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        return {"qk_norm_across_heads": True}


class Cohere2(Cohere):
    model_types = ("cohere2",)
    transformers_class = "Cohere2Config"
    transformers_defaults = {"vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096}
    normally_omitted = frozenset({"sliding_window"})

    def sliding_window(self, c: _Cfg) -> int | None:
        return Family.sliding_window(self, c)

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """As given; else (Cohere2Config) layer i sliding unless (i + 1) is a multiple of
        ``sliding_window_pattern`` (default 4)."""
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        pattern = c.int("sliding_window_pattern", default=4, minimum=1)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)], key


COHERE = Cohere()
COHERE2 = Cohere2()
