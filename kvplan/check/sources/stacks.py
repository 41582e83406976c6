"""The serving stacks whose manifests check reads, one reader module each (kserve, llmd,
dynamo, prodstack, rayserve): which YAML documents each one claims, and its reader.

Every reader takes (doc, file shown, the file's lines, flag catalogue, kvplan.yaml
node_selectors) and returns Deployments (kvplan.check.sources.stack.role_deployments).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.check.deployment import Deployment
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc


def stack_kind(data: Any) -> str | None:
    """The serving stack a YAML document is a manifest of ("kserve", "llm-d", "dynamo",
    "production-stack", "ray-serve"), or None."""
    from kvplan.check.sources.dynamo import is_dynamo
    from kvplan.check.sources.kserve import is_kserve
    from kvplan.check.sources.llmd import is_modelservice
    from kvplan.check.sources.prodstack import is_production_stack
    from kvplan.check.sources.rayserve import is_ray_serve

    for kind, test in (("kserve", is_kserve), ("dynamo", is_dynamo), ("llm-d", is_modelservice),
                       ("production-stack", is_production_stack), ("ray-serve", is_ray_serve)):
        if test(data):
            return kind
    return None


STACK_KINDS = ("kserve", "dynamo", "llm-d", "production-stack", "ray-serve")


def stack_deployments(kind: str, doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict,
                      base_dir: Path | None = None, problems: list | None = None) -> list[Deployment]:
    """The deployments of one document of a serving stack's manifest (see stack_kind).
    ``problems`` receives (line, key, message, hint) of parts that could not be read (a Ray
    ``llm_configs`` file), reported as no-deployment warnings on the file."""
    if kind == "kserve":
        from kvplan.check.sources.kserve import kserve_deployments as read
    elif kind == "dynamo":
        from kvplan.check.sources.dynamo import dynamo_deployments as read
    elif kind == "llm-d":
        from kvplan.check.sources.llmd import modelservice_deployments as read
    elif kind == "production-stack":
        from kvplan.check.sources.prodstack import production_stack_deployments as read
    else:
        from kvplan.check.sources.rayserve import ray_serve_deployments

        return ray_serve_deployments(doc, file, raw, cat, node_map, base_dir=base_dir, problems=problems)
    return read(doc, file, raw, cat, node_map)
