"""Parse a Hugging Face ``config.json`` (a dict) into a ModelSpec, failing closed.

vLLM reads configs through transformers' config classes, which fill defaults and derive fields
(``layer_types`` for Gemma-2/3, Qwen2, gpt-oss; ``sliding_window = None`` when Qwen's
``use_sliding_window`` is false; Llama-4 ``no_rope_layers``; Jamba's attention period). This
module is the generic decoder every family shares: the standard keys, read once, in one order.
What a family's config class does differently lives in its module under
``kvplan.model.families`` (found through the registry there), as hooks this parse calls.

Failing closed: every key read from the config goes through ``kvplan.model.config._Cfg``, which
checks its type and range and raises ``KvplanError`` naming the key as written. What kvplan fills
in or cannot model (a transformers default for a key a partial config omits, an architecture or
quant_method it has no rules for) is estimated anyway and said in ``ModelSpec.notes``.

No silent guess (issue 12): an architecture vLLM serves only as a pooling/encoder model, or not at
all as a generative one (kvplan.model.generative), is exit 2; one with no kvplan family is sized
only from the standard keys, exit 2 naming any key that changes sizing beyond them
(kvplan.model.sizing_keys), and otherwise carries ``ModelSpec.approximations`` (``exact`` False),
which every output shows.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from kvplan.errors import KvplanError, VllmRefuses
from kvplan.model.config import (  # noqa: F401  (re-exported: importers read the config readers from here)
    _DEFAULT_LIMIT,
    _DTYPES,
    _LIMITS,
    _MAX_LIST,
    _MAX_POSITIONS,
    _MAX_ROPE_FACTOR,
    _POSITION_KEYS,
    _REQUIRED,
    _TOP_LEVEL_FALLBACK,
    _Cfg,
    _dtype_of,
    _show,
    _text_cfg,
    text_config_of,
)
from kvplan.model.families import DEFAULT_ARCHITECTURE, FAMILIES, family_for
from kvplan.model.family import Family
from kvplan.model.generative import refuse_non_generative
from kvplan.model.sizing_keys import unread_moe_keys, unread_sizing_keys
from kvplan.model.quant import MODELLED_QUANT_METHODS, _quantization, _unknown_quant_note  # noqa: F401
from kvplan.model.spec import Approximation, ApproximationKind, AttentionShape, LayerKind, ModelSpec


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


def _layer_kinds(c: _Cfg, family: Family, n_layers: int, notes: list[str]) -> tuple[
    tuple[LayerKind, ...], int | None, int | None
]:
    """Per-layer attention kind, the sliding window and the Llama-4 chunk size.

    The family gives the window (``Family.sliding_window``) and the per-layer type strings
    (``Family.layer_types``: as given, or as its config class derives them). Rule (vLLM
    engine/arg_utils.py + attention.py): a model-wide ``sliding_window`` applies to every layer
    only when ``layer_types`` is absent or uniform; otherwise each layer follows its
    ``layer_types`` entry.
    Raises:
        KvplanError: a list of the wrong length, an unknown entry, sliding (chunked) layers
            without ``sliding_window`` (``attention_chunk_size``)."""
    where = c.where
    sliding_window = family.sliding_window(c)
    if sliding_window is not None and sliding_window <= 0:
        sliding_window = None  # vLLM: a window of 0 means disabled (config/model.py)
    chunk = c.int("attention_chunk_size", default=None, minimum=0)

    layer_types, types_key = family.layer_types(c, n_layers, sliding_window, chunk, notes)

    if layer_types:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            raise KvplanError(
                f"{where}: config key '{c.name(types_key)}' must list one entry per layer ({n_layers}), "
                f"got {len(layer_types) if isinstance(layer_types, list) else type(layer_types).__name__}"
            )
        kinds = []
        for i, t in enumerate(layer_types):
            if isinstance(t, LayerKind):  # a family that derives the kinds itself (NemotronH)
                kinds.append(t)
            elif t in ("full_attention", "attention", "global", "full"):
                kinds.append(LayerKind.FULL)
            elif t in ("sliding_attention", "local", "sliding"):
                kinds.append(LayerKind.SLIDING)
            elif t in ("chunked_attention",):
                kinds.append(LayerKind.CHUNKED)
            elif t in ("linear_attention",):
                kinds.append(family.linear_attention_kind)
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


def _derived_max_model_len(c: _Cfg, family: Family, notes: list[str], vllm_version: str) -> tuple[int, int | None]:
    """vLLM's default max_model_len (config/model.py _get_and_verify_max_len), and the raw
    position limit it starts from, in tokens.

    Rule (vLLM config/model.py): the smallest of the present ``_POSITION_KEYS`` (2048 when none
    is), then rope scaling: ``factor`` multiplies it for every rope type but
    su/longrope/llama3/default (YaRN starts from ``original_max_position_embeddings``); longrope
    uses the top-level ``original_max_position_embeddings``. A family with
    ``rope_scaling_sets_max_len`` False (Gemma-3) keeps the unscaled limit. ``vllm_version`` is
    the engine version the note on a missing limit names.
    Raises:
        KvplanError: a position key that is not an integer >= 1 (e.g. "8192", 0, -1); a rope
            factor that is not a number > 0; a derived length above 2**32.
    """
    found = [c.int(k) for k in _POSITION_KEYS if c.has(k)]
    base = min(found) if found else None
    if base is None:
        notes.append(
            "config.json gives no 'max_position_embeddings' (nor n_positions, max_seq_len, seq_length, ...): "
            f"vLLM {vllm_version} then assumes a limit of 2048 tokens"
        )
    derived = float(base) if base is not None else 2048.0
    rope = _rope_params(c)
    if rope is not None:
        params = rope if (rope.has("rope_type") or rope.has("type") or "factor" in rope.data) else None
        if params is not None:
            rope_type = params.raw("rope_type") or params.raw("type") or "default"
            factor = _rope_factor(params)
            scales = family.rope_scaling_sets_max_len
            if scales and rope_type not in ("su", "longrope", "llama3", "default"):
                if rope_type == "yarn" and params.has("original_max_position_embeddings"):
                    derived = float(params.int("original_max_position_embeddings"))
                derived *= factor
            if scales and rope_type == "longrope" and c.has("original_max_position_embeddings"):
                return c.int("original_max_position_embeddings"), base
    if derived > _MAX_POSITIONS:
        raise KvplanError(
            f"{c.where}: config key '{rope.name('factor')}' scales the position limit to {derived:,.0f} "
            f"tokens, above kvplan's limit of {_MAX_POSITIONS:,}"
        )
    return int(derived), base


def _notes_on_defaults(c: _Cfg, family: Family, filled: list[str], notes: list[str]) -> None:
    """Notes for keys a partial config omits and kvplan fills with transformers' defaults."""
    cls = family.transformers_class
    shown = [k for k in filled if k not in family.normally_omitted]
    shown += [k for k in family.hybrid_keys if not c.has(k) and k not in filled]
    if not shown:
        return
    defaults = {**family.hybrid_keys, **family.transformers_defaults}
    listed = ", ".join(f"{k}={defaults[k]!r}" for k in shown)
    notes.append(
        f"config.json lacks {len(shown)} key{'s' if len(shown) != 1 else ''} the published config gives; "
        f"transformers' {cls} defaults used (as vLLM would): {listed}"
    )


