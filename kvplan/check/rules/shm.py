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
