"""Kubernetes writers: an apps/v1 Deployment (one pod, the vllm/vllm-openai image's
`vllm serve` entrypoint with the serve line's arguments, every GPU of the line) and a
LeaderWorkerSet (a group of pods: one per node of a --nnodes line, or vLLM's Ray pattern of
docs deployment/frameworks/lws.md for one big TP x PP engine), read back by
kvplan.check.sources.k8s."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.render.parallel import LEADER_ADDRESS
from kvplan.render.served import GPUS_PER_NODE, Served, pod_gpus

LWS_LEADER = "$(LWS_LEADER_ADDRESS)"  # the leader pod's address, set by LeaderWorkerSet in every pod


def _env(s: Served) -> list[dict]:
    return [{"name": k, "value": str(v)} for k, v in s.env.items()]


def _container(s: Served, gpus: int, **argv) -> dict:
    c = {"name": "vllm", "image": s.image, **argv, "ports": [{"containerPort": 8000}]}
    if s.env:
        c["env"] = _env(s)
    c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return with_shm(s, c)


DSHM = "dshm"


def with_shm(s: Served, container: dict) -> dict:
    """``container`` mounting the pod's /dev/shm volume (shm_volumes) when vLLM keeps anything
    there (its KV offload pool, a multi-GPU engine's shared-memory rings: Served.shm_size_limit),
    with a memory request of the volume's size: its pages are the container's memory (no limit
    is written: vLLM's own process memory is not sized)."""
    if s.shm_size_limit is None:
        return container
    container["volumeMounts"] = [*container.get("volumeMounts", []), {"name": DSHM, "mountPath": "/dev/shm"}]
    container.setdefault("resources", {}).setdefault("requests", {})["memory"] = s.shm_size_limit
    return container


def shm_volumes(s: Served) -> list[dict]:
    """The pod's /dev/shm volume when vLLM keeps anything there (Served.shm_size_limit: its KV
    offload pool, a multi-GPU engine's shared-memory rings, which the container runtime's 64 MiB
    default cannot hold; vLLM's own Kubernetes and LWS examples mount a memory emptyDir at
    /dev/shm for tensor parallelism): an emptyDir {medium: Memory} of that size
    (check.sources.shm reads it back); none otherwise."""
    if s.shm_size_limit is None:
        return []
    return [{"name": DSHM, "emptyDir": {"medium": "Memory", "sizeLimit": s.shm_size_limit}}]


def _pod(s: Served, *containers: dict) -> dict:
    pod = {"containers": list(containers)}
    if shm_volumes(s):
        pod["volumes"] = shm_volumes(s)
    return pod


def deployment_yaml(s: Served) -> dict:
    """A Deployment of one pod with every GPU of the serve line (TP x PP x DP x PCP).

    Raises:
        KvplanError: a serve line over several nodes (--nnodes): a Deployment's pods are
            replicas, not the nodes of one engine."""
    refuse_nodes(s, "k8s")
    labels = {"app": s.name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": s.name, "labels": labels},
        "spec": {"replicas": s.replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": _pod(s, _container(s, s.gpus, args=[s.model, *s.flags]))}},
    }


def leaderworkerset_yaml(s: Served) -> dict:
    """A LeaderWorkerSet whose group runs the serve line.

    * --nnodes N (vLLM's own multi-node launch, entrypoints/cli/serve.py): N pods of GPUs / N,
      the leader running the line with ``--node-rank 0``, every worker ``--headless`` with
      ``--node-rank $(LWS_WORKER_INDEX)`` (LWS sets it to the pod's index in the group, 1..N-1),
      the leader's address ``$(LWS_LEADER_ADDRESS)`` (render/parallel.py launch_lines).
    * one engine of TP x PP (x PCP) over more than 8 GPUs (kvplan.gpus.GPUS_PER_NODE), no data
      parallel: ceil(GPUs / 8) pods, the leader running `vllm serve` with the Ray executor over
      the group (vLLM docs deployment/frameworks/lws.md).
    * otherwise one pod with every GPU."""
    if s.nnodes > 1:
        leader = _container(s, s.gpus_per_node, args=[s.model, *_lws_flags(s.node_flags[0])])
        worker = _container(s, s.gpus_per_node, args=[s.model, *_lws_flags(s.node_flags[1], worker=True)])
        lwt = {"size": s.nnodes, "leaderTemplate": {"spec": _pod(s, leader)},
               "workerTemplate": {"spec": _pod(s, worker)}}
    elif s.gpus > GPUS_PER_NODE and s.dp == 1:
        size = -(-s.gpus // GPUS_PER_NODE)
        per_pod = pod_gpus(s.gpus, 1, 1)  # every pod alike; GPUs past the world sit idle (check says so)
        serve = " ".join(["vllm", "serve", _q(s.model), *map(_q, s.flags)])
        leader_cmd = ["sh", "-c", f"ray start --head --port=6379 && {serve} --distributed-executor-backend ray"]
        worker = {"spec": _pod(s, _container(s, per_pod, command=[
            "sh", "-c", "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]))}
        lwt = {"size": size, "leaderTemplate": {"spec": _pod(s, _container(s, per_pod, command=leader_cmd))},
               "workerTemplate": worker}
    else:  # one pod: the workerTemplate is the leader's too (LeaderWorkerSet API)
        lwt = {"size": 1, "workerTemplate": {"spec": _pod(s, _container(s, s.gpus, args=[s.model, *s.flags]))}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": s.name},
            "spec": {"replicas": s.replicas, "leaderWorkerTemplate": lwt}}


def _lws_flags(flags: tuple[str, ...], worker: bool = False) -> list[str]:
    """A node's flags with the LWS variables: the leader's address, and a worker's own index
    as its --node-rank (one workerTemplate serves every worker pod)."""
    out = [LWS_LEADER if f == LEADER_ADDRESS else f for f in flags]
    if worker:
        i = out.index("--node-rank")
        out[i + 1] = "$(LWS_WORKER_INDEX)"
    return out


def refuse_nodes(s: Served, fmt: str) -> None:
    """Refuse a serve line over several nodes in a format of one pod/container per engine.

    Raises:
        KvplanError: ``s.nnodes`` > 1."""
    if s.nnodes > 1:
        raise KvplanError(f"--nnodes {s.nnodes}: --format {fmt} cannot run one engine over several nodes",
                          hint="use --format lws (a LeaderWorkerSet of one pod per node)")


def _q(word: str) -> str:
    import shlex

    return shlex.quote(word)
