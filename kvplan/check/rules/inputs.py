"""Checks on what a deployment says before any model is loaded: its kvplan targets, its model
name, and its `vllm serve` flags read into kvplan's EngineArgs as vLLM reads them.

The functions take ``ctx``, the run's Checker (``ctx.cat``, ``ctx.vllm_version``).
vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kvplan.check.deployment import Deployment, Setting
from kvplan.check.diagnostics import (
    INVALID_KVPLAN_KEY,
    INVALID_VALUE,
    LITERAL_VARIABLE,
    MODEL_MISSING,
    MODEL_UNRESOLVED,
    NOT_MODELLED,
    UNRESOLVED_VALUE,
    UTILIZATION_RANGE,
)
from kvplan.check.engine_flags import _ENGINE_FIELDS, _NOT_MODELLED, _OTHER_INT_FLAGS, _READ_FLAGS
from kvplan.check.messages import _pydantic_message, _yaml_shown, plain_validation_message
from kvplan.check.sources.manifest import Targets
from kvplan.engines.vllm.serve_flags import parse_human_int


@dataclass
class _EngineInputs:
    """A deployment's flags as kvplan's EngineArgs, with where each came from.

    Attributes:
        args: the EngineArgs (invalid values left at vLLM's defaults).
        keys: EngineArgs field -> the Setting it came from (for lines and keys in messages).
        blockers: flags whose values kvplan cannot size (memory checks are skipped).
        other: integer flags kvplan reads but EngineArgs does not hold (data parallel, nnodes).
        revision: --revision of the model, if given.
    """

    args: Any = None
    keys: dict = field(default_factory=dict)
    blockers: list = field(default_factory=list)
    other: dict = field(default_factory=dict)
    revision: str | None = None
    hf_overrides: dict | None = None
    hf_overrides_setting: Any = None


def validate_targets(ctx, dep: Deployment) -> Targets:
    """Validate the deployment's kvplan targets; a bad key becomes an invalid-kvplan-key error."""
    import difflib

    values = dict(dep.targets)
    while True:
        try:
            return Targets.model_validate(values)
        except ValidationError as exc:
            for err in exc.errors():
                name = str(err["loc"][0]) if err["loc"] else ""
                msg = _pydantic_message(err, Targets)
                if err["type"] == "extra_forbidden":
                    close = difflib.get_close_matches(name, list(Targets.model_fields), n=1)
                    msg = f"not a kvplan key" + (f"; did you mean {close[0]}?" if close else f" (use {', '.join(Targets.model_fields)})")
                dep.diag(INVALID_KVPLAN_KEY, "error", msg, line=dep.target_lines.get(name), key=dep.target_keys.get(name, name))
                values.pop(name, None)
                if not name:
                    values = {}


def model_name(ctx, dep: Deployment, targets: Targets, checks: list[str]) -> str | None:
    """The model to check: the kvplan ``model`` override, else the deployment's own.
    No model at all fails (`vllm serve` exits: entrypoints/cli/serve.py / argparse_utils)."""
    checks.append(MODEL_MISSING)
    if dep.model is None and "model" in dep.invalid:
        return targets.model  # its value was refused (reported where it was read)
    if dep.model is None and dep.model_null_line is not None:
        dep.diag(
            MODEL_MISSING,
            "error",
            "no model: `model:` is empty (YAML null); vLLM's --config loader passes the text 'None' as "
            "the model, which `vllm serve` cannot load",
            line=dep.model_null_line,
            key=dep.model_key,
            hint="write the model's Hugging Face id or path after `model:`",
        )
        return targets.model
    if dep.model is None or not dep.model.strip():
        dep.diag(
            MODEL_MISSING,
            "error",
            "no model: `vllm serve` exits with 'No model specified'"
            if dep.model is None
            else "the model is an empty string: `vllm serve` cannot load it",
            line=dep.model_line if dep.model is not None else None,
            key=dep.model_key if dep.model is not None else "model",
            hint="give the model as `vllm serve MODEL` or a `model:` key",
        )
        return targets.model
    if dep.model_literal:
        dep.diag(
            LITERAL_VARIABLE,
            "error",
            f"the model {dep.model!r} is not expanded ({dep.literal_reason}): vLLM looks for a model "
            f"named {dep.model!r} and exits",
            line=dep.model_line,
            key=dep.model_key,
            hint=_literal_hint(dep),
        )
        return targets.model
    if dep.model_unresolved and targets.model is None:
        notes = [dep.var_notes[v] for v in dep.model_unresolved if v in dep.var_notes]
        why = "; ".join(notes) if notes else "which is not set in this file"
        arg_only = [v for v in dep.model_unresolved if "build argument" in dep.var_notes.get(v, "")]
        dep.diag(
            MODEL_UNRESOLVED,
            "error",
            f"the model {dep.model!r} uses {', '.join('$' + v for v in dep.model_unresolved)}, {why}"
            if not notes
            else f"the model {dep.model!r} is unknown at runtime: {why}",
            line=dep.model_line,
            key=dep.model_key,
            hint=f"add `ENV {arg_only[0]}=${{{arg_only[0]}}}` after the ARG, or a `# kvplan: model=<hub id>` comment"
            if arg_only
            else "set the variable in the file or add a `# kvplan: model=<hub id>` comment",
        )
        return None
    return targets.model or dep.model


def engine_args(ctx, dep: Deployment, checks: list[str]) -> "_EngineInputs":
    """Map the deployment's `vllm serve` flags onto kvplan's EngineArgs, reading values as
    vLLM does (human-readable ints, choices); every rejected value is a diagnostic."""
    from kvplan.engines.vllm import versions
    from kvplan.engines.vllm.args import EngineArgs

    rules = versions.select(ctx.vllm_version)
    KV_CACHE_DTYPES, QUANTIZATIONS = rules.kv_spec.KV_CACHE_DTYPES, rules.quantization.QUANTIZATIONS

    kwargs: dict[str, Any] = {"vllm_version": ctx.vllm_version}
    eng = _EngineInputs()
    eng.blockers += sorted(f for f in dep.invalid if f in _ENGINE_FIELDS)
    for name, s in dep.settings.items():
        base = name.split(".", 1)[0]
        if s.literal:
            read = name in _READ_FLAGS
            dep.diag(
                LITERAL_VARIABLE,
                "error" if read else "warning",
                f"{s.value!r} is not expanded ({dep.literal_reason}): --{name} gets the text as it is"
                + ("; `vllm serve` exits or loads the wrong thing" if read else ""),
                line=s.line,
                key=s.key,
                hint=_literal_hint(dep),
            )
            if name in _ENGINE_FIELDS:
                eng.blockers.append(name)
            continue
        if s.unresolved and (name in _ENGINE_FIELDS or name in _OTHER_INT_FLAGS or name == "revision"):
            dep.diag(
                UNRESOLVED_VALUE,
                "warning",
                f"{s.value!r} uses {', '.join('$' + v for v in s.unresolved)}, which is not set in this file; "
                f"kvplan checks with vLLM's default for --{name}",
                line=s.line,
                key=s.key,
            )
            continue
        if name == "revision":
            eng.revision = str(s.value)
            continue
        if base == "hf-overrides":
            hf_overrides_setting(ctx, dep, eng, name, s)
            continue
        if name in _OTHER_INT_FLAGS:
            try:
                eng.other[name] = int(str(s.value))
            except ValueError:
                dep.diag(INVALID_VALUE, "error", f"expected an integer, got {s.value!r}; `vllm serve` exits", line=s.line, key=s.key)
                eng.blockers.append(name)
                continue
            if name not in _ENGINE_FIELDS:
                continue
        if base in _NOT_MODELLED:
            # never an info note under a green verdict: the figures are approximate (a warning,
            # which check --strict fails on)
            dep.diag(
                NOT_MODELLED,
                "warning",
                f"approximate: kvplan does not model --{base} ({_NOT_MODELLED[base]}); its figures assume it is unset",
                line=s.line,
                key=s.key,
            )
            continue
        if name not in _ENGINE_FIELDS:
            continue
        fname, conv = _ENGINE_FIELDS[name]
        try:
            value = conv(s.value) if conv is not bool else bool(s.value)
        except (TypeError, ValueError) as exc:
            why = str(exc) if "decimals" in str(exc) else f"expected {'a number' if conv is float else 'an integer'}"
            dep.diag(INVALID_VALUE, "error", f"{why}, got {s.value!r}; `vllm serve` exits", line=s.line, key=s.key)
            eng.blockers.append(name)  # never evaluate with a value the file does not hold
            continue
        problem = value_problem(ctx, name, value, KV_CACHE_DTYPES, QUANTIZATIONS, checks)
        if problem is not None:
            check_id, severity, message, hint = problem
            dep.diag(check_id, severity, message, line=s.line, key=s.key, hint=hint)
            if check_id == NOT_MODELLED or severity == "error":
                eng.blockers.append(name)
            continue
        kwargs[fname] = value
        eng.keys[fname] = s
    while eng.args is None:
        try:
            eng.args = EngineArgs(**kwargs)
        except ValidationError as exc:
            for err in exc.errors():
                fname = str(err["loc"][0]) if err["loc"] else ""
                s = eng.keys.get(fname)
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"{plain_validation_message(err)}; `vllm serve` exits",
                    line=s.line if s else None,
                    key=s.key if s else fname,
                )
                kwargs.pop(fname, None)
                eng.blockers.append(fname)
                if not fname:
                    kwargs = {"vllm_version": ctx.vllm_version}
    return eng


