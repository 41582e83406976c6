"""Guarded reads of a Hugging Face ``config.json``: typed, bounded, naming the key as written.

Every key kvplan reads from a config goes through ``_Cfg``, which checks its type and range and
raises ``KvplanError`` naming the key as written (``rope_scaling.factor``,
``text_config.num_hidden_layers``) for a missing required key, a wrong type (``"8192"``,
``"abc"``, ``true`` where a number belongs), a value below the key's minimum (0 layers, a rope
factor <= 0) or above kvplan's sanity limit (``_LIMITS``: far above any released model, and low
enough that the per-layer tuples stay small). Also here: which part of a multimodal config is the
language model (``text_config_of``) and the checkpoint dtype.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import KvplanError

_DTYPES = {
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}

# Keys vLLM reads for the model's position limit (vLLM config/model.py _get_and_verify_max_len
# possible_keys); the smallest present one wins.
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)

# Largest value kvplan accepts per count/size key (the largest released value in brackets, from
# model_specs/ and public configs). A larger one is a typo or a hostile file: before these limits,
# num_hidden_layers = 10**7 took 110 s and 3.1 GB building per-layer tuples, 10**12 a MemoryError.
_MAX_POSITIONS = 1 << 32  # 4.3e9 tokens (Llama-4 Scout: 10,485,760)
_LIMITS: dict[str, int] = {
    "num_hidden_layers": 4096,  # (126: Llama-3.1-405B)
    "hidden_size": 1 << 18,  # (16,384: Llama-3.1-405B)
    "intermediate_size": 1 << 21,  # (53,248: Llama-3.1-405B)
    "moe_intermediate_size": 1 << 21,
    "shared_expert_intermediate_size": 1 << 21,
    "shared_intermediate_size": 1 << 21,
    "vocab_size": 1 << 24,  # (262,208: Gemma-3)
    "num_attention_heads": 1 << 14,  # (128: DeepSeek-V3, Llama-3.1-405B)
    "num_key_value_heads": 1 << 14,
    "head_dim": 1 << 14,  # (256: Gemma-2/3, Qwen3-Next)
    "num_local_experts": 1 << 16,  # (512: Qwen3-Next)
    "num_experts": 1 << 16,
    "n_routed_experts": 1 << 16,
    "num_experts_per_tok": 1 << 16,
    "bits": 64,
    "mamba_expand": 64,
    "mamba_d_conv": 1024,
    "linear_conv_kernel_dim": 1024,
    **{k: _MAX_POSITIONS for k in _POSITION_KEYS},
    "original_max_position_embeddings": _MAX_POSITIONS,
    "sliding_window": _MAX_POSITIONS,
    "attention_chunk_size": _MAX_POSITIONS,
    "max_window_layers": _MAX_POSITIONS,
}
_DEFAULT_LIMIT = 1 << 24  # any other count or size (ranks, state sizes, periods, group sizes)
_MAX_LIST = 1 << 16  # entries of a per-layer list (mlp_only_layers, moe_layers, no_rope_layers)
_MAX_ROPE_FACTOR = 1e6  # (64: DeepSeek YaRN); the derived length is bounded by _MAX_POSITIONS too

_REQUIRED = object()


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Cfg:
    """Typed, bounded reads of one config mapping.

    Messages name the key as the file spells it: ``prefix`` + key (``text_config.hidden_size``,
    ``rope_scaling.factor``), except ``top_keys`` that text_config_of copied from the top level.
    Every read raises KvplanError (exit 2) for a wrong type or range; none returns garbage.
    """

    def __init__(self, data: dict[str, Any], where: str, prefix: str = "", top_keys: frozenset[str] = frozenset()):
        self.data = data
        self.where = where
        self.prefix = prefix
        self.top_keys = top_keys
        self.aliases: dict[str, str] = {}  # standard key -> the key as written (Family.attribute_map)

    def name(self, key: str) -> str:
        key = self.aliases.get(key, key)
        return key if key in self.top_keys else self.prefix + key

    def error(self, key: str, what: str) -> KvplanError:
        return KvplanError(f"{self.where}: config key '{self.name(key)}' {what}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def _first(self, keys: tuple[str, ...]) -> tuple[str, Any]:
        for k in keys:
            if self.data.get(k) is not None:
                return k, self.data[k]
        return keys[0], None

    def check_int(self, key: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
        """``value`` (read from ``key``) as an int in [minimum, limit].

        A float is refused even when integral (``32.0``): transformers keeps the JSON number a
        float, and vLLM builds layer lists and tensor shapes from these keys (``range(32.0)``,
        ``torch.empty(4096.0, ...)`` raise TypeError), so such a config does not load."""
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            raise self.error(
                key, f"must be an integer, got {_show(value)} (a JSON float: vLLM builds layers and tensor shapes from it and fails; write {int(value)})"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and (not math.isfinite(value) or value != int(value))
        ):
            raise self.error(key, f"must be an integer, got {_show(value)}")
        value = int(value)
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        limit = maximum if maximum is not None else _LIMITS.get(key, _DEFAULT_LIMIT)
        if value > limit:
            raise self.error(key, f"is {value:,}, above kvplan's limit of {limit:,} (no released model comes close)")
        return value

    def int(self, key: str, *alts: str, default: Any = _REQUIRED, minimum: int = 1, maximum: int | None = None) -> Any:
        """An integer key (or the first present of ``alts``); ``default`` when absent/null."""
        found, value = self._first((key, *alts))
        if value is None:
            if default is _REQUIRED:
                names = " / ".join(self.name(k) for k in (key, *alts))
                raise KvplanError(f"{self.where}: config.json is missing required key '{names}'")
            return default
        return self.check_int(found, value, minimum, maximum)

    def num(self, key: str, default: Any = None, *, gt: float | None = None, ge: float | None = None,
            le: float | None = None) -> Any:
        """A finite real number key within the bounds; ``default`` when absent/null."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a number, got {_show(value)}")
        if gt is not None and not value > gt:
            raise self.error(key, f"must be > {gt:g}, got {value:g}")
        if ge is not None and not value >= ge:
            raise self.error(key, f"must be >= {ge:g}, got {value:g}")
        if le is not None and not value <= le:
            raise self.error(key, f"must be <= {le:g}, got {value:g}")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        """A boolean key (true/false, or 0/1); ``default`` when absent/null."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise self.error(key, f"must be true or false, got {_show(value)}")

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {_show(value)}")
        return value

    def int_list(self, key: str, *, minimum: int = 0, maximum: int | None = None, length: int | None = None) -> list[int] | None:
        """A list of integers (None when absent/null); ``length``, when given, applies to a
        non-empty list. Lists here are per layer (or shorter), so at most _MAX_LIST entries."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(key, f"must be a list of integers, got {_show(value)}")
        if len(value) > _MAX_LIST:
            raise self.error(key, f"has {len(value):,} entries, above kvplan's limit of {_MAX_LIST:,}")
        if length is not None and value and len(value) != length:
            raise self.error(key, f"must list one entry per layer ({length}), got {len(value)}")
        out = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int):
                raise self.error(key, f"must be a list of integers, got an entry {_show(item)}")
            out.append(self.check_int(key, item, minimum, maximum))
        return out

    def str_list(self, *keys: str) -> tuple[str, ...]:
        """The first non-empty of ``keys`` as a tuple of strings (() when all are absent/empty)."""
        found, value = next(((k, self.data[k]) for k in keys if self.data.get(k)), (keys[0], None))
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(found, f"must be a list of module names, got {_show(value)}")
        return tuple(value)

    def sub(self, key: str) -> "_Cfg | None":
        """A nested mapping as its own _Cfg (messages say ``key.child``); None when absent/null."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, got {_show(value)}")
        return _Cfg(value, self.where, self.name(key) + ".")



def text_config_of(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config: ``text_config`` (multimodal) or the config itself.

    Keys absent from ``text_config`` fall back to the top level (as transformers'
    ``get_text_config`` consumers do for dtype and quantization)."""
    tc = config.get("text_config")
    if isinstance(tc, dict) and tc:
        merged = dict(tc)
        for key in _TOP_LEVEL_FALLBACK:
            if key not in merged and key in config:
                merged[key] = config[key]
        return merged
    if "llm_config" in config and isinstance(config["llm_config"], dict):
        return config["llm_config"]
    return config


