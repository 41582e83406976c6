"""GLM-4.5 / GLM-4.6 / GLM-4.7 (Glm4MoeForCausalLM): grouped-query attention with an explicit
``head_dim``, q/k/v biases with ``attention_bias`` and never an o_proj bias, optional per-head
q/k RMSNorm (``use_qk_norm``), RoPE over ``partial_rotary_factor`` of each head (0.5 when the
config omits it); the first ``first_k_dense_replace`` layers a dense gated MLP of
``intermediate_size``, every later layer a MoE of ``n_routed_experts`` experts of
``moe_intermediate_size`` (top ``num_experts_per_tok``) plus ``n_shared_experts`` shared experts
fused into one gated MLP of ``n_shared_experts x moe_intermediate_size``; the router (no bias)
always has an fp32 ``e_score_correction_bias``. No ``moe_layer_freq``: unlike DeepSeek, every layer
from ``first_k_dense_replace`` on is a MoE. The multi-token-prediction layer
(``num_nextn_predict_layers``, stored after the last decoder layer) is skipped when loading.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/glm4_moe.py (Glm4MoeAttention: QKVParallelLinear
bias=qkv_bias, o_proj bias=False, rope_parameters.setdefault("partial_rotary_factor", 0.5);
Glm4MoeDecoderLayer: MoE when n_routed_experts is set and layer_idx >= first_k_dense_replace;
Glm4MoE: gate bias=False + e_score_correction_bias, shared_experts of moe_intermediate_size x
n_shared_experts; load_weights skip_spec_layers). Defaults are Glm4MoeConfig's (transformers)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class Glm4Moe(Family):
    model_types = ("glm4_moe",)
    transformers_class = "Glm4MoeConfig"
    transformers_defaults = {"vocab_size": 151552, "max_position_embeddings": 131072}
    attention_bias_on_o = False  # o_proj is built bias=False whatever attention_bias says
    reads_mlp_bias = False  # every MLP projection is bias=False

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("n_routed_experts", default=128, minimum=0)
        if not e:
            return None, (False,) * n_layers
        first_dense = c.int("first_k_dense_replace", default=1, minimum=0)
        inter = c.int("moe_intermediate_size", default=1408)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=8, maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=c.int("n_shared_experts", default=1, minimum=0) * inter,
            router_bias=True,  # e_score_correction_bias, always created
        )
        return spec, tuple(i >= first_dense for i in range(n_layers))

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """RoPE over half of each head unless the config says otherwise (vLLM's default)."""
        if c.has("partial_rotary_factor"):
            return {}
        rope = c.raw("rope_parameters")
        if isinstance(rope, dict) and "partial_rotary_factor" in rope:
            factor = float(rope["partial_rotary_factor"])
        else:
            factor = 0.5
        heads = c.int("num_attention_heads")
        head_dim = c.int("head_dim", default=hidden // heads)
        return {"rotary_dim": int(head_dim * factor)}


GLM4_MOE = Glm4Moe()
