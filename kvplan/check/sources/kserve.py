"""KServe manifests: ``LLMInferenceService`` (serving.kserve.io v1alpha1 and v1alpha2) and the
multi-node ``InferenceService`` / ``ServingRuntime`` with a ``workerSpec``.

An LLMInferenceService names no `vllm serve` line: KServe's controller builds it from the
well-known LLMInferenceServiceConfig templates (kserve/kserve
charts/kserve-runtime-configs/files/llmisvcconfigs/resources.yaml, read at commit aaac4e29):

* ``kserve-config-llm-template`` / ``-decode-template`` / ``-prefill-template`` (no ``worker``):
  ``vllm serve /mnt/models --served-model-name ... [--tensor-parallel-size T]
  ${KV_TRANSFER_ARGS} ${VLLM_ADDITIONAL_ARGS} $@`` -- only ``parallelism.tensor`` reaches vLLM;
* ``kserve-config-llm-worker-data-parallel`` (``worker`` with ``parallelism.data``/``dataLocal``):
  every pod of the LeaderWorkerSet runs ``vllm serve`` with ``--enable-expert-parallel`` (when
  ``expert``), ``--tensor-parallel-size``, ``--data-parallel-size data``,
  ``--data-parallel-size-local dataLocal`` and its own start rank; the group has data / dataLocal
  pods (LLMInferenceService ParallelismSpec.GetSize);
* ``KV_TRANSFER_ARGS``: ``spec.kvCacheOffloading`` becomes ``--kv-transfer-config`` with vLLM's
  OffloadingConnector and ``cpu_bytes_to_use`` (pkg/controller/v1alpha2/llmisvc/config_merge.go
  kvTransferConfig), unless VLLM_ADDITIONAL_ARGS or the args already set --kv-transfer-config;
* the user's ``template.containers[main].args`` are the ``$@``; a ``command`` of their own replaces
  the template's.

``spec.prefill`` is a second role with its own ``parallelism``/``template``/``worker``; the
model is ``spec.model`` for both. ``spec.speculator`` (model + config) is passed as vLLM's
``--speculative-config`` to the decode pods only (see _speculator_args). The checkpoint is ``spec.model.uri``: an ``hf://`` id is the model;
any other scheme (pvc://, s3://) is a checkpoint kvplan cannot read (model-unresolved, exit 2,
unless a ``# kvplan: model=`` comment names it).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from kvplan.check.deployment import Deployment, _int_or_none
from kvplan.check.sources.k8s import _gpu_from_selectors, _k8s_env, _pod_gpus
from kvplan.check.sources.stack import Arg, Role, container_resources, flag, model_from_uri, quantity_bytes, replicas_at, role_deployments, unknown_model, words_at
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc

LLMISVC_API = ("serving.kserve.io/v1alpha1", "serving.kserve.io/v1alpha2")
KINDS = ("LLMInferenceService", "InferenceService", "ServingRuntime", "ClusterServingRuntime")


def is_kserve(data: Any) -> bool:
    """Whether a YAML document is a KServe object this reader sizes: an LLMInferenceService, an
    InferenceService whose predictor names a ``model`` (a model format served by a runtime), or
    a ServingRuntime with a multi-node ``workerSpec``. An InferenceService with custom predictor
    ``containers`` or a single-node ServingRuntime runs its own command: the Kubernetes reader
    reads it (kvplan.check.sources.k8s)."""
    if not (isinstance(data, dict) and data.get("kind") in KINDS and str(data.get("apiVersion", "")).startswith("serving.kserve.io/")):
        return False
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    if data["kind"] == "InferenceService":
        pred = spec.get("predictor") if isinstance(spec.get("predictor"), dict) else {}
        return isinstance(pred.get("model"), dict)
    if data["kind"] in ("ServingRuntime", "ClusterServingRuntime"):
        return isinstance(spec.get("workerSpec"), dict)
    return True


def kserve_deployments(doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """The vLLM servers of one KServe object, one Deployment per role (see the module doc)."""
    data = doc.data
    roles = _llmisvc_roles(doc) if data.get("kind") == "LLMInferenceService" else _isvc_roles(doc)
    out: list[Deployment] = []
    for role in roles:
        for dep in role_deployments(role, file, raw, cat):
            if role.pod is not None:
                _gpu_from_selectors(dep, role.pod, role.pod_path, doc, node_map)
            out.append(dep)
    return out


def _main_container(pod: Any) -> tuple[int, dict] | None:
    """(index, container) of the pod's ``main`` container (KServe's name for vLLM's), else its first."""
    containers = pod.get("containers") if isinstance(pod, dict) else None
    if not isinstance(containers, list) or not containers:
        return None
    for i, c in enumerate(containers):
        if isinstance(c, dict) and c.get("name") == "main":
            return i, c
    return (0, containers[0]) if isinstance(containers[0], dict) else None


