"""vLLM production-stack Helm values (vllm-project/production-stack): one vLLM server per
``servingEngineSpec.modelSpec[]`` entry.

How the chart starts it (helm/templates/deployment-vllm-multi.yaml, read at commit a6c01db0):
``vllm serve MODEL_URL --host --port`` then, from ``vllmConfig``: ``enableChunkedPrefill``
(--enable-chunked-prefill / --no-...), ``enablePrefixCaching`` (--enable-prefix-caching, else
--no-enable-prefix-caching), ``maxModelLen``, ``dtype``, ``tensorParallelSize``, ``maxNumSeqs``,
``gpuMemoryUtilization``, ``maxLoras``, ``extraArgs``; ``enableLoRA`` adds --enable-lora; a
``modelRevision`` --revision; ``lmcacheConfig.enabled`` adds --kv-transfer-config with
LMCacheConnectorV1 and ``kvRole`` (kv_both by default). The image is ``repository:tag``, the GPU
count ``requestGPU`` (nvidia.com/gpu), the host memory ``limitMemory`` else ``requestMemory``.
``vllmConfig.pipelineParallelSize`` only applies with ``raySpec`` (a Ray cluster of nodes).
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.check.deployment import Deployment, _int_or_none
from kvplan.check.sources.stack import Arg, Role, flag, quantity_bytes, replicas_at, role_deployments, words_at
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc

# vllmConfig key -> `vllm serve` flag, as the chart writes them (value flags)
_VALUE_KEYS = {"maxModelLen": "max-model-len", "dtype": "dtype", "tensorParallelSize": "tensor-parallel-size",
               "maxNumSeqs": "max-num-seqs", "gpuMemoryUtilization": "gpu-memory-utilization", "maxLoras": "max-loras"}


def is_production_stack(data: Any) -> bool:
    """Whether a YAML document is production-stack values (``servingEngineSpec.modelSpec`` list)."""
    return (isinstance(data, dict) and isinstance(data.get("servingEngineSpec"), dict)
            and isinstance(data["servingEngineSpec"].get("modelSpec"), list))


def production_stack_deployments(doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """One Deployment per ``modelSpec`` entry (see the module doc)."""
    out: list[Deployment] = []
    for mi, ms in enumerate(doc.data["servingEngineSpec"]["modelSpec"]):
        if not isinstance(ms, dict):
            continue
        mpath = ("servingEngineSpec", "modelSpec", mi)
        key = f"servingEngineSpec.modelSpec[{mi}]"
        role = Role(name=f"modelSpec {ms.get('name', mi)}", line=doc.line_of(mpath), kind="production-stack", syntax="exec")
        replicas_at(role, doc, ms, mpath, "replicaCount", f"{key}.replicaCount")
        if isinstance(ms.get("modelURL"), str):
            role.model = (ms["modelURL"], doc.line_of(mpath + ("modelURL",)), f"{key}.modelURL")
        else:
            role.model_unknown = ("(none)", role.line, f"{key}.modelURL", "the modelSpec names no modelURL")
        cfg = ms.get("vllmConfig") if isinstance(ms.get("vllmConfig"), dict) else {}
        cpath = mpath + ("vllmConfig",)
        args: list[Arg] = flag("enable-lora", bool(ms.get("enableLoRA")), doc, mpath + ("enableLoRA",), f"{key}.enableLoRA")
        if "enableChunkedPrefill" in cfg:
            name = "enable-chunked-prefill" if cfg["enableChunkedPrefill"] else "no-enable-chunked-prefill"
            args += flag(name, True, doc, cpath + ("enableChunkedPrefill",), f"{key}.vllmConfig.enableChunkedPrefill")
        if isinstance(ms.get("vllmConfig"), dict):  # inside the chart's `with vllmConfig`: absent, no flag
            name = "enable-prefix-caching" if cfg.get("enablePrefixCaching") else "no-enable-prefix-caching"
            args += flag(name, True, doc, cpath + ("enablePrefixCaching",), f"{key}.vllmConfig.enablePrefixCaching")
        for k, f in _VALUE_KEYS.items():
            if k in cfg:
                args += flag(f, cfg[k], doc, cpath + (k,), f"{key}.vllmConfig.{k}")
        raypp = _int_or_none(cfg.get("pipelineParallelSize")) if isinstance(ms.get("raySpec"), dict) else None
        args += flag("pipeline-parallel-size", raypp, doc, cpath + ("pipelineParallelSize",), f"{key}.vllmConfig.pipelineParallelSize")
        args += words_at(doc, cpath + ("extraArgs",), cfg.get("extraArgs"))
        args += flag("revision", ms.get("modelRevision"), doc, mpath + ("modelRevision",), f"{key}.modelRevision")
        lm = ms.get("lmcacheConfig") if isinstance(ms.get("lmcacheConfig"), dict) else {}
        if lm.get("enabled"):
            kv = {"kv_connector": "LMCacheConnectorV1", "kv_role": lm.get("kvRole") or "kv_both"}
            args += flag("kv-transfer-config", json.dumps(kv), doc, mpath + ("lmcacheConfig",), f"{key}.lmcacheConfig")
            if lm.get("cudaVisibleDevices") is not None:
                role.visible_devices = (str(lm["cudaVisibleDevices"]), doc.line_of(mpath + ("lmcacheConfig", "cudaVisibleDevices")))
        role.args = args
        if ms.get("requestGPU") is not None:
            gpus = _int_or_none(ms["requestGPU"])
            if raypp and isinstance(ms["raySpec"].get("headNode"), dict):
                gpus = (gpus or 0) * raypp  # every node of the Ray cluster brings requestGPU
            role.gpu_count = (gpus, doc.line_of(mpath + ("requestGPU",)), f"{key}.requestGPU")
        for mk in ("limitMemory", "requestMemory"):
            mem = quantity_bytes(ms.get(mk))
            if mem is not None:
                role.host_memory = (mem, doc.line_of(mpath + (mk,)), f"{key}.{mk}")
                break
        if isinstance(ms.get("repository"), str):
            image = ms["repository"] + (f":{ms['tag']}" if ms.get("tag") is not None else "")
            role.image = (image, doc.line_of(mpath + ("tag",)), f"{key}.tag")
        out += role_deployments(role, file, raw, cat)
    return out
