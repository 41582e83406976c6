"""NVIDIA Dynamo ``DynamoGraphDeployment`` (nvidia.com/v1alpha1, v1beta1): its worker services.

A worker service runs ``python3 -m dynamo.vllm ARGS`` in ``extraPodSpec.mainContainer``: ARGS are
vLLM's engine arguments (AsyncEngineArgs) plus Dynamo's own (ai-dynamo/dynamo
components/src/dynamo/vllm/args.py): ``--is-prefill-worker`` / ``--is-decode-worker`` (a
disaggregated role: its KV cache is sent to / received from the other role, a KV transfer
kvplan does not size), ``--connector NAME...`` (the KV connectors), ``--endpoint``,
``--migration-limit`` and the ``--dyn-*`` options. Those are taken out and the disaggregated
role becomes vLLM's ``--kv-transfer-config``; the rest is read as `vllm serve` reads it. The GPU
count is the service's ``resources.limits.gpu`` (else requests); the image is the main
container's. Services whose command is not ``dynamo.vllm`` (frontend, router, planner) are
not vLLM servers.
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.check.deployment import Deployment, _int_or_none
from kvplan.check.sources.k8s import _k8s_env
from kvplan.check.sources.stack import Arg, Role, quantity_bytes, replicas_at, role_deployments, words_at
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc

# Dynamo's own dynamo.vllm options: name -> how many values follow (-1: all until the next option)
_DYNAMO_FLAGS = {"--is-prefill-worker": 0, "--is-decode-worker": 0, "--connector": -1, "--endpoint": 1,
                 "--migration-limit": 1, "--store-kv": 1, "--request-plane": 1, "--event-plane": 1,
                 "--custom-jinja-template": 1, "--use-vllm-tokenizer": 0}


def is_dynamo(data: Any) -> bool:
    """Whether a YAML document is a DynamoGraphDeployment."""
    return (isinstance(data, dict) and data.get("kind") == "DynamoGraphDeployment"
            and str(data.get("apiVersion", "")).startswith("nvidia.com/"))


def _split(words: list[Arg]) -> tuple[list[Arg], dict[str, Arg], list[str]]:
    """(vLLM's arguments, Dynamo role switches by name, connector names)."""
    out, switches, connectors = [], {}, []
    i = 0
    while i < len(words):
        w = words[i]
        name = w.text.split("=", 1)[0]
        if name in _DYNAMO_FLAGS or name.startswith("--dyn-"):
            n = _DYNAMO_FLAGS.get(name, 1)
            i += 1
            if n == 0:
                switches[name] = w
            elif "=" in w.text:
                connectors += [w.text.split("=", 1)[1]] if name == "--connector" else []
            else:
                while i < len(words) and not words[i].text.startswith("-") and (n == -1 or n > 0):
                    if name == "--connector":
                        connectors.append(words[i].text)
                    i += 1
                    n -= 1 if n > 0 else 0
            continue
        out.append(w)
        i += 1
    return out, switches, connectors


def dynamo_deployments(doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """One Deployment per worker service that runs ``dynamo.vllm`` (see the module doc)."""
    spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
    services = spec.get("services") if isinstance(spec.get("services"), dict) else {}
    name = (doc.data.get("metadata") or {}).get("name", "?") if isinstance(doc.data.get("metadata"), dict) else "?"
    out: list[Deployment] = []
    for sname, svc in services.items():
        if not isinstance(svc, dict):
            continue
        spath = ("spec", "services", str(sname))
        main = ((svc.get("extraPodSpec") or {}).get("mainContainer") if isinstance(svc.get("extraPodSpec"), dict) else None) or {}
        cpath = spath + ("extraPodSpec", "mainContainer")
        command = [str(c) for c in main.get("command") or []] if isinstance(main.get("command"), list) else []
        if "dynamo.vllm" not in command:
            continue
        words = words_at(doc, cpath + ("args",), main.get("args"))
        args, switches, connectors = _split(words)
        role = Role(name=f"DynamoGraphDeployment/{name} service {sname}", line=doc.line_of(spath), kind="dynamo")
        replicas_at(role, doc, svc, spath, "replicas", f"spec.services.{sname}.replicas")
        role.env, role.runtime, role.notes = _k8s_env(main)
        for ei, e in enumerate(svc.get("envs") or []):  # the service's envs are the container's too
            if isinstance(e, dict) and "value" in e and "name" in e:
                role.env.setdefault(str(e["name"]), str(e["value"]))
        kv_role = "kv_producer" if "--is-prefill-worker" in switches else ("kv_consumer" if "--is-decode-worker" in switches else None)
        if kv_role is not None:
            sw = switches.get("--is-prefill-worker") or switches.get("--is-decode-worker")
            cfg = {"kv_role": kv_role, **({"kv_connector": connectors[0]} if connectors else {})}
            args += [Arg("--kv-transfer-config", sw.line, sw.text), Arg(json.dumps(cfg), sw.line, sw.text)]
        elif connectors and connectors != ["none"]:
            args += [Arg("--kv-transfer-config", doc.line_of(cpath + ("args",)), "--connector"),
                     Arg(json.dumps({"kv_connector": connectors[0]}), doc.line_of(cpath + ("args",)), "--connector")]
        role.args = args
        res = svc.get("resources") if isinstance(svc.get("resources"), dict) else {}
        for part in ("limits", "requests"):
            vals = res.get(part) if isinstance(res.get(part), dict) else {}
            if "gpu" in vals:
                role.gpu_count = (_int_or_none(vals["gpu"]), doc.line_of(spath + ("resources", part, "gpu")), f"resources.{part}.gpu")
                break
        mem = quantity_bytes(((res.get("limits") or {}) if isinstance(res.get("limits"), dict) else {}).get("memory"))
        if mem is not None:
            role.host_memory = (mem, doc.line_of(spath + ("resources", "limits", "memory")), "resources.limits.memory")
        if isinstance(main.get("image"), str):
            role.image = (main["image"], doc.line_of(cpath + ("image",)), "image")
        out += role_deployments(role, file, raw, cat)
    return out