def value_problem(ctx, name: str, value: Any, kv_dtypes, quantizations, checks: list[str]):
    """(check id, severity, message, hint) when vLLM rejects a value (CacheConfig
    gpu_memory_utilization in (0, 1], CacheDType / ModelDType choices) or kvplan cannot
    size it; None when the value is fine."""
    if name == "gpu-memory-utilization":
        checks.append(UTILIZATION_RANGE)
        if not (0 < value <= 1):
            return (
                UTILIZATION_RANGE,
                "error",
                f"{value} is outside (0, 1]: vLLM's CacheConfig rejects it and `vllm serve` exits",
                "use a fraction such as 0.9",
            )
    elif name == "kv-cache-dtype":
        if value not in ctx.cat.cache_dtypes:
            return (
                INVALID_VALUE,
                "error",
                f"{value!r} is not a vLLM {ctx.cat.version} KV-cache dtype; `vllm serve` exits",
                "choose from " + ", ".join(ctx.cat.cache_dtypes[:6]) + ", ...",
            )
        if value not in kv_dtypes:
            return (NOT_MODELLED, "warning", f"kvplan cannot size a {value} KV cache; memory checks skipped", None)
    elif name == "block-size" and value > 0 and value % 16:
        return (
            NOT_MODELLED,
            "warning",
            f"kvplan models block sizes that are multiples of 16 (FlashAttention); {value} is not: memory checks skipped",
            None,
        )
    elif name == "dtype" and value not in ctx.cat.model_dtypes:
        return (
            INVALID_VALUE,
            "error",
            f"{value!r} is not a vLLM {ctx.cat.version} dtype; `vllm serve` exits",
            "choose from " + ", ".join(ctx.cat.model_dtypes),
        )
    elif name == "quantization" and value.lower() not in quantizations:
        return (NOT_MODELLED, "warning", f"kvplan does not model --quantization {value}; memory checks skipped", None)
    return None


