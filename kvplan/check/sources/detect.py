"""What a file is (vLLM --config, Kubernetes, compose, kvplan.yaml, Dockerfile, script), per
file and per YAML document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc


def _looks_like_vllm_config(data: dict, cat: FlagCatalogue) -> bool:
    if not data:
        return False
    known = 0
    for k in data:
        if not isinstance(k, str):
            continue
        if k in ("model", "kvplan"):
            known += 1
            continue
        m = cat.resolve("--" + k)
        if m.status in ("ok", "abbreviation", "removed"):
            known += 1
    return known >= max(1, len(data) / 2)


def yaml_doc_kind(data: Any, cat: FlagCatalogue) -> str | None:
    """What one YAML document is: a serving stack (kvplan.check.sources.stacks.stack_kind),
    "k8s" (``apiVersion`` and ``kind``), "compose" (a
    ``services`` mapping), "vllm-config" (a mapping whose keys are mostly `vllm serve` flags),
    "manifest" (only ``deployments``/``node_selectors``), or None (none of these)."""
    if not isinstance(data, dict):
        return None
    from kvplan.check.sources.stacks import stack_kind

    stack = stack_kind(data)  # a serving stack's manifest (KServe, llm-d, Dynamo, production-stack, Ray Serve)
    if stack is not None:
        return stack
    if "apiVersion" in data and "kind" in data:
        return "k8s"
    if isinstance(data.get("services"), dict):
        return "compose"
    if _looks_like_vllm_config(data, cat):
        return "vllm-config"
    if isinstance(data.get("deployments"), list) and set(data) <= {"deployments", "node_selectors"}:
        return "manifest"
    return None


def detect_kind(path: Path, docs: list[YamlDoc] | None, cat: FlagCatalogue) -> str:
    """The file's kind: "manifest", "dockerfile", "command" (text scan), or for YAML the kinds
    of its documents joined with "+" ("k8s", "vllm-config", "compose", "k8s+vllm-config").

    YAML files (``.yaml``/``.yml``) are read document by document (see yaml_doc_kind); empty
    documents (a stray ``---``) are skipped; ``kvplan.yaml`` is the manifest; a file with no
    recognised document is searched as text for `vllm serve` lines ("command")."""
    name = path.name.lower()
    if docs is not None:
        if name in ("kvplan.yaml", "kvplan.yml"):
            return "manifest"
        kinds = [yaml_doc_kind(d.data, cat) for d in docs]
        found = [k for k in kinds if k is not None]
        if found == ["manifest"] and sum(d.data is not None for d in docs) == 1:
            return "manifest"
        found = list(dict.fromkeys(k for k in found if k != "manifest"))
        return "+".join(found) if found else "command"
    if name.startswith(("dockerfile", "containerfile")) or name.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    return "command"
