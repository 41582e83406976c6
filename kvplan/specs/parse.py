"""Parse a Hugging Face ``config.json`` (a dict) into a ModelSpec, failing closed.

vLLM reads configs through transformers' config classes, which fill defaults and derive fields
(``layer_types`` for Gemma-2/3, Qwen2, gpt-oss; ``sliding_window = None`` when Qwen's
``use_sliding_window`` is false; Llama-4 ``no_rope_layers``; Jamba's attention period). The rules
below restate those (transformers 5.x config classes, as used by vLLM 0.26.0) for the model
families kvplan knows.

Failing closed: every key read from the config goes through ``_Cfg``, which checks its type and
range and raises ``KvplanError`` naming the key as written (``rope_scaling.factor``,
``text_config.num_hidden_layers``) for a missing required key, a wrong type (``"8192"``,
``"abc"``, ``true`` where a number belongs), a value below the key's minimum (0 layers, a rope
factor <= 0) or above kvplan's sanity limit (``_LIMITS``: far above any released model, and low
enough that the per-layer tuples stay small). What kvplan fills in or cannot model (a
transformers default for a key a partial config omits, an architecture or quant_method it has
no rules for) is estimated anyway and said in ``ModelSpec.notes``.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from kvplan.errors import KvplanError
from kvplan.specs.model_spec import (
    AttentionShape,
    GatedDeltaNetShape,
    LayerKind,
    MambaShape,
    MLAShape,
    ModelSpec,
    MoESpec,
    QuantSpec,
)

# architectures[0] for configs that omit it (vLLM resolves these by model_type as well). The keys
# are also the model types kvplan has rules for (see _notes_on_family).
_DEFAULT_ARCH = {
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
}
_KNOWN_ARCHITECTURES = frozenset(_DEFAULT_ARCH.values())

# Quantization methods whose weight layout kvplan models (kvplan/engines/vllm/weights.py). Any
# other quant_method is kept on the spec (so --quantization checks still see it) but its weights
# are sized as unquantized, and a note says so.
MODELLED_QUANT_METHODS = frozenset({"fp8", "awq", "gptq", "compressed-tensors", "mxfp4", "bitsandbytes"})

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

# Model types whose transformers config sets sliding_window = None unless use_sliding_window.
_QWEN_STYLE_SWA = {"qwen2", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_moe", "qwen3_next"}


# Defaults transformers' config classes fill in for keys a config.json may omit (transformers 5.x
# JambaConfig, Gemma3TextConfig, GraniteMoeHybridConfig, LlamaConfig): vLLM sees these values.
_TRANSFORMERS_DEFAULTS: dict[str, dict[str, Any]] = {
    "jamba": {"vocab_size": 65536, "tie_word_embeddings": False, "num_experts": 16, "num_experts_per_tok": 2},
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "tie_word_embeddings": True},
    "gemma3": {"vocab_size": 262208, "max_position_embeddings": 131072, "tie_word_embeddings": True},
    "granitemoehybrid": {"vocab_size": 32000, "max_position_embeddings": 2048},
    "llama": {"vocab_size": 32000, "max_position_embeddings": 2048},
}
_TRANSFORMERS_CLASS = {
    "jamba": "JambaConfig",
    "gemma3_text": "Gemma3TextConfig",
    "gemma3": "Gemma3TextConfig",
    "granitemoehybrid": "GraniteMoeHybridConfig",
    "llama": "LlamaConfig",
    "qwen3_next": "Qwen3NextConfig",
}
# Keys whose published config.json leaves them to the default (Gemma-3's on-disk form is minimal):
# filling them is the normal case, not a sign of a partial config, so no note.
_NORMALLY_OMITTED = {
    "gemma3_text": {"vocab_size", "max_position_embeddings", "tie_word_embeddings"},
    "gemma3": {"vocab_size", "max_position_embeddings", "tie_word_embeddings"},
}
# Keys that shape the KV cache, the recurrent state or the weights of hybrid models; published
# configs give them all, so a config without them is partial and the defaults used are noted.
_HYBRID_KEYS = {
    "jamba": {
        "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
        "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
        "num_experts": 16, "num_experts_per_tok": 2,
    },
    "granitemoehybrid": {
        "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_chunk_size": 256,
        "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
    },
}

# Keys vLLM 0.26.0 reads for the model's position limit (config/model.py _get_and_verify_max_len
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

    def name(self, key: str) -> str:
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


def _check_head_size(head_dim: int, where: str, notes: list[str]) -> None:
    """Note a head_dim that only vLLM's slowest attention backend takes.

    vLLM 0.26.0's CUDA backends (v1/attention/backends): FlashAttention supports_head_size takes
    a multiple of 8 up to 256 (512 with FA4); FlashInfer get_supported_head_sizes is 64, 128,
    256, 512; Triton supports_head_size takes >= 32; FlexAttention (no list: any size) is the
    last fallback. A head_dim none of the first three take (7: not a multiple of 8 and under
    32) leaves FlexAttention, which is far slower, and points at a config typo.
    """
    flash = head_dim % 8 == 0 and head_dim <= 256
    flashinfer = head_dim in (64, 128, 256, 512)
    triton = head_dim >= 32
    if not (flash or flashinfer or triton):
        notes.append(
            f"{where}: head_dim {head_dim} is taken by none of vLLM 0.26.0's FlashAttention (a multiple of 8, "
            "<= 256), FlashInfer (64/128/256/512) or Triton (>= 32) attention backends; only FlexAttention would "
            "run it (much slower). Check head_dim in config.json"
        )


def _vision_params(vc: _Cfg, text_hidden: int) -> int:
    """Approximate parameter count of a ViT-style vision tower plus its projector (SigLIP/CLIP
    shapes: per layer q,k,v,o + biases, fc1/fc2 + biases, two LayerNorms; patch and position
    embeddings; a linear projector to the text hidden size). vLLM loads it with the LM.

    Raises:
        KvplanError: a vision_config size key that is not a sane positive integer."""
    h = vc.int("hidden_size", default=0, minimum=0, maximum=_LIMITS["hidden_size"])
    inter = vc.int("intermediate_size", default=4 * h, minimum=0, maximum=_LIMITS["intermediate_size"])
    layers = vc.int("num_hidden_layers", "depth", default=0, minimum=0, maximum=_LIMITS["num_hidden_layers"])
    patch = vc.int("patch_size", default=14, maximum=1 << 16)
    image = vc.int("image_size", default=224, maximum=1 << 16)
    chans = vc.int("num_channels", default=3, maximum=1 << 10)
    if h <= 0 or layers <= 0:
        return 0
    per_layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    positions = (image // patch) ** 2
    return layers * per_layer + chans * patch * patch * h + h + positions * h + 2 * h + h * text_hidden + text_hidden


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


def _layer_kinds(c: _Cfg, model_type: str, n_layers: int, notes: list[str]) -> tuple[
    tuple[LayerKind, ...], int | None, int | None
]:
    """Per-layer attention kind, the sliding window and the Llama-4 chunk size.

    Rule (vLLM 0.26.0 engine/arg_utils.py + attention.py): a model-wide ``sliding_window`` applies
    to every layer only when ``layer_types`` is absent or uniform; otherwise each layer follows
    its ``layer_types`` entry."""
    where = c.where
    sliding_window = c.int("sliding_window", default=None, minimum=0)
    if model_type in _QWEN_STYLE_SWA and not c.flag("use_sliding_window", False):
        sliding_window = None
    if sliding_window is not None and sliding_window <= 0:
        sliding_window = None  # vLLM: a window of 0 means disabled (config/model.py)
    chunk = c.int("attention_chunk_size", default=None, minimum=0)

    layer_types = c.raw("layer_types")
    types_key = "layer_types"
    if model_type in ("jamba",):
        period = c.int("attn_layer_period", default=8)
        offset = c.int("attn_layer_offset", default=4, minimum=0)
        layer_types = ["full_attention" if i % period == offset else "mamba" for i in range(n_layers)]
    elif model_type == "granitemoehybrid":
        types_key = "layer_types" if c.has("layer_types") else "layers_block_type"
        blocks = c.raw(types_key)
        if not blocks:
            # transformers GraniteMoeHybridConfig.layers_block_type: no layer_types -> all Mamba.
            blocks = ["mamba"] * n_layers
            notes.append(
                f"config.json has no 'layer_types': transformers' GraniteMoeHybridConfig then makes all "
                f"{n_layers} layers Mamba, so no layer keeps a KV cache; the published config.json lists "
                "which layers are attention"
            )
        if not isinstance(blocks, list):
            raise c.error(types_key, f"must be a list of 'attention'/'mamba', got {_show(blocks)}")
        for i, b in enumerate(blocks):
            if b not in ("attention", "mamba"):
                raise KvplanError(f"{where}: config key '{c.name(types_key)}[{i}]' has unknown value {_show(b)}")
        layer_types = ["full_attention" if b == "attention" else "mamba" for b in blocks]
    elif model_type == "qwen3_next" and not layer_types:
        interval = c.int("full_attention_interval", default=4)
        if not c.has("full_attention_interval"):
            notes.append(
                "config.json has neither 'layer_types' nor 'full_attention_interval': transformers' "
                "Qwen3NextConfig default (every 4th layer full attention) used"
            )
        layer_types = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)
        ]
    elif model_type in ("gemma2",) and not layer_types:
        layer_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    elif model_type in ("gemma3", "gemma3_text") and not layer_types:
        pattern = c.int("sliding_window_pattern", default=6)
        layer_types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
        ]
    elif model_type == "gpt_oss" and not layer_types:
        layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
    elif model_type in ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe") and not layer_types:
        max_window_layers = c.int("max_window_layers", default=n_layers, minimum=0)
        layer_types = [
            "sliding_attention" if sliding_window is not None and i >= max_window_layers else "full_attention"
            for i in range(n_layers)
        ]
    elif model_type in ("llama4", "llama4_text"):
        interval = c.int("no_rope_layer_interval", default=4)
        no_rope = c.int_list("no_rope_layers", minimum=0, maximum=1, length=n_layers)
        if not no_rope:
            no_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
        layer_types = [
            "chunked_attention" if (nr and chunk) else "full_attention" for nr in no_rope
        ]

    if layer_types:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            raise KvplanError(
                f"{where}: config key '{c.name(types_key)}' must list one entry per layer ({n_layers}), "
                f"got {len(layer_types) if isinstance(layer_types, list) else type(layer_types).__name__}"
            )
        kinds = []
        for i, t in enumerate(layer_types):
            if t in ("full_attention", "attention", "global", "full"):
                kinds.append(LayerKind.FULL)
            elif t in ("sliding_attention", "local", "sliding"):
                kinds.append(LayerKind.SLIDING)
            elif t in ("chunked_attention",):
                kinds.append(LayerKind.CHUNKED)
            elif t in ("linear_attention",):
                kinds.append(LayerKind.MAMBA if model_type in ("jamba", "granitemoehybrid") else LayerKind.LINEAR)
            elif t == "mamba":
                kinds.append(LayerKind.MAMBA)
            else:
                raise KvplanError(f"{where}: config key '{c.name(types_key)}[{i}]' has unknown value {_show(t)}")
        uniform = len(set(kinds)) == 1
        if uniform and kinds[0] == LayerKind.FULL and sliding_window is not None:
            # Not interleaved: vLLM applies the model-wide window to every layer.
            kinds = [LayerKind.SLIDING] * n_layers
        if LayerKind.SLIDING in kinds and sliding_window is None:
            raise KvplanError(f"{where}: 'layer_types' has sliding layers but 'sliding_window' is missing")
        if LayerKind.CHUNKED in kinds and not chunk:
            raise KvplanError(f"{where}: 'layer_types' has chunked layers but 'attention_chunk_size' is missing")
        return tuple(kinds), sliding_window, chunk

    if sliding_window is not None:
        return (LayerKind.SLIDING,) * n_layers, sliding_window, None
    return (LayerKind.FULL,) * n_layers, None, None


def _rope_params(c: _Cfg) -> _Cfg | None:
    """The rope scaling mapping (``rope_scaling`` or transformers 5's ``rope_parameters``), or None."""
    key = "rope_scaling" if c.raw("rope_scaling") else "rope_parameters"
    rope = c.sub(key)
    if rope is None or not rope.data:
        return None
    return rope


def _rope_factor(rope: _Cfg) -> float:
    """``factor`` of a rope mapping: a finite number > 0 (1.0 when absent)."""
    return float(rope.num("factor", 1.0, gt=0.0, le=_MAX_ROPE_FACTOR))


def _derived_max_model_len(c: _Cfg, model_type: str, notes: list[str]) -> tuple[int, int | None]:
    """vLLM's default max_model_len (config/model.py _get_and_verify_max_len), and the raw
    position limit it starts from.

    Rule (vLLM 0.26.0): the smallest of the present ``_POSITION_KEYS`` (2048 when none is), then
    rope scaling: ``factor`` multiplies it for every rope type but su/longrope/llama3/default
    (YaRN starts from ``original_max_position_embeddings``); longrope uses the top-level
    ``original_max_position_embeddings``.
    Raises:
        KvplanError: a position key that is not an integer >= 1 (e.g. "8192", 0, -1); a rope
            factor that is not a number > 0; a derived length above 2**32.
    """
    found = [c.int(k) for k in _POSITION_KEYS if c.has(k)]
    base = min(found) if found else None
    if base is None:
        notes.append(
            "config.json gives no 'max_position_embeddings' (nor n_positions, max_seq_len, seq_length, ...): "
            "vLLM 0.26.0 then assumes a limit of 2048 tokens"
        )
    derived = float(base) if base is not None else 2048.0
    rope = _rope_params(c)
    if rope is not None:
        params = rope if (rope.has("rope_type") or rope.has("type") or "factor" in rope.data) else None
        if params is not None:
            rope_type = params.raw("rope_type") or params.raw("type") or "default"
            factor = _rope_factor(params)
            if "gemma3" not in model_type and rope_type not in ("su", "longrope", "llama3", "default"):
                if rope_type == "yarn" and params.has("original_max_position_embeddings"):
                    derived = float(params.int("original_max_position_embeddings"))
                derived *= factor
            if "gemma3" not in model_type and rope_type == "longrope" and c.has("original_max_position_embeddings"):
                return c.int("original_max_position_embeddings"), base
    if derived > _MAX_POSITIONS:
        raise KvplanError(
            f"{c.where}: config key '{rope.name('factor')}' scales the position limit to {derived:,.0f} "
            f"tokens, above kvplan's limit of {_MAX_POSITIONS:,}"
        )
    return int(derived), base


def _quantization(c: _Cfg, notes: list[str]) -> QuantSpec | None:
    """The checkpoint's quantization from ``quantization_config`` (or ModelOpt's
    hf_quant_config.json, stored as ``_hf_quant_config``). Rule source: vLLM 0.26.0
    model_executor/layers/quantization/*.py get_config / from_config (key names and defaults)."""
    q = c.sub("quantization_config")
    mo = c.sub("_hf_quant_config")
    if (q is None or not q.data) and mo is not None:
        # ModelOpt checkpoints describe quantization in hf_quant_config.json (vLLM 0.26.0
        # transformers_utils/config.py reads it next to config.json).
        qd = mo.sub("quantization")
        algo = (qd.text("quant_algo", "") if qd is not None else "").upper()
        if algo == "FP8":
            return QuantSpec(
                method="fp8",
                bits=8,
                kv_cache_fp8=(qd.text("kv_cache_quant_algo", "") or "").upper() == "FP8",
                modules_to_not_convert=qd.str_list("exclude_modules"),
                vllm_name="modelopt",
            )
        if algo:
            method = f"modelopt_{algo.lower()}"
            notes.append(_unknown_quant_note(method, "hf_quant_config.json quant_algo"))
            return QuantSpec(method=method, bits=4 if "FP4" in algo else 8)
    if q is None or not q.data:
        return None
    method_key = "quant_method" if q.has("quant_method") else "quant_type"
    method = (q.text(method_key, "") or "").lower()
    if not method:
        raise KvplanError(f"{c.where}: config key 'quantization_config.quant_method' is missing")
    skip = q.str_list("modules_to_not_convert", "ignored_layers", "ignore")
    if method == "fp8":
        block = q.int_list("weight_block_size", minimum=1)
        if block is not None and len(block) != 2:
            raise q.error("weight_block_size", f"must be [rows, columns], got {_show(block)}")
        return QuantSpec(
            method="fp8",
            bits=8,
            block_size=tuple(block) if block else None,
            modules_to_not_convert=skip,
        )
    if method in ("awq", "gptq"):
        bits_key = "bits" if q.has("bits") or not q.has("w_bit") else "w_bit"
        group_key = "group_size" if q.has("group_size") or not q.has("q_group_size") else "q_group_size"
        return QuantSpec(
            method=method,
            bits=q.int(bits_key, default=4),
            group_size=q.int(group_key, default=128, minimum=-1),
            desc_act=q.flag("desc_act", False),
            zero_point=q.flag("zero_point", True) if method == "awq" else not q.flag("sym", True),
            modules_to_not_convert=skip,
        )
    if method == "mxfp4":
        return QuantSpec(method="mxfp4", bits=4, group_size=32, modules_to_not_convert=skip)
    if method == "bitsandbytes":
        bits = 4 if q.flag("load_in_4bit", False) else 8
        return QuantSpec(method="bitsandbytes", bits=bits, group_size=64, modules_to_not_convert=skip)
    if method == "compressed-tensors":
        groups = q.sub("config_groups")
        bits, group_size, strategy_fp8 = 8, -1, False
        for name in (groups.data if groups is not None else {}):
            group = groups.sub(name)
            w = group.sub("weights") if group is not None else None
            if w is not None:
                bits = w.int("num_bits", default=bits)
                group_size = w.int("group_size", default=group_size, minimum=-1)
                strategy_fp8 = w.raw("type") == "float"
            break
        return QuantSpec(
            method="compressed-tensors",
            bits=bits,
            group_size=group_size,
            zero_point=not strategy_fp8,
            kv_cache_fp8=bool(q.raw("kv_cache_scheme")),
            modules_to_not_convert=skip,
        )
    notes.append(_unknown_quant_note(method, "quantization_config.quant_method"))
    return QuantSpec(method=method, bits=q.int("bits", default=16), modules_to_not_convert=skip)


def _unknown_quant_note(method: str, key: str) -> str:
    """The note for a quantization method kvplan has no weight rule for. vLLM 0.26.0
    config/model.py _verify_quantization raises "Unknown quantization method" for a method not in
    its registry; a registered one kvplan does not model (hqq, gguf, modelopt_fp4, ...) starts."""
    return (
        f"{key} {method!r} is not a method kvplan models ({', '.join(sorted(MODELLED_QUANT_METHODS))}): its weights "
        "are sized as unquantized, which over-states them if it packs weights; vLLM 0.26.0 refuses to start "
        "with a method it does not register"
    )


def _moe(c: _Cfg, model_type: str, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
    if model_type == "mixtral":
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, (True,) * n_layers
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        e = c.int("num_experts")
        step = c.int("decoder_sparse_step", default=1, minimum=0) or 1
        mlp_only = set(c.int_list("mlp_only_layers", minimum=0) or [])
        layers = tuple((i not in mlp_only) and e > 0 and (i + 1) % step == 0 for i in range(n_layers))
        shared = c.int("shared_expert_intermediate_size", default=0, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("moe_intermediate_size"),
            shared_intermediate_size=shared,
            shared_expert_gate=shared > 0,
        )
        return spec, layers
    if model_type in ("deepseek_v2", "deepseek_v3"):
        e = c.int("n_routed_experts", default=0, minimum=0)
        if not e:
            return None, (False,) * n_layers
        first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
        freq = c.int("moe_layer_freq", default=1, minimum=0) or 1
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
        moe_inter = c.int("moe_intermediate_size")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=moe_inter,
            shared_intermediate_size=c.int("n_shared_experts", default=0, minimum=0) * moe_inter,
            router_bias=c.raw("topk_method") == "noaux_tc",
        )
        return spec, layers
    if model_type == "gpt_oss":
        e = c.int("num_local_experts")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", "experts_per_token", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            router_bias=True,
            expert_bias=True,
        )
        return spec, (True,) * n_layers
    if model_type == "jamba":
        e = c.int("num_experts", default=16)
        period = c.int("expert_layer_period", default=2)
        offset = c.int("expert_layer_offset", default=1, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=2, maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, tuple(e > 1 and i % period == offset for i in range(n_layers))
    if model_type == "granitemoehybrid":
        # An explicit null means no experts (a dense Granite-4.0-H); absent means the class default 8.
        e = 0 if "num_local_experts" in c.data and c.data["num_local_experts"] is None else c.int(
            "num_local_experts", default=8, minimum=0
        )
        if e <= 0:
            return None, (False,) * n_layers
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=2, maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            shared_intermediate_size=0 if "shared_intermediate_size" in c.data and c.data["shared_intermediate_size"] is None
            else c.int("shared_intermediate_size", default=1024, minimum=0),
        )
        return spec, (True,) * n_layers
    if model_type in ("llama4", "llama4_text"):
        e = c.int("num_local_experts")
        step = c.int("interleave_moe_layer_step", default=1, minimum=0) or 1
        moe_layers = c.int_list("moe_layers", minimum=0)
        if moe_layers is None:
            moe_layers = list(range(step - 1, n_layers, step))
        moe_set = set(moe_layers)
        inter = c.int("intermediate_size")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=inter,
        )
        return spec, tuple(i in moe_set for i in range(n_layers))
    return None, (False,) * n_layers


