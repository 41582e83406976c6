"""Checks that need the model: its config (with ``--hf-overrides`` applied), tensor-parallel
divisibility, KV-head replication, max_model_len over the model's limit.

The functions take ``ctx``, the run's Checker (``ctx.spec`` caches model specs).
vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

from kvplan.check.deployment import Deployment
from kvplan.check.diagnostics import (
    APPROXIMATE,
    ENGINE_REJECTS,
    KV_HEAD_REPLICATION,
    MAX_MODEL_LEN_LIMIT,
    MODEL_UNRESOLVED,
    NOT_MODELLED,
    PLANNER_NOTE,
    TP_DIVISIBILITY,
)
from kvplan.check.rules.inputs import _EngineInputs
from kvplan.check.sources.manifest import Targets
from kvplan.errors import KvplanError, VllmRefuses


def load_spec(ctx, dep: Deployment, targets: Targets, model: str | None, revision: str | None, eng=None):
    """The model's ModelSpec (cached) with the deployment's ``--hf-overrides`` applied, or
    None with a model-unresolved diagnostic."""
    if model is None:
        return None
    try:
        spec = ctx.spec(model, revision)[0]
    except VllmRefuses as exc:  # the deployment's vLLM itself refuses the model: it does not start
        dep.diag(
            ENGINE_REJECTS,
            "error",
            exc.message,
            line=dep.target_lines.get("model") if targets.model else dep.model_line,
            key=dep.target_keys.get("model") if targets.model else dep.model_key,
            hint="serve it with a vLLM image whose version runs this model (the version comes from the image tag, "
                 "kvplan.yaml vllm_version or --vllm-version)",
        )
        return None
    except KvplanError as exc:
        dep.diag(
            MODEL_UNRESOLVED,
            "error",
            f"kvplan cannot read the model's config: {exc.message}",
            line=dep.target_lines.get("model") if targets.model else dep.model_line,
            key=dep.target_keys.get("model") if targets.model else dep.model_key,
            hint=exc.hint or "add `# kvplan: model=<hub id>` naming a bundled or cached model",
        )
        return None
    if eng is None or not eng.hf_overrides:
        return spec
    return overridden_spec(ctx, dep, model, revision, spec, eng)


def overridden_spec(ctx, dep: Deployment, model: str, revision: str | None, spec, eng: "_EngineInputs"):
    """``spec`` rebuilt from the config with ``--hf-overrides`` applied (vLLM
    config/model.py; see kvplan.model.overrides), with an info naming the keys that changed;
    a warning, and the checkpoint's own spec, when the overridden config cannot be parsed."""
    from kvplan.model.overrides import apply_hf_overrides, shadowed_flat_keys

    s = eng.hf_overrides_setting
    line, key = (s.line, s.key) if s is not None else (None, "--hf-overrides")
    source = ctx.spec(model, revision)[1]
    _, changed = apply_hf_overrides(source.config, eng.hf_overrides)
    try:
        new = ctx.spec(model, revision, eng.hf_overrides)[0]
    except KvplanError as exc:
        dep.diag(
            NOT_MODELLED, "warning",
            f"kvplan cannot apply --hf-overrides to the model's config ({exc.message}); its figures use "
            "the checkpoint's config, vLLM's may differ",
            line=line, key=key,
        )
        return spec
    for name in shadowed_flat_keys(source.config, eng.hf_overrides):
        dep.diag(
            NOT_MODELLED, "warning",
            f"{name} is set on the outer config, but this model's language model reads text_config.{name}: "
            f"vLLM applies it where it changes nothing",
            line=line, key=key, hint=f'write {{"text_config": {{"{name}": ...}}}}',
        )
    dep.diag(
        PLANNER_NOTE, "info",
        f"applied to the model's config as vLLM does (sets {', '.join(changed)})",
        line=line, key=key,
    )
    return new


