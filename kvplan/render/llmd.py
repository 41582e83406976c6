"""llm-d writer: modelservice Helm values (llm-d-incubation/llm-d-modelservice) with one
``decode`` role whose chart-built serve line (``modelCommand: vllmServe``) is the plan's:
``modelArtifacts.uri hf://MODEL``, ``parallelism.tensor``, the other flags as the container's
``args``, the GPUs in its resources. Read back by kvplan.check.sources.llmd."""

from __future__ import annotations

from kvplan.render.served import Served, hub_uri


def modelservice_values_yaml(s: Served) -> dict:
    """The values of one decode role (no prefill role: one engine).

    Its GPUs are every GPU of the serve line (TP x PP x DP x PCP; --data-parallel-size and
    --enable-expert-parallel ride with the other flags).

    Raises:
        KvplanError: a serve line over several nodes (--nnodes: not written for this stack yet).
    """
    from kvplan.render.k8s import refuse_nodes

    refuse_nodes(s, "llm-d")
    args = list(s.flags_without_parallel)
    if s.pp > 1:
        args += ["--pipeline-parallel-size", str(s.pp)]
    c = {"name": "vllm", "image": s.image, "modelCommand": "vllmServe", "args": args}
    if s.env:
        c["env"] = [{"name": k, "value": str(v)} for k, v in s.env.items()]
    c["resources"] = {"limits": {"nvidia.com/gpu": str(s.gpus)}, "requests": {"nvidia.com/gpu": str(s.gpus)}}
    return {
        "multinode": False,
        "modelArtifacts": {"name": s.model, "uri": hub_uri(s, "llm-d")},
        "decode": {"create": True, "replicas": s.replicas, "parallelism": {"tensor": s.tp}, "containers": [c]},
        "prefill": {"create": False},
    }
