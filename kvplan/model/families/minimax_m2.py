"""MiniMax-M2 / M2.5 (MiniMaxM2ForCausalLM): grouped-query full attention with q/k RMSNorms
that span all heads (one weight of num_heads x head_dim for q, num_kv_heads x head_dim for k),
partial rotary embedding over ``rotary_dim`` of each head, and every layer a MoE of
``num_local_experts`` experts of ``intermediate_size`` (top-``num_experts_per_tok``, no shared
expert), its router with a score-correction bias when ``use_routing_bias``. The multi-token
prediction modules (``use_mtp``) are not part of the model vLLM serves without speculative
decoding.

Read from vLLM model_executor/models/minimax_m2.py (MiniMaxM2Attention: q_norm/k_norm
MiniMaxText01RMSNormTP over all heads, get_rope with rotary_dim / head_dim; MiniMaxM2MoE:
FusedMoE with e_score_correction_bias). vLLM's fp32 gate is a quirk of its implementation:
kvplan/engines/vllm/v0_26/family_quirks.py."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class MiniMaxM2(Family):
    model_types = ("minimax_m2",)
    transformers_class = "MiniMaxM2Config"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            shared_intermediate_size=c.int("shared_intermediate_size", default=0, minimum=0),
            router_bias=c.flag("use_routing_bias", False),
        )
        return spec, (True,) * n_layers

    def qk_norm(self, c: _Cfg) -> bool:
        return c.flag("use_qk_norm", True)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        fields: dict[str, Any] = {"qk_norm_across_heads": True}
        rotary = c.int("rotary_dim", default=None, minimum=1)
        if rotary is not None:
            fields["rotary_dim"] = rotary
        return fields


MINIMAX_M2 = MiniMaxM2()
