"""Checks on the planner's Plan: the requested share is free, weights leave a KV cache, the
--kv-cache-memory-bytes override fits, CUDA graphs fit, one max_model_len request fits, fp8 KV
cache support, max_num_seqs against concurrency, min_concurrency.

The functions take ``ctx``, the run's Checker (``ctx.plan`` caches plans).
vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

import math

from kvplan.capacity.start_failure import admission_bytes, kv_shortfall_text
from kvplan.check.deployment import Deployment
from kvplan.check.diagnostics import (
    CUDA_GRAPHS_FIT,
    ENGINE_REJECTS,
    FP8_KV_UNSUPPORTED,
    INVALID_KVPLAN_KEY,
    MAX_MODEL_LEN_FITS,
    MAX_NUM_SEQS,
    MIN_CONCURRENCY,
    PLANNER_NOTE,
    UTILIZATION_RANGE,
    WEIGHTS_FIT,
)
from kvplan.check.messages import _concurrency_text, _gib, _round2
from kvplan.check.rules.outcomes import deployment_notes, refused_flag
from kvplan.check.sources.manifest import Targets
from kvplan.errors import KvplanError


def _override_overflows(b) -> bool:
    """With --kv-cache-memory-bytes vLLM allocates exactly that KV cache, whatever else is on the
    GPU (vLLM v1/worker/gpu_worker.py determine_available_memory): it must fit next to
    the weights, activations, non-torch memory and CUDA graphs in the GPU's total bytes."""
    if not b.kv_cache_memory_override:
        return False
    used = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_bytes
    return used + b.kv_cache_bytes > b.total_bytes


def _layout_words(p, args) -> str:
    """The parallel flags behind a per-GPU figure, as `vllm serve` spells them."""
    words = [f"tensor-parallel-size {args.tensor_parallel_size}"]
    if args.pipeline_parallel_size > 1:
        words.append(f"pipeline-parallel-size {args.pipeline_parallel_size}")
    if p.parallel is not None and p.parallel.shown:
        w = p.parallel.world
        if w.dp > 1:
            words.append(f"data-parallel-size {w.dp}")
        if w.pcp > 1:
            words.append(f"prefill-context-parallel-size {w.pcp}")
        if w.uses_ep:
            words.append(f"enable-expert-parallel: {p.parallel.binding.rank_class.local_experts} experts on the fullest GPU")
    return ", ".join(words)


def _weights_hint(p, spec) -> str:
    """The flags that would give each GPU less to hold. A multi-GPU layout (capacity/ranks.py)
    names them: for a MoE model without expert parallel, --enable-expert-parallel with
    --data-parallel-size spreads whole experts; with it, a larger --data-parallel-size or
    --tensor-parallel-size leaves fewer experts per GPU."""
    if p.parallel is None or not p.parallel.shown:
        return "use more GPUs (tensor parallel), a larger GPU, or a quantized checkpoint"
    if spec.moe is not None and not p.parallel.world.uses_ep:
        return ("add --enable-expert-parallel (whole experts per GPU) or raise --data-parallel-size / "
                "--tensor-parallel-size, use a larger GPU, or a quantized checkpoint")
    if spec.moe is not None:
        return "raise --data-parallel-size or --tensor-parallel-size (fewer experts per GPU), a larger GPU, or a quantized checkpoint"
    return ("raise --tensor-parallel-size or --pipeline-parallel-size (--data-parallel-size copies the whole model "
            "on every engine), a larger GPU, or a quantized checkpoint")