def _llmisvc_roles(doc: YamlDoc) -> list[Role]:
    """The main pool (``decode`` when there is a ``prefill``) and the prefill pool."""
    spec = doc.data.get("spec") if isinstance(doc.data.get("spec"), dict) else {}
    name = (doc.data.get("metadata") or {}).get("name", "?") if isinstance(doc.data.get("metadata"), dict) else "?"
    parts = [(spec, ("spec",), "decode" if isinstance(spec.get("prefill"), dict) else None)]
    if isinstance(spec.get("prefill"), dict):
        parts.append((spec["prefill"], ("spec", "prefill"), "prefill"))
    return [_llmisvc_role(doc, spec, rspec, path, f"LLMInferenceService/{name}" + (f" {label}" if label else ""))
            for rspec, path, label in parts]


def _llmisvc_role(doc: YamlDoc, spec: dict, rspec: dict, path: tuple, name: str) -> Role:
    """One pool: its pod template's main container, then the serve line KServe builds for it."""
    role = Role(name=name, line=doc.line_of(path), kind="kserve")
    replicas_at(role, doc, rspec, path, "replicas", "spec" + "".join(f".{p}" for p in path[1:]) + ".replicas")
    _llmisvc_model(role, spec, doc)
    template = rspec.get("template") if isinstance(rspec.get("template"), dict) else None
    tpath = path + ("template",)
    if template is None and path[-1] == "prefill" and isinstance(spec.get("template"), dict):
        template, tpath = spec["template"], ("spec", "template")  # the prefill pods' own template, else the main one
    main = _main_container(template)
    container, cpath = (main[1], tpath + ("containers", main[0])) if main else ({}, tpath)
    role.env, role.runtime, role.notes = _k8s_env(container)
    if main:
        container_resources(role, container, doc, cpath)
    role.pod, role.pod_path = template, tpath
    worker = rspec.get("worker") if isinstance(rspec.get("worker"), dict) else None
    par = rspec.get("parallelism") if isinstance(rspec.get("parallelism"), dict) else {}
    role.shm = _llmisvc_shm(template or {}, container, doc, tpath, cpath, worker, par)
    _llmisvc_serve_line(role, doc, spec, rspec, path, container, cpath, worker, par)
    _pipeline_group(role, worker, par)
    return role


