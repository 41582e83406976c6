"""The multi-GPU layouts `kvplan plan` searches beyond replicating a TP x PP engine
(capacity/search.py): a MoE model's data parallel as vLLM shards its experts (with and without
expert parallel), and decode context parallel over an engine's TP ranks. Each layout is planned
by the estimate (capacity/estimate.py plan, the world of ranks in capacity/ranks.py); each
returns the options that meet the target.
"""

from __future__ import annotations

import math

from kvplan.capacity.search_option import Option
from kvplan.errors import KvplanError


def engine_capacity(p, workload):
    """(requests one engine serves, what binds it, the workload capacity or None)."""
    if workload is not None:
        cap = workload.capacity(p)
        return cap.requests, cap.binding, cap
    seqs = p.effective["max_num_seqs"]
    return min(p.max_concurrency, float(seqs)), ("kv_cache" if p.max_concurrency < seqs else "max_num_seqs"), None


def latency_dp_sizes(smallest: int, max_dp: int) -> list[int]:
    """The data-parallel sizes `plan --slo` tries beyond the smallest that holds the target
    (``smallest``): the powers of two above it, at most ``max_dp`` (--max-gpus over the engine's
    GPUs). More engines share the same --concurrency, so each runs a smaller batch: lower TTFT and
    TPOT for more GPUs, which only an SLO can ask for. Powers of two bound the perf runs (one per
    size) to log2(max_dp) per engine shape; sizes between them are left out (docs/plan.md)."""
    out, d = [], 2
    while d <= max_dp:
        if d > smallest:
            out.append(d)
        d *= 2
    return out


def moe_dp_options(spec, gpu, args, env, target, dp_replicas: int, max_dp: int, price, gpus_per_node, workload,
                   expert_parallel: tuple[bool, ...] = (False, True), latency: bool = False):
    """A MoE engine that needs ``dp_replicas`` copies as DP 1 engines, planned as vLLM runs
    ``--data-parallel-size``: experts sharded over TP x PCP x DP, without and with
    ``--enable-expert-parallel`` (capacity/ranks.py). For each, the smallest DP (2 ..
    ``dp_replicas``, at most ``max_dp``) whose engines together meet the target; every engine
    is the binding engine's (Plan.max_concurrency), so the count is conservative where EP splits
    experts unevenly. Layouts vLLM refuses (an expert intermediate that does not divide) are
    left out. ``expert_parallel``: the --enable-expert-parallel values to try. ``latency``
    (`plan --slo`): also the larger DP sizes of latency_dp_sizes, up to ``max_dp``, and DP
    layouts of an engine that holds the target alone (``dp_replicas`` 1). Returns a list
    of Option."""
    out = []
    for ep in expert_parallel:
        last = max_dp if latency else min(dp_replicas, max_dp)
        for dp in range(2, last + 1):
            o = _moe_dp_option(spec, gpu, args, env, target, dp, ep, price, gpus_per_node, workload)
            if o is None:
                continue
            if o is False:
                break
            out.append(o)
            if latency:
                out += [x for d in latency_dp_sizes(dp, max_dp)
                        if (x := _moe_dp_option(spec, gpu, args, env, target, d, ep, price, gpus_per_node, workload))]
            break
    return out


def _moe_dp_option(spec, gpu, args, env, target, dp: int, ep: bool, price, gpus_per_node, workload):
    """The engine as ``dp`` DP engines (with expert parallel when ``ep``) when it starts and its
    engines together hold the target: an Option; None when it does not; False when vLLM refuses
    the layout (a larger DP is refused too)."""
    from kvplan.capacity.estimate import plan

    try:
        p = plan(spec, gpu, args.model_copy(update={"data_parallel_size": dp, "enable_expert_parallel": ep}), env)
    except KvplanError:
        return False
    if not p.fits:
        return None
    per_engine, binding, cap = engine_capacity(p, workload)
    if per_engine > 0 and per_engine * dp >= target.concurrency - 1e-9:
        return Option(p, dp, per_engine, price, binding, target, gpus_per_node, cap)
    return None


