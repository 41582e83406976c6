"""Checks on the hardware: the GPU profile, the GPU count against tensor x pipeline x data
parallel, --gpu-memory-utilization against the target.

The functions take ``ctx``, the run's Checker (``ctx.gpu`` caches GPU profiles, ``ctx.default_gpu``).
vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

from kvplan.check.deployment import Deployment
from kvplan.check.diagnostics import GPU_COUNT, GPU_MISSING, GPU_UNKNOWN, MAX_GPU_MEMORY_UTILIZATION
from kvplan.check.rules.inputs import _EngineInputs
from kvplan.check.sources.manifest import Targets
from kvplan.errors import KvplanError


def resolve_gpu(ctx, dep: Deployment, targets: Targets, checks: list[str]):
    """(GPUProfile or None, the name asked for): the deployment's own GPU, else --gpu."""
    gpu_name = targets.gpu or ctx.default_gpu
    checks.append(GPU_MISSING)
    if gpu_name is None:
        dep.diag(
            GPU_MISSING,
            "error",
            "no GPU declared, so kvplan cannot check memory",
            key="gpu",
            hint=dep.gpu_hint or "pass --gpu to kvplan check, add `# kvplan: gpu=H100-80GB`, or a kvplan: mapping with gpu",
        )
        return None, None
    try:
        return ctx.gpu(str(gpu_name)), gpu_name
    except KvplanError as exc:
        dep.diag(
            GPU_UNKNOWN,
            "error",
            exc.message.removeprefix("--gpu: "),
            line=dep.target_lines.get("gpu") if targets.gpu else None,
            key=dep.target_keys.get("gpu", "--gpu") if targets.gpu else "--gpu",
            hint=exc.hint,
        )
        return None, gpu_name


def _visible_count(value: str) -> int:
    """GPUs a CUDA_VISIBLE_DEVICES value makes visible: its comma-separated entries ("" is none)."""
    return len([e for e in value.split(",") if e.strip()])


