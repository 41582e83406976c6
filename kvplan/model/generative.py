"""Whether vLLM can serve an architecture as a generative model at all.

kvplan sizes the KV cache of generative decoders. An architecture vLLM runs only as a pooling
model (embeddings, classification, reward: BERT, RoBERTa, XLM-R, ``*ForSequenceClassification``,
``*Model`` without a generative head) keeps no KV cache for generation, and an encoder-decoder
model (T5, BART) is not served by vLLM as a generative model; sizing either "as a decoder" gives
a number that describes no deployment, so the parse refuses them (exit 2, saying why).

Rule source: vLLM's model_executor/models/registry.py, read in the version kvplan's default rules
name (kvplan.engines.vllm.versions DEFAULT_VERSION; the tables below are its names), and
config/model.py ``_SUFFIX_TO_DEFAULTS`` (an architecture the registry does not list gets its
runner from its name's suffix: ``ForCausalLM`` / ``ForConditionalGeneration`` / ``ChatModel`` /
``LMHeadModel`` generate, ``ForSequenceClassification``, ``EmbeddingModel``, ``Model``, ... pool).
The messages name the version the estimate is for (``vllm_version``); a vLLM version whose registry
serves one of these names generatively would need its own table beside its rules.
"""

from __future__ import annotations

from kvplan.errors import KvplanError

# Names in vLLM's pooling tables (_EMBEDDING_MODELS, _LATE_INTERACTION_MODELS,
# _REWARD_MODELS, _TOKEN_CLASSIFICATION_MODELS, _SEQUENCE_CLASSIFICATION_MODELS, the pooling
# entries of _TRANSFORMERS_BACKEND_MODELS) and in none of its generative tables
# (_TEXT_GENERATION_MODELS, _MULTIMODAL_MODELS, _TRANSFORMERS_SUPPORTED_MODELS).
POOLING_ONLY_ARCHITECTURES = frozenset({
    "BertForMaskedLM", "BertForSequenceClassification", "BertForTokenClassification", "BertModel",
    "BertSpladeSparseEmbeddingModel", "BgeM3EmbeddingModel", "CLIPModel", "ColBERTJinaRobertaModel",
    "ColBERTLfm2Model", "ColBERTModernBertModel", "ColModernVBertForRetrieval", "ColPaliForRetrieval",
    "ColQwen3", "ColQwen3_5", "GPT2ForSequenceClassification", "Gemma2Model", "Gemma3TextModel", "GteModel",
    "GteNewForSequenceClassification", "GteNewModel", "HF_ColBERT", "InternLM2ForRewardModel",
    "JambaForSequenceClassification", "JinaEmbeddingsV5Model", "JinaForRanking", "JinaVLForRanking",
    "LlamaBidirectionalForSequenceClassification", "LlamaBidirectionalModel", "LlamaModel",
    "LlamaNemotronVLForSequenceClassification", "LlamaNemotronVLModel", "MistralModel",
    "ModernBertForSequenceClassification", "ModernBertForTokenClassification", "ModernBertModel",
    "NomicBertModel", "OpenAIPrivacyFilterForTokenClassification", "OpsColQwen3Model", "PrithviGeoSpatialMAE",
    "Qwen2ForProcessRewardModel", "Qwen2ForRewardModel", "Qwen2Model", "Qwen3ASRForcedAlignerForTokenClassification",
    "Qwen3VLNemotronEmbedModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
    "RobertaForTokenClassification", "RobertaModel", "SiglipModel", "Terratorch", "TransformersEmbeddingModel",
    "TransformersForSequenceClassification", "TransformersMoEEmbeddingModel",
    "TransformersMoEForSequenceClassification", "TransformersMultiModalEmbeddingModel",
    "TransformersMultiModalForSequenceClassification", "VoyageQwen3BidirectionalEmbedModel",
    "XLMRobertaForSequenceClassification", "XLMRobertaForTokenClassification", "XLMRobertaModel",
})

# Names in vLLM's generative tables whose suffix alone would say "pooling" (or nothing):
# the registry entry wins over the suffix (ChatGLM's published config names ChatGLMModel).
GENERATIVE_DESPITE_SUFFIX = frozenset({
    "ChatGLMModel", "Cheers", "DiffusionGemmaForBlockDiffusion", "GritLM", "HfMoondream", "Llama_Nemotron_Nano_VL",
    "MiDashengLMModel", "MiniCPMO", "MiniCPMV", "MossAudioModel", "NVLM_D", "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2", "NemotronH_Super_Omni_Reasoning_V3", "OpenVLAForActionPrediction", "Ovis", "Ovis2_5",
    "Phi4ForCausalLMV", "Qwen2_5OmniModel", "Qwen3ASRRealtimeGeneration", "UltravoxModel", "VoxtralRealtimeGeneration",
})

