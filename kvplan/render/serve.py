"""The `vllm serve` line and vLLM ``--config`` YAML for a Plan: the user's flags, kvplan's fixes
and pins, in the version's flag spelling (kvplan.engines.vllm.flags, the version's catalogue).
"""

from __future__ import annotations

from kvplan.engines.vllm import flags
from kvplan.engines.vllm.args import ENGINE_ARGS
from kvplan.capacity.estimate import Plan
from kvplan.capacity.recommend import recommendations


# The engine arguments a serve line can carry as the user set them: every row of ENGINE_ARGS with
# a `vllm serve` flag, in the table's order, except --max-model-len (serve_settings writes it only
# when it is not the model's own), --vllm-version (kvplan's, not vLLM's) and
# --disable-hybrid-kv-cache-manager (no kvplan flag sets it).
HF_OVERRIDES_FLAG = "--hf-overrides"  # vLLM's spelling (engine/arg_utils.py ModelConfig.hf_overrides)
_NOT_EXPLICIT = ("max_model_len", "vllm_version", "disable_hybrid_kv_cache_manager")
EXPLICIT_FIELDS = tuple(a.name for a in ENGINE_ARGS if a.flags and a.name not in _NOT_EXPLICIT)


def explicit_args(plan: Plan) -> dict:
    """The engine arguments the user set (kvplan's EngineArgs minus None/defaults)."""
    a = plan.args
    out = {}
    for key in EXPLICIT_FIELDS:
        v = getattr(a, key)
        if key == "gpu_memory_utilization" and key not in a.model_fields_set:
            continue  # EngineArgs' default, not the user's (vLLM 0.34.0 resolves an unset one per sizing path)
        if v is not None:
            out[key] = v
    if a.usage == "llm":
        # The offline LLM class's batch defaults differ from `vllm serve`'s: pin what was sized.
        out.setdefault("max_num_batched_tokens", plan.effective["max_num_batched_tokens"])
        out.setdefault("max_num_seqs", plan.effective["max_num_seqs"])
    return out


def _served_model(name: str) -> str:
    """What `vllm serve` takes: the directory when kvplan was given a path to a config.json."""
    if name.endswith("config.json") and ("/" in name or "\\" in name or name == "config.json"):
        import os.path

        return os.path.dirname(name) or "."
    return name


def serve_settings(plan: Plan, revision: str | None = None) -> list[dict]:
    """What the serve line carries, in order: ``{"flag", "value", "origin", "tokens"}`` per flag.

    ``origin`` is "user" (a flag the user set to something other than vLLM's default),
    "recommended" (a fix or pin from kvplan.capacity.recommend, which replaces the user's value of the same
    flag) or "pinned" (the offline LLM class's batch sizes kvplan sized). ``--max-model-len`` is
    written only when it is not the model's own default (vLLM's default when the flag is absent).
    """
    values = explicit_args(plan)
    origin = {k: "user" for k in values}
    if plan.args.usage == "llm":
        for k in ("max_num_batched_tokens", "max_num_seqs"):
            if getattr(plan.args, k) is None:
                origin[k] = "pinned"
    a_mml = plan.args.max_model_len
    if a_mml is not None and a_mml != plan.spec.derived_max_model_len:
        values["max_model_len"] = "auto" if a_mml == -1 else a_mml
        origin["max_model_len"] = "user"
    if revision:
        values["revision"] = revision
        origin["revision"] = "user"
    catalogue = plan.rules.serve_flags  # the plan's version's defaults decide what the line may omit
    field_of = {flag: f for f, (flag, _) in catalogue.items()}
    for r in recommendations(plan):
        f = field_of.get(r.flag)
        if f is not None and r.in_serve_line:
            values[f] = r.value
            origin[f] = "recommended"
    out = [
        {"flag": toks[0], "value": toks[1] if len(toks) > 1 else True, "origin": origin[f], "tokens": toks, "field": f}
        for f, toks in flags.serve_tokens(values, catalogue)
    ]
    for toks in plan.serve_extras:  # the user's flags kvplan did not size, as given (cli/serve_extras.py)
        flag, _, explicit = toks[0].partition("=")
        value = explicit if explicit else (" ".join(toks[1:]) if len(toks) > 1 else True)
        out.append({"flag": flag, "value": value, "origin": "user", "tokens": list(toks), "field": None})
    if plan.spec.hf_overrides:
        # the config kvplan sized is the overridden one: vLLM must get the same overrides
        text = plan.spec.hf_overrides
        out.append({"flag": HF_OVERRIDES_FLAG, "value": text, "origin": "user", "tokens": [HF_OVERRIDES_FLAG, text],
                    "field": "hf_overrides"})
    return out