def gpus_needed(eng: "_EngineInputs") -> int:
    """GPUs vLLM starts workers on, per node: tensor x pipeline x data parallel (the local data
    parallel size when given) divided by --nnodes (vLLM config/parallel.py world_size)."""
    tp, pp = eng.args.tensor_parallel_size, eng.args.pipeline_parallel_size
    pp *= getattr(eng.args, "prefill_context_parallel_size", None) or 1  # PCP ranks are GPUs too (world_size)
    local = eng.other.get("data-parallel-size-local")
    if local:  # the engines on this node (vLLM engine/arg_utils.py): already per node
        return tp * pp * local
    dp = eng.other.get("data-parallel-size") or 1
    nnodes = max(eng.other.get("nnodes") or 1, 1)
    return -(-tp * pp * dp // nnodes)


def _overflowing_key(eng, dp: int, tp_key: str, need: int = 0, count: int | None = None) -> str:
    """The flags (as the file spells them) whose size makes a node need ``need`` GPUs where it
    has ``count``: the data-parallel size (local when given), --pipeline-parallel-size,
    --tensor-parallel-size, each above 1; of those, the ones that alone could be lowered to fit
    (the product of the others is at most ``count``), else all of them, joined with "or"."""
    dp_key = next((eng.keys[n].key for n in ("data_parallel_size_local", "data_parallel_size") if n in eng.keys),
                  "--data-parallel-size")
    pp_key = eng.keys["pipeline_parallel_size"].key if "pipeline_parallel_size" in eng.keys else "--pipeline-parallel-size"
    factors = [(k, n) for k, n in ((dp_key, dp), (pp_key, eng.args.pipeline_parallel_size),
                                   (tp_key, eng.args.tensor_parallel_size)) if n > 1]
    if not factors:
        return tp_key
    fits = [k for k, n in factors if count is not None and need // n <= count]
    return " or ".join(fits or [k for k, _ in factors])


def gpu_count_check(ctx, dep: Deployment, targets: Targets, eng: "_EngineInputs", checks: list[str]) -> None:
    """vLLM starts tensor x pipeline x data-parallel workers, one GPU each (per node:
    divided by --nnodes); fewer GPUs than that and it cannot start (vLLM
    config/parallel.py world_size). CUDA_VISIBLE_DEVICES in the process's environment limits
    the GPUs it can use to the entries listed (CUDA; "" hides them all)."""
    count = targets.gpu_count if targets.gpu_count is not None else dep.gpu_count
    tp, pp = eng.args.tensor_parallel_size, eng.args.pipeline_parallel_size
    dp = eng.other.get("data-parallel-size-local") or eng.other.get("data-parallel-size") or 1
    nnodes = max(eng.other.get("nnodes") or 1, 1)
    need = gpus_needed(eng)
    where = ""
    per_node = nnodes > 1 or bool(eng.other.get("data-parallel-size-local"))
    if targets.gpu_count is not None:
        cline, ckey = dep.target_lines.get("gpu_count"), dep.target_keys.get("gpu_count")
    else:
        cline, ckey = dep.gpu_count_line, dep.gpu_count_key
        if dep.gpu_group is not None and count is not None:
            own, size, leader, worker = dep.gpu_group
            if not per_node:
                where = (
                    f" in the LeaderWorkerSet group of {size} pods (leader {leader}"
                    + f" + {size - 1} worker(s) x {worker})"
                )
    in_group = dep.gpu_group is not None and count is not None and targets.gpu_count is None and per_node
    if in_group:
        count = dep.gpu_group[0]  # the leader pod's own: vLLM counts the GPUs of each node
        where = " on the leader pod"
    fix = None
    if dep.visible_devices is not None:
        value, vline, why = dep.visible_devices
        if value is None:
            checks.append(GPU_COUNT)
            dep.diag(
                GPU_COUNT,
                "warning",
                f"CUDA_VISIBLE_DEVICES is {why}: kvplan cannot tell how many GPUs vLLM sees "
                f"(it needs {need} for tensor x pipeline x data parallel)",
                line=vline,
                key="CUDA_VISIBLE_DEVICES",
            )
        else:
            visible = _visible_count(value)
            if count is None or visible < count:
                count, cline, ckey = visible, vline, "CUDA_VISIBLE_DEVICES"
                where = f" visible (CUDA_VISIBLE_DEVICES={value!r})"
                fix = f"list {need} GPUs in CUDA_VISIBLE_DEVICES"
    if count is None:
        return
    if GPU_COUNT not in checks:
        checks.append(GPU_COUNT)
    tp_key = eng.keys["tensor_parallel_size"].key if "tensor_parallel_size" in eng.keys else "--tensor-parallel-size"
    if need > count:
        dep.diag(
            GPU_COUNT,
            "error",
            f"{count} GPU(s){where} but tensor x pipeline x data parallel = {tp} x {pp} x {dp}"
            + (" (local) on this node" if eng.other.get("data-parallel-size-local")
               else f" / {nnodes} nodes" if nnodes > 1 else "")
            + f" needs {need}: vLLM cannot start its workers",
            line=cline,
            key=ckey,
            hint=f"{fix or f'give {need} GPUs'} or lower {_overflowing_key(eng, dp, tp_key, need, count)}",
        )
    elif need < count:
        dep.diag(GPU_COUNT, "info", f"{count} GPU(s){where} but vLLM uses {need} (tensor x pipeline x data parallel): "
                 f"{count - need} GPU(s) idle, paid for and unused", line=cline, key=ckey)
    if need <= count and in_group and where == " on the leader pod":
        _idle_in_group(dep, need, cline, ckey)


def _idle_in_group(dep: Deployment, need: int, line, key) -> None:
    """The GPUs a multi-pod group (LeaderWorkerSet, a stack's leader and workers) gives beyond what
    vLLM uses on each node: every pod of a multi-node serve line runs ``need`` GPUs' workers
    (gpus_needed); a pod's GPUs past that are requested from the scheduler, held, and idle.
    Said once for the group when a worker pod holds idle GPUs (the leader's are said above)."""
    own, size, leader, worker = dep.gpu_group
    if size <= 1 or worker is None or worker <= need:
        return
    idle = (size - 1) * (worker - need) + max((leader or 0) - need, 0)
    dep.diag(GPU_COUNT, "info",
             f"the group's {size - 1} worker pod(s) hold {worker} GPU(s) each but vLLM uses {need} on each node: "
             f"{idle} GPU(s) idle over the group of {size} pods, paid for and unused", line=line, key=key)


def _used_utilization(args) -> float:
    """The gpu_memory_utilization vLLM uses for ``args``: the version's rule (its default may
    depend on the sizing mode; VllmRules.gpu_memory_utilization)."""
    from kvplan.engines.vllm import versions

    return versions.select(args.vllm_version).gpu_memory_utilization(args)


def utilization_target(ctx, dep: Deployment, targets: Targets, eng: "_EngineInputs", checks: list[str]) -> None:
    """--gpu-memory-utilization (the version's default, config/cache.py) against the
    ``max_gpu_memory_utilization`` target."""
    if targets.max_gpu_memory_utilization is None:
        return
    checks.append(MAX_GPU_MEMORY_UTILIZATION)
    util = _used_utilization(eng.args)
    if util > targets.max_gpu_memory_utilization:
        s = eng.keys.get("gpu_memory_utilization")
        dep.diag(
            MAX_GPU_MEMORY_UTILIZATION,
            "error",
            f"gpu-memory-utilization {util} is above the target {targets.max_gpu_memory_utilization}"
            + ("" if s else " (vLLM's default, since the flag is not set)"),
            line=s.line if s else dep.target_lines.get("max_gpu_memory_utilization"),
            key=s.key if s else dep.target_keys.get("max_gpu_memory_utilization"),
        )
