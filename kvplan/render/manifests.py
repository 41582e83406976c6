"""The serving-stack manifest of a Plan, by format: k8s and lws (render/k8s.py), kserve
(render/kserve.py), llm-d (render/llmd.py), compose (render/compose.py), each over the same
Served view (render/served.py), each read back by `kvplan check` (check/sources/)."""

from __future__ import annotations

from kvplan.capacity.estimate import Plan
from kvplan.errors import KvplanError
from kvplan.render.served import FORMATS, dump, header, served


def write(fmt: str, plan: Plan, revision: str | None = None, replicas: int = 1) -> str:
    """The manifest of ``fmt`` (one of FORMATS) for ``plan``, ``replicas`` copies of the engine
    (Deployment/LeaderWorkerSet/KServe/llm-d replicas; compose runs one).

    Raises:
        KvplanError: an unknown format, or a plan no manifest can carry (see served, hub_uri)."""
    s = served(plan, revision, replicas)
    if fmt == "k8s":
        from kvplan.render.k8s import deployment_yaml as w
    elif fmt == "lws":
        from kvplan.render.k8s import leaderworkerset_yaml as w
    elif fmt == "kserve":
        from kvplan.render.kserve import llmisvc_yaml as w
    elif fmt == "llm-d":
        from kvplan.render.llmd import modelservice_values_yaml as w
    elif fmt == "compose":
        from kvplan.render.compose import compose_yaml as w
    else:
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use " + ", ".join(FORMATS))
    return header(s, fmt) + dump(w(s))