def dcp_size(spec, tp: int) -> int:
    """The largest --decode-context-parallel-size vLLM accepts on ``tp`` TP ranks (1 = none):
    MLA (one latent head, replicated on every TP rank) any divisor of TP, so TP itself; GQA/MHA
    only when TP > KV heads, at most TP // KV heads, dividing the query heads per KV head and TP
    (config/model.py, config/parallel.py; capacity/ranks.py validate). Sliding-window and hybrid
    models take none (only full-attention caches shard)."""
    from kvplan.model.spec import LayerKind

    kinds = {k for k in spec.layer_kinds if k != LayerKind.NONE}
    if tp <= 1 or not kinds <= {LayerKind.FULL, LayerKind.MLA}:
        return 1
    if spec.uses_mla:
        return tp
    kv, heads = spec.attention.num_key_value_heads, spec.attention.num_attention_heads
    if tp <= kv:
        return 1
    return max(d for d in range(1, tp // kv + 1) if tp % d == 0 and (heads // kv) % d == 0)


def dcp_options(spec, gpu, args, env, target, max_dp: int, price, gpus_per_node, workload):
    """The engine with decode context parallel over its TP ranks (dcp_size): the same GPUs,
    each request's KV tokens spread over dcp of them, so about dcp x the requests per engine.
    Replicated with --data-parallel-size for a dense model; a MoE model that would need more
    than one engine is left to moe_dp_options. Returns a list of at most one Option."""
    from kvplan.capacity.estimate import plan

    dcp = dcp_size(spec, args.tensor_parallel_size)
    if dcp <= 1:
        return []
    try:
        p = plan(spec, gpu, args.model_copy(update={"decode_context_parallel_size": dcp}), env)
    except KvplanError:
        return []
    if not p.fits:
        return []
    per_engine, binding, cap = engine_capacity(p, workload)
    if per_engine <= 0:
        return []
    dp = max(1, math.ceil(target.concurrency / per_engine - 1e-9))
    if dp > max_dp or (spec.moe is not None and dp > 1):
        return []
    return [Option(p, dp, per_engine, price, binding, target, gpus_per_node, cap)]


def note_tp_engine(best: dict, gpu_id: str, kv: str, quant, engine_gpus: int, per_engine: float, tp: int,
                   pp: int) -> None:
    """Keep in ``best`` (keyed by GPU, --kv-cache-dtype, --quantization) the TP x PP engine of a
    MoE model that serves the most requests per GPU, whether or not it meets the target alone:
    dp_ep_notes compares the DP layouts with it."""
    k = (gpu_id, kv, quant)
    if k not in best or per_engine / engine_gpus > best[k][0] / best[k][1]:
        best[k] = (per_engine, engine_gpus, tp, pp)


def dp_ep_notes(spec, options, tp_engines: dict, env=None, workload=None) -> tuple[str, ...]:
    """For a MoE model: one line per GPU type, for the best-ranked data-parallel option
    (``--data-parallel-size`` > 1, with or without --enable-expert-parallel), comparing on the
    same GPUs its layout with the TP x PP engine of the same GPU, KV dtype and weights that
    serves the most requests per GPU (note_tp_engine): the DP layout is planned again at that
    engine's GPU count (DP = its GPUs / the option's TP x PP x PCP, so both sides use the same
    GPUs; the estimate, capacity/estimate.py plan) and the line says which serves more and the
    --kv-cache-dtype both assume. For MLA models the reason is named: under TP every rank
    holds the whole latent cache (one KV head, replicated), under DP an engine's GPUs hold only
    their own requests' (docs/parallelism.md). Empty for a dense model or without a DP option."""
    from kvplan.capacity.estimate import plan

    if spec.moe is None:
        return ()
    out, seen = [], set()
    for o in options:
        dp0 = o.plan.args.data_parallel_size or 1
        if dp0 <= 1 or o.gpu.id in seen:
            continue
        seen.add(o.gpu.id)
        tp = tp_engines.get((o.gpu.id, o.kv_cache_dtype, o.quantization))
        ep = bool(o.plan.args.enable_expert_parallel)
        name = "DP + EP" if ep else "DP"
        if tp is None:
            out.append(f"{name} on {o.gpu.id}: no TP x PP engine of this model starts on it at this --max-model-len "
                       f"with kv={o.kv_cache_dtype}, weights={o.quantization or 'as in the checkpoint'}")
            continue
        per_engine, gpus, t, p = tp
        a = o.plan.args
        # One DP engine's GPUs are TP x PP x PCP (ranks.World.engine_gpus): DP is what is left
        # of the TP engine's GPU count, so both sides of the line use the same GPUs.
        engine = a.tensor_parallel_size * a.pipeline_parallel_size * (a.prefill_context_parallel_size or 1)
        dp = gpus // engine
        if dp < 2 or gpus % engine:
            continue
        try:
            q = plan(spec, o.gpu, a.model_copy(update={"data_parallel_size": dp}), env)
        except KvplanError:
            continue
        served = engine_capacity(q, workload)[0] * dp if q.fits else 0.0
        layout = " ".join(x for x in (
            f"-tp {a.tensor_parallel_size}" if a.tensor_parallel_size > 1 else "",
            f"-pp {a.pipeline_parallel_size}" if a.pipeline_parallel_size > 1 else "",
            f"-pcp {a.prefill_context_parallel_size}" if (a.prefill_context_parallel_size or 1) > 1 else "",
            f"-dp {dp}", "-ep" if ep else "") if x)
        shape = f"-tp {t}" + (f" -pp {p}" if p > 1 else "")
        more = served > per_engine
        why = " (MLA: under TP every rank holds the whole latent cache)" if spec.uses_mla and more else ""
        kv = o.plan.effective["kv_cache_dtype"]
        kv = f"{kv} = {o.plan.effective['dtype']}" if kv == "auto" else kv
        out.append(f"{name} {'serves more' if more else 'serves no more'} on {gpus}x {o.gpu.id} "
                   f"(--kv-cache-dtype {kv}): {layout} "
                   f"{served:.1f} requests, one {shape} engine {per_engine:.1f}{why}")
    return tuple(out)
