"""Deployments in Kubernetes objects: containers running `vllm serve`, their environment as
Kubernetes builds it, ``nvidia.com/gpu`` counts (LeaderWorkerSet groups included) and the GPU
their node selector maps to in kvplan.yaml."""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any

from kvplan.check.deployment import Deployment, _as_words, _int_or_none
from kvplan.check.diagnostics import INVALID_VALUE, REPLICAS
from kvplan.check.messages import _yaml_shown
from kvplan.check.sources.invocation import deployment_from_invocation
from kvplan.check.sources.shm import pod_shm
from kvplan.check.sources.shell import _VLLM_IMAGE, expand_word, nvidia_visible, serve_calls_in_argv
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.gpus import GFD_PRODUCT_LABEL
from kvplan.io.files import YamlDoc
from kvplan.io.units import k8s_quantity_bytes  # noqa: F401  (read here; its home is io/units.py)


def _gpu_from_selectors(dep: Deployment, pod: dict, path: tuple, doc: YamlDoc, node_map: dict[str, dict[str, str]]) -> None:
    """Set dep's GPU from the pod's nodeSelector / required node affinity and kvplan.yaml's
    node_selectors mapping (or say what is unmapped in dep.gpu_hint); an unmapped
    nvidia.com/gpu.product label is kept in dep.gfd_product for check to match against the GPU
    profiles (kvplan.gpus.find_gfd_product)."""
    pairs: list[tuple[str, str, int | None, str]] = []
    sel = pod.get("nodeSelector")
    if isinstance(sel, dict):
        for k, v in sel.items():
            pairs.append((str(k), str(v), doc.line_of(path + ("nodeSelector", str(k))), f"nodeSelector.{k}"))
    try:
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    except (KeyError, TypeError):
        terms = None
    if isinstance(terms, list):
        for ti, term in enumerate(terms):
            for ei, expr in enumerate((term or {}).get("matchExpressions") or []):
                if isinstance(expr, dict) and expr.get("operator") == "In" and isinstance(expr.get("values"), list):
                    for v in expr["values"]:
                        p = path + ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", ti, "matchExpressions", ei)
                        pairs.append((str(expr.get("key")), str(v), doc.line_of(p), f"affinity matchExpressions {expr.get('key')}"))
    unmapped = []
    for label, value, line, key in pairs:
        gpu = (node_map.get(label) or {}).get(value)
        if gpu:
            dep.set_target("gpu", gpu, line, key)
            return
        if label == GFD_PRODUCT_LABEL and dep.gfd_product is None:  # read against the GPU profiles by check
            dep.gfd_product = (value, line, key)
        if "gpu" in label.lower() or "accelerator" in label.lower() or "instance-type" in label:
            unmapped.append(f"{label}={value}")
    if unmapped:
        dep.gpu_hint = f"map {unmapped[0]} to a GPU profile under node_selectors in kvplan.yaml"


def _find_pod_specs(obj: Any, path: tuple, depth: int = 0):
    if depth > 12:
        return
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield path, obj
            return
        for k, v in obj.items():
            yield from _find_pod_specs(v, path + (str(k),), depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _find_pod_specs(v, path + (i,), depth + 1)


def _k8s_non_strings(dep: Deployment, container: dict, cpath: tuple, doc: YamlDoc) -> None:
    """An invalid-value error for each item of the container's command/args that is not a
    string (an unquoted 4096, true, null): the Kubernetes API server refuses the manifest
    (Container.command and .args are []string), so the pod never starts.

    Rule source: Kubernetes core/v1 Container (command, args: []string)."""
    for part in ("command", "args"):
        items = container.get(part)
        for j, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, str):
                continue
            what = "null" if item is None else type(item).__name__
            dep.diag(
                INVALID_VALUE,
                "error",
                f"{_yaml_shown(item)} is a YAML {what}, not a string; Kubernetes refuses the manifest "
                f"({part} must be a list of strings)",
                line=doc.lines.get(cpath + (part, j), doc.line_of(cpath)),
                key=f"{part}[{j}]",
                hint=f'quote it: "{item}"' if item is not None and not isinstance(item, (dict, list)) else None,
            )


