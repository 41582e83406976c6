"""The container's host memory against vLLM's CPU KV offload buffer: a serving stack's manifest
keeps the memory limit of vLLM's container (check.sources.stack: Kubernetes
``resources.limits.memory``, production-stack ``limitMemory``), and vLLM allocates the whole
CPU offload buffer in that container's memory when it starts.

Rule sources: vLLM (the release of kvplan/engines/vllm/v0_33) config/vllm.py _post_init_kv_transfer_config (``--kv-offloading-size``
GiB with the native backend becomes ``cpu_bytes_to_use`` = size x 2**30, the total across the
tensor-parallel ranks) and v1/kv_offload/cpu/spec.py (the buffer is cpu_bytes_to_use bytes,
carved into chunks at start-up); Kubernetes: a container above its memory limit is OOM-killed.
Only the buffer is compared (vLLM's own process memory comes on top of it), so a buffer above
the limit fails and nothing is said below it.
"""

from __future__ import annotations

import json

from kvplan.check.deployment import Deployment
from kvplan.check.diagnostics import HOST_MEMORY
from kvplan.engines.vllm.serve_flags import parse_human_int


def offload_buffer(dep: Deployment) -> tuple[int, object] | None:
    """(bytes, the Setting that sets them) of vLLM's CPU KV offload buffer, or None when there is
    none or its size is not a number kvplan can read."""
    s = dep.settings.get("kv-offloading-size")
    if s is not None and not s.unresolved:
        backend = dep.settings.get("kv-offloading-backend")
        if backend is None or str(backend.value) == "native":
            try:
                return int(float(str(s.value)) * (1 << 30)), s
            except ValueError:
                return None
    s = dep.settings.get("kv-transfer-config")
    if s is None or s.unresolved:
        return None
    try:
        cfg = json.loads(str(s.value))
    except ValueError:
        return None
    extra = cfg.get("kv_connector_extra_config") if isinstance(cfg, dict) else None
    value = extra.get("cpu_bytes_to_use") if isinstance(extra, dict) else None
    if isinstance(value, bool) or value is None:
        return None
    try:
        return (int(value), s) if isinstance(value, (int, float)) else (parse_human_int(str(value)), s)
    except (TypeError, ValueError):
        return None


def host_memory_check(dep: Deployment, checks: list[str]) -> None:
    """An error when the CPU KV offload buffer alone is above the container's memory limit."""
    if dep.host_memory is None:
        return
    found = offload_buffer(dep)
    if found is None:
        return
    checks.append(HOST_MEMORY)
    size, s = found
    limit, line, key = dep.host_memory
    if size > limit:
        dep.diag(
            HOST_MEMORY, "error",
            f"vLLM's CPU KV offload buffer is {size / 2**30:.2f} GiB, above the container's memory limit of "
            f"{limit / 2**30:.2f} GiB ({key}): the container is OOM-killed when vLLM allocates it",
            line=s.line, key=s.key,
            hint=f"raise {key} above {size / 2**30:.2f} GiB plus vLLM's own memory, or offload less",
        )
