"""MPT (MPTForCausalLM: mosaicml/mpt-7b, mpt-30b), vLLM's mpt.py.

transformers' MptConfig names the sizes ``d_model``, ``n_layers``, ``n_heads`` (its
attribute_map), the position limit ``max_seq_len``, and nests the attention in ``attn_config``.

As vLLM builds it: head size d_model / n_heads; KV heads ``attn_config.kv_n_heads`` when given,
else one per query head; one fused Wqkv projection and an out_proj; a plain (non-gated) GELU MLP
of ``expansion_ratio`` x d_model (up_proj, down_proj); two LayerNorms per layer and a final one;
with ``no_bias`` (MptConfig's default) every bias is removed, the LayerNorms' too, else every
linear and norm has one; ALiBi positions (no rotary cache, no position embedding); the LM head
is the token embedding (vLLM asserts ``tie_word_embeddings``). ``attn_config.qk_ln`` adds a
LayerNorm over d_model on q and one on k (without biases under ``no_bias``).

Refused (exit 2, naming the key) where vLLM asserts or kvplan has no rule: ``attn_config.alibi``
false, ``attn_config.prefix_lm`` true, ``embedding_fraction`` other than 1, a ``norm_type``
other than low_precision_layernorm, ``tie_word_embeddings`` false; ``qk_ln`` with biases or with
fewer KV heads than query heads (vLLM's k_ln is over d_model and could not take the keys).

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/mpt.py
(MPTAttention, MPTMLP, MPTBlock, MPTModel no_bias, MPTForCausalLM) and transformers 5.x
MptConfig / MptAttentionConfig.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family

# MptConfig's defaults (transformers 5.x configuration_mpt.py), the ones that size it
_DEFAULTS = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4, "max_seq_len": 2048,
             "vocab_size": 50368, "no_bias": True, "embedding_fraction": 1.0,
             "norm_type": "low_precision_layernorm", "tie_word_embeddings": True}


class MPT(Family):
    model_types = ("mpt",)
    transformers_class = "MptConfig"
    transformers_defaults = _DEFAULTS
    normally_omitted = frozenset({"tie_word_embeddings"})
    attribute_map = {"hidden_size": "d_model", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads"}
    tie_word_embeddings_default = True
    gated_mlp = False
    reads_attention_bias = False  # ``no_bias`` is the key (spec_fields)
    reads_mlp_bias = False

    def _attn(self, c: _Cfg) -> _Cfg:
        return c.sub("attn_config") or _Cfg({}, c.where, c.name("attn_config") + ".")

    def num_key_value_heads(self, c: _Cfg, n_heads: int) -> int:
        return self._attn(c).int("kv_n_heads", default=n_heads, maximum=n_heads)

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        return c.int("expansion_ratio", maximum=1 << 10) * hidden

    def qk_norm(self, c: _Cfg) -> bool:
        return self._attn(c).flag("qk_ln", False)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        attn = self._attn(c)
        if not attn.flag("alibi", True):
            raise attn.error("alibi", "is false: vLLM's MPT supports ALiBi positions only (mpt.py asserts alibi)")
        if attn.flag("prefix_lm", False):
            raise attn.error("prefix_lm", "is true: vLLM's MPT does not serve prefix-LM models (mpt.py asserts not prefix_lm)")
        if c.num("embedding_fraction", 1.0) != 1.0:
            raise c.error("embedding_fraction", f"is {_show(c.raw('embedding_fraction'))}: vLLM's MPT requires 1.0")
        if c.text("norm_type", "low_precision_layernorm") != "low_precision_layernorm":
            raise c.error("norm_type", f"is {_show(c.raw('norm_type'))}: vLLM's MPT requires 'low_precision_layernorm'")
        if not c.flag("tie_word_embeddings", True):
            raise c.error("tie_word_embeddings", "is false: vLLM's MPT always uses the token embedding as LM head "
                          "(mpt.py asserts tie_word_embeddings)")
        bias = not c.flag("no_bias", True)
        heads = c.int("num_attention_heads")
        if attn.flag("qk_ln", False) and (bias or self.num_key_value_heads(c, heads) != heads):
            raise attn.error("qk_ln", "is true with biases or grouped KV heads: vLLM's q_ln/k_ln are LayerNorms "
                             "over d_model, a layout kvplan has no rule for")
        return {"qkv_bias": bias, "o_bias": bias, "mlp_bias": bias, "norm_has_bias": bias,
                "qk_norm_across_heads": True, "rotary_dim": None}


MPT_FAMILY = MPT()