def _llmisvc_serve_line(role: Role, doc: YamlDoc, spec: dict, rspec: dict, path: tuple, container: dict, cpath: tuple,
                        worker: dict | None, par: dict) -> None:
    """The template's flags in its order: parallelism, speculator, KV_TRANSFER_ARGS (unless the
    user's own args set --kv-transfer-config), VLLM_ADDITIONAL_ARGS, then the container's args;
    a container ``command`` of the user's own replaces the line."""
    args = _parallelism_args(par, worker, doc, path + ("parallelism",), role.ignored)
    extra = _additional_args(container, doc, cpath, role)
    speculator = _speculator_args(spec, doc) if path[-1] != "prefill" else []
    if speculator:  # the CR's config replaces one in VLLM_ADDITIONAL_ARGS and is appended to it
        extra = _without_flag(extra, "--speculative-config") + speculator
    user_args = words_at(doc, cpath + ("args",), container.get("args"))
    if not any(a.text.split("=", 1)[0] in ("--kv-transfer-config", "--kv_transfer_config") for a in extra + user_args):
        args += _offloading_args(rspec, spec, doc, path)
    if not any("--lora-modules" in a.text for a in extra + user_args):
        user_args = _lora_args(spec, doc) + user_args
    role.args = args + extra + user_args
    if isinstance(container.get("command"), list):
        role.command = [(a.text, a.line) for a in words_at(doc, cpath + ("command",), container["command"])]
        role.command += [(a.text, a.line) for a in user_args]


# The /dev/shm volume of KServe's well-known LLMInferenceServiceConfig templates (kserve/kserve
# config/llmisvcconfig/*.yaml at aaac4e29): an emptyDir {medium: Memory} named ``dshm`` mounted at
# /dev/shm, sizeLimit 1Gi in the single-node templates (config-llm-template, -decode-template,
# -prefill-template) and 8Gi in the data-parallel worker templates (config-llm-worker-data-parallel
# and its decode/prefill versions). The user's template merges over it: a volume named dshm, or a
# mount at /dev/shm, of their own replaces it.
_KSERVE_DSHM = {"single": "1Gi", "data-parallel": "8Gi"}


def _llmisvc_shm(template: dict, container: dict, doc: YamlDoc, tpath: tuple, cpath: tuple, worker, par: dict):
    """The /dev/shm of the pool's main container: its own mount and volume over the template's dshm."""
    from kvplan.check.sources.shm import ShmSize, pod_shm

    data_parallel = bool(par.get("data") or par.get("dataLocal"))
    if worker is not None and not data_parallel:  # the pipeline-parallel worker config: not published at aaac4e29
        return ShmSize(None, doc.line_of(tpath), "spec.worker",
                       "set by KServe's pipeline-parallel worker template, which kvplan has not read")
    which = "data-parallel" if worker is not None else "single"
    volume = {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _KSERVE_DSHM[which]}}
    mount = {"name": "dshm", "mountPath": "/dev/shm"}
    source = ("KServe's data-parallel worker template" if worker is not None else "KServe's single-node template") \
        + f" dshm, sizeLimit {_KSERVE_DSHM[which]}"
    return pod_shm(template, container, doc, tpath, cpath, (volume,), (mount,), source)


