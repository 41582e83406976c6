"""kvplan.yaml: the targets of a deployment (``Targets``, also the ``kvplan:`` block of a vLLM
config and ``# kvplan:`` comments), the manifest of several deployments, and the
node_selectors a Kubernetes file below it takes its GPU from.

The functions take ``ctx``, the run's Checker (its flag catalogue ``ctx.cat`` and the
node-selector lookup cache ``ctx._manifests``).
vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvplan.check.deployment import Deployment, parse_serve_args
from kvplan.check.diagnostics import INVALID_KVPLAN_KEY, MULTIPLE_DOCUMENTS, Diagnostic
from kvplan.check.messages import _pydantic_message, _yaml_shown
from kvplan.check.paths import _display_path, _lookup_ceiling, _real, is_stdin, link_out_of_repository, outside_boundary
from kvplan.check.report import FileResult, add_parse_error
from kvplan.check.sources.detect import detect_kind, yaml_doc_kind
from kvplan.check.sources.invocation import deployment_from_invocation
from kvplan.check.sources.shell import _locate, serve_calls_in_text
from kvplan.check.sources.vllm_config import (
    config_tokens,
    deployment_from_config,
    describe_yaml,
    duplicate_top_keys,
    multiple_documents_problem,
)
from kvplan.io.files import InputError, YamlDoc, load_yaml, read_text


class Targets(BaseModel):
    """The ``kvplan:`` mapping of a vLLM config file (also ``# kvplan: k=v`` comments and the
    fields of a ``kvplan.yaml`` deployment): the hardware and the targets to check against."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: Optional[str] = Field(None, description="GPU profile id or alias (see `kvplan gpus`), e.g. H100-80GB.")
    gpu_count: Optional[int] = Field(
        None, ge=1, description="GPUs this deployment gets on one node; must cover tensor x pipeline x data parallel."
    )
    model: Optional[str] = Field(
        None,
        description="Check as this model (a Hub id or bundled spec) when the deployment loads from a path "
        "that does not exist where kvplan runs.",
    )
    min_concurrency: Optional[float] = Field(
        None, gt=0, allow_inf_nan=False, description="Requests that must fit in the KV cache at once, each of request_len tokens."
    )
    request_len: Optional[int] = Field(
        None, gt=0, description="Tokens per request (prompt + output) for min_concurrency; default max_model_len."
    )
    max_gpu_memory_utilization: Optional[float] = Field(
        None, gt=0, le=1, allow_inf_nan=False, description="Fail when --gpu-memory-utilization (default 0.92) is above this fraction."
    )
    vllm_version: Optional[str] = Field(
        None,
        min_length=1,
        description="The vLLM version this deployment runs (X.Y.Z, quoted in YAML), checked with that version's "
        "rules; below --vllm-version, above the image tag. A version kvplan has no rules for is a warning "
        "naming the nearest supported one, which is used.",
    )


class ManifestDeployment(Targets):
    """One deployment in ``kvplan.yaml``: a vLLM config file, a `vllm serve` command line, or a
    model with a mapping of `vllm serve` flags; plus targets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Deployment name used in messages.")
    config: Optional[str] = Field(None, description="Path (relative to kvplan.yaml) of a vLLM --config YAML file.")
    command: Optional[str] = Field(None, description="A `vllm serve MODEL --flag value ...` command line.")
    args: Optional[dict[str, Any]] = Field(
        None, description="`vllm serve` flags as in a --config YAML file (dashes or underscores)."
    )


class Manifest(BaseModel):
    """``kvplan.yaml`` at the repository root: deployments to check and the Kubernetes
    node-selector -> GPU profile mapping used for k8s files anywhere below it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_selectors: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="label -> label value -> GPU profile, e.g. "
        "{'nvidia.com/gpu.product': {'NVIDIA-H100-80GB-HBM3': 'H100-80GB'}}.",
    )
    deployments: list[ManifestDeployment] = Field(default_factory=list)
    vllm_version: Optional[str] = Field(
        None,
        min_length=1,
        description="The vLLM version of every deployment listed here that names none itself (X.Y.Z, quoted in YAML).",
    )


