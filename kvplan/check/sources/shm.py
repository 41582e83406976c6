"""How much ``/dev/shm`` a deployment file gives vLLM's container: a Kubernetes pod's mount at
/dev/shm (a serving stack's pod template, with the stack's own default volume), a compose
service's ``shm_size`` / ``ipc``, a ``docker run --shm-size`` / ``--ipc``.

vLLM (engines/vllm/v0_33 and later) maps its CPU KV offload pool as one file in /dev/shm and
refuses to start when the file system there has less free space than the pool
(check.rules.shm), so the size matters.

Rule sources:
* no volume at /dev/shm: the container runtime's own tmpfs of 64 MiB (Docker `docker run
  --shm-size` default "64m"; containerd's CRI sandbox /dev/shm, size=65536k);
* Kubernetes core/v1 EmptyDirVolumeSource.sizeLimit: "The size limit is also applicable for
  memory medium. The maximum usage on memory medium EmptyDir would be the minimum value between
  the SizeLimit specified here and the sum of memory limits of all containers in a pod"; without
  either, the tmpfs is sized by the node's memory (kvplan cannot know it);
* ``hostIPC: true`` / a hostPath /dev/shm / compose or docker ``ipc: host``: the host's
  /dev/shm, whose size kvplan cannot know;
* Docker compose ``shm_size`` and ``docker run --shm-size``: a byte size with b/k/m/g suffixes
  (docker/go-units RAMInBytes: powers of 1024), applied only with a private IPC namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RUNTIME_DEFAULT_SHM_BYTES = 64 * 2**20  # Docker --shm-size default "64m"; containerd CRI: size=65536k
SHM_PATH = "/dev/shm"


@dataclass(frozen=True)
class ShmSize:
    """The /dev/shm a container gets.

    Attributes:
        bytes: its size in bytes; None when the file cannot say (the host's /dev/shm, a memory
            emptyDir bounded by nothing the pod states).
        line / key: where the file decides it (the sizeLimit, the mount, shm_size ...).
        how: in words, for messages ("an emptyDir {medium: Memory} with sizeLimit 16Gi").
        kind: "k8s" or "docker" (which fix the hint names).
    """

    bytes: int | None
    line: int | None
    key: str
    how: str
    kind: str = "k8s"


def _k8s_bytes(value: Any) -> int | None:
    from kvplan.io.units import k8s_quantity_bytes

    return k8s_quantity_bytes(value)


def _memory_limits(pod: dict) -> int | None:
    """The sum of the pod's containers' memory limits; None when one of them sets none."""
    total = 0
    for c in pod.get("containers") or []:
        lim = ((c.get("resources") or {}).get("limits") or {}) if isinstance(c, dict) else {}
        mem = _k8s_bytes(lim.get("memory")) if isinstance(lim, dict) else None
        if mem is None:
            return None
        total += mem
    return total or None


def pod_shm(pod: dict, container: dict, doc, path: tuple, cpath: tuple,
            default_volumes: tuple[dict, ...] = (), default_mounts: tuple[dict, ...] = (),
            default_from: str = "") -> ShmSize:
    """The /dev/shm of ``container`` in the pod spec ``pod`` at ``path`` (see the module doc).

    ``default_volumes`` / ``default_mounts``: what the stack's own pod template adds (KServe's
    well-known configs mount an emptyDir ``dshm``); the pod's own volumes and mounts of the same
    name / mountPath replace them (Kubernetes strategic merge: volumes by name, volumeMounts by
    mountPath). ``default_from`` names that template in messages."""
    if pod.get("hostIPC") is True:
        return ShmSize(None, doc.line_of(path + ("hostIPC",)), "hostIPC", "the host's /dev/shm (hostIPC: true)")
    mounts = {str(m.get("mountPath", "")).rstrip("/"): (m, cpath + ("volumeMounts", i))
              for i, m in enumerate(container.get("volumeMounts") or []) if isinstance(m, dict)}
    for m in default_mounts:
        mounts.setdefault(m["mountPath"], (m, None))
    mount, mpath = mounts.get(SHM_PATH, (None, None))
    cline = doc.line_of(cpath)
    if mount is None:
        return ShmSize(RUNTIME_DEFAULT_SHM_BYTES, cline, "volumeMounts",
                       "no volume mounted at /dev/shm: the container runtime's 64 MiB default")
    name = mount.get("name")
    volumes = {str(v.get("name")): (v, path + ("volumes", i)) for i, v in enumerate(pod.get("volumes") or [])
               if isinstance(v, dict)}
    for v in default_volumes:
        volumes.setdefault(v["name"], (v, None))
    vol, vpath = volumes.get(str(name), (None, None))
    src = f" ({default_from})" if vpath is None and default_from else ""
    vline = doc.line_of(vpath) if vpath is not None else (doc.line_of(mpath) if mpath is not None else cline)
    key = f"volumes[{name}]"
    if vol is None:
        return ShmSize(None, doc.line_of(mpath) if mpath else cline, "volumeMounts",
                       f"volume {name!r} mounted at /dev/shm is not among the pod's volumes")
    empty = vol.get("emptyDir")
    if isinstance(empty, dict) or (empty is None and "emptyDir" in vol):
        empty = empty or {}
        size = _k8s_bytes(empty.get("sizeLimit"))
        sline = doc.line_of(vpath + ("emptyDir", "sizeLimit")) if vpath is not None and size is not None else vline
        if empty.get("medium") != "Memory":
            if size is not None:
                return ShmSize(size, sline, f"{key}.emptyDir.sizeLimit",
                               f"a disk-backed emptyDir with sizeLimit {empty.get('sizeLimit')}{src}")
            return ShmSize(None, vline, key, f"a disk-backed emptyDir without sizeLimit{src}")
        limits = _memory_limits(pod)
        if size is not None and (limits is None or size <= limits):
            return ShmSize(size, sline, f"{key}.emptyDir.sizeLimit",
                           f"an emptyDir {{medium: Memory}} with sizeLimit {empty.get('sizeLimit')}{src}")
        if limits is not None:
            return ShmSize(limits, vline, "resources.limits.memory",
                           f"an emptyDir {{medium: Memory}} bounded by the pod's memory limits{src}")
        return ShmSize(None, vline, key, f"an emptyDir {{medium: Memory}} with no sizeLimit and no memory limit{src}: "
                       "the node's memory bounds it")
    if isinstance(vol.get("hostPath"), dict):
        return ShmSize(None, vline, f"{key}.hostPath", f"the host's {vol['hostPath'].get('path', '/dev/shm')} (hostPath)")
    other = next((k for k in vol if k != "name"), "volume")
    return ShmSize(None, vline, key, f"a {other} volume")


_DOCKER_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def docker_bytes(value: Any) -> int | None:
    """A Docker memory size ("16g", "2gb", "512m", 1073741824) in bytes (docker/go-units
    RAMInBytes: b, k, m, g, t in powers of 1024); None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    m = _DOCKER_SIZE.match(str(value))
    if m is None:
        return None
    return int(float(m.group(1)) * 1024 ** "bkmgt".index(m.group(2).lower() or "b"))