def _mamba(c: _Cfg, model_type: str, hidden: int) -> MambaShape | None:
    if model_type == "jamba":
        expand = c.int("mamba_expand", default=2)
        dt_rank = c.raw("mamba_dt_rank", "auto")
        dt_rank = math.ceil(hidden / 16) if dt_rank == "auto" else c.int("mamba_dt_rank")
        return MambaShape(
            version=1,
            intermediate_size=expand * hidden,
            state_size=c.int("mamba_d_state", default=16),
            conv_kernel=c.int("mamba_d_conv", default=4),
            dt_rank=dt_rank,
            use_conv_bias=c.flag("mamba_conv_bias", True),
            use_bias=c.flag("mamba_proj_bias", False),
        )
    if model_type == "granitemoehybrid":
        expand = c.int("mamba_expand", default=2)
        n_mheads = c.int("mamba_n_heads", default=128)
        d_head = c.raw("mamba_d_head", "auto")
        d_head = expand * hidden // n_mheads if d_head == "auto" else c.int("mamba_d_head")
        if d_head <= 0:
            raise c.error("mamba_n_heads", f"({n_mheads}) leaves no room for a head in mamba_expand x hidden_size ({expand * hidden})")
        return MambaShape(
            version=2,
            intermediate_size=expand * hidden,
            state_size=c.int("mamba_d_state", default=256),
            conv_kernel=c.int("mamba_d_conv", default=4),
            n_groups=c.int("mamba_n_groups", default=1),
            num_heads=n_mheads,
            head_dim=d_head,
            chunk_size=c.int("mamba_chunk_size", default=256),
            use_conv_bias=c.flag("mamba_conv_bias", True),
            use_bias=c.flag("mamba_proj_bias", False),
        )
    return None


