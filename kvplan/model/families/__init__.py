"""The model-family registry: one table from Hugging Face ``architectures`` names to the family
whose rules size them, as vLLM's model_executor/models/registry.py maps architecture names to
implementations.

Adding a family: write one module here (a ``Family`` subclass overriding the hooks where its
config differs from the generic decoder, see kvplan.model.family) and add its architecture
names to ``FAMILIES`` as (module, attribute) (and its model types to ``DEFAULT_ARCHITECTURE``, for
configs that omit ``architectures``).

How a config finds its family (``family_for``): the family registered for its architecture when
that family claims the config's ``model_type`` (``Family.for_model_type``: a multimodal wrapper
such as InternVL answers with the variant for its text decoder's type), else the family of the
model type's default architecture; the rules follow ``model_type``, as they always have. A model type with no family
is sized as the generic decoder (``known`` False: the parse notes that kvplan has no rules).
"""

from __future__ import annotations

import importlib

from kvplan.model.family import Family

# Hugging Face architecture name -> family: (module under kvplan.model.families, attribute), imported
# when a config names the architecture, as vLLM's registry imports a model class lazily (an
# estimate imports one family module, not all). A Family instance is accepted too (tests register
# one with monkeypatch.setitem). The one registry.
FAMILIES: dict[str, tuple[str, str] | Family] = {
    "LlamaForCausalLM": ("llama", "LLAMA"),
    "MistralForCausalLM": ("mistral", "MISTRAL"),
    "MixtralForCausalLM": ("mistral", "MIXTRAL"),
    "Qwen2ForCausalLM": ("qwen2", "QWEN2"),
    "Qwen2MoeForCausalLM": ("qwen2", "QWEN2_MOE"),
    "Qwen3ForCausalLM": ("qwen3", "QWEN3"),
    "Qwen3MoeForCausalLM": ("qwen3", "QWEN3_MOE"),
    "Qwen3NextForCausalLM": ("qwen3_next", "QWEN3_NEXT"),
    "GemmaForCausalLM": ("gemma", "GEMMA"),
    "Gemma2ForCausalLM": ("gemma2", "GEMMA2"),
    "Gemma3ForCausalLM": ("gemma3", "GEMMA3"),
    "Gemma3ForConditionalGeneration": ("gemma3", "GEMMA3"),
    "Phi3ForCausalLM": ("phi3", "PHI3"),
    "OPTForCausalLM": ("opt", "OPT_FAMILY"),
    "DeepseekV2ForCausalLM": ("deepseek", "DEEPSEEK"),
    "DeepseekV3ForCausalLM": ("deepseek", "DEEPSEEK"),
    "GptOssForCausalLM": ("gpt_oss", "GPT_OSS"),
    "JambaForCausalLM": ("jamba", "JAMBA"),
    "GraniteMoeHybridForCausalLM": ("granite_moe_hybrid", "GRANITE_MOE_HYBRID"),
    "Llama4ForConditionalGeneration": ("llama4", "LLAMA4"),
    "Llama4ForCausalLM": ("llama4", "LLAMA4"),
    "OlmoeForCausalLM": ("olmoe", "OLMOE"),
    "PhiMoEForCausalLM": ("phimoe", "PHIMOE"),
    "Glm4MoeLiteForCausalLM": ("glm4_moe_lite", "GLM4_MOE_LITE"),
    "Glm4MoeForCausalLM": ("glm4_moe", "GLM4_MOE"),
    "GlmMoeDsaForCausalLM": ("glm_moe_dsa", "GLM_MOE_DSA"),
    "HunYuanDenseV1ForCausalLM": ("hunyuan", "HUNYUAN_DENSE"),
    "HunYuanMoEV1ForCausalLM": ("hunyuan", "HUNYUAN_MOE"),
    "Mistral3ForConditionalGeneration": ("mistral3", "MISTRAL3"),
    "BailingMoeForCausalLM": ("bailing", "BAILING"),
    "BailingMoeV2ForCausalLM": ("bailing", "BAILING"),
    "Exaone4ForCausalLM": ("exaone4", "EXAONE4"),
    "MiniMaxM2ForCausalLM": ("minimax_m2", "MINIMAX_M2"),
    "Qwen3VLForConditionalGeneration": ("qwen3_vl", "QWEN3_VL"),
    "Qwen3_5ForConditionalGeneration": ("qwen3_5", "QWEN3_5"),
    "Qwen3_5ForCausalLM": ("qwen3_5", "QWEN3_5"),
    "Qwen3_5MoeForConditionalGeneration": ("qwen3_5", "QWEN3_5_MOE"),
    "Qwen3_5MoeForCausalLM": ("qwen3_5", "QWEN3_5_MOE"),
    "NemotronHForCausalLM": ("nemotron_h", "NEMOTRON_H"),
    "DeepseekV32ForCausalLM": ("deepseek", "DEEPSEEK_V32"),
    "Gemma4ForConditionalGeneration": ("gemma4", "GEMMA4"),
    "GraniteForCausalLM": ("granite", "GRANITE"),
    "GraniteMoeForCausalLM": ("granite", "GRANITE_MOE"),
    "GraniteMoeSharedForCausalLM": ("granite", "GRANITE_MOE_SHARED"),
    "SeedOssForCausalLM": ("seed_oss", "SEED_OSS"),
    "Starcoder2ForCausalLM": ("starcoder2", "STARCODER2"),
    "Ernie4_5ForCausalLM": ("ernie45", "ERNIE45"),
    "Ernie4_5_MoeForCausalLM": ("ernie45", "ERNIE45_MOE"),
    "CohereForCausalLM": ("cohere", "COHERE"),
    "Cohere2ForCausalLM": ("cohere", "COHERE2"),
    "Olmo2ForCausalLM": ("olmo2", "OLMO2"),
    "Olmo3ForCausalLM": ("olmo2", "OLMO3"),
    "FalconForCausalLM": ("falcon", "FALCON"),
    "RWForCausalLM": ("falcon", "FALCON"),
    "SmolLM3ForCausalLM": ("smollm3", "SMOLLM3"),
    "MambaForCausalLM": ("mamba", "MAMBA"),
    "FalconMambaForCausalLM": ("mamba", "MAMBA"),
    "Mamba2ForCausalLM": ("mamba", "MAMBA2"),
    "FalconH1ForCausalLM": ("falcon_h1", "FALCON_H1"),
    "Lfm2ForCausalLM": ("lfm2", "LFM2"),
    "MiMoV2FlashForCausalLM": ("mimo_v2", "MIMO_V2_FLASH"),
    "Lfm2MoeForCausalLM": ("lfm2", "LFM2_MOE"),
    "Zamba2ForCausalLM": ("zamba2", "ZAMBA2"),
    "ChatGLMModel": ("chatglm", "CHATGLM"),
    "ChatGLMForConditionalGeneration": ("chatglm", "CHATGLM"),
    "MPTForCausalLM": ("mpt", "MPT_FAMILY"),
    "MptForCausalLM": ("mpt", "MPT_FAMILY"),
    "InternVLChatModel": ("internvl", "INTERNVL"),
    "KimiLinearForCausalLM": ("kimi_linear", "KIMI_LINEAR"),
}

