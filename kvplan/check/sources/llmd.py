"""llm-d ``modelservice`` Helm values (llm-d-incubation/llm-d-modelservice): the ``decode`` and
``prefill`` roles, each a Deployment (or a LeaderWorkerSet with ``multinode: true``) of pods
running vLLM.

How the chart builds each container (charts/llm-d-modelservice/templates/_helpers.tpl, read at
commit 3051935e):

* ``modelCommand: vllmServe``: ``vllm serve MODEL --port P`` then ``--tensor-parallel-size``,
  ``--data-parallel-size``, ``--data-parallel-size-local`` (each only when above 1) from the
  role's ``parallelism``, ``--served-model-name``, then the container's ``args``;
* ``imageDefault``: the same flags as args to the image's entrypoint, with ``--model MODEL``;
* ``custom`` (the default): the container's own ``command`` and ``args``;
* MODEL is the id of ``modelArtifacts.uri`` ``hf://ID`` (``{{ .Values.modelArtifacts.name }}``
  in it is that value); ``pvc://CLAIM/PATH`` is a path in a volume kvplan cannot read;
* GPUs: the container's ``resources`` ``nvidia.com/gpu`` when set, else the chart fills
  dataLocal x tensor (llm-d-modelservice.numGpuPerWorker) for the default ``accelerator.type``
  nvidia;
* parallelism: dataLocal = data / workers, workers = data / dataLocal (numWorkers, the
  LeaderWorkerSet size with ``multinode``);
* ``acceleratorTypes`` (labelKey, labelValues) becomes a required node affinity, mapped to a GPU
  by kvplan.yaml's node_selectors.
"""

from __future__ import annotations

from typing import Any

from kvplan.check.deployment import Deployment, _int_or_none
from kvplan.check.sources.k8s import _gpu_from_selectors, _headless, _k8s_env
from kvplan.check.sources.stack import Role, container_resources, flag, model_from_uri, replicas_at, role_deployments, unknown_model, words_at
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc

ROLES = ("decode", "prefill")


def is_modelservice(data: Any) -> bool:
    """Whether a YAML document is modelservice Helm values: ``modelArtifacts`` and a ``decode``
    or ``prefill`` mapping."""
    return (isinstance(data, dict) and isinstance(data.get("modelArtifacts"), dict)
            and any(isinstance(data.get(r), dict) for r in ROLES))


