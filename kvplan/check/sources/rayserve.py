"""Ray Serve LLM configs (ray-project/ray, ``ray.serve.llm``): a ``serve run`` config whose
``applications[].args`` hold ``llm_configs`` (or ``prefill_config``/``decode_config`` for
prefill/decode disaggregation), or one LLMConfig file on its own.

An LLMConfig (ray python/ray/llm/_internal/serve/configs/server_models.py LLMConfig) gives
vLLM its ``engine_kwargs`` as AsyncEngineArgs keyword arguments (a key is the flag with
underscores; ``false`` is passed as False, i.e. the switch off), the model as
``model_loading_config.model_source`` (else ``model_id``), and the GPU model as
``accelerator_type`` (a Ray accelerator name such as A10G, L4, H100); each replica gets
tensor x pipeline GPUs (one placement-group bundle per worker). ``deployment_config``
(``num_replicas``, ``autoscaling_config``) scales replicas of the same engine. An
``llm_configs`` entry that is a file path is read when it is inside the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.check.deployment import Deployment
from kvplan.check.paths import outside_boundary
from kvplan.check.sources.stack import Arg, Role, replicas_at, role_deployments
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import InputError, YamlDoc, load_yaml, read_text


def is_llm_config(data: Any) -> bool:
    """One Ray LLMConfig mapping: ``model_loading_config`` and ``engine_kwargs`` or ``accelerator_type``."""
    return isinstance(data, dict) and isinstance(data.get("model_loading_config"), dict) and (
        "engine_kwargs" in data or "accelerator_type" in data)


def is_ray_serve(data: Any) -> bool:
    """A Ray Serve config with LLM applications, or one LLMConfig file."""
    if is_llm_config(data):
        return True
    apps = data.get("applications") if isinstance(data, dict) else None
    return isinstance(apps, list) and any(
        isinstance(a, dict) and isinstance(a.get("args"), dict)
        and any(k in a["args"] for k in ("llm_configs", "prefill_config", "decode_config")) for a in apps)


def _engine_args(kwargs: dict, doc: YamlDoc, path: tuple, key: str, cat: FlagCatalogue) -> list[Arg]:
    out: list[Arg] = []
    for k, v in kwargs.items():
        name = str(k).replace("_", "-")
        line, kk = doc.line_of(path + (str(k),)), f"{key}.{k}"
        if v is None:
            continue
        if v is True:
            out.append(Arg(f"--{name}", line, kk))
        elif v is False:
            if cat.arity.get(name) == "negatable":
                out.append(Arg(f"--no-{name}", line, kk))
            # a store_true switch set False is its default: nothing to pass
        else:
            text = json.dumps(v) if isinstance(v, (dict, list)) else str(v)
            out += [Arg(f"--{name}", line, kk), Arg(text, line, kk)]
    return out


def _role(cfg: dict, doc: YamlDoc, path: tuple, key: str, name: str, cat: FlagCatalogue) -> Role:
    role = Role(name=name, line=doc.line_of(path), kind="ray-serve", syntax="exec")
    mlc = cfg.get("model_loading_config") if isinstance(cfg.get("model_loading_config"), dict) else {}
    for mk in ("model_source", "model_id"):
        if isinstance(mlc.get(mk), str):
            role.model = (mlc[mk], doc.line_of(path + ("model_loading_config", mk)), f"{key}.model_loading_config.{mk}")
            break
    else:
        role.model_unknown = ("(none)", role.line, f"{key}.model_loading_config.model_source",
                              "the LLMConfig names no model_loading_config.model_source or model_id")
    dc = cfg.get("deployment_config")
    replicas_at(role, doc, dc, path + ("deployment_config",), "num_replicas", f"{key}.deployment_config.num_replicas".lstrip("."))
    kwargs = cfg.get("engine_kwargs") if isinstance(cfg.get("engine_kwargs"), dict) else {}
    role.args = _engine_args(kwargs, doc, path + ("engine_kwargs",), f"{key}.engine_kwargs", cat)
    if isinstance(cfg.get("accelerator_type"), str):
        role.gpu = (cfg["accelerator_type"], doc.line_of(path + ("accelerator_type",)), f"{key}.accelerator_type")
    return role


def ray_serve_deployments(doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict,
                          base_dir: Path | None = None, problems: list | None = None) -> list[Deployment]:
    """One Deployment per LLMConfig (see the module doc). An ``llm_configs`` path that cannot be
    read is a (line, key, message, hint) in ``problems``: check reports it as a no-deployment
    warning on the file (it fails --strict; never a silent pass)."""
    data = doc.data
    if is_llm_config(data):
        return role_deployments(_role(data, doc, (), "", "LLMConfig", cat), file, raw, cat)
    out: list[Deployment] = []
    for ai, app in enumerate(data.get("applications") or []):
        args = app.get("args") if isinstance(app, dict) and isinstance(app.get("args"), dict) else {}
        apath = ("applications", ai, "args")
        aname = app.get("name", ai) if isinstance(app, dict) else ai
        items = [(("llm_configs", i), c) for i, c in enumerate(args.get("llm_configs") or [])]
        items += [((k,), args[k]) for k in ("prefill_config", "decode_config") if k in args]
        for sub, cfg in items:
            path = apath + sub
            key = f"applications[{ai}].args." + ".".join(str(s) if not isinstance(s, int) else f"[{s}]" for s in sub).replace(".[", "[")
            name = f"application {aname} {sub[0]}" + (f"[{sub[1]}]" if len(sub) > 1 else "")
            if isinstance(cfg, str):
                loaded = _load_config_file(cfg, base_dir)
                if isinstance(loaded, str):
                    if problems is not None:
                        problems.append((doc.line_of(path), key, f"{cfg}: {loaded}; this LLMConfig is not checked",
                                         f"give kvplan check the file {cfg} itself"))
                    continue
                sub_doc, sub_file = loaded
                out += role_deployments(_role(sub_doc.data, sub_doc, (), "", name, cat), sub_file, read_text(Path(sub_file)).split("\n"), cat)
                continue
            if isinstance(cfg, dict):
                out += role_deployments(_role(cfg, doc, path, key, name, cat), file, raw, cat)
    return out


def _load_config_file(name: str, base_dir: Path | None):
    """(YamlDoc, path shown) of an llm_configs file (looked for next to the serve config, then
    in the working directory, inside the repository only), or why it cannot be read."""
    from kvplan.check.paths import _display_path

    cands = [Path(name)] if Path(name).is_absolute() else ([base_dir / name] if base_dir else []) + [Path.cwd() / name]
    found = next((c for c in cands if c.is_file()), None)
    if found is None:
        return "no such file next to the serve config or in the working directory"
    if outside_boundary(found, base_dir or Path.cwd(), name) is not None:
        return "outside the repository; not read"
    try:
        docs = [d for d in load_yaml(read_text(found)) if d.data is not None]
    except InputError as exc:
        return exc.message
    if len(docs) != 1 or not is_llm_config(docs[0].data):
        return "not one LLMConfig mapping"
    return docs[0], _display_path(str(found))