_TOP_LEVEL_FALLBACK = ("torch_dtype", "dtype", "quantization_config", "_hf_quant_config", "tie_word_embeddings")


def _text_cfg(config: dict[str, Any], where: str) -> _Cfg:
    """text_config_of as a _Cfg whose messages name ``text_config.`` / ``llm_config.`` keys."""
    tc = config.get("text_config")
    if tc is not None and not isinstance(tc, dict):
        raise KvplanError(f"{where}: config key 'text_config' must be a mapping, got {_show(tc)}")
    if isinstance(tc, dict) and tc:
        copied = frozenset(k for k in _TOP_LEVEL_FALLBACK if k not in tc and k in config)
        return _Cfg(text_config_of(config), where, "text_config.", copied)
    if "llm_config" in config and isinstance(config["llm_config"], dict):
        return _Cfg(config["llm_config"], where, "llm_config.")
    return _Cfg(config, where)


def _dtype_of(cfg: dict[str, Any], top: dict[str, Any], where: str = "config.json") -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype") or top.get("dtype")
    if raw is None:
        # vLLM treats a missing dtype as float32, which `--dtype auto` then runs as bfloat16.
        return "float32"
    key = str(raw).replace("torch.", "").lower()
    if key not in _DTYPES:
        raise KvplanError(
            f"{where}: config key 'torch_dtype' has an unsupported value {_show(raw)}",
            hint="vLLM reads float32, float16 or bfloat16 here",
        )
    return _DTYPES[key]