def _start_failure(model_type: str, vllm_version: str) -> str | None:
    """Why ``vllm_version`` cannot start ``model_type`` at all (its family_quirks
    ``START_FAILURES``), or None."""
    from kvplan.engines.vllm import versions  # the engine owns version facts; read lazily

    return versions.select(vllm_version).start_failures.get(model_type)


def _refuse_unsupported(where: str, architecture: str, model_type: str, reason: str | None, vllm_version: str) -> None:
    """Exit 2 for a family kvplan registers only to refuse (``Family.unsupported``) or that the
    vLLM version itself cannot start (its family_quirks ``start_failure``, said first).

    Raises:
        KvplanError: always."""
    failure = _start_failure(model_type, vllm_version)
    said = f"vLLM {vllm_version} does not start it: {failure}" if failure else ""
    if said and reason:
        said += "; and "
    raise (VllmRefuses if failure else KvplanError)(
        f"{where}: {architecture} (model_type {model_type!r}): {said}{reason or ''}",
        hint="no kvplan figure is given rather than a guessed one",
    )


def _refuse_removed(where: str, architecture: str, vllm_version: str) -> None:
    """Exit 2 for an architecture the vLLM version no longer serves (its rules'
    ``removed_architectures``, from that version's registry.py _PREVIOUSLY_SUPPORTED_MODELS).

    Raises:
        KvplanError: when ``architecture`` is one of them."""
    from kvplan.engines.vllm import versions  # the engine owns version facts; read lazily

    until = versions.select(vllm_version).removed_architectures.get(architecture)
    if until:
        raise VllmRefuses(
            f"{where}: vLLM {vllm_version} no longer serves {architecture}: its registry says it was supported "
            f"until v{until} and refuses to load it",
            hint="size it for an older vLLM that serves it (--vllm-version)",
        )