def model_checks(ctx, dep: Deployment, spec, args, keys: dict, checks: list[str]) -> bool:
    """Checks that need only the model: tensor-parallel divisibility and KV-head replication
    (vLLM config/parallel.py + model_executor attention layers), max_model_len over the
    model's limit (config/model.py _get_and_verify_max_len). False when the planner would refuse.

    A model kvplan sizes only approximately (``spec.exact`` False: an architecture without a
    kvplan family), or a deployment whose estimate leaves a memory term unmodelled (a multimodal
    encoder's profile, a partial bundled snapshot: capacity.estimate.estimate_approximations) is
    a warning, so ``check --strict`` fails on it."""
    ok = True
    from kvplan.capacity.estimate import estimate_approximations
    from kvplan.engines.vllm import versions

    try:
        rules = versions.select(args.vllm_version or versions.DEFAULT_VERSION)
        reasons = estimate_approximations(spec, args.limit_mm_per_prompt, rules)
    except KvplanError:  # an unknown version is reported by the estimate's own check
        reasons = spec.approximations
    if reasons:
        checks.append(APPROXIMATE)
        dep.diag(
            APPROXIMATE,
            "warning",
            (
                "approximate: kvplan has no exact rules for this model, so its memory figures are approximate ("
                if not spec.exact
                else "approximate: kvplan's memory figures for this deployment are approximate ("
            )
            + "; ".join(a.reason for a in reasons) + ")",
            line=dep.target_lines.get("model") or dep.model_line,
            key=dep.target_keys.get("model") or dep.model_key,
            hint=(
                "add a kvplan family for the architecture (kvplan/model/families), or verify with a real start"
                if any(a.kind.value in ("unknown_family", "unregistered_architecture") for a in reasons)
                else "verify with a real start (kvplan verify), or remove the unmodelled term the reason names"
            ),
        )
    tp = args.tensor_parallel_size
    s = keys.get("tensor_parallel_size")
    tline, tkey = (s.line, s.key) if s else (dep.line, "--tensor-parallel-size")
    checks.append(TP_DIVISIBILITY)
    heads = spec.attention.num_attention_heads
    kv = spec.attention.num_key_value_heads
    from kvplan.capacity.estimate import valid_tensor_parallel_sizes

    # the hint lists the sizes the planner's own refusal predicate accepts (one rule, not two)
    valid = valid_tensor_parallel_sizes(spec)
    valid_hint = ("valid sizes: " + ", ".join(map(str, valid))) if valid else None
    if heads % tp:
        dep.diag(
            TP_DIVISIBILITY,
            "error",
            f"tensor-parallel-size {tp} does not divide the model's {heads} attention heads; vLLM refuses it",
            line=tline,
            key=tkey,
            hint=valid_hint,
        )
        ok = False
    elif not spec.uses_mla and ((tp > kv and tp % kv) or (tp <= kv and kv % tp)):
        dep.diag(
            TP_DIVISIBILITY,
            "error",
            f"tensor-parallel-size {tp} and the model's {kv} KV heads: one must divide the other; vLLM refuses it",
            line=tline,
            key=tkey,
            hint=valid_hint,
        )
        ok = False
    elif not spec.uses_mla and tp > kv:
        checks.append(KV_HEAD_REPLICATION)
        dep.diag(
            KV_HEAD_REPLICATION,
            "info",
            f"tensor-parallel-size {tp} > {kv} KV heads: each KV head is replicated on {tp // kv} GPUs, "
            "so every GPU stores a full head's KV cache",
            line=tline,
            key=tkey,
        )
    mml = args.max_model_len
    if mml is not None and mml != -1:
        checks.append(MAX_MODEL_LEN_LIMIT)
        limit = spec.max_len_limit
        if mml > limit:
            s = keys["max_model_len"]
            base = spec.max_position_embeddings
            how = (
                f"max_position_embeddings {base}"
                if base is None or base == limit
                else f"max_position_embeddings {base} with rope scaling"
            )
            # vLLM envs.py: VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" / "true"
            allowed = dep.process_env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")
            if allowed:
                dep.diag(
                    MAX_MODEL_LEN_LIMIT,
                    "warning",
                    f"{mml} tokens is over the model's limit of {limit} ({how}); vLLM's environment sets "
                    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, so vLLM accepts it but warns that outputs may be wrong; "
                    "kvplan sizes no length past the limit, so the memory checks are skipped",
                    line=s.line,
                    key=s.key,
                    hint=f"use {limit} or less unless the model was trained for longer contexts",
                )
            else:
                dep.diag(
                    MAX_MODEL_LEN_LIMIT,
                    "error",
                    f"{mml} tokens is over the model's limit of {limit} ({how}); vLLM refuses it "
                    "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                    line=s.line,
                    key=s.key,
                    hint=f"use {limit} or less",
                )
            ok = False
    return ok