def compose_shm(svc: dict, doc, spath: tuple, sname: str) -> ShmSize:
    """A compose service's /dev/shm: ``ipc: host`` (the host's), ``shm_size``, else Docker's 64 MiB."""
    key = f"services.{sname}"
    if str(svc.get("ipc", "")) == "host":
        return ShmSize(None, doc.line_of(spath + ("ipc",)), f"{key}.ipc", "the host's /dev/shm (ipc: host)", "docker")
    if svc.get("shm_size") is not None:
        size = docker_bytes(svc["shm_size"])
        return ShmSize(size, doc.line_of(spath + ("shm_size",)), f"{key}.shm_size",
                       f"shm_size {svc['shm_size']}" if size is not None else f"shm_size {svc['shm_size']!r} (not a size)",
                       "docker")
    return ShmSize(RUNTIME_DEFAULT_SHM_BYTES, doc.line_of(spath), key, "no shm_size: Docker's 64 MiB default", "docker")


def docker_run_shm(options: list[str], lines: list[int | None], line: int | None) -> ShmSize:
    """The /dev/shm of a ``docker run`` whose options (the words between ``run`` and the image)
    are ``options``: ``--ipc host`` (the host's), ``--shm-size``, else Docker's 64 MiB."""
    found = ShmSize(RUNTIME_DEFAULT_SHM_BYTES, line, "docker run", "no --shm-size: Docker's 64 MiB default", "docker")
    for i, w in enumerate(options):
        opt, eq, val = w.partition("=")
        if not eq and i + 1 < len(options):
            val = options[i + 1]
        where = lines[i] if i < len(lines) and lines[i] is not None else line
        if opt == "--ipc" and val == "host":
            return ShmSize(None, where, "--ipc", "the host's /dev/shm (--ipc=host)", "docker")
        if opt == "--shm-size":
            size = docker_bytes(val)
            found = ShmSize(size, where, "--shm-size", f"--shm-size {val}", "docker")
    return found