def _refuse_unread_moe_keys(c: _Cfg, architecture: str) -> None:
    """For a known family whose rules read no experts (a dense family: its ``moe`` hook is the
    default): exit 2 naming the expert keys a config has (kvplan.model.sizing_keys
    unread_moe_keys), instead of sizing routed experts as nothing.

    Raises:
        KvplanError: one line naming the keys as written."""
    keys = unread_moe_keys(c.data)
    if keys:
        raise KvplanError(
            f"{c.where}: {architecture} is a dense family in kvplan, but config.json has mixture-of-experts keys "
            f"({', '.join(repr(c.name(k)) for k in keys)}) that its rules do not read; sizing the experts as absent "
            "would be wrong, so kvplan refuses to guess",
            hint="check the config's architectures entry; a MoE variant needs its own kvplan family",
        )


def _refuse_unread_keys(c: _Cfg, architecture: str, model_type: str) -> None:
    """For a config with no kvplan family: exit 2 naming every key that changes sizing and that
    the generic decoder does not read (kvplan.model.sizing_keys), instead of sizing it as dense.

    Raises:
        KvplanError: one line naming the keys as written and what they shape."""
    found = unread_sizing_keys(c.data)
    if not found:
        return
    by_what: dict[str, list[str]] = {}
    for key, what in found:
        by_what.setdefault(what, []).append(f"'{c.name(key)}'")
    listed = "; ".join(f"{', '.join(keys)} ({what})" for what, keys in by_what.items())
    raise KvplanError(
        f"{c.where}: model_type {model_type!r} ({architecture}) has no kvplan family, and config.json has "
        f"keys that change its size which kvplan cannot read without one: {listed}; sizing it as a standard "
        "dense decoder would be wrong, so kvplan refuses to guess",
        hint="kvplan sizes an architecture without a family only from the standard keys (hidden_size, "
        "num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, "
        "layer_types of full/sliding attention); a family module under kvplan/model/families reads the rest",
    )


def _approximations(architecture: str, model_type: str, family: Family, intermediate: int,
                    vllm_version: str) -> tuple[Approximation, ...]:
    """Why the sizing is not exact: an architecture without a kvplan family (sized as the generic
    decoder from the standard keys), or one its model type's family is not registered for."""
    if not family.known:
        return (
            Approximation(
                kind=ApproximationKind.UNKNOWN_FAMILY,
                reason=f"model_type {model_type!r} ({architecture}) has no kvplan family: sized as a standard "
                "decoder from the standard keys (attention per layer_types/sliding_window, RoPE, RMSNorm, "
                f"biases only from attention_bias/mlp_bias); vLLM {vllm_version} may build it differently",
            ),
            Approximation(
                kind=ApproximationKind.ASSUMED_MLP,
                reason=f"MLP assumed gated (gate, up and down projections of {intermediate:,}); a plain "
                "two-matrix MLP has a third fewer MLP weights",
            ),
        )
    if architecture not in FAMILIES:
        return (
            Approximation(
                kind=ApproximationKind.UNREGISTERED_ARCHITECTURE,
                reason=f"architecture {architecture!r} is not one kvplan has rules for: sized with the "
                f"{model_type!r} rules; vLLM {vllm_version} may build it differently",
            ),
        )
    return ()


