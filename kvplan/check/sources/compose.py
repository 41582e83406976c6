"""Deployments in a docker-compose file: services running `vllm serve` (the vllm/vllm-openai
image's entrypoint), compose's interpolation from .env, reserved GPUs."""

from __future__ import annotations

import shlex

from kvplan.check.deployment import Deployment, _int_or_none
from kvplan.check.diagnostics import INVALID_VALUE
from kvplan.check.messages import _yaml_shown
from kvplan.check.sources.invocation import deployment_from_invocation
from kvplan.check.sources.shm import compose_shm, docker_bytes
from kvplan.check.sources.shell import (
    _COMPOSE_NOTE, _SHELL_REF, _VLLM_IMAGE, _locate, expand_word, nvidia_visible, serve_calls_in_argv,
)
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc


def compose_deployments(
    doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, dotenv: dict[str, str] | None = None,
    problems: list[tuple[int | None, str, str]] | None = None,
) -> list[Deployment]:
    """Deployments in a docker-compose file: services whose entrypoint/command run `vllm serve`
    (the vllm/vllm-openai image's entrypoint is `vllm serve`), with their reserved GPU count.

    ``${VAR}`` in entrypoint/command is compose's interpolation from ``dotenv`` (the .env file
    next to the compose file), not the service's ``environment:``; no shell runs the command
    unless it is ``sh -c``, which sees ``environment:``.

    ``problems`` receives (line, key, message) for an entrypoint/command that compose refuses
    whatever it runs (a mapping, a number)."""
    out: list[Deployment] = []
    services = doc.data.get("services") or {}
    for sname, svc in services.items():
        if not isinstance(svc, dict):
            continue
        spath = ("services", str(sname))
        sline = doc.line_of(spath)
        env: dict[str, str] = {}
        envs = svc.get("environment")
        if isinstance(envs, dict):
            env = {str(k): str(v) for k, v in envs.items() if v is not None}
        elif isinstance(envs, list):
            env = dict(str(e).split("=", 1) for e in envs if "=" in str(e))
        words: list[str] = []
        lines: list[int | None] = []
        spans: list[tuple[int, int] | None] = []
        for part in ("entrypoint", "command"):
            v = svc.get(part)
            if isinstance(v, str):
                try:
                    ws = shlex.split(v)
                except ValueError as exc:
                    out_dep = Deployment(name=f"service {sname}", file=file, line=doc.line_of(spath + (part,)), kind="compose")
                    out_dep.diag(INVALID_VALUE, "error", f"cannot split the {part} string: {exc}", key=f"services.{sname}.{part}")
                    out.append(out_dep)
                    ws = []
                span = doc.spans.get(spath + (part,)) or (doc.line_of(spath + (part,)),) * 2
                words += ws
                lines += _locate(ws, raw, span[0] - 1, span[1] - 1)
                spans += [span] * len(ws)
            elif v is not None and not isinstance(v, list):
                # compose's schema: entrypoint/command is a string or a list of strings; `docker
                # compose` refuses the file otherwise
                if problems is not None:
                    problems.append((doc.line_of(spath + (part,)), f"services.{sname}.{part}",
                                     f"{_yaml_shown(v)} is not a string or a list; docker compose refuses the file"))
            elif isinstance(v, list):
                for j, w in enumerate(v):
                    words.append(str(w))
                    lines.append(doc.lines.get(spath + (part, j), sline))
                    spans.append(doc.spans.get(spath + (part, j)))
        implicit = svc.get("entrypoint") is None and bool(_VLLM_IMAGE.search(str(svc.get("image", ""))))
        notes = {}
        for m in _SHELL_REF.finditer(" ".join(words)):
            name = m.group(1) or m.group(2)
            notes[name] = _COMPOSE_NOTE.format(name=name)
        invs = serve_calls_in_argv(
            words, lines, sline or doc.line, implicit=implicit, env=env, raw=raw, spans=spans,
            syntax="compose", argv_env=dotenv or {}, notes=notes,
        )
        for inv in invs:
            dep = deployment_from_invocation(inv, file, f"service {sname}", "compose", cat)
            if isinstance(svc.get("image"), str):
                # compose interpolates image: too (${VAR:-default}, ${VAR-default}, .env values);
                # a name without a value stays as written (its version is unknown, version.py)
                image, missing, _ = expand_word(svc["image"], "compose", dotenv or {})
                dep.image = svc["image"] if missing else image
                dep.image_line, dep.image_key = doc.line_of(spath + ("image",)), f"services.{sname}.image"
            try:
                devices = svc["deploy"]["resources"]["reservations"]["devices"]
            except (KeyError, TypeError):
                devices = None
            dep.shm = compose_shm(svc, doc, spath, str(sname))
            dep.memory_limit = compose_memory_limit(svc, doc, spath, str(sname), dep)
            dep.host = f"compose file {file}"  # compose starts a file's services on one Docker host
            dep.host_gpus = nvidia_visible(env.get("NVIDIA_VISIBLE_DEVICES"))
            if isinstance(devices, list):
                for di, d in enumerate(devices):
                    if isinstance(d, dict) and ("gpu" in (d.get("capabilities") or []) or d.get("driver") == "nvidia"):
                        dep.host_gpus = _reserved_gpus(d)
                        dpath = spath + ("deploy", "resources", "reservations", "devices", di)
                        if isinstance(d.get("device_ids"), list):
                            dep.gpu_count = len(d["device_ids"])
                            dep.gpu_count_line = doc.line_of(dpath + ("device_ids",))
                            dep.gpu_count_key = f"services.{sname}.deploy.resources.reservations.devices[{di}].device_ids"
                        elif _int_or_none(d.get("count")) is not None:
                            dep.gpu_count = _int_or_none(d.get("count"))
                            dep.gpu_count_line = doc.line_of(dpath + ("count",))
                            dep.gpu_count_key = f"services.{sname}.deploy.resources.reservations.devices[{di}].count"
                        break
            out.append(dep)
    return out