def _parallel_figures(p) -> dict:
    """A multi-GPU layout's figures for check's verdict: GPUs used, each DP engine's blocks /
    tokens / concurrency as it logs it, the cluster totals and the evidence label (render/
    parallel.py, MULTI_GPU_UNCHECKED); {} for one TP/PP engine."""
    if p.parallel is None or not p.parallel.shown:
        return {}
    from kvplan.engines.vllm.rules import MULTI_GPU_UNCHECKED

    lp = p.parallel
    return {
        "data_parallel_size": lp.world.dp,
        "gpus": lp.world.gpus,
        "engines": [
            {"data_parallel_rank": e.index, "num_gpu_blocks": e.num_gpu_blocks,
             "gpu_kv_cache_tokens": e.gpu_kv_cache_tokens, "max_concurrency": _round2(e.max_concurrency)}
            for e in lp.engines
        ],
        "cluster_max_concurrency": _round2(lp.cluster_concurrency),
        "multi_gpu": MULTI_GPU_UNCHECKED,
    }


def plan_checks(
    ctx, dep: Deployment, model, revision, spec, gpu, args, keys: dict, targets: Targets, checks: list[str], *, dp: int = 1
):
    """Checks on the planner's Plan: weights fit, one max_model_len request fits (vLLM
    v1/core/kv_cache_utils.py check_enough_kv_cache_memory), max_num_seqs vs concurrency,
    min_concurrency, fp8 KV cache support.

    ``dp``: --data-parallel-size, the engine's replicas. min_concurrency counts requests
    across all of them (per-replica concurrency x dp), as `kvplan plan` does
    (search.Option.achieved); the figures and message give the per-replica number too."""
    try:
        p = ctx.plan(model, revision, spec, gpu, args)
    except KvplanError as exc:
        from kvplan.sources.draft import DraftUnresolved

        if isinstance(exc, DraftUnresolved):  # kvplan cannot read the draft: bad input (exit 2), not vLLM's refusal
            from kvplan.check.diagnostics import MODEL_UNRESOLVED

            s = keys.get("speculative_config")
            dep.diag(MODEL_UNRESOLVED, "error", exc.message, line=s.line if s else dep.line,
                     key=s.key if s else "--speculative-config", hint=exc.hint)
            return None
        flag = refused_flag(exc)
        s = keys.get(flag[2:].replace("-", "_")) if flag else None
        dep.diag(
            ENGINE_REJECTS,
            "error",
            exc.message,
            line=s.line if s else dep.line,
            key=s.key if s else flag,
            hint=exc.hint,
        )
        return None
    _host_checks(dep, p, checks)
    mml = p.effective["max_model_len"]
    ms = keys.get("max_model_len")
    mline, mkey = (ms.line, ms.key) if ms else (dep.model_line or dep.line, dep.model_key)
    from kvplan.capacity.outcomes import StartOutcome

    checks += [WEIGHTS_FIT, MAX_MODEL_LEN_FITS]
    starved = [s for s in p.stages if s.budget.kv_cache_bytes <= 0]
    over_free = [
        s for s in p.stages if s.budget.requested_bytes > s.budget.free_at_start_bytes
        and not s.budget.kv_cache_memory_override and s.budget.checks_free_memory
    ]
    if over_free:
        # vLLM v1/worker/gpu_worker.py init_device: the requested share of the GPU
        # must be free at start-up; the planner's failure says by how much (as estimate does).
        b = over_free[0].budget
        us = keys.get("gpu_memory_utilization")
        checks.append(UTILIZATION_RANGE)
        most = math.floor(b.free_at_start_bytes / b.total_bytes * 1000) / 1000 if b.total_bytes else 0
        dep.diag(
            UTILIZATION_RANGE,
            "error",
            f"gpu-memory-utilization {p.effective['gpu_memory_utilization']} asks for {_gib(b.requested_bytes)} of "
            f"{gpu.display_name}, but only about {_gib(b.free_at_start_bytes)} is free when vLLM starts "
            f"(the CUDA context holds {(b.total_bytes - b.free_at_start_bytes) / 2**20:.0f} MiB): vLLM refuses to start",
            line=us.line if us else dep.line,
            key=us.key if us else "gpu-memory-utilization",
            hint=f"use at most {most} (the free share of the GPU when vLLM starts)" if most > 0 else None,
        )
    elif starved:
        st = starved[0]
        b = st.budget
        dep.diag(
            WEIGHTS_FIT,
            "error",
            f"{spec.name} on {gpu.display_name} ({_layout_words(p, args)}): weights "
            f"{_gib(b.weights_bytes)} + activations {_gib(b.activation_peak_bytes)} + non-torch "
            f"{_gib(b.non_torch_bytes)} per GPU leave no KV cache within {_gib(b.requested_bytes)} "
            f"(gpu-memory-utilization {p.effective['gpu_memory_utilization']}); vLLM will refuse to start",
            line=dep.model_line or dep.line,
            key=dep.model_key,
            hint=_weights_hint(p, spec),
        )
    elif any(_override_overflows(s.budget) for s in p.stages):
        st = next(s for s in p.stages if _override_overflows(s.budget))
        b = st.budget
        ks = keys.get("kv_cache_memory_bytes")
        used = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_bytes
        dep.diag(
            WEIGHTS_FIT,
            "error",
            f"kv-cache-memory-bytes {_gib(b.kv_cache_bytes)} + weights {_gib(b.weights_bytes)} + activations, "
            f"non-torch and CUDA graphs {_gib(used - b.weights_bytes)} per GPU exceed the "
            f"{_gib(b.total_bytes)} of {gpu.display_name}: vLLM runs out of memory allocating the KV cache",
            line=ks.line if ks else dep.line,
            key=ks.key if ks else "kv-cache-memory-bytes",
            hint=f"use at most {max(b.total_bytes - used, 0) // 2**20} MiB (e.g. --kv-cache-memory-bytes "
            f"{max(b.total_bytes - used, 0) // 2**30}G)",
        )
    elif p.outcome is StartOutcome.CUDA_GRAPH_CAPTURE_OOM:
        # the same typed outcome estimate reports; its fix comes from kvplan.capacity.recommend
        from kvplan.capacity.recommend import recommendations

        checks.append(CUDA_GRAPHS_FIT)
        us = keys.get("gpu_memory_utilization")
        fix = next((r for r in recommendations(p) if r.flag == "--gpu-memory-utilization"), None)
        dep.diag(
            CUDA_GRAPHS_FIT,
            "error",
            p.failure or "CUDA graph capture runs out of memory",
            line=us.line if us else dep.line,
            key=us.key if us else "gpu-memory-utilization",
            hint=(f"use --gpu-memory-utilization {fix.value} or less" if fix else "lower gpu-memory-utilization")
            + ", or --enforce-eager",
        )
    elif not p.fits:
        largest = p.largest_max_model_len or 0
        worst = p.worst_stage
        default = "" if ms else f" (max-model-len not set: vLLM uses the model's {spec.derived_max_model_len})"
        dep.diag(
            MAX_MODEL_LEN_FITS,
            "error",
            kv_shortfall_text(worst, admission_bytes(p.stages)[p.stages.index(worst)], mml, p.max_in_flight_tokens)
            + f" on {gpu.display_name}{default}: "
            "vLLM will refuse to start"
            + (f"; the largest max-model-len that fits is {largest}" if largest > 0 else ""),
            line=mline,
            key=mkey if ms else "max-model-len",
            hint=f"set --max-model-len {largest}" if largest > 0 else "use more GPUs or a larger GPU",
        )
    figures = {
        "gpu": gpu.id,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "max_model_len": mml,
        "max_num_seqs": p.effective["max_num_seqs"],
        "kv_cache_dtype": p.effective["kv_cache_dtype"],
        "gpu_memory_utilization": p.effective["gpu_memory_utilization"],
        "kv_cache_bytes": p.worst_stage.budget.kv_cache_bytes,
        "num_gpu_blocks": p.num_gpu_blocks,
        "block_size": p.block_size,
        "gpu_kv_cache_tokens": p.gpu_kv_cache_tokens,
        "max_concurrency": _round2(p.max_concurrency),
        "fits": p.fits,
        "largest_max_model_len": p.largest_max_model_len,
        **_parallel_figures(p),
    }
    kvd = p.effective["kv_cache_dtype"]
    if kvd.startswith("fp8"):
        checks.append(FP8_KV_UNSUPPORTED)
        if not gpu.fp8_supported:
            s = keys.get("kv_cache_dtype")
            dep.diag(
                FP8_KV_UNSUPPORTED,
                "warning",
                f"{kvd} KV cache on {gpu.display_name}, which has no fp8 support: attention backends may "
                "refuse it or run slowly",
                line=s.line if s else dep.line,
                key=s.key if s else "kv-cache-dtype",
                hint="use --kv-cache-dtype auto on this GPU",
            )
    shown, notes = deployment_notes(p)
    for w in shown:
        dep.diag(PLANNER_NOTE, "info", w)
    if notes:
        figures["notes"] = notes
    if not p.fits:
        return figures
    seqs = p.effective["max_num_seqs"]
    checks.append(MAX_NUM_SEQS)
    ss = keys.get("max_num_seqs")
    conc = p.max_concurrency
    shown_conc = _concurrency_text(conc)
    if ss is not None and seqs > conc:
        dep.diag(
            MAX_NUM_SEQS,
            "info",
            f"max-num-seqs {seqs}: the KV cache holds {shown_conc} requests of {mml} tokens at once; "
            "more run together only when requests are shorter",
            line=ss.line,
            key=ss.key,
        )
    elif ss is not None and seqs < int(conc):
        dep.diag(
            MAX_NUM_SEQS,
            "info",
            f"max-num-seqs {seqs} caps concurrency below the {shown_conc} requests of {mml} tokens the KV cache holds",
            line=ss.line,
            key=ss.key,
        )
    if targets.min_concurrency is not None:
        checks.append(MIN_CONCURRENCY)
        req = targets.request_len or mml
        tline, tkey = dep.target_lines.get("min_concurrency"), dep.target_keys.get("min_concurrency")
        if req > mml:
            dep.diag(
                INVALID_KVPLAN_KEY,
                "error",
                f"request_len {req} is longer than max-model-len {mml}; vLLM rejects such requests",
                line=dep.target_lines.get("request_len"),
                key=dep.target_keys.get("request_len"),
            )
        else:
            kv_conc = p.layout.max_concurrency(p.num_gpu_blocks, req, p.max_in_flight_tokens)
            per_replica = min(kv_conc, float(seqs))
            achievable = per_replica * dp  # every replica has its own KV cache and max-num-seqs
            figures["concurrency_at_request_len"] = _round2(achievable)
            figures["request_len"] = req
            if dp > 1:
                figures["concurrency_per_replica_at_request_len"] = _round2(per_replica)
                figures["data_parallel_size"] = dp
            if achievable < targets.min_concurrency:
                cap = "max-num-seqs" if seqs < kv_conc else "the KV cache"
                fit = (
                    f"{_concurrency_text(per_replica)} requests of {req} tokens fit at once per replica, "
                    f"x{dp} replicas = {_concurrency_text(achievable, targets.min_concurrency)}"
                    if dp > 1
                    else f"{_concurrency_text(achievable, targets.min_concurrency)} requests of {req} tokens fit at once"
                )
                dep.diag(
                    MIN_CONCURRENCY,
                    "error",
                    f"{fit} ({cap} limits it; "
                    f"{p.num_gpu_blocks} blocks of {p.block_size} tokens), below the target {targets.min_concurrency:g}",
                    line=tline,
                    key=tkey,
                    hint="raise max-num-seqs"
                    if cap == "max-num-seqs"
                    else "use more GPUs or a shorter max-model-len"
                    if kvd.startswith("fp8")
                    else "use more GPUs, an fp8 KV cache, or a shorter max-model-len",
                )
    return figures


