"""docker compose writer: one service of the vllm/vllm-openai image (its entrypoint is
`vllm serve`) with the serve line as its command and every GPU of the serve line (TP x PP x DP x PCP) reserved. Read back by
kvplan.check.sources.compose."""

from __future__ import annotations

from kvplan.render.served import Served


def compose_yaml(s: Served) -> dict:
    """One service with every GPU of the serve line (TP x PP x DP x PCP).

    Raises:
        KvplanError: a serve line over several nodes (--nnodes): compose runs on one host."""
    from kvplan.render.k8s import refuse_nodes

    refuse_nodes(s, "compose")
    svc = {"image": s.image, "command": [s.model, *s.flags], "ipc": "host", "ports": ["8000:8000"]}
    if s.shm_region:
        # vLLM keeps its KV offload pool in /dev/shm (Served.shm_region): a sized private /dev/shm
        # holding it and the rings (Docker applies shm_size only without ipc: host, whose size
        # kvplan cannot know); without it, ipc: host gives a multi-GPU engine the host's /dev/shm
        del svc["ipc"]
        svc["shm_size"] = s.shm_size_limit.removesuffix("Gi") + "gb"  # docker/go-units: powers of 1024
    if s.env:
        svc["environment"] = {k: str(v) for k, v in s.env.items()}
    svc["deploy"] = {"resources": {"reservations": {"devices": [
        {"driver": "nvidia", "count": s.gpus, "capabilities": ["gpu"]}]}}}
    return {"services": {"vllm": svc}}