def _reserved_gpus(device: dict) -> tuple[str, ...] | None:
    """The host GPUs a compose device reservation gives: its device_ids, or for ``count: N``
    GPUs 0..N-1 (Docker daemon/nvidia_linux.go sets NVIDIA_VISIBLE_DEVICES to the first N
    indices), None for ``count: all`` or a count kvplan cannot read."""
    ids = device.get("device_ids")
    if isinstance(ids, list):
        return tuple(str(i).strip() for i in ids)
    n = _int_or_none(device.get("count"))
    return tuple(str(i) for i in range(n)) if n is not None and n >= 0 else None


def compose_memory_limit(svc: dict, doc: YamlDoc, spath: tuple, sname: str,
                         dep: Deployment) -> tuple[int, int | None, str] | None:
    """The service container's memory limit (bytes, line, key): ``mem_limit`` or
    ``deploy.resources.limits.memory`` (compose spec; both are byte sizes as docker/go-units
    RAMInBytes reads them: b, k, m, g, t in powers of 1024, case-insensitive, check.sources.shm
    docker_bytes); None when neither is set or readable.

    compose-go (loader/validate.go) refuses a service that sets the two to distinct values ("can't
    set distinct values on 'mem_limit' and 'deploy.resources.limits.memory'"): that is an
    invalid-value error on ``dep``, and the smaller of the two is compared."""
    found = []
    if svc.get("mem_limit") is not None:
        found.append((svc["mem_limit"], spath + ("mem_limit",), f"services.{sname}.mem_limit"))
    try:
        deploy_mem = svc["deploy"]["resources"]["limits"]["memory"]
    except (KeyError, TypeError):
        deploy_mem = None
    if deploy_mem is not None:
        found.append((deploy_mem, spath + ("deploy", "resources", "limits", "memory"),
                      f"services.{sname}.deploy.resources.limits.memory"))
    read = []
    for value, path, key in found:
        size = docker_bytes(value)
        if size is None:
            dep.diag(INVALID_VALUE, "error", f"{_yaml_shown(value)} is not a memory size docker compose reads",
                     line=doc.line_of(path), key=key, hint="use a byte size such as 16g or 16384m")
        else:
            read.append((size, doc.line_of(path), key))
    if len(read) == 2 and read[0][0] != read[1][0]:
        dep.diag(INVALID_VALUE, "error", f"{read[0][2]} and {read[1][2]} set distinct memory limits: docker compose "
                 "refuses the file (\"can't set distinct values on 'mem_limit' and 'deploy.resources.limits.memory'\")",
                 line=read[1][1], key=read[1][2], hint="set one of them, or the same value in both")
    return min(read, key=lambda r: r[0]) if read else None