def _notes_on_defaults(c: _Cfg, model_type: str, filled: list[str], notes: list[str]) -> None:
    """Notes for keys a partial config omits and kvplan fills with transformers' defaults."""
    cls = _TRANSFORMERS_CLASS.get(model_type, "PretrainedConfig")
    shown = [k for k in filled if k not in _NORMALLY_OMITTED.get(model_type, set())]
    shown += [k for k in _HYBRID_KEYS.get(model_type, {}) if not c.has(k) and k not in filled]
    if not shown:
        return
    defaults = {**_HYBRID_KEYS.get(model_type, {}), **_TRANSFORMERS_DEFAULTS.get(model_type, {})}
    listed = ", ".join(f"{k}={defaults[k]!r}" for k in shown)
    notes.append(
        f"config.json lacks {len(shown)} key{'s' if len(shown) != 1 else ''} the published config gives; "
        f"transformers' {cls} defaults used (as vLLM would): {listed}"
    )


def _notes_on_family(architecture: str, model_type: str, c: _Cfg, notes: list[str]) -> None:
    """Notes when kvplan has no rules for the model type or the architecture (estimated anyway)."""
    if model_type not in _DEFAULT_ARCH:
        moe_keys = [k for k in ("num_experts", "num_local_experts", "n_routed_experts") if c.has(k)]
        extra = f"; its expert keys ({', '.join(moe_keys)}) are not read" if moe_keys else ""
        notes.append(
            f"model_type {model_type!r} ({architecture}) has no kvplan rules: sized as a standard decoder "
            f"from the generic keys (full attention unless layer_types/sliding_window say otherwise, dense "
            f"MLP){extra}; KV cache and weights may differ from what vLLM 0.26.0 builds"
        )
    elif architecture not in _KNOWN_ARCHITECTURES:
        notes.append(
            f"architecture {architecture!r} is not one kvplan has rules for: sized with the {model_type!r} "
            "rules; vLLM 0.26.0 may build it differently (or not serve it as a generative model)"
        )