def hf_overrides_setting(ctx, dep: Deployment, eng: "_EngineInputs", name: str, s: Setting) -> None:
    """Read ``--hf-overrides JSON`` or a dotted ``--hf-overrides.KEY VALUE`` into
    ``eng.hf_overrides``, as vLLM's parser does (engine/arg_utils.py: a JSON object;
    utils/argparse_utils.py: dotted keys build a nested mapping from JSON or plain text,
    and that mapping is passed after the other arguments, so it replaces a whole
    ``--hf-overrides JSON`` given as well). A value kvplan cannot read is a warning: the
    overrides are not applied."""
    if s.unresolved:
        dep.diag(
            UNRESOLVED_VALUE, "warning",
            f"{s.value!r} uses {', '.join('$' + v for v in s.unresolved)}, which is not set in this file; "
            "kvplan did not apply --hf-overrides to the model's config",
            line=s.line, key=s.key,
        )
        eng.hf_overrides_setting = None
        eng.hf_overrides = None
        return
    if name == "hf-overrides":
        text = str(s.value)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            # engine/arg_utils.py union_dict_and_str: `{...}` must be JSON (else argparse
            # exits), other text stays a string, which ModelConfig.hf_overrides refuses
            dep.diag(
                INVALID_VALUE, "error",
                f"{_yaml_shown(s.value)} is not a JSON object; `vllm serve` exits",
                line=s.line, key=s.key, hint='write a JSON object such as \'{"max_position_embeddings": 262144}\'',
            )
            return
        if eng.hf_overrides_setting is not None and "." in eng.hf_overrides_setting.flag:
            return  # the dotted keys are passed last and win (see above)
        eng.hf_overrides, eng.hf_overrides_setting = value, s
        return
    path = name.split(".")[1:]
    text = str(s.value)
    try:
        value: Any = json.loads(text)
    except ValueError:
        try:
            value = parse_human_int(text)
        except (TypeError, ValueError):
            value = text
    if eng.hf_overrides_setting is None or "." not in eng.hf_overrides_setting.flag:
        eng.hf_overrides = {}
    target = eng.hf_overrides
    for part in path[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[path[-1]] = value
    eng.hf_overrides_setting = s


def _literal_hint(dep: Deployment) -> str:
    if dep.kind == "dockerfile":
        return 'write the value out, use the shell form (CMD vllm serve ...), or ["sh", "-c", "vllm serve $VAR ..."]'
    if dep.kind == "k8s":
        return "write $(NAME) with the variable in the container's env"
    return "write the value out, or `$VAR` (one $) for compose to substitute it"