def _host_checks(dep: Deployment, p, checks: list[str]) -> None:
    """The checks of what the plan's add-ons take outside the GPU: the add-on findings
    (addon_checks: approximate, host memory) and the KV offload region in /dev/shm (check.rules.shm)."""
    addon_checks(dep, p, checks)
    if p.addons is not None:
        from kvplan.check.rules.shm import shm_check

        shm_check(dep, p, _offload_setting(dep, p.addons), checks)


def host_checks_without_max_model_len(ctx, dep: Deployment, model, revision, spec, gpu, args, checks: list[str]) -> bool:
    """The host-memory and /dev/shm checks of a deployment whose plan_checks did not run or
    stopped before them (an over-long or refused --max-model-len): neither depends on
    max_model_len (the CPU KV pool is --kv-offloading-size carved into blocks, the pinned weights
    are the checkpoint's: the version's addons.py), so they are sized on a plan with
    max_model_len at the model's own limit (spec.max_len_limit), and CI sees every finding in one
    round. Nothing when that plan is refused too, or the deployment has no add-on.

    Returns True when the checks ran."""
    if not any(n in dep.settings for n in (*_KV_OFFLOAD_FLAGS, *_WEIGHT_OFFLOAD_FLAGS, "speculative-config",
                                            "enable-lora")):
        return False
    try:
        p = ctx.plan(model, revision, spec, gpu, args.model_copy(update={"max_model_len": spec.max_len_limit}))
    except (KvplanError, ValueError, TypeError):
        return False
    _host_checks(dep, p, checks)
    return True


