"""Kubernetes writers: an apps/v1 Deployment (one pod, the vllm/vllm-openai image's
`vllm serve` entrypoint with the serve line's arguments) and a LeaderWorkerSet (vLLM's
multi-node pattern, docs deployment/frameworks/lws.md: the leader pod starts a Ray head and
`vllm serve` over the group, the workers join it), read back by kvplan.check.sources.k8s."""

from __future__ import annotations

from kvplan.render.served import GPUS_PER_NODE, Served


def _env(s: Served) -> list[dict]:
    return [{"name": k, "value": str(v)} for k, v in s.env.items()]


def _container(s: Served, gpus: int, **argv) -> dict:
    c = {"name": "vllm", "image": s.image, **argv, "ports": [{"containerPort": 8000}]}
    if s.env:
        c["env"] = _env(s)
    c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def deployment_yaml(s: Served) -> dict:
    """A Deployment of one pod with tp x pp GPUs running the serve line."""
    labels = {"app": s.name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": s.name, "labels": labels},
        "spec": {"replicas": s.replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [_container(s, s.gpus, args=[s.model, *s.flags])]}}},
    }


def leaderworkerset_yaml(s: Served) -> dict:
    """A LeaderWorkerSet of ceil(GPUs / 8) pods of GPUs / pods each (kvplan assumes 8 GPUs a
    node, kvplan.gpus.GPUS_PER_NODE); with more than one pod the leader runs `vllm serve` with
    the Ray executor over the group."""
    size = -(-s.gpus // GPUS_PER_NODE)
    per_pod = -(-s.gpus // size)  # every pod alike; GPUs past tensor x pipeline sit idle (check says so)
    serve = " ".join(["vllm", "serve", _q(s.model), *map(_q, s.flags)])
    if size > 1:
        leader_cmd = ["sh", "-c", f"ray start --head --port=6379 && {serve} --distributed-executor-backend ray"]
        worker = {"spec": {"containers": [_container(s, per_pod, command=[
            "sh", "-c", "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"])]}}
    else:
        leader_cmd = None
        worker = None
    if leader_cmd:
        lwt = {"size": size, "leaderTemplate": {"spec": {"containers": [_container(s, per_pod, command=leader_cmd)]}},
               "workerTemplate": worker}
    else:  # one pod: the workerTemplate is the leader's too (LeaderWorkerSet API)
        lwt = {"size": 1, "workerTemplate": {"spec": {"containers": [_container(s, per_pod, args=[s.model, *s.flags])]}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": s.name},
            "spec": {"replicas": s.replicas, "leaderWorkerTemplate": lwt}}


def _q(word: str) -> str:
    import shlex

    return shlex.quote(word)
