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

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec

_DEFAULTS = {
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}


class PhiMoE(Family):
    model_types = ("phimoe",)
    transformers_class = "PhimoeConfig"
    transformers_defaults = _DEFAULTS
    norm_has_bias = True
    qkv_bias = True
    o_bias = True

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """Every layer routes to ``num_local_experts`` experts of ``intermediate_size``."""
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, (True,) * n_layers


PHIMOE = PhiMoE()