def _pipeline_group(role: Role, worker: dict | None, par: dict) -> None:
    """A pipeline-parallel ``worker`` (no data parallel): one `vllm serve` over ``pipeline`` pods,
    the leader's GPUs plus pipeline - 1 workers' (as a LeaderWorkerSet group, kvplan.check.sources.k8s)."""
    size = _int_or_none(par.get("pipeline")) or 1
    if worker is not None and (par.get("data") or par.get("dataLocal")) and role.gpu_count is not None:
        # the data-parallel worker template: data / dataLocal pods (ParallelismSpec.GetSize), each
        # running its dataLocal engines on its own GPUs (the gpu-count check counts them per pod)
        pods = max((_int_or_none(par.get("data")) or 1) // max(_int_or_none(par.get("dataLocal")) or 1, 1), 1)
        leader, workers = role.gpu_count[0], _pod_gpus(worker)
        if leader is not None and workers is not None and pods > 1:
            role.gpu_group = (leader, pods, leader, workers)
        return
    if worker is None or size <= 1 or par.get("data") or par.get("dataLocal") or role.gpu_count is None:
        return
    leader, workers = role.gpu_count[0], _pod_gpus(worker)
    if leader is not None and workers is not None:
        role.gpu_group = (leader, size, leader, workers)
        role.gpu_count = (leader + (size - 1) * workers, role.gpu_count[1], role.gpu_count[2])


def _llmisvc_model(role: Role, spec: dict, doc: YamlDoc) -> None:
    model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
    uri = model.get("uri")
    hub = model_from_uri(uri)
    if hub:
        role.model = (hub, doc.line_of(("spec", "model", "uri")), "spec.model.uri")
    elif uri is None:
        unknown_model(role, "(none)", doc.line_of(("spec", "model")), "spec.model.uri",
                      "the LLMInferenceService names no spec.model.uri")
    else:
        unknown_model(role, str(uri), doc.line_of(("spec", "model", "uri")), "spec.model.uri",
                      f"{uri} is a checkpoint kvplan cannot read (only hf:// ids are)")


def _parallelism_args(par: dict, worker: dict | None, doc: YamlDoc, ppath: tuple, ignored: list) -> list[Arg]:
    """The flags KServe's templates write from ``parallelism`` (see the module doc)."""
    k = "spec" + "".join(f".{p}" for p in ppath[1:])
    out = flag("tensor-parallel-size", _int_or_none(par.get("tensor")), doc, ppath + ("tensor",), f"{k}.tensor")
    if worker is not None and (par.get("data") or par.get("dataLocal")):
        out = flag("enable-expert-parallel", bool(par.get("expert")), doc, ppath + ("expert",), f"{k}.expert") + out
        out += flag("data-parallel-size", _int_or_none(par.get("data")) or 1, doc, ppath + ("data",), f"{k}.data")
        out += flag("data-parallel-size-local", _int_or_none(par.get("dataLocal")) or 1, doc, ppath + ("dataLocal",), f"{k}.dataLocal")
    elif worker is not None and _int_or_none(par.get("pipeline")):
        out += flag("pipeline-parallel-size", _int_or_none(par.get("pipeline")), doc, ppath + ("pipeline",), f"{k}.pipeline")
    else:
        # the single-node templates pass only the tensor size: data/dataLocal/expert/pipeline
        # without a worker never reach vLLM (a warning on each, in ignored)
        for name in ("data", "dataLocal", "expert", "pipeline"):
            if par.get(name):
                ignored.append((doc.line_of(ppath + (name,)), f"{k}.{name}",
                                f"KServe's single-node template passes only parallelism.tensor to vLLM: {k}.{name} "
                                "has no effect without a worker (the multi-node data-parallel template)"))
    return out


def _speculator_args(spec: dict, doc: YamlDoc) -> list[Arg]:
    """``spec.speculator`` as the --speculative-config KServe appends to the decode pods'
    VLLM_ADDITIONAL_ARGS (pkg/controller/v1alpha2/llmisvc injectSpeculativeDecodingArgs: the
    config map with each value read as an integer, float or boolean when it is one, plus
    ``model``: KServe mounts the downloaded draft there; kvplan names the uri's Hub id). Prefill
    pods get none."""
    sp = spec.get("speculator")
    if not isinstance(sp, dict):
        return []
    cfg = {str(k): _json_typed(v) for k, v in sp["config"].items()} if isinstance(sp.get("config"), dict) else {}
    model = sp.get("model") if isinstance(sp.get("model"), dict) else {}
    if model.get("uri") is not None:
        cfg["model"] = model_from_uri(model["uri"]) or str(model["uri"])
    if not cfg:
        return []
    return flag("speculative-config", json.dumps(cfg), doc, ("spec", "speculator"), "spec.speculator")


def _lora_args(spec: dict, doc: YamlDoc) -> list[Arg]:
    """``spec.model.lora`` as KServe's controller writes it before the container's args, in every
    pool (pkg/controller/v1alpha2/llmisvc/workload_lora.go addLoRAVLLMArgs): ``--enable-lora``,
    ``--max-lora-rank``/``--max-loras``/``--max-cpu-loras`` when maxRank/maxAdapters/
    maxCpuAdapters are set, ``--lora-modules`` with each adapter at /mnt/lora/NAME (KServe adds a
    namespaced alias of each, which changes no memory). Nothing when the user's args already set
    --lora-modules."""
    lora = (spec.get("model") or {}).get("lora") if isinstance(spec.get("model"), dict) else None
    adapters = lora.get("adapters") if isinstance(lora, dict) else None
    if not isinstance(adapters, list) or not adapters:
        return []
    path, key = ("spec", "model", "lora"), "spec.model.lora"
    out = flag("enable-lora", True, doc, path, key)
    for field, name in (("maxRank", "max-lora-rank"), ("maxAdapters", "max-loras"), ("maxCpuAdapters", "max-cpu-loras")):
        out += flag(name, _int_or_none(lora.get(field)), doc, path + (field,), f"{key}.{field}")
    modules = [json.dumps({"name": str(a.get("name", i)), "path": f"/mnt/lora/{a.get('name', i)}"})
               for i, a in enumerate(adapters) if isinstance(a, dict)]
    line = doc.line_of(path + ("adapters",))
    return out + [Arg("--lora-modules", line, f"{key}.adapters")] + [Arg(m, line, f"{key}.adapters") for m in modules]


def _json_typed(v: Any) -> Any:
    """A config value as KServe's inferJSONType reads it: integer, float, boolean, else text."""
    if not isinstance(v, str):
        return v
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def _without_flag(args: list[Arg], name: str) -> list[Arg]:
    """``args`` without ``name`` and its value (``name=value`` or two words)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a.text == name:
            skip = True
            continue
        if a.text.startswith(name + "="):
            continue
        out.append(a)
    return out


def _offloading_args(rspec: dict, spec: dict, doc: YamlDoc, path: tuple) -> list[Arg]:
    """``kvCacheOffloading`` (the role's own: ``spec.prefill.kvCacheOffloading`` for the prefill
    pods; ``spec.workload.kvCacheOffloading`` in a later schema, main pods) as the
    ``--kv-transfer-config`` KServe writes (config_merge.go kvTransferConfig; the templates'
    KV_TRANSFER_ARGS)."""
    workload = spec.get("workload") if isinstance(spec.get("workload"), dict) and path[-1] != "prefill" else {}
    for kv, kpath in ((rspec.get("kvCacheOffloading"), path + ("kvCacheOffloading",)),
                      (workload.get("kvCacheOffloading"), ("spec", "workload", "kvCacheOffloading"))):
        if not isinstance(kv, dict):
            continue
        cpu = kv.get("cpu")
        size = quantity_bytes(cpu.get("size") if isinstance(cpu, dict) else cpu)
        extra: dict[str, Any] = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": size}
        cfg = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}
        return flag("kv-transfer-config", json.dumps(cfg), doc, kpath, "spec" + "".join(f".{p}" for p in kpath[1:]))
    return []


def _additional_args(container: dict, doc: YamlDoc, cpath: tuple, role: Role) -> list[Arg]:
    """``VLLM_ADDITIONAL_ARGS`` from the container's env, split as the template's ``eval`` does."""
    for ei, e in enumerate(container.get("env") or []):
        if not isinstance(e, dict) or e.get("name") != "VLLM_ADDITIONAL_ARGS":
            continue
        line = doc.lines.get(cpath + ("env", ei), doc.line_of(cpath))
        if "VLLM_ADDITIONAL_ARGS" not in role.env:
            return [Arg("$(VLLM_ADDITIONAL_ARGS)", line)]  # valueFrom: unresolved, reported
        try:
            words = shlex.split(role.env["VLLM_ADDITIONAL_ARGS"])
        except ValueError:
            words = role.env["VLLM_ADDITIONAL_ARGS"].split()
        vline = doc.lines.get(cpath + ("env", ei, "value"), line)
        return [Arg(w, vline) for w in words]
    return []


# --- InferenceService / ServingRuntime (v1beta1 huggingfaceserver, vLLM backend) ----------------

# huggingfaceserver's own arguments (kserve python/huggingfaceserver/__main__.py), not vLLM's
_HF_SERVER_ARGS = {"--model_name", "--model_id", "--model_dir", "--model_revision", "--tokenizer_revision", "--backend",
                   "--task", "--return_token_type_ids", "--return_probabilities", "--disable_lower_case",
                   "--disable_special_tokens", "--return_raw_logits", "--max_length", "--tensor_input_names"}


def _isvc_roles(doc: YamlDoc) -> list[Role]:
    """One role for an InferenceService's predictor (or a ServingRuntime's container): the
    huggingfaceserver runs vLLM with its own arguments removed; ``workerSpec`` makes it a Ray
    group of pipelineParallelSize nodes with tensorParallelSize GPUs each (KServe docs
    modelserving/v1beta1/llm/huggingface/multi-node: TENSOR_PARALLEL_SIZE and
    PIPELINE_PARALLEL_SIZE in the env win over workerSpec; the GPU count of every pod is the
    tensor size)."""
    data = doc.data
    spec = data.get("spec") if isinstance(data.get("spec"), dict) else {}
    name = (data.get("metadata") or {}).get("name", "?") if isinstance(data.get("metadata"), dict) else "?"
    role = Role(name=f"{data.get('kind')}/{name}", line=doc.line_of(("spec",)), kind="kserve")
    if data.get("kind") == "InferenceService":
        pred = spec.get("predictor") if isinstance(spec.get("predictor"), dict) else {}
        container = pred.get("model") if isinstance(pred.get("model"), dict) else {}
        cpath = ("spec", "predictor", "model")
        worker = pred.get("workerSpec") if isinstance(pred.get("workerSpec"), dict) else None
        wpath = ("spec", "predictor", "workerSpec")
        role.pod, role.pod_path = pred, ("spec", "predictor")
    else:
        main = _main_container(spec)
        container, cpath = (main[1], ("spec", "containers", main[0])) if main else ({}, ("spec",))
        worker = spec.get("workerSpec") if isinstance(spec.get("workerSpec"), dict) else None
        wpath = ("spec", "workerSpec")
    role.env, role.runtime, role.notes = _k8s_env(container)
    container_resources(role, container, doc, cpath)
    words = words_at(doc, cpath + ("args",), container.get("args"))
    model = None
    for a in words:
        opt, _, value = a.text.partition("=")
        if opt in ("--model_id", "--model_dir") and value:
            model = (value, a.line, f"args {opt}")
    uri = container.get("storageUri")
    if model is None and model_from_uri(uri):
        model = (model_from_uri(uri), doc.line_of(cpath + ("storageUri",)), "storageUri")
    if model is not None:
        role.model = model
    elif uri is not None:
        unknown_model(role, str(uri), doc.line_of(cpath + ("storageUri",)), "storageUri",
                      f"{uri} is a checkpoint kvplan cannot read (only hf:// ids are)")
    else:
        unknown_model(role, "(none)", role.line, "storageUri",
                      f"a {data.get('kind')} names no model; the InferenceService that uses it does")
    role.args = [a for a in words if a.text.partition("=")[0] not in _HF_SERVER_ARGS]
    if worker is not None:
        tp = _int_or_none(role.env.get("TENSOR_PARALLEL_SIZE")) or _int_or_none(worker.get("tensorParallelSize")) or 1
        pp = (_int_or_none(role.env.get("PIPELINE_PARALLEL_SIZE")) or _int_or_none(worker.get("pipelineParallelSize"))
              or ((_int_or_none(worker.get("size")) or 1) + 1))
        role.args = (flag("tensor-parallel-size", tp, doc, wpath + ("tensorParallelSize",), "workerSpec.tensorParallelSize")
                     + flag("pipeline-parallel-size", pp, doc, wpath + ("pipelineParallelSize",), "workerSpec.pipelineParallelSize")
                     + role.args)
        role.gpu_count = (tp * pp, doc.line_of(wpath), "workerSpec")
        role.gpu_group = (tp, pp, tp, tp)
    return [role]
