"""How vLLM 0.26.0's implementation of a model family costs memory beyond what the model's
shape says: the one table of per-family quirks of this version (facts about the model itself
belong to ModelSpec, not here).

Keyed by Hugging Face ``model_type`` (what vLLM's model file implements), except the runner
list, which vLLM itself keys by architecture name (config/vllm.py). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass

# Per-family load-time extras seen in the worker's exact model_memory_usage and not (yet) traced
# to a vLLM source line; each from tests/data/vllm-0.26.0-h200 records:
# Qwen2 (qwen2.py): +15,728,640 B over 4 layers (p-qwen25-4L, exact) and +0.092..0.102 GiB over
# 28 (calibration qwen2.5-7b_eager) -> 3.75 MiB per decoder layer.
QWEN2_BYTES_PER_LAYER = 3_932_160
# Gemma-3 (gemma3.py): +64 MiB over the parameters and the two RoPE caches (gemma3-1b_eager).
GEMMA3_EXTRA_BYTES = 64 << 20

# Gemma-4: vLLM 0.26.0 transformers_utils/model_arch_config_convertor.py
# Gemma4ModelArchConfigConvertor.get_head_size reads the text config's global ``head_dim``, which
# transformers 5.17 refuses for Gemma-4's per-layer attributes (recorded start
# tests/data/vllm-0.26.0-h200/families/gemma4-26b-a4b_eager.log, rc=1 before any memory figure).
GEMMA4_START_FAILURE = (
    "with transformers 5.17 its config reader raises AmbiguousGlobalPerLayerAttributeError ('head_dim' is a "
    "per-layer attribute) in model_arch_config_convertor.get_head_size, before loading anything"
)
# model_type -> why vLLM 0.26.0 cannot start it (VllmRules.start_failures; not reused by 0.33.0,
# whose config converter reads per-layer configs).
START_FAILURES = {"gemma4": GEMMA4_START_FAILURE, "gemma4_text": GEMMA4_START_FAILURE}
# model_type -> its attention layers are built without the cache config, so they keep the
# model dtype's KV cache whatever --kv-cache-dtype says (VllmRules.kv_cache_dtype_ignored):
# vLLM 0.26.0 mimo_v2.py MiMoV2FlashDecoderLayer builds MiMoV2Attention without cache_config,
# and layers/attention/attention.py Attention then takes kv_cache_dtype "auto".
KV_CACHE_DTYPE_IGNORED = frozenset({"mimo_v2_flash", "mimo_v2"})


@dataclass(frozen=True)
class FamilyQuirks:
    """What vLLM 0.26.0's model file for one family does differently.

    Attributes:
        mlp_keeps_gate_up: the dense MLP is written ``gate_up = ...; x = act(gate_up);
            x = down(x)`` and keeps gate_up alive through down_proj (qwen2.py Qwen2MLP, also used
            by qwen3; deepseek_v2.py; qwen2_moe.py); calibration qwen2.5-7b_eager 2.20 GiB,
            record qwen3-8b_eager_fp8kv exact 53,248 el/token.
        gemma_style_activation: Gemma-2/3's MLP peak 5H + 3I (records p-gemma2-4L-t16384-s256,
            gemma3-1b_eager: exact).
        extra_bytes_per_layer: untraced load-time bytes per decoder layer of a stage.
        extra_bytes_first_stage: untraced load-time bytes once, on the first pipeline stage.
        router_bias_fp32: the MoE router's bias (e_score_correction_bias) is kept in fp32
            (deepseek_v2.py).
        lm_head_bias: the LM head is built with a bias (one per padded vocabulary row) whatever
            the config says (phimoe.py PhiMoEForCausalLM: ParallelLMHead(bias=True), though
            transformers' PhimoeConfig.lm_head_bias defaults to False).
        unfused_norm_hidden_tensors: hidden-size tensors per token the feed-forward peak holds
            beyond the fused add+RMSNorm path, because the layer norms are torch LayerNorms and
            the residual add is a separate tensor (phimoe.py PhiMoEDecoderLayer: 1; exaone4.py
            Exaone4DecoderLayer, post-norm ``residual + norm(mlp(x))``: 1, which reproduces the
            worker's exact peak of families/exaone4-32b_eager, 3,397,403,136 B; commandr.py
            CohereDecoderLayer runs attention and MLP in parallel on the same normed input and
            adds ``residual + attn + mlp`` at the end, so the attention output stays alive
            through the MLP: 1).
        router_fp32_scratch: the MoE routing function keeps an fp32 [tokens, num_experts]
            tensor live at the feed-forward peak (phimoe.py sparsemixer).
        router_fp32: the MoE router (gate) weight is an fp32 nn.Linear, its correction bias fp32
            too (glm4_moe.py Glm4MoE.gate, used by glm4_moe_lite.py).
        mla_bf16_absorbed_copies: an unquantized MLA layer also holds W_UK^T / W_UV copies of
            kv_b_proj. vLLM 0.26.0 mla_attention.py process_weights_after_loading registers them
            as views of the bf16 kv_b_proj weight (get_and_maybe_dequant_weights returns the
            weight itself when unquantized), so no copy is made; the DeepSeek rule keeps the
            copies it was fitted with (calibration dsv2-lite_eager, log precision: 31.55 vs
            31.50 GB logged) so that existing predictions do not move; Glm4MoeLite uses the
            source's rule (families/glm4.7-flash_eager: without the copies 0.13 % under the
            worker's exact 59,993,332,224 B, with them 0.58 % over).
        ssm_state_dtype_from_config: with ``--mamba-ssm-cache-dtype auto`` the recurrent
            (temporal) state takes the dtype the config names (``ModelSpec.ssm_state_dtype``),
            the conv state keeps the model dtype (model_executor/models/config.py
            Qwen3_5ForConditionalGenerationConfig, NemotronHForCausalLMConfig; mamba_utils.py
            MambaStateDtypeCalculator._mamba_state_dtype).
        ssm_state_dtype_default: the temporal-state dtype when the config names none (NemotronH:
            "float32", NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE); None = the
            conv state's (the model dtype).
        unfused_norm_hidden_tensors and router_fp32_scratch reproduce the worker's exact peak activation of families/phi3.5-moe_eager
        (2,165,309,440 B at 16384 tokens: +4096 + 32 elements per token over the MoE rule).
    """

    mlp_keeps_gate_up: bool = False
    gemma_style_activation: bool = False
    extra_bytes_per_layer: int = 0
    extra_bytes_first_stage: int = 0
    router_bias_fp32: bool = False
    lm_head_bias: bool = False
    unfused_norm_hidden_tensors: float = 0.0
    router_fp32_scratch: bool = False
    router_fp32: bool = False
    mla_bf16_absorbed_copies: bool = True
    ssm_state_dtype_from_config: bool = False
    ssm_state_dtype_default: str | None = None


NONE = FamilyQuirks()

# model_type -> quirks (the one table).
QUIRKS: dict[str, FamilyQuirks] = {
    "qwen2": FamilyQuirks(mlp_keeps_gate_up=True, extra_bytes_per_layer=QWEN2_BYTES_PER_LAYER),
    "qwen3": FamilyQuirks(mlp_keeps_gate_up=True),
    "qwen2_moe": FamilyQuirks(mlp_keeps_gate_up=True),
    "qwen3_moe": FamilyQuirks(mlp_keeps_gate_up=True),
    "qwen3_next": FamilyQuirks(mlp_keeps_gate_up=True),
    "deepseek_v2": FamilyQuirks(mlp_keeps_gate_up=True, router_bias_fp32=True),
    "deepseek_v3": FamilyQuirks(mlp_keeps_gate_up=True, router_bias_fp32=True),
    "deepseek_v32": FamilyQuirks(mlp_keeps_gate_up=True, router_bias_fp32=True),  # deepseek_v2.py too
    "glm_moe_dsa": FamilyQuirks(mlp_keeps_gate_up=True, router_bias_fp32=True),  # deepseek_v2.py GlmMoeDsaForCausalLM
    # glm4_moe.py: Glm4MoeMLP keeps gate_up; Glm4MoE.gate is an fp32 nn.Linear with an fp32 correction bias
    "glm4_moe": FamilyQuirks(mlp_keeps_gate_up=True, router_fp32=True),
    "bailing_moe": FamilyQuirks(router_bias_fp32=True),  # bailing_moe.py gate.expert_bias is fp32
    "phimoe": FamilyQuirks(lm_head_bias=True, unfused_norm_hidden_tensors=1.0, router_fp32_scratch=True),
    "glm4_moe_lite": FamilyQuirks(mlp_keeps_gate_up=True, router_fp32=True, mla_bf16_absorbed_copies=False),
    "exaone4": FamilyQuirks(unfused_norm_hidden_tensors=1.0),
    # commandr.py (Cohere, Cohere2): CohereMLP keeps gate_up through down_proj, and the parallel
    # block keeps the attention output alive through the MLP. With both, the dense rule gives
    # 5H + 3I = 63,488 elements per token, the worker's exact peak of families/aya-23-8b_eager
    # (2,113,946,112 B at 16384 tokens, to the byte); without them 0.25 GiB under.
    "cohere": FamilyQuirks(mlp_keeps_gate_up=True, unfused_norm_hidden_tensors=1.0),
    "cohere2": FamilyQuirks(mlp_keeps_gate_up=True, unfused_norm_hidden_tensors=1.0),
    # qwen3_vl.py Qwen3LLMModel is Qwen3Model (Qwen2MLP keeps gate_up): families/qwen3-vl-8b_eager
    # peak 1,778,401,792 B = the Qwen3 rule exactly (one hidden tensor short without it).
    "qwen3_vl": FamilyQuirks(mlp_keeps_gate_up=True),
    "qwen3_vl_text": FamilyQuirks(mlp_keeps_gate_up=True),
    # qwen3_5.py: Qwen3NextMLP is Qwen2MoeMLP (keeps gate_up); mamba_ssm_dtype from the config.
    "qwen3_5": FamilyQuirks(mlp_keeps_gate_up=True, ssm_state_dtype_from_config=True),
    "qwen3_5_text": FamilyQuirks(mlp_keeps_gate_up=True, ssm_state_dtype_from_config=True),
    "qwen3_5_moe": FamilyQuirks(mlp_keeps_gate_up=True, ssm_state_dtype_from_config=True),
    "qwen3_5_moe_text": FamilyQuirks(mlp_keeps_gate_up=True, ssm_state_dtype_from_config=True),
    # nemotron_h.py: gate.e_score_correction_bias is fp32; the SSM state float32 unless the config says
    "nemotron_h": FamilyQuirks(router_bias_fp32=True, ssm_state_dtype_from_config=True, ssm_state_dtype_default="float32"),
    # kimi_linear.py: KimiMLP keeps gate_up; its MLA layers are DeepSeek's (unquantized kv_b_proj
    # views, no copies); the KDA recurrent state is float32 whatever the model dtype
    # (mamba_utils.py MambaStateDtypeCalculator.kda_state_dtype), the conv state the model dtype
    "kimi_linear": FamilyQuirks(mlp_keeps_gate_up=True, mla_bf16_absorbed_copies=False,
                                ssm_state_dtype_from_config=True, ssm_state_dtype_default="float32"),
    "minimax_m2": FamilyQuirks(router_fp32=True),  # minimax_m2.py GateLinear(params_dtype=torch.float32)
    "ernie4_5_moe": FamilyQuirks(router_fp32=True),  # ernie45_moe.py gate params_dtype=torch.float32
    "gemma2": FamilyQuirks(gemma_style_activation=True),
    # mimo_v2.py MiMoV2MoE.gate: an nn.Linear in moe_router_dtype (default float32), its
    # e_score_correction_bias the same dtype
    "mimo_v2_flash": FamilyQuirks(router_fp32=True),
    # lfm2_moe.py: gate.e_score_correction_bias is fp32 (the gate itself in the model dtype)
    "lfm2_moe": FamilyQuirks(router_bias_fp32=True),
    "mimo_v2": FamilyQuirks(router_fp32=True),
    "gemma3": FamilyQuirks(gemma_style_activation=True, extra_bytes_first_stage=GEMMA3_EXTRA_BYTES),
    "gemma3_text": FamilyQuirks(gemma_style_activation=True, extra_bytes_first_stage=GEMMA3_EXTRA_BYTES),
}
# Every other DeepSeek model_type (deepseek_v32, deepseek_mtp ...) shares deepseek_v2.py's
# fp32 router bias.
_PREFIX_QUIRKS = (("deepseek", FamilyQuirks(router_bias_fp32=True)),)


def quirks(model_type: str) -> FamilyQuirks:
    """The quirks of vLLM 0.26.0's implementation of ``model_type`` (NONE when it has none)."""
    q = QUIRKS.get(model_type)
    if q is not None:
        return q
    for prefix, pq in _PREFIX_QUIRKS:
        if model_type.startswith(prefix):
            return pq
    return NONE


# vLLM 0.26.0 config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES: MoE architectures that still
# get the V2 model runner (keyed by architecture, as vLLM keys it).
DEFAULT_V2_ARCHITECTURES = frozenset(
    {
        "DeepseekV2ForCausalLM",
        "GraniteMoeForCausalLM",
        "InklingForCausalLM",
        "InklingForConditionalGeneration",
        "LongcatFlashNgramForCausalLM",
        "Qwen2MoeForCausalLM",
    }
)

# Backward-compatible sets (activation.py's names before the table).
MLP_KEEPS_GATE_UP = frozenset(k for k, q in QUIRKS.items() if q.mlp_keeps_gate_up)
GEMMA_STYLE = frozenset(k for k, q in QUIRKS.items() if q.gemma_style_activation)


# The Transformers modeling backend (model_executor/models/transformers/, registry.py
# _TRANSFORMERS_SUPPORTED_MODELS; architectures.TRANSFORMERS_BACKEND_TEXT) runs transformers'
# own decoder loop: its model forward keeps ``inputs_embeds`` (one hidden-size tensor per
# token) referenced for the whole pass and computes the rotary ``cos`` and ``sin`` once, each
# ``head_dim`` wide in the activation dtype (transformers 5.17 modeling_smollm3.py
# SmolLM3Model.forward / SmolLM3RotaryEmbedding, the same in olmo2 and starcoder2), beside what
# vLLM's own Llama-style layer holds. With them the dense rule reproduces the worker's exact peak
# of families/smollm3-3b_eager (1,392,525,824 B at 16384 tokens, to the byte: 4H + 3I + 2 x 128
# elements per token) and families/starcoder2-3b_eager within 1 MiB (64 B per token under).
# Only the backend architectures whose transformers modeling file was read for this hold it;
# GPTBigCode (learned positions added to the embeddings) and OLMo-1 keep the plain rule.
TRANSFORMERS_BACKEND_HIDDEN_TENSORS = 1
TRANSFORMERS_BACKEND_ROTARY_TENSORS = 2
TRANSFORMERS_BACKEND_ROTARY_LOOP = frozenset({"Olmo2ForCausalLM", "SmolLM3ForCausalLM", "Starcoder2ForCausalLM"})


def transformers_backend_held_elements(architecture: str, hidden_size: int, head_dim: int) -> int:
    """Elements per token the Transformers backend's decoder loop keeps live through every layer
    of the forward: the embeddings (``hidden_size``) and the rotary cos/sin (2 x ``head_dim``)
    for the architectures of TRANSFORMERS_BACKEND_ROTARY_LOOP, 0 for any other (vLLM 0.26.0's
    own model files, e.g. llama.py, free or fuse them)."""
    if architecture not in TRANSFORMERS_BACKEND_ROTARY_LOOP:
        return 0
    return TRANSFORMERS_BACKEND_HIDDEN_TENSORS * hidden_size + TRANSFORMERS_BACKEND_ROTARY_TENSORS * head_dim


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/vllm.py', 'DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES'),
    ('model_executor/models/qwen2.py', 'Qwen2MLP'),
    ('model_executor/models/phimoe.py', 'PhiMoEDecoderLayer'),
    ('model_executor/models/phimoe.py', 'sparsemixer'),
    ('model_executor/models/mimo_v2.py', 'MiMoV2FlashDecoderLayer.__init__'),
    ('model_executor/models/mimo_v2.py', 'MiMoV2MoE.__init__'),
    ('model_executor/models/config.py', 'Gemma4Config'),
)