def _k8s_env(container: dict, injected: dict[str, str | None] | None = None) -> tuple[dict[str, str], frozenset[str], dict[str, str]]:
    """The container's environment as Kubernetes builds it: (known values, names set to values
    kvplan cannot read, $NAME -> why).

    ``env`` entries in order, each ``value`` with ``$(NAME)`` of the entries above it expanded
    (``$$`` escapes); a ``valueFrom`` entry (secret, config map, field, resource) has a value
    known only in the cluster; ``envFrom`` may define any name ("*" in the second item).
    ``injected``: variables the controller adds (LeaderWorkerSet: LWS_GROUP_SIZE ...; None as a
    value: unknown). Rule source: Kubernetes core/v1 EnvVar ("Variable references $(VAR_NAME)
    are expanded using the previously defined environment variables in the container").
    """
    env: dict[str, str] = {}
    runtime: set[str] = set()
    notes: dict[str, str] = {}
    if container.get("envFrom"):  # read before env; env entries override them
        runtime.add("*")
    for name, value in (injected or {}).items():
        if value is None:
            runtime.add(name)
            notes[name] = f"${name} is set by the LeaderWorkerSet controller to a value kvplan cannot know"
        else:
            env[name] = value
    for e in container.get("env") or []:
        if not isinstance(e, dict) or "name" not in e:
            continue
        name = str(e["name"])
        if "value" in e:
            value = "" if e["value"] is None else str(e["value"])
            new, missing, _ = expand_word(value, "k8s", env, frozenset(runtime) if runtime else frozenset())
            if missing:  # refers to a value kvplan cannot read: so is this one
                env.pop(name, None)
                runtime.add(name)
                notes[name] = f"${name} is built from {', '.join('$(' + m + ')' for m in missing)}, which kvplan cannot read"
            else:
                env[name] = new
                runtime.discard(name)
        elif isinstance(e.get("valueFrom"), dict):
            env.pop(name, None)
            runtime.add(name)
            source = next(iter(e["valueFrom"]), "valueFrom")
            notes[name] = f"${name} comes from the container's env valueFrom ({source}), which kvplan cannot read"
        else:  # a name with no value: Kubernetes sets it to ""
            env[name] = ""
    return env, frozenset(runtime), notes


def _pod_gpus(pod: Any) -> int | None:
    """The ``nvidia.com/gpu`` count of a pod spec: its containers' limits (else requests), summed;
    None when no container asks for GPUs or a count is not an integer."""
    if not isinstance(pod, dict) or not isinstance(pod.get("containers"), list):
        return None
    total, seen = 0, False
    for c in pod["containers"]:
        res = c.get("resources") if isinstance(c, dict) and isinstance(c.get("resources"), dict) else {}
        for part in ("limits", "requests"):
            vals = res.get(part) if isinstance(res.get(part), dict) else {}
            if "nvidia.com/gpu" in vals:
                n = _int_or_none(vals["nvidia.com/gpu"])
                if n is None:
                    return None
                total, seen = total + n, True
                break
    return total if seen else None


@dataclass
class _LwsGroup:
    """A LeaderWorkerSet's group: ``size`` pods, the leader from ``leaderTemplate`` (or
    ``workerTemplate`` when there is none) and size - 1 workers from ``workerTemplate``.

    Rule source: LeaderWorkerSet API v1 (leaderworkerset.x-k8s.io/v1) LeaderWorkerTemplate
    (size, leaderTemplate, workerTemplate) and the env it adds to every container
    (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX); vLLM docs
    deployment/frameworks/lws.md (the leader runs `vllm serve` over a Ray cluster of the group).
    """

    size: int
    size_line: int | None
    leader_path: tuple  # path of the pod spec that the leader runs
    leader_gpus: int | None
    worker_gpus: int | None

    @property
    def gpus(self) -> int | None:
        if self.leader_gpus is None or (self.size > 1 and self.worker_gpus is None):
            return None
        return self.leader_gpus + (self.size - 1) * (self.worker_gpus or 0)

    def env(self, leader: bool) -> dict[str, str | None]:
        return {"LWS_LEADER_ADDRESS": None, "LWS_GROUP_SIZE": str(self.size), "LWS_WORKER_INDEX": "0" if leader else None}


def _lws_group(doc: YamlDoc) -> _LwsGroup | None:
    """The group of a LeaderWorkerSet document, or None for any other object."""
    data = doc.data
    if data.get("kind") != "LeaderWorkerSet" or not str(data.get("apiVersion", "")).startswith("leaderworkerset.x-k8s.io/"):
        return None
    lwt = (data.get("spec") or {}).get("leaderWorkerTemplate") if isinstance(data.get("spec"), dict) else None
    if not isinstance(lwt, dict):
        return None
    size = _int_or_none(lwt.get("size", 1))
    if size is None or size < 1:
        size = 1
    base = ("spec", "leaderWorkerTemplate")
    worker = (lwt.get("workerTemplate") or {}).get("spec") if isinstance(lwt.get("workerTemplate"), dict) else None
    leader = (lwt.get("leaderTemplate") or {}).get("spec") if isinstance(lwt.get("leaderTemplate"), dict) else None
    leader_path = base + (("leaderTemplate", "spec") if isinstance(leader, dict) else ("workerTemplate", "spec"))
    return _LwsGroup(
        size=size,
        size_line=doc.lines.get(base + ("size",)),
        leader_path=leader_path,
        leader_gpus=_pod_gpus(leader if isinstance(leader, dict) else worker),
        worker_gpus=_pod_gpus(worker),
    )


def _replicas_note(dep: Deployment, doc: YamlDoc, serving: bool) -> None:
    """An info naming ``spec.replicas`` of a Deployment, StatefulSet or LeaderWorkerSet: copies of
    this engine, the figures are per copy (as for the serving stacks, check.sources.stack)."""
    spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
    n = spec.get("replicas")
    if serving and doc.data.get("kind") in ("Deployment", "StatefulSet", "LeaderWorkerSet") and isinstance(n, int) and n != 1:
        dep.diag(REPLICAS, "info", f"{n} replica(s) of this engine; the figures are per replica",
                 line=doc.line_of(("spec", "replicas")), key="spec.replicas")


