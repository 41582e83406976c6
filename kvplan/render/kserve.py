"""KServe writer: an LLMInferenceService (serving.kserve.io/v1alpha2) whose controller builds
the serve line back (kvplan.check.sources.kserve): ``spec.model.uri hf://MODEL``,
``parallelism.tensor``, the other flags in the main container's ``VLLM_ADDITIONAL_ARGS``
(its single-node template passes only the tensor size, so --pipeline-parallel-size goes there
too), the GPUs in its resources and the vLLM image."""

from __future__ import annotations

import shlex

from kvplan.render.served import Served, hub_uri


def llmisvc_yaml(s: Served) -> dict:
    """The LLMInferenceService of one engine.

    Its GPUs are every GPU of the serve line (TP x PP x DP x PCP; --data-parallel-size and
    --enable-expert-parallel ride with the other flags).

    Raises:
        KvplanError: a serve line over several nodes (--nnodes: not written for this stack yet).
    """
    from kvplan.render.k8s import refuse_nodes

    refuse_nodes(s, "kserve")
    extra = list(s.flags_without_parallel)
    if s.pp > 1:
        extra += ["--pipeline-parallel-size", str(s.pp)]
    env = [{"name": k, "value": str(v)} for k, v in s.env.items()]
    if extra:
        env.append({"name": "VLLM_ADDITIONAL_ARGS", "value": shlex.join(extra)})
    main = {"name": "main", "image": s.image}
    if env:
        main["env"] = env
    main["resources"] = {"limits": {"nvidia.com/gpu": str(s.gpus)}, "requests": {"nvidia.com/gpu": str(s.gpus)}}
    spec = {"model": {"uri": hub_uri(s, "kserve"), "name": s.model}, "replicas": s.replicas}
    if s.tp > 1:
        spec["parallelism"] = {"tensor": s.tp}
    spec["router"] = {"scheduler": {}, "route": {}, "gateway": {}}
    spec["template"] = {"containers": [main]}
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService", "metadata": {"name": s.name},
            "spec": spec}
