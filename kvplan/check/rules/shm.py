"""vLLM's CPU KV offload region against the /dev/shm the deployment file gives its container.

In the vLLM releases of engines/vllm/v0_33 and later, on CUDA, the native offload pool
(--kv-offloading-size, an OffloadingConnector's ``cpu_bytes_to_use``) is one shared file in /dev/shm: v1/kv_offload/cpu/spec.py
CPUOffloadingSpec.create_worker -> shared_offload_region.py SharedOffloadRegion, of
``num_chunks x kv_bytes_per_chunk`` bytes (the version's addons.kv_offload_capacity host_bytes).
The worker that creates it first calls distributed/device_communicators/shm_broadcast.py
check_shm_free_space, which raises "Insufficient space in /dev/shm for CPU KV offload shared
region in /dev/shm" when the file system's free space is below that size: vLLM does not start.
Each data-parallel engine has its own engine_id (v1/engine/utils.py: ``{engine_id}_dp{rank}``)
and so its own file: a pod holding several engines needs the sum. The region's pages are shmem,
charged to the container's memory cgroup (the host-memory check compares them with the limit).

Where the file cannot say how large /dev/shm is (the host's /dev/shm, a memory emptyDir bounded by
nothing the pod states), a warning says so: the verdict cannot be green on a guess.
"""

from __future__ import annotations

from kvplan.check.deployment import Deployment
from kvplan.capacity.addons import engines_on_a_node, shm_region_bytes
from kvplan.check.diagnostics import SHM_SIZE

