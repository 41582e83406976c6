"""Read the draft model of ``--speculative-config`` like any model (Hub id, local directory,
bundled spec) and attach it to the target's ModelSpec (``ModelSpec.speculative_draft``).

* eagle / eagle3 / draft_model: the draft's own config.json. EAGLE drafts name a drafter class
  (``LlamaForCausalLMEagle3`` ...) that vLLM maps to its llama_eagle*.py; kvplan parses its
  decoder with the base architecture's rules (DRAFTER_BASE) and keeps EAGLE-3's extra keys.
* mtp (and the model-specific MTP names): the target's own config cut to its prediction layers
  (vLLM config/speculative.py, every supported version: hf_config_override: n_predict =
  num_nextn_predict_layers, or mtp_num_hidden_layers; the MTP layers are the target's decoder
  layer type, MoE where the target's later layers are).
* ngram / ngram_gpu: no draft model.

I/O lives here (sources/); the arithmetic is the version's addons rules.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError

# EAGLE drafter architecture -> the base architecture whose decoder layer it builds (vLLM
# model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS, every supported version).
DRAFTER_BASE = {
    "EagleLlamaForCausalLM": "LlamaForCausalLM",
    "LlamaForCausalLMEagle": "LlamaForCausalLM",
    "Eagle3LlamaForCausalLM": "LlamaForCausalLM",
    "LlamaForCausalLMEagle3": "LlamaForCausalLM",
    "Eagle3Qwen3ForCausalLM": "Qwen3ForCausalLM",
    "Qwen3ForCausalLMEagle3": "Qwen3ForCausalLM",
    "EagleMiniCPMForCausalLM": "LlamaForCausalLM",
}


# model_type -> MTP layers vLLM builds when the config names none. Qwen3-Next's checkpoints ship one
# MTP layer and their config.json has no count: vLLM's Qwen3NextMultiTokenPredictor takes
# ``getattr(config, "num_nextn_predict_layers", 1)`` (model_executor/models/qwen3_next_mtp.py in
# every supported vLLM version alike). DeepSeek's MTP reads the key without a default.
MTP_DEFAULT_LAYERS = {"qwen3_next": 1}


def _mtp_layers(config: dict) -> int | None:
    text = config.get("text_config") or config
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        n = text.get(key)
        if isinstance(n, int) and n > 0:
            return n
    return MTP_DEFAULT_LAYERS.get(text.get("model_type") or config.get("model_type"))


def mtp_draft_config(config: dict) -> dict:
    """The target's config cut to its MTP prediction layers (see the module docstring).

    Raises:
        KvplanError: the config names no MTP layers (vLLM finds none to load).
    """
    n = _mtp_layers(config)
    if n is None:
        raise KvplanError(
            "--speculative-config: method mtp, but the model's config has no num_nextn_predict_layers "
            "(or mtp_num_hidden_layers): vLLM finds no MTP layers to load",
            hint="use a model that ships MTP layers (DeepSeek-V3, GLM-4.5/4.7, Qwen3-Next, ...)",
        )
    out = dict(config)
    target = out.get("text_config") if isinstance(out.get("text_config"), dict) else None
    cut = dict(target) if target is not None else out
    cut["num_hidden_layers"] = n
    if "first_k_dense_replace" in cut:
        cut["first_k_dense_replace"] = 0  # the MTP layer is the target's MoE layer type
    if "layer_types" in cut:
        cut["layer_types"] = ["full_attention"] * n
    if "full_attention_interval" in cut:
        cut["full_attention_interval"] = 1
    if "mlp_only_layers" in cut:
        cut["mlp_only_layers"] = []
    if target is not None:
        out["text_config"] = cut
    return out


def load_draft(settings: Any, target_config: dict | None, revision: str | None = None,
               vllm_version: str | None = None):
    """The DraftModel of ``settings`` (features.SpeculativeSettings), or None for a method with
    no draft model (ngram, ngram_gpu, suffix ...).

    Args:
        target_config: the target's config.json (for MTP), None when not at hand.
    Raises:
        KvplanError: the draft cannot be found or parsed (exit 2, names --speculative-config).
    """
    from kvplan.model.draft import DraftModel
    from kvplan.model.parse import parse_config
    from kvplan.sources import resolve_model

    method = settings.method
    if method == "mtp":
        if target_config is None:
            raise KvplanError("--speculative-config: method mtp needs the target model's config.json")
        config = mtp_draft_config(target_config)
        spec = parse_config(config, "MTP layers of the target", snapshot=False, vllm_version=vllm_version)
        return DraftModel(spec=spec, method="mtp", source="target")
    if not settings.needs_draft_config:
        return None
    try:
        source = resolve_model(settings.model, revision=None)
    except KvplanError as exc:
        raise KvplanError(f"--speculative-config: the draft model {settings.model!r}: {exc.message}", exc.hint) from None
    config = dict(source.config)
    arch = (config.get("architectures") or [""])[0]
    detected = method
    if method is None:
        # config/speculative.py: "eagle-" / "eagle3" in the draft's name, an MTP model type, else draft_model
        name = settings.model.lower()
        detected = "eagle" if "eagle-" in name else "eagle3" if "eagle3" in name else "draft_model"
    if arch in DRAFTER_BASE:
        config["architectures"] = [DRAFTER_BASE[arch]]
    spec = parse_config(config, settings.model, snapshot=source.origin == "bundled", vllm_version=vllm_version)
    names = getattr(source, "tensor_names", None)
    eagle = config.get("eagle_config") or {}
    layer_ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    return DraftModel(
        spec=spec, method=detected, source=source.origin,
        draft_vocab_size=config.get("draft_vocab_size"),
        num_aux_hidden_states=int(config.get("num_aux_hidden_states") or (len(layer_ids) if layer_ids else 3)),
        target_hidden_size=config.get("target_hidden_size"),
        checkpoint_tensor_names=tuple(names) if names else None,
    )


class DraftUnresolved(KvplanError):
    """The draft model of --speculative-config cannot be found or read (exit 2): ``kvplan check``
    reports it as model-unresolved on the speculative-config key, like an unreadable model."""


def attach_draft(spec, args, target_config: dict | None, vllm_version: str | None = None):
    """``spec`` with the draft of ``args``' speculative settings attached (unchanged when there
    is none). Raises KvplanError as load_draft and features.speculative_settings."""
    from kvplan.engines.vllm import versions
    from kvplan.engines.vllm.features import speculative_settings

    rules = versions.select(vllm_version or args.vllm_version)
    settings = speculative_settings(args, rules.addons.MTP_METHODS)
    if settings is None:
        return spec
    try:
        draft = load_draft(settings, target_config, vllm_version=vllm_version or args.vllm_version)
    except DraftUnresolved:
        raise
    except KvplanError as exc:  # the draft's config cannot be found or read: bad input, not vLLM's refusal
        raise DraftUnresolved(exc.message, exc.hint, exc.exit_code) from None
    if draft is None:
        return spec
    return spec.model_copy(update={"speculative_draft": draft})