def _check_head_size(head_dim: int, where: str, notes: list[str], vllm_version: str) -> None:
    """Note a head_dim that only vLLM's slowest attention backend takes.

    vLLM's CUDA backends (v1/attention/backends; read in the version the engine rules name):
    FlashAttention supports_head_size takes a multiple of 8 up to 256 (512 with FA4);
    FlashInfer get_supported_head_sizes is 64, 128, 256, 512; Triton supports_head_size takes
    >= 32; FlexAttention (no list: any size) is the last fallback. A head_dim none of the first
    three take (7: not a multiple of 8 and under 32) leaves FlexAttention, which is far slower,
    and points at a config typo.
    """
    flash = head_dim % 8 == 0 and head_dim <= 256
    flashinfer = head_dim in (64, 128, 256, 512)
    triton = head_dim >= 32
    if not (flash or flashinfer or triton):
        notes.append(
            f"{where}: head_dim {head_dim} is taken by none of vLLM {vllm_version}'s FlashAttention (a multiple of 8, "
            "<= 256), FlashInfer (64/128/256/512) or Triton (>= 32) attention backends; only FlexAttention would "
            "run it (much slower). Check head_dim in config.json"
        )


def _no_architectures_note(config: dict, assumed: str, vllm_version: str) -> str:
    """The note for a config.json with no (or an empty) ``architectures`` list.

    vLLM then resolves the model as a pooling (embedding) model (seen on a recorded start:
    the device log tests/data/logs/device-h200-2026-11-29/p-jamba-8L.log shows "Resolved pooling
    config ... supported_tasks=('embed', 'token_embed')" for a Jamba config without the key, a
    start with no sampler warm-up; see that folder's README.md)."""
    given = "an empty 'architectures' list" if "architectures" in config else "no 'architectures' key"
    return (
        f"config.json has {given}: kvplan sized it as a generative {assumed} (from model_type), but "
        f"vLLM {vllm_version} would load it as a pooling (embedding) model, with no sampler warm-up and a "
        f'different start-up; add "architectures": ["{assumed}"] to config.json for the generative '
        "start kvplan sized"
    )


def _default_vllm_version() -> str:
    """The engine version notes name when the caller gives none (kvplan.sources.load_spec
    passes it). The engine side owns the version table; read lazily so the model layer does not
    import the engine at module level."""
    from kvplan.engines.vllm.versions import DEFAULT_VERSION

    return DEFAULT_VERSION