def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _fix(shm, need: int) -> str:
    size = -(-need // 2**30)
    if shm.kind == "docker" and shm.bytes is None and shm.key.endswith("ipc"):
        # already the host's /dev/shm (ipc: host, --ipc=host): Docker applies shm_size only with a
        # private IPC namespace, so the fix is room on the host or a private, sized /dev/shm
        return (f"make sure the host's /dev/shm has {size} GiB free, or drop ipc: host and set "
                f"shm_size / --shm-size to at least {size}g")
    if shm.kind == "docker":
        return f"set shm_size / --shm-size to at least {size}g (or share the host's with ipc: host)"
    return f"mount an emptyDir {{medium: Memory, sizeLimit: {size}Gi}} or larger at /dev/shm"


def shm_check(dep: Deployment, p, setting, checks: list[str]) -> None:
    """An error when the KV offload region cannot fit the /dev/shm ``dep.shm`` gives, a warning
    when that size is unknown (see the module doc); nothing when the deployment runs outside a
    container kvplan reads (``dep.shm`` None) or the version keeps no region in /dev/shm.

    ``setting``: the Setting that turned offloading on (the finding's line and key)."""
    shm = getattr(dep, "shm", None)
    need = shm_region_bytes(p)
    if shm is None or not need:
        return
    checks.append(SHM_SIZE)
    engines = engines_on_a_node(p)
    what = (f"vLLM {p.effective['vllm_version']} maps its CPU KV offload pool as a /dev/shm region of {_gib(need)}"
            + (f" ({engines} engines on the node, one region each)" if engines > 1 else "")
            + " (v1/kv_offload/cpu/shared_offload_region.py)")
    line, key = (setting.line, setting.key) if setting is not None else (shm.line, shm.key)
    if shm.bytes is None:
        dep.diag(SHM_SIZE, "warning",
                 f"{what}; /dev/shm is {shm.how}, a size kvplan cannot know: the region must fit there, "
                 "and it counts against the container's memory limit",
                 line=shm.line, key=shm.key, hint=_fix(shm, need))
    elif need > shm.bytes and not getattr(dep, "version_pinned", True):
        # the region exists only from the releases of engines/vllm/v0_33 on: a deployment whose
        # image names no release may run one that pins host tensors instead
        dep.diag(SHM_SIZE, "warning",
                 f"{what}, but /dev/shm holds {_gib(shm.bytes)} ({shm.how}): if the image runs this vLLM, it "
                 "refuses to start (\"Insufficient space in /dev/shm\"); the deployment names no vLLM release "
                 "(the version is kvplan's default)",
                 line=line, key=key, hint=_fix(shm, need) + ", or pin the image's vLLM release")
    elif need > shm.bytes:
        dep.diag(SHM_SIZE, "error",
                 f"{what}, but /dev/shm holds {_gib(shm.bytes)} ({shm.how}): vLLM refuses to start "
                 "(\"Insufficient space in /dev/shm\", shm_broadcast.py check_shm_free_space)",
                 line=line, key=key, hint=_fix(shm, need))
    else:
        dep.diag(SHM_SIZE, "info", f"{what}; /dev/shm holds {_gib(shm.bytes)} ({shm.how})", line=shm.line, key=shm.key)


# --- a multi-GPU engine's shared-memory rings ----------------------------------------------------

def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def pod_layout(args, pod_gpus: int | None) -> tuple[int, int, int | None]:
    """(GPUs of one engine, engines on this pod, the engine's workers on it or None for all) of a
    deployment's EngineArgs ``args`` (vLLM config/parallel.py: an engine is TP x PP x PCP
    workers; --data-parallel-size-local engines on a node, all of --data-parallel-size on one
    node without --nnodes); ``pod_gpus`` the GPUs the pod gets, when the file says."""
    engine = args.tensor_parallel_size * args.pipeline_parallel_size * (args.prefill_context_parallel_size or 1)
    dp, nnodes = args.data_parallel_size or 1, args.nnodes or 1
    engines = args.data_parallel_size_local or (max(dp // nnodes, 1) if nnodes > 1 else dp)
    workers = None
    if nnodes > 1 and engine * dp > nnodes and engine > engine * dp // nnodes:
        workers = max(engine * dp // nnodes, 1)  # one engine over several nodes: its share here
    if pod_gpus is not None and pod_gpus < engine * engines and engines == 1:
        workers = pod_gpus  # a LeaderWorkerSet pod of a Ray engine: the workers this pod holds
    return engine, engines, workers


def queue_check(dep: Deployment, rules, version: str, args, checks: list[str]) -> None:
    """The /dev/shm a multi-GPU engine's shared-memory rings need against the container's.

    ``rules``: the version's check_rules module (engines/vllm/v0_26/check_rules.py node_rings;
    RING_FREE_SPACE_CHECKED from the release of engines/vllm/v0_33 on) of the vLLM ``version``
    the deployment runs;
    ``args`` the deployment's EngineArgs.

    * an error when the version checks each ring's free space (engines/vllm/v0_33 and later:
      shm_broadcast.py check_shm_free_space) and the largest ring, which the multiprocessing
      executor certainly creates, is larger than the /dev/shm the file gives: vLLM refuses to
      start (a warning when the deployment names no vLLM release, or runs the Ray executor,
      whose rings kvplan does not size);
    * a warning on the container runtime's 64 MiB default (no volume at /dev/shm, no hostIPC /
      ipc: host): NCCL's shared-memory transport needs room there too, which kvplan does not size;
    * an info otherwise (the size, that the rings together would outgrow it when full, or that
      the file cannot say it).
    Nothing for one GPU alone, or a deployment outside a container kvplan reads (``dep.shm`` None).
    """
    from kvplan.check.diagnostics import SHM_QUEUES
    from kvplan.check.sources.shm import RUNTIME_DEFAULT_SHM_BYTES

    shm = getattr(dep, "shm", None)
    if shm is None:
        return
    # a LeaderWorkerSet pod's own GPUs (dep.gpu_group), else the container's
    engine, engines, workers = pod_layout(args, dep.gpu_group[0] if dep.gpu_group else dep.gpu_count)
    dcp = args.decode_context_parallel_size or 1
    rings = rules.node_rings(engine, args.tensor_parallel_size, engines, workers, dcp)
    if not rings:
        return
    checks.append(SHM_QUEUES)
    largest, total = max(rings), sum(rings)
    backend = str(getattr(dep.settings.get("distributed-executor-backend"), "value", "") or "")
    dp_backend = str(getattr(dep.settings.get("data-parallel-backend"), "value", "") or "")
    ray = "ray" in (backend, dp_backend)
    gpus = f"{engine} GPU" + ("s" if engine > 1 else "")
    shape = (f"{engines} engines of {gpus}" if engines > 1 else f"an engine of {gpus}") + (
        f" ({workers} of its workers on this pod)" if workers is not None and workers < engine else "")
    executor = ("the Ray executor (kvplan sizes the rings the multiprocessing executor would create)" if ray
                else "the multiprocessing executor")
    what = (f"vLLM {version} runs {shape} with {executor}: {len(rings)} shared-memory rings in "
            f"/dev/shm of up to {_mib(largest)} each, {_mib(total)} in all "
            "(distributed/device_communicators/shm_broadcast.py MessageQueue)")
    size = -(-(total + 2**30) // 2**30)  # the rings and 1 GiB of room for NCCL: the writers' choice
    fix = (f"mount an emptyDir {{medium: Memory, sizeLimit: {size}Gi}} at /dev/shm" if shm.kind == "k8s"
           else f"set shm_size / --shm-size to at least {size}g, or ipc: host")
    if shm.bytes is None:
        dep.diag(SHM_QUEUES, "info", f"{what}; /dev/shm is {shm.how}, a size kvplan cannot know",
                 line=shm.line, key=shm.key)
        return
    held = f"/dev/shm holds {_mib(shm.bytes)} ({shm.how})"
    if largest > shm.bytes and rules.RING_FREE_SPACE_CHECKED:
        certain = getattr(dep, "version_pinned", True) and not ray
        why = ("" if certain else " if the image runs this release with the multiprocessing executor"
               + (" (the deployment names no vLLM release)" if not getattr(dep, "version_pinned", True) else "")
               + (" (it asks for the Ray executor, whose rings kvplan does not size)" if ray else ""))
        dep.diag(SHM_QUEUES, "error" if certain else "warning",
                 f"{what}, but {held}: vLLM {version} checks the free space before each ring "
                 f"(check_shm_free_space) and refuses to start (\"Insufficient space in /dev/shm\"){why}",
                 line=shm.line, key=shm.key, hint=fix)
    elif shm.bytes <= RUNTIME_DEFAULT_SHM_BYTES:
        dep.diag(SHM_QUEUES, "warning",
                 f"{what}, and {held}: the rings are sparse files that fail with a bus error when /dev/shm "
                 "fills, and NCCL's shared-memory transport needs room there too (not sized by kvplan)",
                 line=shm.line, key=shm.key, hint=fix)
    elif total > shm.bytes:
        # every ring fits on its own; together they can outgrow /dev/shm only when their chunks
        # fill (large messages in flight): said, not failed
        dep.diag(SHM_QUEUES, "info",
                 f"{what}; {held}: each ring fits, all of them full would not (their pages are taken as "
                 "messages are written), plus NCCL's own (not sized by kvplan)",
                 line=shm.line, key=shm.key, hint=fix)
    else:
        dep.diag(SHM_QUEUES, "info", f"{what}; {held}, plus NCCL's own (not sized by kvplan)",
                 line=shm.line, key=shm.key)