def addon_checks(dep: Deployment, p, checks: list[str]) -> None:
    """What speculative decoding, LoRA and the offloads add to a deployment's verdict:

    * the add-ons kvplan cannot size make the figures approximate (a warning: check --strict
      fails on it; capacity/addons.py plan_addons' approximations);
    * each add-on rule no real start of the version checked is named by the evidence (the
      vllm-version note);
    * the host memory the offloads need (pinned weights, the CPU KV pool: the version's
      addons.py) against the container's memory limit (k8s resources.limits.memory): above it,
      the pod is OOM-killed (error); without a limit the need is said (info).
    """
    from kvplan.check.diagnostics import APPROXIMATE, HOST_MEMORY

    rep = getattr(p, "addons", None)
    if rep is None:
        return
    spec_reasons = set(p.spec.approximations)
    extra = [a for a in p.approximations if a not in spec_reasons and a.kind.value == "partial_rules"
             and a.reason not in {d.message for d in dep.diagnostics}]
    if extra:
        checks.append(APPROXIMATE)
        for src, reasons in _by_setting(dep, extra):
            dep.diag(APPROXIMATE, "warning",
                     "approximate: kvplan's memory figures for this deployment are approximate ("
                     + "; ".join(reasons) + ")", line=src.line if src else None, key=src.key if src else None,
                     hint="verify with a real start (kvplan verify)")
    # the add-on rules no real start checked are named in the evidence (the vllm-version note)
    need = rep.host_bytes
    if not need and rep.kv_offload is None:
        return
    # this sized check replaces the buffer-only one check.rules.host_memory made before planning
    dep.diagnostics[:] = [d for d in dep.diagnostics if d.check_id != HOST_MEMORY]
    if HOST_MEMORY not in checks:
        checks.append(HOST_MEMORY)
    parts = []
    if rep.kv_offload is not None and rep.kv_offload.host_bytes is not None:
        parts.append(f"CPU KV pool {_gib(rep.kv_offload.host_bytes)}: {rep.kv_offload.host_rule}")
    pinned = (need or 0) - (rep.kv_offload.host_bytes or 0 if rep.kv_offload is not None else 0)
    if pinned > 0:
        parts.append(f"offloaded weights {_gib(pinned)} pinned (power-of-two rounded: vllm-project/vllm issue #56410)")
    src = _offload_setting(dep, rep)
    sline, skey = (src.line, src.key) if src is not None else (None, None)
    if need is None:
        dep.diag(HOST_MEMORY, "warning",
                 f"approximate: {rep.kv_offload.host_rule}; the host memory it needs is not known to kvplan",
                 line=sline, key=skey)
        return
    from kvplan.capacity.addons import engines_on_a_node

    engines = engines_on_a_node(p)  # each data-parallel engine on the node has its own pool and pinned weights
    if engines > 1:
        need *= engines
        parts.append(f"x {engines} engines on the node")
    what = f"vLLM needs at least {_gib(need)} of host memory for offloading ({'; '.join(parts)}), plus the process itself"
    limit_of = dep.memory_limit or dep.host_memory  # k8s resources.limits.memory / a serving stack's limit
    if limit_of is not None:
        limit, line, key = limit_of
        # the finding sits on the offload setting (a manifest's spec.kvCacheOffloading, a --flag); the
        # limit's key is named in the message, or carries the finding when no setting is found
        if need > limit:
            dep.diag(HOST_MEMORY, "error",
                     f"{what}, above the container's memory limit of {_gib(limit)} ({key}): the pod is OOM-killed "
                     "when the pool is populated", line=sline if src else line, key=skey if src else key,
                     hint=f"raise {key} above {_gib(need)} plus the process's own memory, or lower the offload size")
        else:
            dep.diag(HOST_MEMORY, "info", f"{what}; the container's memory limit is {_gib(limit)} ({key})",
                     line=sline if src else line, key=skey if src else key)
    else:
        dep.diag(HOST_MEMORY, "info", f"{what} (no container memory limit found to compare)", line=sline, key=skey)


