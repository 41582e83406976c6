"""ChatGLM (ChatGLMModel / ChatGLMForConditionalGeneration: ChatGLM2/3, GLM-4-9B), vLLM's chatglm.py.

The config is the remote-code ChatGLMConfig (vLLM ships its own copy,
transformers_utils/configs/chatglm.py), with its own key names: ``num_layers`` layers (a given
``num_hidden_layers`` wins, its attribute_map), ``padded_vocab_size`` rows in the embedding and
the output layer (whatever ``vocab_size`` says), ``ffn_hidden_size`` for the MLP, ``seq_length``
positions.

As vLLM builds it: head size hidden_size / num_attention_heads (``kv_channels`` is not read: a
config where it differs is refused, the checkpoint would not load, as is one with ChatGLM's own
``quantization_bit`` weights); KV heads
``multi_query_group_num`` with ``multi_query_attention``, else one per query head; one fused
query_key_value projection, biased with ``add_bias_linear`` or ``add_qkv_bias``, and a dense
output biased with ``add_bias_linear``; a gated SiLU MLP (dense_h_to_4h: hidden -> 2 x
ffn_hidden_size; dense_4h_to_h) biased with ``add_bias_linear``; two norms per layer (RMSNorm
with ``rmsnorm``, else LayerNorm with bias) and a final one (with ``post_layer_norm``, which
every published config sets; false is refused); RoPE on half of each head
(partial_rotary_factor 0.5), its cache ``seq_length`` rows; the output layer tied only with
``tie_word_embeddings`` (PretrainedConfig default True, published configs say false).
ChatGLMConfig's defaults fill what a config omits.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/chatglm.py
(GLMAttention, GLMMLP, GLMBlock, GLMTransformer post_layer_norm, ChatGLMModel
padded_vocab_size, ChatGLMBaseModel tie_word_embeddings) and transformers_utils/configs/chatglm.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _LIMITS, _Cfg
from kvplan.model.family import Family

# ChatGLMConfig's __init__ defaults (vLLM transformers_utils/configs/chatglm.py), the ones that size it
_DEFAULTS = {"num_layers": 28, "padded_vocab_size": 65024, "hidden_size": 4096, "ffn_hidden_size": 13696,
             "num_attention_heads": 32, "seq_length": 2048, "rmsnorm": True, "post_layer_norm": True,
             "add_bias_linear": False, "add_qkv_bias": False, "multi_query_attention": False,
             "multi_query_group_num": 1}


class ChatGLM(Family):
    model_types = ("chatglm",)
    transformers_class = "ChatGLMConfig"
    transformers_defaults = _DEFAULTS
    # keys the published configs give; only these are noted when a partial config lacks them
    normally_omitted = frozenset(_DEFAULTS) - {"num_layers", "padded_vocab_size", "hidden_size", "ffn_hidden_size",
                                               "num_attention_heads", "seq_length"}
    attribute_map = {"num_hidden_layers": "num_layers"}
    derived_keys = {"vocab_size": "padded_vocab_size"}
    tie_word_embeddings_default = True  # PretrainedConfig's; ChatGLMConfig sets none
    reads_attention_bias = False  # add_bias_linear / add_qkv_bias are the keys (spec_fields)
    reads_mlp_bias = False

    def num_key_value_heads(self, c: _Cfg, n_heads: int) -> int:
        if c.flag("multi_query_attention", False):
            return c.int("multi_query_group_num", maximum=n_heads)
        return n_heads

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        return c.int("ffn_hidden_size")

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        heads = c.int("num_attention_heads")
        head_dim = hidden // heads
        given = c.int("kv_channels", default=None)
        if given is not None and given != head_dim:
            raise c.error("kv_channels", f"is {given}, but vLLM's ChatGLM head size is always hidden_size / "
                          f"num_attention_heads ({head_dim}): vLLM could not load this checkpoint")
        if c.raw("vision_config") is not None:
            raise c.error("vision_config", "is given: vLLM's ChatGLM is text-only (a GLM-4V checkpoint needs "
                          "--hf-overrides '{\"architectures\": [\"GLM4VForCausalLM\"]}', which kvplan has no rules for)")
        if c.int("quantization_bit", default=0, minimum=0, maximum=64):
            raise c.error("quantization_bit", f"is {c.raw('quantization_bit')}: the checkpoint holds ChatGLM's own "
                          "cpm_kernels-quantized weights, which vLLM's chatglm.py does not load")
        linear_bias = c.flag("add_bias_linear", False)
        fields: dict[str, Any] = {
            "qkv_bias": linear_bias or c.flag("add_qkv_bias", False),
            "o_bias": linear_bias,
            "mlp_bias": linear_bias,
            "norm_has_bias": not c.flag("rmsnorm", True),
            "rotary_dim": head_dim // 2,  # chatglm.py: partial_rotary_factor 0.5
            "rope_max_position": c.int("seq_length"),
            # the embedding and output layer have padded_vocab_size rows whatever vocab_size says
            "vocab_size": c.int("padded_vocab_size", maximum=_LIMITS["vocab_size"]),
        }
        if not c.flag("post_layer_norm", True):
            raise c.error("post_layer_norm", "is false (no final norm): kvplan's ChatGLM rules have the final norm "
                          "every published ChatGLM config has, and no rule without it")
        return fields


CHATGLM = ChatGLM()