def serve_env(plan: Plan, revision: str | None = None) -> dict[str, str]:
    """The environment the serve line needs to start as predicted: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    when the line's --max-model-len (after kvplan's fixes) is above the model's derived max length
    (vLLM config/model.py _get_and_verify_max_len refuses it otherwise); {} otherwise."""
    for st in serve_settings(plan, revision):
        if st["field"] == "max_model_len" and st["value"] != "auto":
            return plan.start_env(int(st["value"]))
    return {}


def serve_command(plan: Plan, revision: str | None = None) -> str:
    """The copy-pasteable ``vllm serve`` line: the user's flags plus kvplan's fixes (serve_settings),
    preceded by the ``NAME=VALUE`` assignments of serve_env when vLLM needs them to start."""
    import shlex

    toks = [t for s in serve_settings(plan, revision) for t in s["tokens"]]
    env = [f"{k}={shlex.quote(v)}" for k, v in serve_env(plan, revision).items()]
    return " ".join([*env, shlex.join(["vllm", "serve", _served_model(plan.spec.name), *toks])])

def config_yaml(plan: Plan, revision: str | None = None) -> str:
    """A vLLM ``--config`` file for this plan."""
    import json

    import yaml

    args = {}
    extra: dict = {}
    overrides = None
    for st in serve_settings(plan, revision):
        if st["field"] == "hf_overrides":
            overrides = json.loads(st["value"])  # vLLM's --config turns a mapping back into JSON
        elif st["field"] is None:  # a flag kvplan did not size: kept under its own name
            extra[st["flag"].lstrip("-")] = _extra_value(st)
        elif st["flag"].startswith("--no-"):
            args[st["field"]] = False
        else:
            args[st["field"]] = True if st["value"] is True else _typed(st["value"])
    doc = flags.config_yaml_dict(_served_model(plan.spec.name), args, None, plan.rules.serve_flags)
    if overrides is not None:
        doc[HF_OVERRIDES_FLAG[2:]] = overrides
    doc.update(extra)
    text = yaml.safe_dump(doc, sort_keys=False)
    env = serve_env(plan, revision)
    if env:
        # vLLM reads these from its environment, not from --config: say so where the YAML is copied.
        text = "".join(f"# start vLLM with {k}={v} in its environment\n" for k, v in env.items()) + text
    return text


def _extra_value(st: dict):
    """A kept flag's --config value (vLLM load_config_file: ``key: true`` is the bare switch, a
    list is nargs="+" values; ``--no-X`` is written as ``no-X: true``)."""
    toks = st["tokens"]
    if "=" in toks[0]:
        return _typed(toks[0].split("=", 1)[1])
    if len(toks) == 1:
        return True
    return _typed(toks[1]) if len(toks) == 2 else [_typed(t) for t in toks[1:]]


def _typed(raw: str):
    """A serve-line value back as int / float / text (for the --config YAML)."""
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def approximate_warning(plan: Plan) -> str | None:
    """The stderr line of ``--format yaml/serve`` for an approximate estimate (``plan.exact``
    False: an architecture without a kvplan family), None when exact."""
    if plan.exact:
        return None
    return "warning: approximate estimate, not exact: " + "; ".join(a.reason for a in plan.approximations)


def no_start_warning(plan: Plan) -> str:
    """The stderr line of ``--format yaml/serve`` for a plan that does not start: the failure
    and which of kvplan's fixes the line carries (kvplan.capacity.recommend)."""
    fixes = [f"{r.flag} {r.value}" for r in recommendations(plan) if r.in_serve_line]
    fix = (
        "; the line below adds kvplan's fixes: " + ", ".join(fixes)
        if fixes
        else "; kvplan found no flag that fixes it (`kvplan estimate` without --format says why)"
    )
    return f"warning: this configuration does not start: {plan.failure}{fix}"
