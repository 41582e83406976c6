"""StarCoder2 (Starcoder2ForCausalLM), which vLLM (the release kvplan/engines/vllm/v0_26 follows) serves through its Transformers backend
(registry.py _TRANSFORMERS_SUPPORTED_MODELS), so the layout is transformers' Starcoder2 model:
grouped-query attention with q/k/v and o biases, a plain (non-gated) MLP c_fc -> c_proj with
biases, LayerNorms with bias (two per layer and a final one), every layer sliding with
``sliding_window`` when it is set, embeddings tied by default. All the biases follow ``use_bias``
(default True, as every published StarCoder2 config gives it); a config with ``use_bias: false``
is refused rather than sized with biases it does not have.

Read from transformers 5.x Starcoder2Config / Starcoder2Attention / Starcoder2MLP and vLLM (the release kvplan/engines/vllm/v0_26 follows)
model_executor/models/transformers/ (VocabParallelEmbedding and ParallelLMHead: the vocabulary
is padded as for native models)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class Starcoder2(Family):
    model_types = ("starcoder2",)
    transformers_class = "Starcoder2Config"
    transformers_defaults = {"vocab_size": 49152, "max_position_embeddings": 4096}
    tie_word_embeddings_default = True
    gated_mlp = False
    norm_has_bias = True
    qkv_bias = True
    o_bias = True
    mlp_bias = True
    reads_attention_bias = False
    reads_mlp_bias = False

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        if not c.flag("use_bias", True):
            raise c.error("use_bias", "is false: kvplan's StarCoder2 rules (kvplan/model/families/starcoder2.py) "
                          "know only the biased layout every published StarCoder2 config uses")
        return {}


STARCODER2 = Starcoder2()
