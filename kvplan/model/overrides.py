"""``--hf-overrides`` applied to a model's config.json the way vLLM applies it.

Rule (vLLM config/model.py ``ModelConfig.__post_init__`` and ``_apply_dict_overrides``,
transformers_utils/config.py ``get_config``): the overrides mapping is split in two.

- Keys whose value is not a mapping are set on the top-level config (``config.update``), before
  the text config is picked: on a multimodal model a flat ``max_position_embeddings`` lands on the
  outer config, not in ``text_config``.
- Keys whose value is a mapping are applied after the config is loaded: when the config already
  holds a sub-config under that key (``text_config``, ``vision_config``, ...), the mapping is merged
  into it key by key (recursively for nested mappings); otherwise the value replaces the attribute
  as a whole (``rope_scaling: {...}`` replaces the checkpoint's rope mapping, it is not merged).

Pure functions over plain dicts; nothing here reads files or the network.
"""

from __future__ import annotations

import copy
from typing import Any

# Dict-valued config.json keys that transformers keeps as plain dicts, not as sub-configs: an
# override mapping replaces them. Every other ``*_config`` mapping is a sub-config (merged).
_PLAIN_DICT_KEYS = frozenset({"quantization_config", "compression_config", "_hf_quant_config"})


def _is_sub_config(key: str, value: Any) -> bool:
    return isinstance(value, dict) and key.endswith("_config") and key not in _PLAIN_DICT_KEYS


def _merge(target: dict, updates: dict) -> None:
    """vLLM's ``_update_nested``: a mapping value recurses into an existing mapping, anything
    else is set."""
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def apply_hf_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``config`` with ``overrides`` applied as vLLM applies ``--hf-overrides``.

    Args:
        config: the parsed config.json (not modified).
        overrides: the ``--hf-overrides`` mapping (JSON object).
    Returns:
        (the new config, the dotted names of the keys that were set, e.g.
        ``["max_position_embeddings", "text_config.max_position_embeddings"]``).
    """
    out = copy.deepcopy(config)
    changed: list[str] = []
    flat = {k: v for k, v in overrides.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in overrides.items() if isinstance(v, dict)}
    for key, value in flat.items():
        out[str(key)] = copy.deepcopy(value)
        changed.append(str(key))
    for key, value in nested.items():
        key = str(key)
        if _is_sub_config(key, out.get(key)):
            _merge(out[key], value)
            changed += [f"{key}.{name}" for name in _leaves(value)]
        else:
            out[key] = copy.deepcopy(value)
            changed.append(key)
    return out, changed


def _leaves(mapping: dict, prefix: str = "") -> list[str]:
    names: list[str] = []
    for k, v in mapping.items():
        if isinstance(v, dict) and v:
            names += _leaves(v, f"{prefix}{k}.")
        else:
            names.append(f"{prefix}{k}")
    return names


def shadowed_flat_keys(config: dict[str, Any], overrides: dict[str, Any]) -> list[str]:
    """Flat override keys that vLLM sets on the outer config of a multimodal model while the
    language model reads the same key from ``text_config`` (so the override changes nothing
    there): e.g. ``max_position_embeddings`` on Gemma 3. Rule source: vLLM
    transformers_utils/config.py get_hf_text_config (the text config is ``text_config``)."""
    tc = config.get("text_config")
    if not isinstance(tc, dict) or not tc:
        return []
    return [str(k) for k, v in overrides.items() if not isinstance(v, dict) and (k in tc or k in _TEXT_MODEL_KEYS)]


# Keys a language model reads from its own (text) config; in a snapshot that keeps only the keys
# that differ from transformers' defaults they may be absent from text_config.
_TEXT_MODEL_KEYS = frozenset({
    "max_position_embeddings", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "hidden_size", "intermediate_size", "sliding_window", "rope_scaling", "rope_parameters", "rope_theta",
    "vocab_size",
})
