"""GLM-5 / GLM-5.1 / GLM-5.2 (GlmMoeDsaForCausalLM, model_type ``glm_moe_dsa``): vLLM serves it
with its DeepSeek-V2 model class unchanged (deepseek_v2.py ``GlmMoeDsaForCausalLM(
DeepseekV2ForCausalLM): pass``), so the rules are DeepSeek-V3.2's: multi-head latent attention,
the sparse-attention lightning indexer with its own cache on the layers the
``index_topk_freq`` / ``index_skip_topk_offset`` / ``index_topk_pattern`` rule picks (GLM-5.2:
every 4th from layer 3), the DeepSeek MoE from ``first_k_dense_replace`` on. ``indexer_types``
and ``mlp_layer_types`` (transformers' spelling of the same patterns) are not read by vLLM (the v0_26 release).

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/deepseek_v2.py (GlmMoeDsaForCausalLM,
_get_moe_router_dtype: fp32 routing for glm_moe_dsa) and config/model.py is_deepseek_mla
(glm_moe_dsa listed)."""

from __future__ import annotations

from kvplan.model.families.deepseek import DeepSeekV32


class GlmMoeDsa(DeepSeekV32):
    model_types = ("glm_moe_dsa",)
    transformers_class = "GlmMoeDsaConfig"


GLM_MOE_DSA = GlmMoeDsa()
