"""Parse a Hugging Face ``config.json`` (a dict) into a ModelSpec, failing closed.

vLLM reads configs through transformers' config classes, which fill defaults and derive fields
(``layer_types`` for Gemma-2/3, Qwen2, gpt-oss; ``sliding_window = None`` when Qwen's
``use_sliding_window`` is false; Llama-4 ``no_rope_layers``; Jamba's attention period). The rules
below restate those (transformers 5.x config classes, as used by vLLM 0.26.0) for the model
families kvplan knows. A key that is required and missing raises ``KvplanError`` naming the key
(exit 2) rather than being guessed.
"""

from __future__ import annotations

import math
from typing import Any

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

# architectures[0] for configs that omit it (vLLM resolves these by model_type as well).
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


def _vision_params(vc: dict[str, Any], text_hidden: int) -> int:
    """Approximate parameter count of a ViT-style vision tower plus its projector (SigLIP/CLIP
    shapes: per layer q,k,v,o + biases, fc1/fc2 + biases, two LayerNorms; patch and position
    embeddings; a linear projector to the text hidden size). vLLM loads it with the LM."""
    try:
        h = int(vc.get("hidden_size") or 0)
        inter = int(vc.get("intermediate_size") or 4 * h)
        layers = int(vc.get("num_hidden_layers") or vc.get("depth") or 0)
        patch = int(vc.get("patch_size") or 14)
        image = int(vc.get("image_size") or 224)
        chans = int(vc.get("num_channels") or 3)
    except (TypeError, ValueError):
        return 0
    if h <= 0 or layers <= 0:
        return 0
    per_layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    positions = (image // patch) ** 2
    return layers * per_layer + chans * patch * patch * h + h + positions * h + 2 * h + h * text_hidden + text_hidden


def _need(cfg: dict[str, Any], key: str, where: str, *alts: str) -> Any:
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    names = " / ".join((key, *alts))
    raise KvplanError(f"{where}: config.json is missing required key '{names}'")


def _int(cfg: dict[str, Any], key: str, where: str, *alts: str, minimum: int = 1) -> int:
    value = _need(cfg, key, where, *alts)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
        isinstance(value, float) and (not math.isfinite(value) or value != int(value))
    ):
        raise KvplanError(f"{where}: config key '{key}' must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise KvplanError(f"{where}: config key '{key}' must be >= {minimum}, got {value}")
    return value


def _opt_int(cfg: dict[str, Any], key: str, where: str, default: int | None = None) -> int | None:
    if cfg.get(key) is None:
        return default
    return _int(cfg, key, where, minimum=0)


def text_config_of(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config: ``text_config`` (multimodal) or the config itself.

    Keys absent from ``text_config`` fall back to the top level (as transformers'
    ``get_text_config`` consumers do for dtype and quantization)."""
    tc = config.get("text_config")
    if isinstance(tc, dict) and tc:
        merged = dict(tc)
        for key in ("torch_dtype", "dtype", "quantization_config", "_hf_quant_config", "tie_word_embeddings"):
            if key not in merged and key in config:
                merged[key] = config[key]
        return merged
    if "llm_config" in config and isinstance(config["llm_config"], dict):
        return config["llm_config"]
    return config


def _dtype_of(cfg: dict[str, Any], top: dict[str, Any]) -> str:
    raw = cfg.get("torch_dtype") or cfg.get("dtype") or top.get("torch_dtype") or top.get("dtype")
    if raw is None:
        # vLLM treats a missing dtype as float32, which `--dtype auto` then runs as bfloat16.
        return "float32"
    key = str(raw).replace("torch.", "").lower()
    if key not in _DTYPES:
        raise KvplanError(f"config key 'torch_dtype' has an unsupported value {raw!r}")
    return _DTYPES[key]


def _layer_kinds(cfg: dict[str, Any], model_type: str, n_layers: int, where: str) -> tuple[
    tuple[LayerKind, ...], int | None, int | None
]:
    """Per-layer attention kind, the sliding window and the Llama-4 chunk size.

    Rule (vLLM 0.26.0 engine/arg_utils.py + attention.py): a model-wide ``sliding_window`` applies
    to every layer only when ``layer_types`` is absent or uniform; otherwise each layer follows
    its ``layer_types`` entry."""
    sliding_window = cfg.get("sliding_window")
    if model_type in _QWEN_STYLE_SWA and not cfg.get("use_sliding_window", False):
        sliding_window = None
    if sliding_window is not None:
        if isinstance(sliding_window, bool) or not isinstance(sliding_window, int):
            raise KvplanError(f"{where}: config key 'sliding_window' must be an integer, got {sliding_window!r}")
        if sliding_window <= 0:
            sliding_window = None  # vLLM: a window of 0 means disabled (config/model.py)
    chunk = cfg.get("attention_chunk_size")

    layer_types = cfg.get("layer_types")
    if model_type in ("jamba",):
        period = int(cfg.get("attn_layer_period", 8))
        offset = int(cfg.get("attn_layer_offset", 4))
        layer_types = ["full_attention" if i % period == offset else "mamba" for i in range(n_layers)]
    elif model_type == "granitemoehybrid":
        blocks = cfg.get("layer_types") or cfg.get("layers_block_type")
        if not blocks:
            blocks = ["mamba"] * n_layers
        layer_types = ["full_attention" if b == "attention" else "mamba" for b in blocks]
    elif model_type == "qwen3_next" and not layer_types:
        interval = int(cfg.get("full_attention_interval", 4))
        layer_types = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)
        ]
    elif model_type in ("gemma2",) and not layer_types:
        layer_types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    elif model_type in ("gemma3", "gemma3_text") and not layer_types:
        pattern = int(cfg.get("sliding_window_pattern", 6))
        layer_types = [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)
        ]
    elif model_type == "gpt_oss" and not layer_types:
        layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
    elif model_type in ("qwen2", "qwen3", "qwen3_moe", "qwen2_moe") and not layer_types:
        max_window_layers = int(cfg.get("max_window_layers", n_layers))
        layer_types = [
            "sliding_attention" if sliding_window is not None and i >= max_window_layers else "full_attention"
            for i in range(n_layers)
        ]
    elif model_type in ("llama4", "llama4_text"):
        interval = int(cfg.get("no_rope_layer_interval", 4))
        no_rope = cfg.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n_layers)]
        layer_types = [
            "chunked_attention" if (nr and chunk) else "full_attention" for nr in no_rope
        ]

    if layer_types:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            raise KvplanError(
                f"{where}: config key 'layer_types' must list one entry per layer ({n_layers}), "
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
                raise KvplanError(f"{where}: config key 'layer_types[{i}]' has unknown value {t!r}")
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


def _derived_max_model_len(cfg: dict[str, Any], model_type: str) -> tuple[int, int | None]:
    """vLLM's default max_model_len (config/model.py _get_and_verify_max_len), and the raw
    position limit it starts from."""
    keys = (
        "max_position_embeddings",
        "n_positions",
        "max_seq_len",
        "seq_length",
        "max_sequence_length",
        "max_seq_length",
        "seq_len",
    )
    found = [int(cfg[k]) for k in keys if isinstance(cfg.get(k), (int, float)) and not isinstance(cfg.get(k), bool)]
    base = min(found) if found else None
    derived = float(base) if base is not None else 2048.0
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and rope and "gemma3" not in model_type:
        params = rope if ("rope_type" in rope or "type" in rope or "factor" in rope) else None
        if params is not None:
            rope_type = params.get("rope_type") or params.get("type") or "default"
            if rope_type not in ("su", "longrope", "llama3", "default"):
                factor = params.get("factor") or 1.0
                if rope_type == "yarn" and params.get("original_max_position_embeddings"):
                    derived = float(params["original_max_position_embeddings"])
                derived *= float(factor)
            if rope_type == "longrope" and cfg.get("original_max_position_embeddings"):
                return int(cfg["original_max_position_embeddings"]), base
    return int(derived), base


def _quantization(cfg: dict[str, Any], where: str) -> QuantSpec | None:
    q = cfg.get("quantization_config")
    mo = cfg.get("_hf_quant_config")
    if not q and isinstance(mo, dict):
        # ModelOpt checkpoints describe quantization in hf_quant_config.json (vLLM 0.26.0
        # transformers_utils/config.py reads it next to config.json).
        qd = mo.get("quantization") or {}
        algo = str(qd.get("quant_algo") or "").upper()
        if algo == "FP8":
            return QuantSpec(
                method="fp8",
                bits=8,
                kv_cache_fp8=str(qd.get("kv_cache_quant_algo") or "").upper() == "FP8",
                modules_to_not_convert=tuple(qd.get("exclude_modules") or ()),
            )
        if algo:
            return QuantSpec(method=f"modelopt_{algo.lower()}", bits=4 if "FP4" in algo else 8)
    if not q:
        return None
    if not isinstance(q, dict):
        raise KvplanError(f"{where}: config key 'quantization_config' must be a mapping")
    method = str(q.get("quant_method") or q.get("quant_type") or "").lower()
    if not method:
        raise KvplanError(f"{where}: config key 'quantization_config.quant_method' is missing")
    skip = tuple(q.get("modules_to_not_convert") or q.get("ignored_layers") or q.get("ignore") or ())
    if method == "fp8":
        block = q.get("weight_block_size")
        return QuantSpec(
            method="fp8",
            bits=8,
            block_size=tuple(block) if block else None,
            modules_to_not_convert=skip,
        )
    if method in ("awq", "gptq"):
        return QuantSpec(
            method=method,
            bits=int(q.get("bits", q.get("w_bit", 4))),
            group_size=int(q.get("group_size", q.get("q_group_size", 128))),
            desc_act=bool(q.get("desc_act", False)),
            zero_point=bool(q.get("zero_point", True)) if method == "awq" else not bool(q.get("sym", True)),
            modules_to_not_convert=skip,
        )
    if method == "mxfp4":
        return QuantSpec(method="mxfp4", bits=4, group_size=32, modules_to_not_convert=skip)
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit") else 8
        return QuantSpec(method="bitsandbytes", bits=bits, group_size=64, modules_to_not_convert=skip)
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        bits, group_size, strategy_fp8 = 8, -1, False
        for group in groups.values():
            w = (group or {}).get("weights") or {}
            bits = int(w.get("num_bits", bits))
            if w.get("group_size"):
                group_size = int(w["group_size"])
            strategy_fp8 = w.get("type") == "float"
            break
        return QuantSpec(
            method="compressed-tensors",
            bits=bits,
            group_size=group_size,
            zero_point=not strategy_fp8,
            kv_cache_fp8=bool(q.get("kv_cache_scheme")),
            modules_to_not_convert=skip,
        )
    return QuantSpec(method=method, bits=int(q.get("bits", 16) or 16), modules_to_not_convert=skip)


def _moe(cfg: dict[str, Any], model_type: str, n_layers: int, where: str) -> tuple[MoESpec | None, tuple[bool, ...]]:
    if model_type == "mixtral":
        e = _int(cfg, "num_local_experts", where)
        spec = MoESpec(
            num_experts=e,
            top_k=_int(cfg, "num_experts_per_tok", where),
            moe_intermediate_size=_int(cfg, "intermediate_size", where),
        )
        return spec, (True,) * n_layers
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        e = _int(cfg, "num_experts", where)
        step = int(cfg.get("decoder_sparse_step", 1) or 1)
        mlp_only = set(cfg.get("mlp_only_layers") or [])
        layers = tuple((i not in mlp_only) and e > 0 and (i + 1) % step == 0 for i in range(n_layers))
        shared = int(cfg.get("shared_expert_intermediate_size", 0) or 0)
        spec = MoESpec(
            num_experts=e,
            top_k=_int(cfg, "num_experts_per_tok", where),
            moe_intermediate_size=_int(cfg, "moe_intermediate_size", where),
            shared_intermediate_size=shared,
            shared_expert_gate=shared > 0,
        )
        return spec, layers
    if model_type in ("deepseek_v2", "deepseek_v3"):
        e = cfg.get("n_routed_experts")
        if not e:
            return None, (False,) * n_layers
        first_dense = int(cfg.get("first_k_dense_replace", 0) or 0)
        freq = int(cfg.get("moe_layer_freq", 1) or 1)
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
        moe_inter = _int(cfg, "moe_intermediate_size", where)
        spec = MoESpec(
            num_experts=int(e),
            top_k=_int(cfg, "num_experts_per_tok", where),
            moe_intermediate_size=moe_inter,
            shared_intermediate_size=int(cfg.get("n_shared_experts", 0) or 0) * moe_inter,
            router_bias=cfg.get("topk_method") == "noaux_tc",
        )
        return spec, layers
    if model_type == "gpt_oss":
        spec = MoESpec(
            num_experts=_int(cfg, "num_local_experts", where),
            top_k=_int(cfg, "num_experts_per_tok", where, "experts_per_token"),
            moe_intermediate_size=_int(cfg, "intermediate_size", where),
            router_bias=True,
            expert_bias=True,
        )
        return spec, (True,) * n_layers
    if model_type == "jamba":
        e = int(cfg.get("num_experts", 16))
        period = int(cfg.get("expert_layer_period", 2))
        offset = int(cfg.get("expert_layer_offset", 1))
        spec = MoESpec(
            num_experts=e,
            top_k=int(cfg.get("num_experts_per_tok", 2)),
            moe_intermediate_size=_int(cfg, "intermediate_size", where),
        )
        return spec, tuple(e > 1 and i % period == offset for i in range(n_layers))
    if model_type == "granitemoehybrid":
        e = int(cfg.get("num_local_experts", 8) or 0)
        if e <= 0:
            return None, (False,) * n_layers
        spec = MoESpec(
            num_experts=e,
            top_k=int(cfg.get("num_experts_per_tok", 2)),
            moe_intermediate_size=_int(cfg, "intermediate_size", where),
            shared_intermediate_size=int(cfg.get("shared_intermediate_size", 1024) or 0),
        )
        return spec, (True,) * n_layers
    if model_type in ("llama4", "llama4_text"):
        e = _int(cfg, "num_local_experts", where)
        step = int(cfg.get("interleave_moe_layer_step", 1) or 1)
        moe_layers = cfg.get("moe_layers")
        if moe_layers is None:
            moe_layers = list(range(step - 1, n_layers, step))
        moe_set = set(moe_layers)
        inter = _int(cfg, "intermediate_size", where)
        spec = MoESpec(
            num_experts=e,
            top_k=_int(cfg, "num_experts_per_tok", where),
            moe_intermediate_size=inter,
            shared_intermediate_size=inter,
        )
        return spec, tuple(i in moe_set for i in range(n_layers))
    return None, (False,) * n_layers


def parse_config(config: dict[str, Any], name: str = "model") -> ModelSpec:
    """Build a ModelSpec from a config.json dict.

    Args:
        config: the parsed config.json.
        name: a label for messages (repo id or path).
    Returns:
        the ModelSpec (whole-model shapes, before tensor parallelism).
    Raises:
        KvplanError: a required key is missing or has the wrong type (message names the key).
    """
    if not isinstance(config, dict):
        raise KvplanError(f"{name}: config.json must be a JSON object, got {type(config).__name__}")
    cfg = text_config_of(config)
    where = name
    top_type = str(config.get("model_type") or "")
    model_type = str(cfg.get("model_type") or top_type or "")
    for key, value in _TRANSFORMERS_DEFAULTS.get(model_type, {}).items():
        if cfg.get(key) is None:
            cfg = {**cfg, key: value}
    if not model_type:
        raise KvplanError(f"{where}: config.json is missing required key 'model_type'")
    archs = config.get("architectures") or []
    if archs and not isinstance(archs, list):
        raise KvplanError(f"{where}: config key 'architectures' must be a list")
    architecture = str(archs[0]) if archs else _DEFAULT_ARCH.get(top_type or model_type, "")
    if not architecture:
        raise KvplanError(f"{where}: config.json is missing required key 'architectures'")

    hidden = _int(cfg, "hidden_size", where, "d_model", "n_embd")
    n_layers = _int(cfg, "num_hidden_layers", where, "num_layers", "n_layer")
    n_heads = _int(cfg, "num_attention_heads", where, "n_head", "num_heads")
    vocab = _int(cfg, "vocab_size", where)
    kv_heads = cfg.get("num_key_value_heads")
    if kv_heads is None:
        kv_heads = n_heads
    if isinstance(kv_heads, bool) or not isinstance(kv_heads, int) or kv_heads <= 0:
        raise KvplanError(f"{where}: config key 'num_key_value_heads' must be a positive integer, got {kv_heads!r}")
    if n_heads % kv_heads:
        raise KvplanError(
            f"{where}: num_attention_heads ({n_heads}) is not a multiple of num_key_value_heads ({kv_heads})"
        )
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        if hidden % n_heads:
            raise KvplanError(f"{where}: hidden_size ({hidden}) is not divisible by num_attention_heads ({n_heads}); "
                              "config.json needs 'head_dim'")
        head_dim = hidden // n_heads
    head_dim = int(head_dim)
    if head_dim <= 0:
        raise KvplanError(f"{where}: config key 'head_dim' must be positive, got {head_dim}")

    intermediate = cfg.get("intermediate_size")
    if model_type in ("llama4", "llama4_text") and cfg.get("intermediate_size_mlp"):
        intermediate = cfg["intermediate_size_mlp"]  # dense layers; experts use intermediate_size
    if intermediate is None:
        intermediate = cfg.get("ffn_dim") or cfg.get("n_inner") or 4 * hidden
    intermediate = int(intermediate)

    kinds, sliding_window, chunk = _layer_kinds(cfg, model_type, n_layers, where)
    moe, moe_layers = _moe(cfg, model_type, n_layers, where)

    mla = None
    if model_type in ("deepseek_v2", "deepseek_v3") and cfg.get("kv_lora_rank"):
        mla = MLAShape(
            kv_lora_rank=_int(cfg, "kv_lora_rank", where),
            qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", where, minimum=0),
            qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", where, minimum=0),
            v_head_dim=_int(cfg, "v_head_dim", where),
            q_lora_rank=_opt_int(cfg, "q_lora_rank", where),
        )
        kinds = tuple(LayerKind.MLA if k == LayerKind.FULL else k for k in kinds)

    gdn = None
    if model_type == "qwen3_next":
        gdn = GatedDeltaNetShape(
            num_k_heads=_int(cfg, "linear_num_key_heads", where),
            num_v_heads=_int(cfg, "linear_num_value_heads", where),
            head_k_dim=_int(cfg, "linear_key_head_dim", where),
            head_v_dim=_int(cfg, "linear_value_head_dim", where),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim", where),
        )

    mamba = None
    if model_type == "jamba":
        expand = int(cfg.get("mamba_expand", 2))
        mamba = MambaShape(
            version=1,
            intermediate_size=expand * hidden,
            state_size=int(cfg.get("mamba_d_state", 16)),
            conv_kernel=int(cfg.get("mamba_d_conv", 4)),
            dt_rank=int(cfg.get("mamba_dt_rank") or math.ceil(hidden / 16)),
            use_conv_bias=bool(cfg.get("mamba_conv_bias", True)),
            use_bias=bool(cfg.get("mamba_proj_bias", False)),
        )
    elif model_type == "granitemoehybrid":
        expand = int(cfg.get("mamba_expand", 2))
        n_mheads = int(cfg.get("mamba_n_heads", 128))
        d_head = cfg.get("mamba_d_head", "auto")
        if d_head in (None, "auto"):
            d_head = expand * hidden // n_mheads
        mamba = MambaShape(
            version=2,
            intermediate_size=expand * hidden,
            state_size=int(cfg.get("mamba_d_state", 256)),
            conv_kernel=int(cfg.get("mamba_d_conv", 4)),
            n_groups=int(cfg.get("mamba_n_groups", 1)),
            num_heads=n_mheads,
            head_dim=int(d_head),
            chunk_size=int(cfg.get("mamba_chunk_size", 256)),
            use_conv_bias=bool(cfg.get("mamba_conv_bias", True)),
            use_bias=bool(cfg.get("mamba_proj_bias", False)),
        )

    head_dim_v = head_dim
    if mla is not None:
        head_dim_v = mla.v_head_dim

    derived, base_positions = _derived_max_model_len(cfg, model_type)
    rope_rows = base_positions
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and base_positions:
        rt = rope.get("rope_type") or rope.get("type")
        if rt in ("yarn", "deepseek_yarn") and rope.get("original_max_position_embeddings"):
            rope_rows = int(rope["original_max_position_embeddings"] * float(rope.get("factor", 1)))
        elif rt == "dynamic":
            rope_rows = int(base_positions * float(rope.get("factor", 1)))

    rotary_dim = None
    partial = cfg.get("partial_rotary_factor")
    if mla is not None:
        rotary_dim = mla.qk_rope_head_dim
    elif partial:
        rotary_dim = int(head_dim * float(partial))
    else:
        rotary_dim = head_dim

    qk_norm = model_type in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text") or bool(
        cfg.get("use_qk_norm", False) and model_type not in ("llama4", "llama4_text")
    )
    norms = 2
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        norms = 4
    gated = model_type not in ("opt",)
    learned_positions = 0
    if model_type == "opt":
        learned_positions = int(cfg.get("max_position_embeddings", 2048)) + 2

    quant = _quantization(cfg, where)

    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = config.get("tie_word_embeddings")
    if tie is None:
        # transformers' PretrainedConfig default is True; many families override it to False.
        tie = model_type in ("gemma", "gemma2", "gemma3", "gemma3_text", "opt", "granitemoehybrid")

    is_mm = isinstance(config.get("vision_config"), dict)
    vision_params = _vision_params(config["vision_config"], hidden) if is_mm else 0

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
            num_key_value_heads=int(kv_heads),
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
        dtype=_dtype_of(cfg, config),
        quantization=quant,
        tie_word_embeddings=bool(tie),
        max_position_embeddings=base_positions,
        derived_max_model_len=derived,
        rope_max_position=rope_rows if learned_positions == 0 else None,
        rope_caches=2 if model_type in ("gemma3", "gemma3_text") else 1,
        rotary_dim=rotary_dim if learned_positions == 0 else None,
        attention_sinks=model_type == "gpt_oss",
        logit_softcapping=bool(cfg.get("final_logit_softcapping")),
        qkv_bias=bool(cfg.get("attention_bias", False)) or model_type in ("qwen2", "qwen2_moe", "opt", "gpt_oss"),
        o_bias=model_type in ("opt", "gpt_oss") or (bool(cfg.get("attention_bias", False)) and model_type not in ("qwen3", "qwen3_moe")),
        mlp_bias=bool(cfg.get("mlp_bias", False)) or model_type == "opt",
        qk_norm=qk_norm,
        norms_per_layer=norms,
        gated_mlp=gated,
        learned_positions=learned_positions,
        is_multimodal=is_mm,
        vision_params=vision_params,
    )
