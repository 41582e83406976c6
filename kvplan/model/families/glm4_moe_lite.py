"""GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-style multi-head latent attention (q through
a ``q_lora_rank`` latent, one ``kv_lora_rank`` + ``qk_rope_head_dim`` latent cached per token),
the first ``first_k_dense_replace`` layers a dense MLP of ``intermediate_size`` and the rest a
MoE of ``n_routed_experts`` experts plus ``n_shared_experts`` shared ones of
``moe_intermediate_size``; its router always has a score-correction bias (GLM-4 MoE routing).

Read from vLLM model_executor/models/glm4_moe_lite.py (Glm4MoeLiteDecoderLayer: the MLA
attention of deepseek_v2.py, the MoE of glm4_moe.py from ``first_k_dense_replace`` on, every
``moe_layer_freq``-th layer). vLLM's fp32 router is a quirk of its implementation:
kvplan/engines/vllm/v0_26/family_quirks.py."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.families.deepseek import DeepSeek
from kvplan.model.spec import MoESpec


class Glm4MoeLite(DeepSeek):
    model_types = ("glm4_moe_lite",)
    transformers_class = "Glm4MoeLiteConfig"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """DeepSeek's layout; the router's correction bias is always there (glm4_moe.py
        Glm4MoE.gate.e_score_correction_bias, whatever ``topk_method`` says)."""
        spec, layers = super().moe(c, n_layers)
        if spec is None:
            return spec, layers
        return spec.model_copy(update={"router_bias": True}), layers


GLM4_MOE_LITE = Glm4MoeLite()