def _no_architectures_note(config: dict, assumed: str) -> str:
    """The note for a config.json with no (or an empty) ``architectures`` list.

    vLLM 0.26.0 then resolves the model as a pooling (embedding) model: the device log
    tests/data/logs/device-h200-2026-11-29/p-jamba-8L.log shows "Resolved pooling config ...
    supported_tasks=('embed', 'token_embed')" for a Jamba config without the key, a start with no
    sampler warm-up (see that folder's README.md)."""
    given = "an empty 'architectures' list" if "architectures" in config else "no 'architectures' key"
    return (
        f"config.json has {given}: kvplan sized it as a generative {assumed} (from model_type), but "
        "vLLM 0.26.0 would load it as a pooling (embedding) model, with no sampler warm-up and a "
        f'different start-up; add "architectures": ["{assumed}"] to config.json for the generative '
        "start kvplan sized"
    )


def parse_config(config: dict[str, Any], name: str = "model", *, snapshot: bool = False) -> ModelSpec:
    """Build a ModelSpec from a config.json dict.

    Args:
        config: the parsed config.json.
        name: a label for messages (repo id or path).
        snapshot: ``config`` is a bundled snapshot of a published config (model_specs/), which
            may leave out ``architectures`` although the published config gives it; no note is
            added for the missing key then.
    Returns:
        the ModelSpec (whole-model shapes, before tensor parallelism); ``notes`` says what was
        filled with a default or cannot be modelled (a partial config, an unknown architecture or
        quant_method).
    Raises:
        KvplanError: a required key is missing, or a key has the wrong type or an out-of-range
            value (0 layers, a position limit of "8192" or -1, a rope factor <= 0, 10**12 layers);
            the one-line message names the key.
    Rule source: transformers 5.x config classes and vLLM 0.26.0 config/model.py, per family
    (see the helpers).
    """
    if not isinstance(config, dict):
        raise KvplanError(f"{name}: config.json must be a JSON object, got {type(config).__name__}")
    where = name
    notes: list[str] = []
    top = _Cfg(config, where)
    c = _text_cfg(config, where)
    top_type = top.text("model_type", "") or ""
    model_type = c.text("model_type", "") or top_type
    filled: list[str] = []
    for key, value in _TRANSFORMERS_DEFAULTS.get(model_type, {}).items():
        if c.data.get(key) is None:
            c.data = {**c.data, key: value}
            filled.append(key)
    if not model_type:
        raise KvplanError(f"{where}: config.json is missing required key 'model_type'")
    archs = config.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise KvplanError(f"{where}: config key 'architectures' must be a list of class names, got {_show(archs)}")
    architecture = archs[0] if archs else _DEFAULT_ARCH.get(top_type or model_type, "")
    if not architecture:
        raise KvplanError(f"{where}: config.json is missing required key 'architectures'")
    if not archs and not snapshot:
        notes.append(_no_architectures_note(config, architecture))

    hidden = c.int("hidden_size", "d_model", "n_embd")
    n_layers = c.int("num_hidden_layers", "num_layers", "n_layer")
    n_heads = c.int("num_attention_heads", "n_head", "num_heads")
    vocab = c.int("vocab_size")
    kv_heads = c.int("num_key_value_heads", default=n_heads)
    if n_heads % kv_heads:
        raise KvplanError(
            f"{where}: num_attention_heads ({n_heads}) is not a multiple of num_key_value_heads ({kv_heads})"
        )
    head_dim = c.int("head_dim", default=None)
    if head_dim is None:
        if hidden % n_heads:
            raise KvplanError(f"{where}: hidden_size ({hidden}) is not divisible by num_attention_heads ({n_heads}); "
                              "config.json needs 'head_dim'")
        head_dim = hidden // n_heads

    if model_type in ("llama4", "llama4_text") and c.has("intermediate_size_mlp"):
        intermediate = c.int("intermediate_size_mlp", minimum=0, maximum=_LIMITS["intermediate_size"])
    else:
        intermediate = c.int("intermediate_size", "ffn_dim", "n_inner", default=None, minimum=0)
        if intermediate is None:
            intermediate = 4 * hidden

    kinds, sliding_window, chunk = _layer_kinds(c, model_type, n_layers, notes)
    moe, moe_layers = _moe(c, model_type, n_layers)
    if intermediate == 0 and moe is None:
        # every decoder layer has a dense MLP of this width: 0 is no model (a MoE config may
        # leave the unused dense width at 0)
        key = next((k for k in ("intermediate_size", "ffn_dim", "n_inner", "intermediate_size_mlp") if c.has(k)), "intermediate_size")
        raise c.error(key, "must be >= 1 for a model with dense MLP layers, got 0")
    _check_head_size(head_dim, where, notes)

    mla = None
    if model_type in ("deepseek_v2", "deepseek_v3") and c.raw("kv_lora_rank"):
        mla = MLAShape(
            kv_lora_rank=c.int("kv_lora_rank"),
            qk_rope_head_dim=c.int("qk_rope_head_dim", minimum=0),
            qk_nope_head_dim=c.int("qk_nope_head_dim", minimum=0),
            v_head_dim=c.int("v_head_dim"),
            q_lora_rank=c.int("q_lora_rank", default=None, minimum=0),
        )
        kinds = tuple(LayerKind.MLA if k == LayerKind.FULL else k for k in kinds)

    gdn = None
    if model_type == "qwen3_next":
        gdn = GatedDeltaNetShape(
            num_k_heads=c.int("linear_num_key_heads"),
            num_v_heads=c.int("linear_num_value_heads"),
            head_k_dim=c.int("linear_key_head_dim"),
            head_v_dim=c.int("linear_value_head_dim"),
            conv_kernel=c.int("linear_conv_kernel_dim"),
        )

    mamba = _mamba(c, model_type, hidden)

    head_dim_v = head_dim
    if mla is not None:
        head_dim_v = mla.v_head_dim

    derived, base_positions = _derived_max_model_len(c, model_type, notes)
    rope_rows = base_positions
    rope = _rope_params(c)
    if rope is not None and base_positions:
        rt = rope.raw("rope_type") or rope.raw("type")
        if rt in ("yarn", "deepseek_yarn") and rope.has("original_max_position_embeddings"):
            rope_rows = int(rope.int("original_max_position_embeddings") * _rope_factor(rope))
        elif rt == "dynamic":
            rope_rows = int(base_positions * _rope_factor(rope))

    partial = c.num("partial_rotary_factor", None, gt=0.0, le=1.0)
    if mla is not None:
        rotary_dim = mla.qk_rope_head_dim
    elif partial:
        rotary_dim = int(head_dim * float(partial))
    else:
        rotary_dim = head_dim

    qk_norm = model_type in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text") or (
        c.flag("use_qk_norm", False) and model_type not in ("llama4", "llama4_text")
    )
    norms = 2
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        norms = 4
    gated = model_type not in ("opt",)
    learned_positions = 0
    if model_type == "opt":
        learned_positions = c.int("max_position_embeddings", default=2048) + 2

    quant = _quantization(c, notes)

    if c.has("tie_word_embeddings"):
        tie = c.flag("tie_word_embeddings")
    elif top.has("tie_word_embeddings"):
        tie = top.flag("tie_word_embeddings")
    else:
        # transformers' PretrainedConfig default is True; many families override it to False.
        tie = model_type in ("gemma", "gemma2", "gemma3", "gemma3_text", "opt", "granitemoehybrid")

    vc = top.sub("vision_config")
    vision_params = _vision_params(vc, hidden) if vc is not None else 0
    softcap = c.num("final_logit_softcapping", None, ge=0.0)
    attention_bias = c.flag("attention_bias", False)

    _notes_on_defaults(c, model_type, filled, notes)
    _notes_on_family(architecture, model_type, c, notes)

    try:
        return ModelSpec(
            name=name,
            architecture=architecture,
            model_type=model_type,
            hidden_size=hidden,
            intermediate_size=intermediate,
            vocab_size=vocab,
            num_hidden_layers=n_layers,
            attention=AttentionShape(
                num_attention_heads=n_heads,
                num_key_value_heads=kv_heads,
                head_dim=head_dim,
                head_dim_v=head_dim_v,
            ),
            layer_kinds=kinds,
            sliding_window=sliding_window if LayerKind.SLIDING in kinds else None,
            attention_chunk_size=chunk if LayerKind.CHUNKED in kinds else None,
            mla=mla,
            gdn=gdn,
            mamba=mamba,
            moe=moe,
            moe_layers=moe_layers,
            dtype=_dtype_of(c.data, config, where),
            quantization=quant,
            tie_word_embeddings=bool(tie),
            max_position_embeddings=base_positions,
            derived_max_model_len=derived,
            rope_max_position=rope_rows if learned_positions == 0 else None,
            rope_caches=2 if model_type in ("gemma3", "gemma3_text") else 1,
            rotary_dim=rotary_dim if learned_positions == 0 else None,
            attention_sinks=model_type == "gpt_oss",
            logit_softcapping=bool(softcap),
            qkv_bias=attention_bias or model_type in ("qwen2", "qwen2_moe", "opt", "gpt_oss"),
            o_bias=model_type in ("opt", "gpt_oss") or (attention_bias and model_type not in ("qwen3", "qwen3_moe")),
            mlp_bias=c.flag("mlp_bias", False) or model_type == "opt",
            qk_norm=qk_norm,
            norms_per_layer=norms,
            gated_mlp=gated,
            learned_positions=learned_positions,
            is_multimodal=vc is not None,
            vision_params=vision_params,
            notes=tuple(notes),
        )
    except ValidationError as exc:  # a combination the per-key checks let through: still one line
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise KvplanError(f"{where}: config.json gives an invalid {loc} ({err['msg']})") from None