# ``architectures[0]`` for configs that omit it (vLLM resolves these by model_type as well).
DEFAULT_ARCHITECTURE: dict[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "qwen3_next": "Qwen3NextForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gemma3": "Gemma3ForConditionalGeneration",
    "phi3": "Phi3ForCausalLM",
    "opt": "OPTForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "jamba": "JambaForCausalLM",
    "granitemoehybrid": "GraniteMoeHybridForCausalLM",
    "llama4": "Llama4ForConditionalGeneration",
    "llama4_text": "Llama4ForCausalLM",
    "olmoe": "OlmoeForCausalLM",
    "phimoe": "PhiMoEForCausalLM",
    "glm4_moe_lite": "Glm4MoeLiteForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "glm_moe_dsa": "GlmMoeDsaForCausalLM",
    "hunyuan_v1_dense": "HunYuanDenseV1ForCausalLM",
    "hunyuan_v1_moe": "HunYuanMoEV1ForCausalLM",
    "mistral3": "Mistral3ForConditionalGeneration",
    "bailing_moe": "BailingMoeForCausalLM",
    "exaone4": "Exaone4ForCausalLM",
    "minimax_m2": "MiniMaxM2ForCausalLM",
    "qwen3_vl": "Qwen3VLForConditionalGeneration",
    "qwen3_vl_text": "Qwen3VLForConditionalGeneration",
    "qwen3_5": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_text": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
    "qwen3_5_moe_text": "Qwen3_5MoeForConditionalGeneration",
    "nemotron_h": "NemotronHForCausalLM",
    "deepseek_v32": "DeepseekV32ForCausalLM",
    "gemma4": "Gemma4ForConditionalGeneration",
    "gemma4_text": "Gemma4ForConditionalGeneration",
    "granite": "GraniteForCausalLM",
    "granitemoe": "GraniteMoeForCausalLM",
    "granitemoeshared": "GraniteMoeSharedForCausalLM",
    "seed_oss": "SeedOssForCausalLM",
    "starcoder2": "Starcoder2ForCausalLM",
    "ernie4_5": "Ernie4_5ForCausalLM",
    "ernie4_5_moe": "Ernie4_5_MoeForCausalLM",
    "cohere": "CohereForCausalLM",
    "cohere2": "Cohere2ForCausalLM",
    "olmo2": "Olmo2ForCausalLM",
    "olmo3": "Olmo3ForCausalLM",
    "falcon": "FalconForCausalLM",
    "RefinedWeb": "RWForCausalLM",
    "RefinedWebModel": "RWForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "mamba": "MambaForCausalLM",
    "falcon_mamba": "FalconMambaForCausalLM",
    "mamba2": "Mamba2ForCausalLM",
    "falcon_h1": "FalconH1ForCausalLM",
    "lfm2": "Lfm2ForCausalLM",
    "mimo_v2_flash": "MiMoV2FlashForCausalLM",
    "lfm2_moe": "Lfm2MoeForCausalLM",
    "zamba2": "Zamba2ForCausalLM",
    "chatglm": "ChatGLMModel",
    "mpt": "MPTForCausalLM",
    "internvl_chat": "InternVLChatModel",
    "kimi_linear": "KimiLinearForCausalLM",
}


