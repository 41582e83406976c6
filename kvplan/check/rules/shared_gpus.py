"""Several vLLM processes on one host that use the same GPU: each asks for its
``--gpu-memory-utilization`` share of the GPU's *total* memory and refuses to start when less than
that is free (vLLM v1/worker/utils.py request_memory: "Free memory on device ... is less than
desired GPU memory utilization"). Once one runs, it holds its share, so on a GPU where the shares
of the processes running together add up to more than 1 the one that starts later exits.

Which deployments run together: a compose file's services (one Docker host); a script's
commands where the earlier ones are started in the background (``vllm serve ... &``); a command
the script waits for ends before the next starts. Kubernetes pods are placed by the scheduler
and each container gets its own GPUs from the device plugin (``nvidia.com/gpu``); only the
containers of one pod that see node GPUs without a limit of their own (NVIDIA_VISIBLE_DEVICES
in their env) are grouped, by the GPUs it names.

Which GPUs a process uses: the first tensor x pipeline x data-parallel ones it sees. It sees
the host GPUs of its container (compose ``device_ids``, ``count: N`` = GPUs 0..N-1,
NVIDIA_VISIBLE_DEVICES; all of them otherwise for a script), reordered and limited by
CUDA_VISIBLE_DEVICES (indices into what the container sees). A value kvplan cannot read leaves
the deployment out (no finding rather than a guess).
"""

from __future__ import annotations

from kvplan.check.deployment import Deployment
from kvplan.check.diagnostics import SHARED_GPU


def used_gpus(dep: Deployment, need: int) -> tuple[str, ...] | None:
    """The host GPU ids (as written: indices or UUIDs) the deployment's vLLM workers use, or None
    when kvplan cannot tell. ``need``: how many GPUs vLLM uses (rules.hardware.gpus_needed)."""
    seen = dep.host_gpus
    if dep.visible_devices is not None:
        value, _, _ = dep.visible_devices
        if value is None:
            return None
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if seen is not None:  # CUDA_VISIBLE_DEVICES counts the GPUs the container sees
            try:
                entries = [seen[int(e)] for e in entries]
            except (ValueError, IndexError):
                return None
    else:
        entries = list(seen) if seen is not None else [str(i) for i in range(need)]
    return tuple(entries[:need])


def _running_together(deps: list[Deployment]) -> list[list[Deployment]]:
    """The deployments of one host split into the sets that run at the same time: a script's
    command ended by ``&`` runs beside the next ones; a command not in the background ends the set
    (the script waits for it). A compose file's services and a pod's containers all run together."""
    if all(d.kind != "command" for d in deps):
        return [deps]
    sets, cur = [], []
    for d in deps:
        cur.append(d)
        if not d.background:
            sets.append(cur)
            cur = []
    if cur:
        sets.append(cur)
    return sets


def shared_gpu_check(deps: list[Deployment], checks_of: dict[int, list[str]]) -> None:
    """Add a ``shared-gpu`` error to each deployment that runs beside another on a GPU both use
    when their --gpu-memory-utilization values on it add up to more than 1, naming the others.
    ``deps`` have ``gpu_use`` = (utilization, GPUs used, its Setting or None) set (Checker.evaluate); ``checks_of``: id(dep) -> the checks list
    of its result (SHARED_GPU is added for deployments that share a host with another)."""
    hosts: dict[str, list[Deployment]] = {}
    for d in deps:
        if d.host is not None and d.gpu_use is not None:
            hosts.setdefault(d.host, []).append(d)
    for group in hosts.values():
        for together in _running_together(group):
            if len(together) < 2:
                continue
            use = {}
            for d in together:
                util, need, _ = d.gpu_use
                gpus = used_gpus(d, need)
                if gpus:
                    use[id(d)] = (d, util, set(gpus))
                    if SHARED_GPU not in checks_of[id(d)]:
                        checks_of[id(d)].append(SHARED_GPU)
            for d, util, gpus in use.values():
                others = [(o, u, g & gpus) for o, u, g in use.values() if o is not d and g & gpus]
                over = sorted(
                    (gpu for gpu in gpus if util + sum(u for _, u, g in others if gpu in g) > 1 + 1e-9),
                    key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s),
                )
                if not over:
                    continue
                names = [o for o, _, g in others if g & set(over)]
                total = util + sum(u for o, u, _ in others if o in names)
                s = d.gpu_use[2]
                dep_list = ", ".join(f"{o.name} ({u})" for o, u, _ in others if o in names)
                d.diag(
                    SHARED_GPU,
                    "error",
                    f"GPU {', '.join(over)} is also used by {dep_list} on the same host: "
                    f"--gpu-memory-utilization {util}{'' if s is not None else ' (the default)'} here makes {total:.2f} "
                    "of the GPU's total memory in all; "
                    "each vLLM process takes its share of the total memory and exits at start when less than "
                    "that is free, so whichever starts later does not start",
                    line=s.line if s is not None else None,
                    key=s.key if s is not None else None,
                    hint="give each its own GPUs (CUDA_VISIBLE_DEVICES, compose device_ids) or lower "
                    "--gpu-memory-utilization so that they add up to at most 1",
                )