def _headless(dep: Deployment) -> bool:
    """The invocation runs `vllm serve --headless` (a worker node: no API server)."""
    s = dep.settings.get("headless")
    return s is not None and s.value not in (False, "false", "False", "0")


def k8s_deployments(docs: list[YamlDoc], file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """Deployments in Kubernetes objects: every container whose command/args run `vllm serve`
    (or whose image is vLLM's with only args), with its ``nvidia.com/gpu`` count and node selector.

    In a LeaderWorkerSet the leader's `vllm serve` runs over the whole group (vLLM's multi-node
    pattern: Ray across the pods), so its GPU count is the group's: the leader pod's GPUs plus
    size - 1 times a worker pod's (see _LwsGroup); ``dep.gpu_group`` keeps the per-pod count for
    a `vllm serve --nnodes N` that counts GPUs per node. A worker pod's `vllm serve --headless`
    is part of the leader's deployment, not a server of its own: it is not listed."""
    out: list[Deployment] = []
    for di, doc in enumerate(docs):
        if not isinstance(doc.data, dict):
            continue
        obj_kind = doc.data.get("kind", "object")
        meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
        obj_name = meta.get("name", "?")
        group = _lws_group(doc)
        for path, pod in _find_pod_specs(doc.data, ()):
            is_leader = group is not None and path == group.leader_path
            lws = group
            for ci, c in enumerate(pod["containers"]):
                if not isinstance(c, dict):
                    continue
                cpath = path + ("containers", ci)
                cline = doc.line_of(cpath)
                cmd, args = _as_words(c.get("command")), _as_words(c.get("args"))
                if cmd is None or args is None:
                    continue
                words = cmd + args
                keys = [cpath + ("command", j) for j in range(len(cmd))] + [cpath + ("args", j) for j in range(len(args))]
                lines = [doc.lines.get(k, cline) for k in keys]
                spans = [doc.spans.get(k) for k in keys]
                env, runtime, notes = _k8s_env(c, injected=lws.env(is_leader) if lws else None)
                implicit = not cmd and bool(_VLLM_IMAGE.search(str(c.get("image", ""))))
                invs = serve_calls_in_argv(
                    words, lines, cline or doc.line, implicit=implicit, env=env, raw=raw, spans=spans, syntax="k8s",
                    notes=notes, runtime=runtime,
                )
                for n_inv, inv in enumerate(invs):
                    name = f"{obj_kind}/{obj_name} container {c.get('name', ci)}"
                    if lws is not None:
                        name = f"{obj_kind}/{obj_name} {'leader' if is_leader else 'worker'} container {c.get('name', ci)}"
                    dep = deployment_from_invocation(inv, file, name, "k8s", cat)
                    if lws is not None and not is_leader and _headless(dep):
                        # `vllm serve --headless` on a worker pod runs engines for the leader's
                        # deployment and no API server (vLLM entrypoints/cli/serve.py
                        # run_headless): not a server of its own; the leader's GPU count is the group's
                        continue
                    if n_inv == 0:
                        _k8s_non_strings(dep, c, cpath, doc)
                    res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
                    for part in ("limits", "requests"):
                        vals = res.get(part) if isinstance(res.get(part), dict) else {}
                        if "nvidia.com/gpu" in vals:
                            dep.gpu_count = _int_or_none(vals["nvidia.com/gpu"])
                            dep.gpu_count_line = doc.line_of(cpath + ("resources", part, "nvidia.com/gpu"))
                            dep.gpu_count_key = f"resources.{part}.nvidia.com/gpu"
                            break
                    limits = res.get("limits") if isinstance(res.get("limits"), dict) else {}
                    mem = k8s_quantity_bytes(limits.get("memory"))
                    if mem is not None:
                        dep.memory_limit = (mem, doc.line_of(cpath + ("resources", "limits", "memory")),
                                            "resources.limits.memory")
                    dep.shm = pod_shm(pod, c, doc, path, cpath)
                    if dep.gpu_count is None and "NVIDIA_VISIBLE_DEVICES" in env:
                        # no device-plugin GPUs of its own (those are exclusive to the container):
                        # it sees the node's GPUs that NVIDIA_VISIBLE_DEVICES names, beside the
                        # pod's other containers (check.rules.shared_gpus)
                        dep.host = f"pod {obj_kind}/{obj_name} (document {di + 1}{'/' + '.'.join(map(str, path)) if path else ''})"
                        dep.host_gpus = nvidia_visible(env["NVIDIA_VISIBLE_DEVICES"])
                    if is_leader and group.gpus is not None and group.size > 1:
                        dep.gpu_group = (dep.gpu_count, group.size, group.leader_gpus, group.worker_gpus)
                        dep.gpu_count = group.gpus
                    _gpu_from_selectors(dep, pod, path, doc, node_map)
                    if isinstance(c.get("image"), str):
                        dep.image, dep.image_line, dep.image_key = c["image"], doc.line_of(cpath + ("image",)), "image"
                    _replicas_note(dep, doc, is_leader or group is None)
                    out.append(dep)
    return out