class _Unregistered(Family):
    """A model type kvplan has no family for: the generic decoder (``known`` False)."""

    known = False


class _UnregisteredGemma3Like(_Unregistered):
    """An unregistered model type naming gemma3 (gemma3n, ...): rope scaling leaves the
    derived max length alone, as for Gemma-3."""

    rope_scaling_sets_max_len = False


_GENERIC = _Unregistered()
_GEMMA3_LIKE = _UnregisteredGemma3Like()
# Unregistered model types that still read a key the way a registered family does.
_UNREGISTERED: dict[str, tuple[str, str]] = {"qwen2_vl": ("qwen2", "QWEN_VL_TEXT"), "qwen2_5_vl": ("qwen2", "QWEN_VL_TEXT")}


def _load(entry: tuple[str, str] | Family | None) -> Family | None:
    """The Family a registry entry names (importing its module on first use)."""
    if entry is None or isinstance(entry, Family):
        return entry
    module, attr = entry
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


def registered() -> dict[str, Family]:
    """Every registered architecture with its family, all imported (for tests and the coverage
    table; the parse path imports only the family it needs)."""
    return {arch: _load(entry) for arch, entry in FAMILIES.items()}


def family_for(architecture: str, model_type: str) -> Family:
    """The family whose rules size a config of ``architecture`` and ``model_type`` (see the
    module docstring); the generic decoder (``known`` False) for a model type with no family."""
    family = _load(FAMILIES.get(architecture))
    chosen = family.for_model_type(model_type) if family is not None else None
    if chosen is not None:
        return chosen
    family = _load(FAMILIES.get(DEFAULT_ARCHITECTURE.get(model_type, "")))
    if family is not None:
        return family
    if model_type in _UNREGISTERED:
        return _load(_UNREGISTERED[model_type])
    return _GEMMA3_LIKE if "gemma3" in model_type else _GENERIC
