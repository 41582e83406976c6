"""OLMoE (OlmoeForCausalLM): full multi-head attention with q/k RMSNorms that span all heads
(one weight of num_heads x head_dim for q and of num_kv_heads x head_dim for k, not one per
head), and every layer a MoE of ``num_experts`` routed experts of ``intermediate_size``, no
shared expert, no biases. transformers' OlmoeConfig defaults fill what a partial config omits
(vLLM sees them): allenai/OLMoE-1B-7B-0924's published config.json gives every key below, so a
config without them is a trimmed copy.

Read from vLLM model_executor/models/olmoe.py (OlmoeAttention, OlmoeMoE) and
transformers 5.x OlmoeConfig."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec

_DEFAULTS = {
    "vocab_size": 50304,
    "max_position_embeddings": 4096,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "tie_word_embeddings": False,
}


class Olmoe(Family):
    model_types = ("olmoe",)
    transformers_class = "OlmoeConfig"
    transformers_defaults = _DEFAULTS

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """Every layer routes to ``num_experts`` experts of ``intermediate_size`` (no shared one)."""
        e = c.int("num_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, (True,) * n_layers

    def qk_norm(self, c: _Cfg) -> bool:
        return True

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        return {"qk_norm_across_heads": True}


OLMOE = Olmoe()