def _parallelism(par: dict) -> tuple[int, int, int, int]:
    """(tensor, data, dataLocal, workers) as the chart derives them (see the module doc)."""
    tp = _int_or_none(par.get("tensor")) or 1
    data, local, workers = (_int_or_none(par.get(k)) for k in ("data", "dataLocal", "workers"))
    dp = data or ((local * workers) if local and workers else (local or 1))
    dpl = local or ((data // workers) if data and workers else (data or 1))
    nw = workers or ((data // local) if data and local else 1)
    return tp, dp, dpl, nw


def _model(values: dict, doc: YamlDoc) -> tuple[str | None, int | None, str]:
    art = values.get("modelArtifacts") or {}
    uri = str(art.get("uri") or "")
    if "{{" in uri and isinstance(art.get("name"), str):
        uri = uri.replace('"{{ .Values.modelArtifacts.name }}"', art["name"]).replace("{{ .Values.modelArtifacts.name }}", art["name"])
    return model_from_uri(uri), doc.line_of(("modelArtifacts", "uri")), uri


def modelservice_deployments(doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """One Deployment per vLLM container of the ``decode`` and ``prefill`` roles (``create``
    not false); worker pods of a LeaderWorkerSet that run no `vllm serve` give none."""
    values = doc.data
    out: list[Deployment] = []
    for rname in ROLES:
        rv = values.get(rname)
        if not isinstance(rv, dict) or rv.get("create") is False:
            continue
        for ci, c in enumerate(rv.get("containers") or []):
            if not isinstance(c, dict):
                continue
            role = _container_role(doc, values, rname, rv, ci, c)
            for dep in role_deployments(role, file, raw, cat):
                if values.get("multinode") and _headless(dep):
                    # a worker pod's `vllm serve --headless` (the custom command's branch for
                    # LWS_WORKER_INDEX > 0): engines of the leader's deployment, not a server
                    continue
                _gpu_from_selectors(dep, role.pod, (rname, "acceleratorTypes"), doc, node_map)
                out.append(dep)
    return out


def _container_role(doc: YamlDoc, values: dict, rname: str, rv: dict, ci: int, c: dict) -> Role:
    """One container of a role, as the chart renders it (see the module doc)."""
    cpath = (rname, "containers", ci)
    par = rv.get("parallelism") if isinstance(rv.get("parallelism"), dict) else {}
    tp, dp, dpl, nw = _parallelism(par)
    role = Role(name=f"modelservice {rname} container {c.get('name', ci)}", line=doc.line_of(cpath), kind="llm-d")
    # the chart divides data by workers (no dataLocal) or by dataLocal (no workers) and fails
    # when that is not whole (_helpers.tpl dataLocalParallelism, numWorkers)
    for by, unless in (("workers", "dataLocal"), ("dataLocal", "workers")):
        data, other = _int_or_none(par.get("data")), _int_or_none(par.get(by))
        if data and other and not par.get(unless) and data % other:
            role.invalid.append((doc.line_of((rname, "parallelism", "data")), f"{rname}.parallelism.data",
                                 f"parallelism.data {data} is not a multiple of parallelism.{by} {other}: the chart "
                                 "fails to render (`helm` exits)"))
    replicas_at(role, doc, rv, (rname,), "replicas", f"{rname}.replicas")
    # multinode: a LeaderWorkerSet of `workers` pods, every one from this container (the chart
    # writes a workerTemplate only); LWS sets LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and
    # LWS_WORKER_INDEX in each, read here from the leader's side (index 0)
    lws = {"LWS_LEADER_ADDRESS": None, "LWS_GROUP_SIZE": str(nw), "LWS_WORKER_INDEX": "0"} if values.get("multinode") else None
    role.env, role.runtime, role.notes = _k8s_env(c, injected=lws)
    container_resources(role, c, doc, cpath)
    if role.gpu_count is None and (values.get("accelerator") or {}).get("type", "nvidia") == "nvidia":
        role.gpu_count = (dpl * tp, doc.line_of((rname, "parallelism")),
                          f"{rname}.parallelism (the chart's nvidia.com/gpu: dataLocal x tensor)")
    if (c.get("modelCommand") or "custom") in ("vllmServe", "imageDefault"):
        hub, uri_line, uri = _model(values, doc)
        if hub:
            role.model = (hub, uri_line, "modelArtifacts.uri")
        else:
            unknown_model(role, uri or "(none)", uri_line, "modelArtifacts.uri",
                          f"{uri or 'no modelArtifacts.uri'} is not an hf:// model id kvplan can read")
        ppath, k = (rname, "parallelism"), f"{rname}.parallelism"
        args = flag("tensor-parallel-size", tp if tp > 1 else None, doc, ppath + ("tensor",), f"{k}.tensor")
        args += flag("data-parallel-size", dp if dp > 1 else None, doc, ppath + ("data",), f"{k}.data")
        args += flag("data-parallel-size-local", dpl if dpl > 1 else None, doc, ppath + ("dataLocal",), f"{k}.dataLocal")
        role.args = args + words_at(doc, cpath + ("args",), c.get("args"))
    else:  # custom: the container's own command names its model
        cmd = words_at(doc, cpath + ("command",), c.get("command")) + words_at(doc, cpath + ("args",), c.get("args"))
        role.command = [(a.text, a.line) for a in cmd]
    if values.get("multinode") and nw > 1 and dp <= 1 and role.gpu_count is not None and role.gpu_count[0] is not None:
        # a Ray group of `workers` pods (vLLM over the LeaderWorkerSet): the leader's `vllm serve`
        # uses every pod's GPUs
        pod = role.gpu_count[0]
        role.gpu_group = (pod, nw, pod, pod)
        role.gpu_count = (pod * nw, role.gpu_count[1], role.gpu_count[2] + f" x {nw} pods")
    elif values.get("multinode") and nw > 1 and role.gpu_count is not None and role.gpu_count[0] is not None:
        # data parallel over the group: every pod runs its dataLocal engines (idle GPUs per pod: check.rules.hardware)
        role.gpu_group = (role.gpu_count[0], nw, role.gpu_count[0], role.gpu_count[0])
    role.pod, role.pod_path = _affinity(rv), (rname,)
    role.shm = _shm(rv, c, doc, rname, cpath)
    return role


def _shm(rv: dict, c: dict, doc: YamlDoc, rname: str, cpath: tuple):
    """The /dev/shm of the container as the chart renders its pod: the role's ``volumes`` and
    ``hostIPC`` (or ``extraConfig.hostIPC``), the container's ``volumeMounts``."""
    from kvplan.check.sources.shm import pod_shm

    extra = rv.get("extraConfig") if isinstance(rv.get("extraConfig"), dict) else {}
    pod = {"containers": [x for x in rv.get("containers") or [] if isinstance(x, dict)],
           "volumes": rv.get("volumes") if isinstance(rv.get("volumes"), list) else [],
           "hostIPC": rv.get("hostIPC", extra.get("hostIPC"))}
    return pod_shm(pod, c, doc, (rname,), cpath)


def _affinity(rv: dict) -> dict:
    """The node affinity the chart writes from ``acceleratorTypes`` (labelKey In labelValues)."""
    acc = rv.get("acceleratorTypes") if isinstance(rv.get("acceleratorTypes"), dict) else {}
    key, vals = acc.get("labelKey"), acc.get("labelValues")
    if not key or not isinstance(vals, list):
        return {}
    expr = {"key": key, "operator": "In", "values": vals}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}}