def parse_config(config: dict[str, Any], name: str = "model", *, snapshot: bool = False,
                 vllm_version: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a config.json dict.

    Args:
        config: the parsed config.json.
        name: a label for messages (repo id or path).
        snapshot: ``config`` is a bundled snapshot of a published config (model_specs/), which
            may leave out ``architectures`` although the published config gives it; no note is
            added for the missing key then.
        vllm_version: the vLLM version whose behaviour the notes describe (default: the engine's
            default version, kvplan.engines.vllm.versions).
    Returns:
        the ModelSpec (whole-model shapes, before tensor parallelism); ``notes`` says what was
        filled with a default or cannot be modelled (a partial config, an unknown architecture or
        quant_method).
    Raises:
        KvplanError: a required key is missing, or a key has the wrong type or an out-of-range
            value (0 layers, a position limit of "8192" or -1, a rope factor <= 0, 10**12 layers);
            the one-line message names the key.
    Rule source: transformers 5.x config classes and vLLM config/model.py; per family, the
    hooks of its module in kvplan.model.families.
    """
    if not isinstance(config, dict):
        raise KvplanError(f"{name}: config.json must be a JSON object, got {type(config).__name__}")
    version = vllm_version if vllm_version is not None else _default_vllm_version()
    where = name
    notes: list[str] = []
    top = _Cfg(config, where)
    c = _text_cfg(config, where)
    top_type = top.text("model_type", "") or ""
    model_type = c.text("model_type", "") or top_type
    if not model_type:
        raise KvplanError(f"{where}: config.json is missing required key 'model_type'")
    archs = config.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise KvplanError(f"{where}: config key 'architectures' must be a list of class names, got {_show(archs)}")
    architecture = archs[0] if archs else DEFAULT_ARCHITECTURE.get(top_type or model_type, "")
    if not architecture:
        raise KvplanError(f"{where}: config.json is missing required key 'architectures'")
    if architecture not in FAMILIES:
        refuse_non_generative(
            where, architecture, model_type,
            encoder_decoder=top.flag("is_encoder_decoder", False) or c.flag("is_encoder_decoder", False),
            registered=False, vllm_version=version,
        )
    _refuse_removed(where, architecture, version)
    family = family_for(architecture, model_type)
    if family.unsupported or _start_failure(model_type, version):
        _refuse_unsupported(where, architecture, model_type, family.unsupported, version)
    if not family.known:
        _refuse_unread_keys(c, architecture, model_type)
    elif type(family).moe is Family.moe:
        _refuse_unread_moe_keys(c, architecture)
    filled: list[str] = []
    # an own key whose standard name the config gives takes that value, not the class default
    set_by_standard = {own for standard, own in family.attribute_map.items() if c.has(standard)}
    for key, value in family.transformers_defaults.items():
        if c.data.get(key) is None and key not in set_by_standard:
            c.data = {**c.data, key: value}
            filled.append(key)
    for standard, own in {**family.attribute_map, **family.derived_keys}.items():
        # transformers' attribute_map: a standard name the config gives is the value (it sets the
        # class's own key); otherwise the own key, or the class's default for it, is read
        if not c.has(standard) and c.has(own):
            c.data = {**c.data, standard: c.data[own]}
            c.aliases[standard] = own
    if not archs and not snapshot:
        notes.append(_no_architectures_note(config, architecture, version))

    hidden = c.int("hidden_size", "d_model", "n_embd")
    n_layers = c.int("num_hidden_layers", "num_layers", "n_layer")
    vocab = c.int("vocab_size")
    if family.attention_free:
        # no attention layer reads these (a Mamba-2 config's num_heads/head_dim are the mixer's)
        n_heads = kv_heads = 1
        head_dim = hidden
    else:
        n_heads = c.int("num_attention_heads", "n_head", "num_heads")
        kv_heads = family.num_key_value_heads(c, n_heads)
        head_dim = c.int("head_dim", default=None)
    if n_heads % kv_heads:
        raise KvplanError(
            f"{where}: num_attention_heads ({n_heads}) is not a multiple of num_key_value_heads ({kv_heads})"
        )
    if head_dim is None:
        if hidden % n_heads:
            raise KvplanError(f"{where}: hidden_size ({hidden}) is not divisible by num_attention_heads ({n_heads}); "
                              "config.json needs 'head_dim'")
        head_dim = hidden // n_heads

    intermediate = family.intermediate_size(c, hidden)

    kinds, sliding_window, chunk = _layer_kinds(c, family, n_layers, notes)
    moe, moe_layers = family.moe(c, n_layers)
    if intermediate == 0 and moe is None and not family.attention_free:
        # every decoder layer has a dense MLP of this width: 0 is no model (a MoE config may
        # leave the unused dense width at 0)
        key = next((k for k in ("intermediate_size", "ffn_dim", "n_inner", "intermediate_size_mlp") if c.has(k)), "intermediate_size")
        raise c.error(key, "must be >= 1 for a model with dense MLP layers, got 0")
    if not family.attention_free:
        _check_head_size(head_dim, where, notes, version)

    mla = family.mla(c)
    if mla is not None:
        kinds = tuple(LayerKind.MLA if k == LayerKind.FULL else k for k in kinds)
    gdn = family.gdn(c)
    mamba = family.mamba(c, hidden)

    head_dim_v = head_dim
    if mla is not None:
        head_dim_v = mla.v_head_dim

    derived, base_positions = _derived_max_model_len(c, family, notes, version)
    # longrope (Phi-3-128k, Phi-3.5, Phi-4-mini): original_max_position_embeddings is only the
    # default; an explicit --max-model-len may go up to the unscaled position limit (vLLM
    # config/model.py _get_and_verify_max_len: the longrope default branch applies only when
    # max_model_len is unset or -1, the check compares with the derived limit).
    len_limit = base_positions if base_positions and base_positions > derived else None
    rope_rows = base_positions
    rope = _rope_params(c)
    if rope is not None and base_positions:
        rt = rope.raw("rope_type") or rope.raw("type")
        if rt in ("yarn", "deepseek_yarn") and rope.has("original_max_position_embeddings"):
            rope_rows = int(rope.int("original_max_position_embeddings") * _rope_factor(rope))
        elif rt == "dynamic":
            rope_rows = int(base_positions * _rope_factor(rope))
        elif rt in (None, "default") and rope.has("mrope_section"):
            # multimodal RoPE (Qwen2-VL/Qwen3-VL/Qwen3.5): vLLM's MRotaryEmbedding caches 4 x the
            # positions for video inputs (vLLM rotary_embedding/mrope.py
            # cache_max_position_num); families/qwen3.5-35b-a3b_eager weights exact with it.
            rope_rows = 4 * base_positions

    partial = c.num("partial_rotary_factor", None, gt=0.0, le=1.0)
    if mla is not None:
        rotary_dim = mla.qk_rope_head_dim
    elif partial:
        rotary_dim = int(head_dim * float(partial))
    else:
        rotary_dim = head_dim

    qk_norm = family.qk_norm(c)
    learned_positions = family.learned_positions(c)

    quant = _quantization(c, notes, version)

    if c.has("tie_word_embeddings"):
        tie = c.flag("tie_word_embeddings")
    elif top.has("tie_word_embeddings"):
        tie = top.flag("tie_word_embeddings")
    else:
        # transformers' PretrainedConfig default is True; many families override it to False.
        tie = family.tie_word_embeddings_default

    vc = top.sub("vision_config")
    vision_params = 0
    if vc is not None:
        own = family.vision_params(top, vc, hidden)
        vision_params = _vision_params(vc, hidden) if own is None else own
    softcap = c.num("final_logit_softcapping", None, ge=0.0)
    attention_bias = c.flag("attention_bias", False) if family.reads_attention_bias else False

    extra = family.spec_fields(c, hidden, n_layers)  # a family's own facts (kvplan.model.family)
    rotary_dim = extra.pop("rotary_dim", rotary_dim)
    vision_params = extra.pop("vision_params", vision_params)
    _notes_on_defaults(c, family, filled, notes)
    approximations = _approximations(architecture, model_type, family, intermediate, version)
    approximations += tuple(extra.pop("approximations", ()))  # what the family's rules leave out

    try:
        fields: dict[str, Any] = dict(
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
            max_model_len_limit=len_limit,
            rope_max_position=rope_rows if learned_positions == 0 else None,
            rope_caches=family.rope_caches,
            rotary_dim=rotary_dim if learned_positions == 0 else None,
            attention_sinks=family.attention_sinks,
            logit_softcapping=bool(softcap),
            qkv_bias=attention_bias or family.qkv_bias,
            o_bias=family.has_o_bias(attention_bias),
            mlp_bias=(c.flag("mlp_bias", False) and family.reads_mlp_bias) or family.mlp_bias,
            qk_norm=qk_norm,
            norms_per_layer=family.norms_per_layer,
            norm_has_bias=family.norm_has_bias,
            attn_output_gate=family.attn_output_gate,
            gated_mlp=family.gated_mlp,
            learned_positions=learned_positions,
            is_multimodal=vc is not None,
            vision_params=vision_params,
            approximations=approximations,
            notes=tuple(notes),
        )
        fields.update(extra)  # a family's own facts win over the generic reading (Family.spec_fields)
        return ModelSpec(**fields)
    except ValidationError as exc:  # a combination the per-key checks let through: still one line
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise KvplanError(f"{where}: config.json gives an invalid {loc} ({err['msg']})") from None
