"""KServe writer: an LLMInferenceService (serving.kserve.io/v1alpha2) whose controller builds
the serve line back (kvplan.check.sources.kserve): ``spec.model.uri hf://MODEL``,
``parallelism.tensor``, the other flags in the main container's ``VLLM_ADDITIONAL_ARGS``
(its single-node template passes only the tensor size, so --pipeline-parallel-size goes there
too), the GPUs in its resources and the vLLM image.

Several nodes (--nnodes): KServe's multi-node pattern, a ``spec.worker`` beside the leader's
``spec.template`` with ``parallelism.{tensor, data, dataLocal, expert}``: the controller picks
its data-parallel worker template (kserve/kserve config/llmisvcconfig/
config-llm-worker-data-parallel.yaml, pkg/controller/v1alpha2/llmisvc/config_merge.go at
aaac4e294dae2c7b1aa1886447793f3aa1c30912) and a LeaderWorkerSet of data / dataLocal pods
(ParallelismSpec.GetSize), every pod running ``vllm serve --tensor-parallel-size T
--data-parallel-size data --data-parallel-size-local dataLocal --data-parallel-start-rank
LWS_WORKER_INDEX x dataLocal`` (the workers ``--headless``) -- as the published sample
docs/samples/llmisvc/dp-ep/.../llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml writes
it. KServe publishes no pipeline-parallel worker template at that commit, so one engine over
several nodes is refused (served.refuse_multinode_layout).
"""

from __future__ import annotations

import shlex

from kvplan.render.served import MULTINODE_FIELDS, Served, hub_uri, refuse_multinode_layout

_HOW = "KServe's multi-node LLMInferenceService runs whole data-parallel engines in each pod: its data-parallel worker template"


def _main(s: Served, extra: list[str]) -> dict:
    """The ``main`` container: the vLLM image, VLLM_ADDITIONAL_ARGS, one pod's GPUs, /dev/shm."""
    from kvplan.render.k8s import with_shm

    env = [{"name": k, "value": str(v)} for k, v in s.env.items()]
    if extra:
        env.append({"name": "VLLM_ADDITIONAL_ARGS", "value": shlex.join(extra)})
    main = {"name": "main", "image": s.image}
    if env:
        main["env"] = env
    gpus = s.gpus_per_node
    main["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return with_shm(s, main)


def _pod(s: Served, extra: list[str]) -> dict:
    """A pod template of the main container; its ``dshm`` volume (when vLLM keeps its KV offload
    pool in /dev/shm) replaces the one of KServe's template by name (strategic merge)."""
    from kvplan.render.k8s import shm_volumes

    pod = {"containers": [_main(s, extra)]}
    if shm_volumes(s):
        pod["volumes"] = shm_volumes(s)
    return pod


def llmisvc_yaml(s: Served) -> dict:
    """The LLMInferenceService of one engine (or of one data-parallel deployment over --nnodes).

    Its GPUs are every GPU of the serve line (TP x PP x DP x PCP; --data-parallel-size and
    --enable-expert-parallel ride with the other flags); with --nnodes, each pod's share.

    Raises:
        KvplanError: a --nnodes layout KServe's data-parallel worker template cannot run
            (served.refuse_multinode_layout)."""
    refuse_multinode_layout(s, "kserve", _HOW)
    spec = {"model": {"uri": hub_uri(s, "kserve"), "name": s.model}, "replicas": s.replicas}
    if s.nnodes > 1:
        par = {"tensor": s.tp, "data": s.dp, "dataLocal": s.dp_local}
        if s.expert_parallel:
            par["expert"] = True
        spec["parallelism"] = par
        extra = list(s.flags_without(*MULTINODE_FIELDS))
    else:
        extra = list(s.flags_without_parallel)
        if s.pp > 1:
            extra += ["--pipeline-parallel-size", str(s.pp)]
        if s.tp > 1:
            spec["parallelism"] = {"tensor": s.tp}
    spec["router"] = {"scheduler": {}, "route": {}, "gateway": {}}
    spec["template"] = _pod(s, extra)
    if s.nnodes > 1:
        spec["worker"] = _pod(s, extra)
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "metadata": {"name": s.name},
            "spec": spec}