# vLLM config/model.py _SUFFIX_TO_DEFAULTS, in its order (the first match wins).
_SUFFIX_RUNNER: tuple[tuple[str, str], ...] = (
    ("ForCausalLM", "generate"),
    ("ForConditionalGeneration", "generate"),
    ("ChatModel", "generate"),
    ("LMHeadModel", "generate"),
    ("ForTextEncoding", "pooling"),
    ("EmbeddingModel", "pooling"),
    ("ForSequenceClassification", "pooling"),
    ("ForTokenClassification", "pooling"),
    ("ForAudioClassification", "pooling"),
    ("ForImageClassification", "pooling"),
    ("ForVideoClassification", "pooling"),
    ("ClassificationModel", "pooling"),
    ("ForRewardModeling", "pooling"),
    ("RewardModel", "pooling"),
    ("Model", "pooling"),
)

# Encoder-only model types (transformers): vLLM implements them only as pooling models
# (model_executor/models/bert.py, roberta.py, modernbert.py, bert_with_rope.py), whatever the
# architecture name says.
ENCODER_ONLY_MODEL_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "xlm_roberta", "modernbert", "distilbert", "deberta", "deberta-v2",
    "electra", "albert", "camembert", "mpnet", "nomic_bert", "new", "xlm", "ernie", "esm",
})

# Encoder-decoder model types (transformers), for configs that omit ``is_encoder_decoder``.
# vLLM removed every encoder-decoder model but Whisper with the V0 engine (registry.py
# _PREVIOUSLY_SUPPORTED_MODELS comment); BART/mBART/Florence-2 live only in the
# vllm-project/bart-plugin (_OOT_SUPPORTED_MODELS).
ENCODER_DECODER_MODEL_TYPES = frozenset({
    "t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "pegasus", "pegasus_x", "marian",
    "led", "prophetnet", "blenderbot", "blenderbot-small", "plbart", "fsmt", "t5gemma", "encoder-decoder",
})
# Encoder-decoder architectures vLLM does serve generatively (_MULTIMODAL_MODELS).
_SERVED_ENCODER_DECODER = frozenset({"WhisperForConditionalGeneration"})


def runner_by_suffix(architecture: str) -> str | None:
    """"generate" or "pooling" as vLLM derives it from the architecture name's suffix; None when no
    suffix matches."""
    for suffix, runner in _SUFFIX_RUNNER:
        if architecture.endswith(suffix):
            return runner
    return None


def refuse_non_generative(where: str, architecture: str, model_type: str, encoder_decoder: bool,
                          registered: bool, vllm_version: str) -> None:
    """Raise when vLLM cannot serve ``architecture`` as a generative model (see module docstring).

    ``registered``: kvplan has a family for the architecture (always generative).
    Raises:
        KvplanError: a pooling-only architecture (vLLM's table, or a pooling suffix for a name the
            table does not list), an encoder-only model type, an encoder-decoder model.
    """
    if registered:
        return
    said = f"architecture {architecture!r} (model_type {model_type!r})"
    hint = "kvplan sizes generative decoders (the KV cache of `vllm serve` with the generate runner)"
    pooling = (
        architecture in POOLING_ONLY_ARCHITECTURES
        or (architecture not in GENERATIVE_DESPITE_SUFFIX and runner_by_suffix(architecture) == "pooling")
    )
    if model_type in ENCODER_ONLY_MODEL_TYPES or pooling:
        what = "an encoder-only model" if model_type in ENCODER_ONLY_MODEL_TYPES else "not a generative model"
        raise KvplanError(
            f"{where}: {said} is {what}: vLLM {vllm_version} runs it only as a pooling/encoder model "
            "(embedding, classification or scoring: `--runner pooling`), which keeps no KV cache for "
            "generation; there is no generative start to size",
            hint=hint,
        )
    if (encoder_decoder or model_type in ENCODER_DECODER_MODEL_TYPES) and architecture not in _SERVED_ENCODER_DECODER:
        raise KvplanError(
            f"{where}: {said} is an encoder-decoder model: vLLM {vllm_version} does not serve it as a "
            "generative model (encoder-decoder models other than Whisper were removed with vLLM's V0 engine; "
            "BART / mBART / Florence-2 only through the vllm-project/bart-plugin)",
            hint=hint,
        )