# the flags that make vLLM take host memory for offloading, KV pool first (vLLM's
# config/vllm.py _post_init_kv_transfer_config turns --kv-offloading-size into a kv_transfer_config;
# --cpu-offload-gb / --offload-group-size are the UVA and prefetch weight offloads)
_KV_OFFLOAD_FLAGS = ("kv-offloading-size", "kv-transfer-config")
_WEIGHT_OFFLOAD_FLAGS = ("cpu-offload-gb", "offload-group-size")


# which flag each add-on approximation of capacity/addons.py (plan_addons, stage_costs) comes from,
# by the words its reason starts with
_REASON_FLAGS = (("--speculative-config", ("speculative-config",)), ("draft model", ("speculative-config",)),
                 ("speculative decoding", ("speculative-config",)), ("LoRA", ("enable-lora",)),
                 ("KV connector", _KV_OFFLOAD_FLAGS), ("--cpu-offload-gb", ("cpu-offload-gb",)))


def _by_setting(dep: Deployment, approximations) -> list[tuple[object, list[str]]]:
    """The add-on approximations grouped by the Setting that turned the add-on on (None: not found),
    so that each finding names the key the file wrote (a manifest's spec.speculator, --connector)."""
    groups: dict[int, tuple[object, list[str]]] = {}
    for a in approximations:
        names = next((f for prefix, f in _REASON_FLAGS if a.reason.startswith(prefix)), ())
        src = next((dep.settings[n] for n in names if n in dep.settings), None)
        groups.setdefault(id(src), (src, []))[1].append(a.reason)
    return list(groups.values())


def _offload_setting(dep: Deployment, rep):
    """The Setting (flag, line, key as the file writes it) that asks for the host memory in ``rep``:
    the KV offload's when there is one, else the weight offload's; None when none is set."""
    flags = (_KV_OFFLOAD_FLAGS if rep.kv_offload is not None else ()) + _WEIGHT_OFFLOAD_FLAGS
    for name in flags:
        s = dep.settings.get(name)
        if s is not None:
            return s
    return None
