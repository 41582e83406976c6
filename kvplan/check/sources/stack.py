"""What every serving stack's manifest reader shares: a ``Role`` (one vLLM server a stack starts,
as the stack's controller or Helm chart builds its `vllm serve` line) and the Deployment it
becomes.

A stack keeps vLLM's settings in its own keys (KServe ``spec.parallelism.tensor``, llm-d
``decode.parallelism``, production-stack ``vllmConfig.maxModelLen``, Ray ``engine_kwargs``);
each reader in this package turns them into the flags `vllm serve` gets, in vLLM's spelling,
each with the manifest key and line it came from, so check's findings point at the key the
user wrote. Free-form arguments (container ``args``, KServe's ``VLLM_ADDITIONAL_ARGS``) are
read as the platform passes them. Flags kvplan does not size (--enable-expert-parallel,
--speculative-config, --kv-transfer-config ...) are kept in the flags, where check's
not-modelled rule reports them (kvplan.check.rules.inputs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.check.deployment import Deployment, _int_or_none, expand_tokens, parse_serve_args
from kvplan.check.diagnostics import IGNORED_FLAG, INVALID_VALUE, REPLICAS
from kvplan.check.sources.invocation import deployment_from_invocation
from kvplan.check.sources.shell import LITERAL_REASONS, serve_calls_in_argv
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc


@dataclass
class Arg:
    """One argument of a role's `vllm serve` line: its text, line, and the manifest key that
    set it (None for a word the user wrote as an argument: it is named by its own text)."""

    text: str
    line: int | None
    key: str | None = None


@dataclass
class Role:
    """One vLLM server a stack starts (a decode or prefill role, a worker service, a model spec).

    Attributes:
        name: shown in messages ("LLMInferenceService/x prefill").
        line: where it is declared.
        kind: the stack ("kserve", "llm-d", "dynamo", "production-stack", "ray-serve").
        model: (Hub id or path, line, key) of the served model; None when the manifest names
            none it can be read from (``model_unknown`` says why).
        model_unknown: (text shown, line, key, why) when the model cannot be determined.
        args: the flags after the model, in the order the stack passes them.
        command: a user's own command (argv words with lines) that replaces the stack's
            `vllm serve` line; read like a Kubernetes container's (shell scripts included).
        env / runtime / notes: the container's environment as Kubernetes builds it
            (kvplan.check.sources.k8s._k8s_env).
        syntax: how variables in ``args``/``command`` are expanded ("k8s", "exec").
        gpu_count: (GPUs the server gets, line, key).
        gpu_group: a multi-pod group (this pod's GPUs, pods, leader GPUs, worker GPUs).
        gpu: (GPU profile name, line, key) when the manifest names the GPU model.
        host_memory: (bytes, line, key): the container's memory limit.
        image: (image, line, key).
        pod / pod_path: the pod spec whose node selectors map to a GPU (kvplan.yaml).
    """

    name: str
    line: int | None
    kind: str
    model: tuple[str, int | None, str] | None = None
    model_unknown: tuple[str, int | None, str, str] | None = None
    args: list[Arg] = field(default_factory=list)
    command: list[tuple[str, int | None]] | None = None
    env: dict[str, str] = field(default_factory=dict)
    runtime: frozenset[str] = frozenset()
    notes: dict[str, str] = field(default_factory=dict)
    syntax: str = "k8s"
    gpu_count: tuple[int | None, int | None, str] | None = None
    gpu_group: tuple | None = None
    gpu: tuple[str, int | None, str] | None = None
    host_memory: tuple[int, int | None, str] | None = None
    image: tuple[str, int | None, str] | None = None
    pod: dict | None = None
    pod_path: tuple = ()
    visible_devices: tuple[str, int | None] | None = None  # CUDA_VISIBLE_DEVICES the stack sets: (value, line)
    ignored: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, key, why): keys the stack does not pass
    replicas: tuple[Any, int | None, str] | None = None  # (replicas as written, line, key)
    invalid: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, key, why): the stack refuses it
    shm: Any = None  # the /dev/shm of the server's container (check.sources.shm ShmSize); None: not read


def flag(name: str, value: Any, doc: YamlDoc, path: tuple, key: str) -> list[Arg]:
    """``--name value`` (``--name`` alone for True; nothing for False/None) set by the manifest
    key at ``path``, named ``key`` in messages."""
    line = doc.line_of(path)
    if value is None or value is False:
        return []
    if value is True:
        return [Arg(f"--{name}", line, key)]
    return [Arg(f"--{name}", line, key), Arg(str(value), line, key)]


def words_at(doc: YamlDoc, path: tuple, items: Any) -> list[Arg]:
    """A YAML list of argument words (a container's ``args``) with each item's line."""
    if not isinstance(items, list):
        return []
    return [Arg(str(w), doc.lines.get(path + (i,), doc.line_of(path))) for i, w in enumerate(items)]


_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|m)?\s*$")
_UNITS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}


def quantity_bytes(value: Any) -> int | None:
    """A Kubernetes memory quantity ("32Gi", "16G", 17179869184) in bytes; None when it is not
    one (Kubernetes resource.Quantity: binary Ki..Pi, decimal k..P suffixes)."""
    m = _QUANTITY.match(str(value)) if value is not None else None
    if m is None or m.group(2) == "m":
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def container_resources(role: Role, container: dict, doc: YamlDoc, cpath: tuple, gpu_resource: str = "nvidia.com/gpu") -> None:
    """Set the role's GPU count (limits, else requests) and host memory limit from a
    Kubernetes container's ``resources``."""
    res = container.get("resources") if isinstance(container.get("resources"), dict) else {}
    for part in ("limits", "requests"):
        vals = res.get(part) if isinstance(res.get(part), dict) else {}
        if gpu_resource in vals and role.gpu_count is None:
            role.gpu_count = (_int_or_none(vals[gpu_resource]), doc.line_of(cpath + ("resources", part, gpu_resource)),
                              f"resources.{part}.{gpu_resource}")
    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
    mem = quantity_bytes(limits.get("memory"))
    if mem is not None:
        role.host_memory = (mem, doc.line_of(cpath + ("resources", "limits", "memory")), "resources.limits.memory")
    if isinstance(container.get("image"), str):
        role.image = (container["image"], doc.line_of(cpath + ("image",)), "image")


def role_deployments(role: Role, file: str, raw: list[str], cat: FlagCatalogue) -> list[Deployment]:
    """The Deployment(s) of one role: its `vllm serve` flags read as vLLM reads them, its model,
    GPUs, image and host memory limit. A role whose ``command`` runs no `vllm serve` gives none
    (a Ray worker pod, a sidecar)."""
    if role.command is not None:
        words = [w for w, _ in role.command]
        lines = [ln for _, ln in role.command]
        invs = serve_calls_in_argv(words, lines, role.line or 1, env=role.env, raw=raw, syntax=role.syntax,
                                   notes=role.notes, runtime=role.runtime)
        deps = [deployment_from_invocation(inv, file, role.name, role.kind, cat) for inv in invs]
    else:
        dep = Deployment(name=role.name, file=file, line=role.line, kind=role.kind)
        dep.literal_reason = LITERAL_REASONS.get(role.syntax, "")
        dep.var_notes = dict(role.notes)
        dep.process_env = dict(role.env)  # the container's environment is vLLM's (VLLM_ALLOW_LONG_MAX_MODEL_LEN ...)
        toks = expand_tokens([(a.text, a.line) for a in role.args], role.env, role.syntax, role.runtime)
        for t, a in zip(toks, role.args):
            if a.key is not None:
                t.key = a.key if t.text.startswith("-") else None
                t.value_of = None if t.text.startswith("-") else a.key
        parse_serve_args(dep, toks, cat, positional_model=False)
        if role.model is not None and dep.model is None:
            dep.model, dep.model_line, dep.model_key = role.model
        deps = [dep]
    for dep in deps:
        _platform(dep, role)
    return deps


def _platform(dep: Deployment, role: Role) -> None:
    """What the stack says beside the flags: the model when the manifest cannot name it, GPU
    count and model, image, host memory."""
    if role.model_unknown is not None and dep.model is None:
        shown, line, key, why = role.model_unknown
        dep.model, dep.model_line, dep.model_key = shown, line, key
        dep.model_unresolved = (key,)
        dep.var_notes[key] = why
    if role.gpu_count is not None and dep.gpu_count is None:
        dep.gpu_count, dep.gpu_count_line, dep.gpu_count_key = role.gpu_count
    if role.gpu_group is not None:
        dep.gpu_group = role.gpu_group
    if role.gpu is not None and "gpu" not in dep.targets:
        dep.set_target("gpu", *role.gpu)
    if role.image is not None and dep.image is None:
        dep.image, dep.image_line, dep.image_key = role.image
    dep.host_memory = role.host_memory
    if role.shm is not None and dep.shm is None:
        dep.shm = role.shm
    if role.replicas is not None and role.replicas[0] != 1:
        n, line, key = role.replicas
        dep.diag(REPLICAS, "info", f"{n} replica(s) of this engine; the figures are per replica", line=line, key=key)
    for line, key, why in role.invalid:
        dep.diag(INVALID_VALUE, "error", why, line=line, key=key)
    for line, key, why in role.ignored:
        dep.diag(IGNORED_FLAG, "warning", why, line=line, key=key)
    if role.visible_devices is not None and dep.visible_devices is None:
        dep.visible_devices = (role.visible_devices[0], role.visible_devices[1], "")


def model_from_uri(uri: Any) -> str | None:
    """The Hub id of an ``hf://ORG/NAME`` storage URI (KServe, llm-d), None for any other scheme
    (pvc://, s3://, oci://: a checkpoint kvplan cannot read)."""
    if not isinstance(uri, str):
        return None
    text = uri.strip().strip('"')
    if text.startswith("hf://"):
        rest = text[5:].strip().strip('"')
        return rest or None
    return None


UNKNOWN_MODEL_HINT = "add a `# kvplan: model=<hub id>` comment naming the checkpoint"


def replicas_at(role: Role, doc: YamlDoc, parent: Any, path: tuple, name: str, key: str) -> None:
    """Record ``parent[name]`` (the stack's replica count of the role) when it is written."""
    if isinstance(parent, dict) and parent.get(name) is not None:
        role.replicas = (parent[name], doc.line_of(path + (name,)), key)


def unknown_model(role: Role, shown: str, line: int | None, key: str, why: str) -> None:
    """Mark the role's model as one kvplan cannot determine: check fails with model-unresolved
    (exit 2) naming ``key``, unless a ``# kvplan: model=`` comment names it."""
    role.model_unknown = (shown, line, key, why + "; " + UNKNOWN_MODEL_HINT)


__all__ = ["Arg", "Role", "container_resources", "flag", "model_from_uri", "quantity_bytes",
           "replicas_at", "role_deployments", "unknown_model", "words_at"]
