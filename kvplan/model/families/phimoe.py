"""Phi-3.5-MoE (PhiMoEForCausalLM): grouped-query attention whose q/k/v and o projections always
carry biases, LayerNorms with bias (not RMSNorm) before attention, before the MoE and at the
end, and every layer a MoE of ``num_local_experts`` experts of ``intermediate_size`` (top-2, no
shared expert). transformers' PhimoeConfig defaults fill what a partial config omits (the
published microsoft/Phi-3.5-MoE-instruct config.json gives them, with a longrope
``rope_scaling`` whose ``original_max_position_embeddings`` 4096 is the default length).

Read from vLLM model_executor/models/phimoe.py (PhiMoEAttention: QKVParallelLinear and
RowParallelLinear with bias=True; PhiMoEDecoderLayer: nn.LayerNorm) and transformers 5.x
PhimoeConfig. vLLM's LM-head bias is a quirk of its implementation:
kvplan/engines/vllm/v0_26/family_quirks.py."""

from __future__ import annotations

from kvplan.model.families.mistral import Mixtral

_DEFAULTS = {
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}


class PhiMoE(Mixtral):
    """Mixtral's layer layout (``moe``: every layer a MoE of ``num_local_experts`` experts of
    ``intermediate_size``) with PhiMoE's biases and transformers defaults."""

    model_types = ("phimoe",)
    transformers_class = "PhimoeConfig"
    transformers_defaults = _DEFAULTS
    norm_has_bias = True
    qkv_bias = True
    o_bias = True


PHIMOE = PhiMoE()
