"""Leader/worker groups among a file's deployments: one multi-node vLLM deployment is a leader
(`vllm serve ... --nnodes N --node-rank 0`, the API server) and N - 1 workers running
`vllm serve ... --headless` (vLLM entrypoints/cli/serve.py run_headless: engines, no API
server). A worker is not a server of its own: it joins the leader's deployment. LeaderWorkerSet
pods are grouped where they are read (sources/k8s.py); this pairs the rest (a script, a compose
file, two Kubernetes objects in one file).
"""

from __future__ import annotations

from kvplan.check.deployment import Deployment


def _value(dep: Deployment, flag: str):
    s = dep.settings.get(flag)
    return None if s is None else s.value


def _headless(dep: Deployment) -> bool:
    v = _value(dep, "headless")
    return v is not None and v not in (False, "false", "False", "0")


def _nnodes(dep: Deployment) -> str | None:
    v = _value(dep, "nnodes")
    return None if v is None else str(v)


def join_headless_workers(deps: list[Deployment]) -> list[Deployment]:
    """``deps`` without the headless workers that have a leader among them: a deployment of the
    same model and the same ``--nnodes`` (> 1) that is not headless. A headless deployment with
    no leader in the file stays (it is all kvplan can see of that deployment)."""
    leaders = {(d.model, _nnodes(d)) for d in deps if not _headless(d) and _nnodes(d) not in (None, "1")}
    return [d for d in deps if not (_headless(d) and (d.model, _nnodes(d)) in leaders)]
