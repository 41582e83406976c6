"""llm-d writer: modelservice Helm values (llm-d-incubation/llm-d-modelservice) with one
``decode`` role whose chart-built serve line (``modelCommand: vllmServe``) is the plan's:
``modelArtifacts.uri hf://MODEL``, ``parallelism.tensor``, the other flags as the container's
``args``, the GPUs in its resources. Read back by kvplan.check.sources.llmd.

Several nodes (--nnodes): ``multinode: true``, which makes the chart write a LeaderWorkerSet
(templates/decode-lws.yaml at 3051935eb5a49f6df21cd6aeb5e4f05b98799262) of ``numWorkers`` pods =
parallelism.data / dataLocal, each of dataLocal x tensor GPUs (_helpers.tpl numWorkers,
numGpuPerWorker), every pod from the one container (a workerTemplate only). The chart's
``vllmServe`` line has no per-pod flags, so the container runs a ``custom`` command, as llm-d's
published wide-EP values do (llm-d-incubation/llm-d-infra quickstart/examples/wide-ep-lws/
ms-wide-ep/values.yaml at c865e13bf9ef9376f9d2e8fc8193347ab2fe425b: ``modelCommand: custom``,
``$(LWS_LEADER_ADDRESS)``, ``$(LWS_WORKER_INDEX)``): vLLM's own multi-node launch
(render/parallel.py launch_lines), the leader's line on LWS_WORKER_INDEX 0, the ``--headless``
worker's on the others. vLLM listens on the chart's routing.proxy.targetPort (8200 by default:
the decode pods' routing sidecar forwards there).
"""

from __future__ import annotations

import shlex

from kvplan.render.parallel import LEADER_ADDRESS
from kvplan.render.served import Served, hub_uri, refuse_multinode_layout

_HOW = "llm-d modelservice's multinode pods each hold dataLocal x tensor GPUs of whole data-parallel engines"
PROXY_TARGET_PORT = "8200"  # llm-d-modelservice values.yaml routing.proxy.targetPort (3051935e)


def _gpus(n: int) -> dict:
    return {"limits": {"nvidia.com/gpu": str(n)}, "requests": {"nvidia.com/gpu": str(n)}}


def modelservice_values_yaml(s: Served) -> dict:
    """The values of one decode role (no prefill role: one engine, or one data-parallel
    deployment over --nnodes pods).

    Its GPUs are every GPU of the serve line (TP x PP x DP x PCP; --data-parallel-size and
    --enable-expert-parallel ride with the other flags); with --nnodes, each pod's share.

    Raises:
        KvplanError: a --nnodes layout the chart's pods cannot hold (served.refuse_multinode_layout).
    """
    from kvplan.render.k8s import shm_volumes, with_shm

    refuse_multinode_layout(s, "llm-d", _HOW)
    if s.nnodes > 1:
        c = {"name": "vllm", "image": s.image, "modelCommand": "custom", "command": ["/bin/sh", "-c"],
             "args": [_multinode_script(s)]}
        par = {"tensor": s.tp, "data": s.dp, "dataLocal": s.dp_local}
    else:
        args = list(s.flags_without_parallel)
        if s.pp > 1:
            args += ["--pipeline-parallel-size", str(s.pp)]
        c = {"name": "vllm", "image": s.image, "modelCommand": "vllmServe", "args": args}
        par = {"tensor": s.tp}
    if s.env:
        c["env"] = [{"name": k, "value": str(v)} for k, v in s.env.items()]
    c["resources"] = _gpus(s.gpus_per_node)
    decode = {"create": True, "replicas": s.replicas, "parallelism": par, "containers": [with_shm(s, c)]}
    if shm_volumes(s):
        decode["volumes"] = shm_volumes(s)
    return {
        "multinode": s.nnodes > 1,
        "modelArtifacts": {"name": s.model, "uri": hub_uri(s, "llm-d")},
        "decode": decode,
        "prefill": {"create": False},
    }


def _multinode_script(s: Served) -> str:
    """The pod's shell script: the leader's launch line on LWS_WORKER_INDEX 0, else a worker's
    with its own index as --node-rank (one container for every pod of the group)."""
    def line(flags: tuple[str, ...], worker: bool) -> str:
        words = list(flags)
        if worker:
            words[words.index("--node-rank") + 1] = "@INDEX@"
        text = shlex.join(["exec", "vllm", "serve", s.model, *words, "--port", PROXY_TARGET_PORT])
        return (text.replace(shlex.quote(LEADER_ADDRESS), '"$LWS_LEADER_ADDRESS"')
                .replace("@INDEX@", '"$LWS_WORKER_INDEX"'))

    return (f'if [ "${{LWS_WORKER_INDEX:-0}}" = 0 ]; then\n  {line(s.node_flags[0], False)}\n'
            f"else\n  {line(s.node_flags[1], True)}\nfi\n")