_MISSING_NAME = "required: every deployment needs a name (used in messages)"


def _manifest_key(loc: tuple) -> str:
    """A kvplan.yaml key path as check prints it: ("deployments", 0, "name") -> deployments[0].name."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def covered_by_manifests(ctx, paths: list[str]) -> set[str]:
    """Real paths of the --config files that the kvplan.yaml manifests among ``paths`` name
    (``deployments[].config``, relative to the manifest). A manifest that cannot be read
    covers nothing (check_file reports it)."""
    covered: set[str] = set()
    for p in paths:
        path = Path(p)
        if is_stdin(p) or path.suffix.lower() not in (".yaml", ".yml"):
            continue
        try:
            docs = load_yaml(read_text(path))
        except (InputError, OSError):
            continue
        if detect_kind(path, docs, ctx.cat) != "manifest":
            continue
        for doc in docs:
            entries = doc.data.get("deployments") if isinstance(doc.data, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("config"), str) and entry["config"].strip():
                    if outside_boundary(path.parent / entry["config"], path.parent, entry["config"]):
                        continue  # refused there, unread: a file named here is checked on its own
                    cfg = _real(str(path.parent / entry["config"]))
                    if cfg != _real(p):
                        covered.add(cfg)
    return covered


def node_selectors_for(ctx, path: Path, fr: FileResult) -> tuple[dict, str | None]:
    """kvplan.yaml's node_selectors from the nearest directory at or above the file's own,
    and that kvplan.yaml as shown in messages (None when none is used).

    The search stops at the file's repository root (the nearest directory with a ``.git``);
    outside a repository, at the working directory, never above it (a file outside the
    working directory: its own directory only). A stray kvplan.yaml in /tmp or $HOME does
    not remap GPUs."""
    start = path.resolve().parent
    ceiling = _lookup_ceiling(start)
    d = start
    seen = []
    while True:
        if d in ctx._manifests:
            found = ctx._manifests[d]
            break
        seen.append(d)
        cand = next((d / n for n in ("kvplan.yaml", "kvplan.yml") if (d / n).is_file()), None)
        escape = link_out_of_repository(cand) if cand is not None else None
        if escape is not None:
            add_parse_error(fr, escape, file=_display_path(str(cand)))
            found = None
            break
        if cand is not None:
            manifest = load_manifest_file(ctx, cand, fr)
            found = (manifest, _display_path(str(cand))) if manifest is not None else None
            break
        if d == ceiling or d.parent == d:
            found = None
            break
        d = d.parent
    for s in seen:
        ctx._manifests[s] = found
    return (found[0].node_selectors, found[1]) if found is not None else ({}, None)


def load_manifest_file(ctx, cand: Path, fr: FileResult) -> Manifest | None:
    """The kvplan.yaml that supplies node_selectors, validated as ``kvplan check
    kvplan.yaml`` and ``kvplan schema manifest`` do (the Manifest model: a deployment needs
    a name, targets must be finite ...); None with its problems on ``fr`` (same key, line
    and message as when the file is checked directly)."""
    shown = _display_path(str(cand))
    doc = None
    try:
        docs = [d for d in load_yaml(read_text(cand)) if d.data is not None]
        if len(docs) > 1:
            raise InputError("kvplan.yaml must be one YAML mapping (node_selectors, deployments)", docs[1].line)
        doc = docs[0] if docs else None
        return Manifest.model_validate(doc.data if doc is not None else {})
    except InputError as exc:
        add_parse_error(fr, exc.message, exc.line, file=shown)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            if err["type"] == "missing" and loc[-1:] == ("name",) and loc[:1] == ("deployments",):
                message = _MISSING_NAME
            else:
                message = _pydantic_message(err, Manifest)
            fr.diagnostics.append(
                Diagnostic(
                    check_id=INVALID_KVPLAN_KEY,
                    severity="error",
                    file=shown,
                    line=doc.line_of(loc) if doc is not None else None,
                    key=_manifest_key(loc),
                    message=message,
                )
            )
    return None


def manifest_deployments(ctx, docs: list[YamlDoc], path: Path, shown: str, raw: list[str], fr: FileResult) -> list[Deployment]:
    docs = [d for d in docs if d.data is not None]  # kvplan reads it: empty documents are harmless
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        where = docs[1].line if len(docs) > 1 else (docs[0].line if docs else None)
        add_parse_error(fr, "kvplan.yaml must be one YAML mapping (node_selectors, deployments)", where)
        return []
    doc = docs[0]
    data = doc.data
    problems = []
    try:
        Manifest.model_validate({k: v for k, v in data.items() if k != "deployments"})
    except ValidationError as exc:
        problems = exc.errors()
    for err in problems:
        loc = tuple(str(p) if not isinstance(p, int) else p for p in err["loc"])
        fr.diagnostics.append(
            Diagnostic(
                check_id=INVALID_KVPLAN_KEY,
                severity="error",
                file=shown,
                line=doc.line_of(loc),
                key=".".join(str(p) for p in loc),
                message=_pydantic_message(err, Manifest),
            )
        )
    entries = data.get("deployments") or []
    if not isinstance(entries, list):
        fr.diagnostics.append(
            Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=doc.line_of(("deployments",)), key="deployments", message="must be a list")
        )
        return []
    deps = []
    base = path.parent
    for i, entry in enumerate(entries):
        epath = ("deployments", i)
        eline = doc.line_of(epath)
        if not isinstance(entry, dict):
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=eline, key=f"deployments[{i}]", message="must be a mapping")
            )
            continue
        if not isinstance(entry.get("name"), str):  # the schema's rule (ManifestDeployment.name)
            fr.diagnostics.append(
                Diagnostic(
                    check_id=INVALID_KVPLAN_KEY,
                    severity="error",
                    file=shown,
                    line=doc.line_of(epath + ("name",)),
                    key=f"deployments[{i}].name",
                    message=_MISSING_NAME if "name" not in entry else f"expected text (got {_yaml_shown(entry['name'])})",
                )
            )
        name = str(entry.get("name") or f"deployments[{i}]")
        sources = [k for k in ("config", "command", "args") if entry.get(k) is not None]
        dep: Deployment | None = None
        if len(sources) > 1:
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=eline, key=f"deployments[{i}]", message=f"give one of config, command or args (got {', '.join(sources)})")
            )
            continue
        if "config" in sources:
            dep = manifest_config(ctx, entry, i, name, doc, path, shown, fr)
            if dep is None:
                continue
        elif "command" in sources:
            cmd = str(entry["command"])
            span = doc.spans.get(epath + ("command",)) or (eline, eline)
            calls, _ = serve_calls_in_text(cmd.split("\n"), {})
            if not calls:
                fr.diagnostics.append(
                    Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=span[0], key=f"deployments[{i}].command", message="no `vllm serve` call in the command")
                )
                continue
            inv = calls[0]
            inv.lines = list(_locate(inv.words, raw, span[0] - 1, span[1] - 1))
            dep = deployment_from_invocation(inv, shown, name, "manifest", ctx.cat)
            dep.line = eline
        else:
            dep = Deployment(name=name, file=shown, line=eline, kind="manifest")
            args = entry.get("args") or {}
            if not isinstance(args, dict):
                dep.diag(INVALID_KVPLAN_KEY, "error", "must be a mapping of `vllm serve` flags", key=f"deployments[{i}].args")
                args = {}
            toks = config_tokens(dep, args, lambda k: doc.lines.get(epath + ("args", k), eline), ctx.cat, key_prefix=f"deployments[{i}].args.")
            parse_serve_args(dep, toks, ctx.cat, positional_model=False)
            if entry.get("model") is not None:
                dep.model, dep.model_line, dep.model_key = str(entry["model"]), doc.line_of(epath + ("model",)), f"deployments[{i}].model"
        served_here = "config" not in sources and "command" not in sources
        for k, v in entry.items():
            if k in ("name", "config", "command", "args") or (k == "model" and served_here):
                continue  # (for args/model entries `model` is the served model, set above)
            dep.set_target(str(k), v, doc.line_of(epath + (str(k),)), f"deployments[{i}].{k}")
        if isinstance(data.get("vllm_version"), str):
            if "vllm_version" not in entry:
                dep.set_target("vllm_version", data["vllm_version"], doc.line_of(("vllm_version",)), "vllm_version")
            else:  # the fallback when the deployment's own vllm_version is invalid (kvplan.check.version)
                dep.manifest_version = (data["vllm_version"], doc.line_of(("vllm_version",)))
        if "vllm_version" in dep.target_keys:
            dep.version_file = shown
        deps.append(dep)
    return deps


def manifest_config(ctx, entry: dict, i: int, name: str, doc: YamlDoc, path: Path, shown: str, fr: FileResult):
    """The deployment of a kvplan.yaml entry with ``config: FILE`` (relative to kvplan.yaml),
    or None with one diagnostic on ``fr`` when FILE cannot be a vLLM --config file: this
    kvplan.yaml itself, a name vLLM's loader refuses (not .yaml/.yml), unreadable, not YAML,
    or not one mapping of `vllm serve` flags. The other entries are checked either way.

    Rule source: vLLM utils/argparse_utils.py load_config_file (yaml/yml only,
    yaml.safe_load of one document, every top-level key a flag).
    """
    raw_cfg = str(entry["config"])
    key, line = f"deployments[{i}].config", doc.line_of(("deployments", i, "config"))
    cfg = path.parent / raw_cfg
    cshown = _display_path(str(cfg))

    def bad_key(message: str, hint: str | None = None) -> None:
        fr.diagnostics.append(
            Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=line, key=key,
                       message=message, hint=hint, deployment=name)
        )

    outside = outside_boundary(cfg, path.parent, raw_cfg)
    if outside is not None:  # outside the boundary: not read, so nothing of it reaches CI logs
        bad_key(*outside)
        return None
    try:
        same = cfg.exists() and cfg.resolve() == path.resolve()
    except OSError:
        same = False
    if same:
        bad_key(f"{raw_cfg} is this kvplan.yaml itself, not a vLLM --config file",
                "name the YAML file given to `vllm serve --config`, e.g. deploy/chat.yaml")
        return None
    if cfg.suffix.lower() not in (".yaml", ".yml"):
        bad_key(f"{raw_cfg}: vLLM reads a --config file only when its name ends in .yaml or .yml "
                "(`vllm serve` exits with 'Config file must be of a yaml/yml type')")
        return None
    try:
        ctext = read_text(cfg)
        cdocs = load_yaml(ctext)
    except InputError as exc:
        add_parse_error(fr, f"{exc.message} (deployment {name!r} of {shown})", exc.line, file=cshown)
        return None
    mappings = [d for d in cdocs if isinstance(d.data, dict)]
    what = None
    if len(mappings) > 1:
        what = f"holds {len(mappings)} YAML mappings"
    elif len(mappings) != 1 or any(d.data is not None and not isinstance(d.data, dict) for d in cdocs):
        what = describe_yaml(cdocs)
    else:
        kind = yaml_doc_kind(mappings[0].data, ctx.cat)
        if kind in ("k8s", "compose", "manifest"):
            what = "holds " + {"k8s": "a Kubernetes object", "compose": "a docker-compose file",
                               "manifest": "a kvplan.yaml (deployments)"}[kind]
    if what is not None:
        add_parse_error(
            fr,
            f"a vLLM --config file must be one YAML mapping of `vllm serve` flags; it {what} "
            f"(deployment {name!r} of {shown})",
            mappings[1].line if len(mappings) > 1 else None,
            file=cshown,
        )
        return None
    dups = duplicate_top_keys(ctext)
    dep = deployment_from_config(mappings[0], cshown, ctx.cat, name=name, duplicates=dups[0] if dups else ())
    problem = multiple_documents_problem(cdocs, ctext.split("\n"))
    if problem is not None:
        dep.diag(MULTIPLE_DOCUMENTS, "error", problem[1], line=problem[0], hint=problem[2])
    return dep
