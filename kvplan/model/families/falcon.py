"""Falcon (FalconForCausalLM, and the older RWForCausalLM name), vLLM's falcon.py.

KV heads: ``num_kv_heads`` (``n_head_kv`` in the older RefinedWeb configs) with
``new_decoder_architecture`` (Falcon-40B/180B), else one with ``multi_query`` (Falcon-7B), else
one per query head. One fused query_key_value projection and a dense output, both biased with
``bias``; a plain (non-gated) GELU MLP of 4 x hidden_size (vLLM's FalconMLP ignores
``ffn_hidden_size``; a config giving another width is refused), biased with ``bias``; LayerNorms
with bias: two per layer (ln_attn and ln_mlp, or input and post-attention norms without
``parallel_attn``) unless a parallel block has ``num_ln_in_parallel_attn`` 1 (the default, None,
means 2 for the new decoder architecture and 1 otherwise), and a final one; ALiBi models
(``alibi``) build no rotary cache; embeddings tied unless ``tie_word_embeddings`` is false.
transformers' FalconConfig defaults (those of tiiuae/falcon-7b) fill what a config omits.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/falcon.py (FalconAttention total_num_kv_heads,
QKVParallelLinear/RowParallelLinear bias=config.bias; FalconMLP 4 * hidden_size;
FalconDecoderLayer num_ln_in_parallel_attn; FalconForCausalLM tie_word_embeddings default True)
and transformers 5.x FalconConfig."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family

_DEFAULTS = {"vocab_size": 65024, "max_position_embeddings": 2048, "multi_query": True, "parallel_attn": True,
             "new_decoder_architecture": False, "bias": False, "alibi": False}


class Falcon(Family):
    model_types = ("falcon", "RefinedWeb", "RefinedWebModel")
    transformers_class = "FalconConfig"
    transformers_defaults = _DEFAULTS
    normally_omitted = frozenset(_DEFAULTS) - {"vocab_size"}
    tie_word_embeddings_default = True
    gated_mlp = False
    norm_has_bias = True
    reads_attention_bias = False  # ``bias`` is the key (spec_fields)
    reads_mlp_bias = False

    def num_key_value_heads(self, c: _Cfg, n_heads: int) -> int:
        if c.flag("new_decoder_architecture", False):
            return c.int("num_kv_heads", "n_head_kv", default=n_heads)
        if c.flag("multi_query", True):
            return 1
        return n_heads

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        given = c.int("ffn_hidden_size", default=None, minimum=1)
        if given is not None and given != 4 * hidden:
            raise c.error("ffn_hidden_size", f"is {given:,}, but vLLM's Falcon MLP is always 4 x hidden_size "
                          f"({4 * hidden:,}): vLLM could not load this checkpoint")
        return 4 * hidden

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        bias = c.flag("bias", False)
        n_ln = c.int("num_ln_in_parallel_attn", default=None, minimum=1, maximum=2)
        if n_ln is None and c.flag("new_decoder_architecture", False):
            n_ln = 2
        norms = 2 if not c.flag("parallel_attn", True) or n_ln == 2 else 1
        fields: dict[str, Any] = {"qkv_bias": bias, "o_bias": bias, "mlp_bias": bias, "norms_per_layer": norms}
        if c.flag("alibi", False):
            fields["rotary_dim"] = None
        return fields


FALCON = Falcon()
