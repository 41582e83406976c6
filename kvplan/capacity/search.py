"""Reverse planning: from (model, max_model_len, concurrency) to the GPUs to rent.

Searches every GPU profile x tensor-parallel size x pipeline-parallel size x --kv-cache-dtype x
--quantization, runs kvplan's estimate (the selected vLLM version's rules) on each engine, replicates an engine
that starts with data parallelism until the target concurrency is met, and ranks what meets it
by hourly cost, then GPU count (`plan --slo` re-ranks by cost per served request:
served_rank_key, with kvplan perf's throughput).

Rules of the search (kvplan's, not vLLM's):

* TP stays within a node (``tensor_parallel_size <= gpus_per_node``); PP may span nodes; the
  engine is TP x PP GPUs and is replicated DP times (``--data-parallel-size``); TP x PP x DP <=
  max_gpus.
* An engine's concurrency is vLLM's "Maximum concurrency" figure for ``max_model_len``-token
  requests (v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config), capped by
  ``max_num_seqs``; with a workload, kvplan.capacity.workload's steady-state requests instead.
* fp8 KV cache is proposed only on GPUs with fp8 support; fp8 weights need compute capability
  >= 7.5 (vLLM model_executor/layers/quantization/fp8.py get_min_capability; Marlin
  weight-only fp8 below 8.9).
* With ``SearchSpace.latency_layouts`` (`plan --slo`): every engine that starts is also laid
  out with the larger DP sizes of search_layouts.latency_dp_sizes (a MoE model's DP engines with
  and without EP, a dense model's replicas) - more GPUs buy latency - and every shape of one GPU
  count is kept for the SLO screen.
* Pruning: an option is dropped when another needs no more GPUs, costs no more (same GPU
  profile: fewer GPUs; both priced: cost; both unpriced: GPU count) and lowers precision no more
  (fp8 KV cache, fp8 weights), strictly better in GPUs or cost.
  Unknown prices are never guessed: unpriced options rank after priced ones, by GPU count.

Units: bytes (int), tokens, USD per hour (float).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from kvplan.capacity.outcomes import EstimateRefusal, RefusalKind, StartOutcome
from kvplan.capacity.search_layouts import dcp_options, dp_ep_notes, latency_dp_sizes, moe_dp_options, note_tp_engine
from kvplan.capacity.search_option import Option, Target, count_text  # noqa: F401  (their home; imported from here too)
from kvplan.engines.vllm import versions
from kvplan.errors import KvplanError
from kvplan.gpus import GPUProfile

DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_PP = (1, 2, 4)
DEFAULT_KV = ("auto", "fp8")
DEFAULT_QUANT: tuple[str | None, ...] = (None, "fp8")


@dataclass(frozen=True)
class SearchSpace:
    """What to try.

    Attributes:
        gpus: GPU profiles.
        tensor_parallel_sizes / pipeline_parallel_sizes: engine shapes.
        kv_cache_dtypes: --kv-cache-dtype values ("auto", "fp8", ...).
        quantizations: --quantization values (None = the checkpoint as is).
        max_gpus: most GPUs in one option (all replicas).
        gpus_per_node: GPUs in one node (TP must fit in it).
        require_fp8_support: skip fp8 KV caches on GPUs without fp8 (False: plan them anyway,
            as the planner does with a warning - used by the benchmark to time every combination).
    """

    gpus: tuple[GPUProfile, ...]
    tensor_parallel_sizes: tuple[int, ...] = DEFAULT_TP
    pipeline_parallel_sizes: tuple[int, ...] = DEFAULT_PP
    kv_cache_dtypes: tuple[str, ...] = DEFAULT_KV
    quantizations: tuple[str | None, ...] = DEFAULT_QUANT
    max_gpus: int = 8
    gpus_per_node: int = 8
    require_fp8_support: bool = True
    # multi-GPU layouts (capacity/search_layouts.py): a MoE model's DP with these
    # --enable-expert-parallel values, and DCP over the TP ranks where the attention allows it
    expert_parallel: tuple[bool, ...] = (False, True)
    decode_context_parallel: bool = True
    # `plan --slo`: more GPUs buy latency, so also the larger data-parallel layouts of every engine
    # (search_layouts.latency_dp_sizes), and every shape kept for the SLO screen (not one per bill)
    latency_layouts: bool = False


@dataclass(frozen=True)
class Skipped:
    """A combination the search left out, and why (shown with --explain).

    Attributes:
        category: "invalid_parallel" | "max_gpus" | "tp_exceeds_node" | "no_fp8" |
            "unsupported" | "does_not_start" | "below_target" | "dominated" | "same_engine"
            (a flag that changes nothing for this checkpoint: --quantization on pre-quantized
            weights, an fp8 KV cache the checkpoint already gives with auto).
        flag: the `vllm serve` flag the skip is about ("--quantization" ...), or None; code
            reads this, not ``reason``'s text (not in ``to_dict``: the JSON keeps its keys).
    """

    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    quantization: str | None
    category: str
    reason: str
    flag: str | None = None

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        del d["flag"]
        return d


@dataclass
class SearchResult:
    """Ranked options that meet the target, what was skipped, and the closest miss.

    Attributes:
        options: ranked (cheapest first; unpriced after priced, by GPU count).
        dominated: options that meet the target but are dominated (see module docstring).
        closest: when no option meets the target, the one that comes nearest (highest fraction
            of the target among engines that start at max_model_len; else the largest context).
        evaluated: planner calls made; elapsed_s: wall time of the search.
        approximations: the model's (ModelSpec.approximations): why every option's figures are
            approximate; empty when kvplan has rules for the architecture (``exact``).
    """

    target: Target
    options: list[Option]
    dominated: list[Option]
    skipped: list[Skipped]
    closest: Option | None
    closest_note: str | None
    evaluated: int
    combinations: int
    elapsed_s: float
    unpriced: list[str] = field(default_factory=list)
    refusal: str | None = None
    refusal_hint: str | None = None
    approximations: tuple = ()
    layout_notes: tuple[str, ...] = ()  # a MoE model's DP (+ EP) options against TP: search_layouts.dp_ep_notes

    @property
    def exact(self) -> bool:
        return not self.approximations


def _engine_args_error(exc) -> tuple[str, str]:
    """A pydantic ValidationError from EngineArgs as (argument name, one line naming the flag)."""
    err = exc.errors()[0]
    field_name = str(err["loc"][0]) if err.get("loc") else "argument"
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    ctx = err.get("ctx") or {}
    if err.get("type") == "less_than_equal":
        msg = f"must be <= {ctx.get('le')}"
    elif err.get("type") == "greater_than_equal":
        msg = f"must be >= {ctx.get('ge')}"
    return field_name, f"--{field_name.replace('_', '-')} {err.get('input')}: {msg}"


def _stage(s: Skipped) -> int:
    """How far a skipped combination got through the search's checks, in the order they run:
    0 fp8 KV on a GPU without fp8, 1 fp8 weights below compute capability 7.5, 2 TP above a node,
    3 TP x PP above --max-gpus, 4 refused by vLLM's rules in the planner."""
    if s.category == "no_fp8":
        return 1 if s.flag == "--quantization" else 0
    return {"tp_exceeds_node": 2, "max_gpus": 3}.get(s.category, 4)


def _utilization_refusal(plans: list, util) -> tuple[str, str]:
    """(line, hint) when every sized engine asks vLLM for more memory than is free at start-up
    (total x --gpu-memory-utilization > total - the CUDA context; vLLM gpu_worker.py
    request_memory). The hint gives the largest utilization every GPU tried accepts."""
    import math as _m

    free: dict[str, tuple[float, float, float]] = {}
    for p in plans:
        for st in p.stages:
            b = st.budget
            if b.requested_bytes > b.free_at_start_bytes:
                free[p.gpu.display_name] = (b.requested_bytes, b.free_at_start_bytes, b.total_bytes)
                break
    shown = "; ".join(
        f"{name}: requests {req / 2**30:.2f} GiB, about {fr / 2**30:.2f} GiB free" for name, (req, fr, _) in free.items()
    )
    best = min(_m.floor(1000 * (fr - (1 << 20)) / tot) / 1000 for _, fr, tot in free.values())
    line = (
        f"--gpu-memory-utilization {util}: above the memory free when vLLM starts on every GPU tried "
        f"({shown}; the CUDA context takes the rest); vLLM refuses to start"
    )
    hint = (
        f"use --gpu-memory-utilization {best} or less" if 0 < best <= 1 else "no utilization leaves room on these GPUs"
    )
    return line, hint


def refusal_message(skipped: list[Skipped], space: SearchSpace, most: int = 3, version: str | None = None) -> str:
    """One line saying why no combination reached the sizing step, naming the flags.

    Only the skips that got furthest through the checks are said: a check that other
    combinations passed did not stop the search (with ``-tp 3`` the PP=4 engines above
    --max-gpus are incidental; TP=3 not dividing the heads is the cause). Distinct reasons, the
    first ``most`` of them and a count of the rest."""
    if not skipped:
        return "no combination to plan"
    far = max(_stage(s) for s in skipped)
    items = [s for s in skipped if _stage(s) == far]
    msgs: list[str] = []
    if far == 2:
        tps = ",".join(str(t) for t in sorted({s.tensor_parallel_size for s in items}))
        msgs.append(f"--tensor-parallel-size {tps}: above --gpus-per-node {space.gpus_per_node} (TP stays within a node; PP spans nodes)")
    elif far == 3:
        small = min(items, key=lambda s: s.tensor_parallel_size * s.pipeline_parallel_size)
        n = small.tensor_parallel_size * small.pipeline_parallel_size
        msgs.append(f"--max-gpus {space.max_gpus}: below the {n} GPUs of the smallest engine tried "
                    f"(--tensor-parallel-size {small.tensor_parallel_size} x --pipeline-parallel-size {small.pipeline_parallel_size})")
    elif far == 0:
        kv = ",".join(sorted({s.kv_cache_dtype for s in items}))
        gpus = ", ".join(sorted({s.gpu for s in items}))
        msgs.append(f"--kv-cache-dtype {kv}: no fp8 support on {gpus}; kvplan does not propose an fp8 KV cache there")
    elif far == 1:
        gpus = ", ".join(sorted({s.gpu for s in items}))
        vllm = version or versions.DEFAULT_VERSION
        msgs.append(f"--quantization fp8: needs compute capability >= 7.5 (vLLM {vllm} Fp8Config); {gpus} below it")
    else:
        msgs = merge_reasons([s.reason for s in items])
    line = "; ".join(msgs[:most])
    if len(msgs) > most:
        line += f" (and {len(msgs) - most} more reason(s))"
    return line


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")


def merge_reasons(reasons: list[str]) -> list[str]:
    """Distinct reasons, those that differ only in standalone numbers said once with the numbers
    joined by "or" (``--max-num-batched-tokens 1: smaller than --max-num-seqs 256`` and ``... 1024``
    -> ``... --max-num-seqs 256 or 1024``: vLLM's default differs by GPU). Numbers inside words
    (``H100``) are part of the text, so different GPUs are never merged. Order is kept."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for r in dict.fromkeys(reasons):
        key = tuple(_NUMBER.split(r))
        groups.setdefault(key, []).append(_NUMBER.findall(r))
    out = []
    for key, numbers in groups.items():
        parts = [key[0]]
        for i, text in enumerate(key[1:]):
            values = list(dict.fromkeys(n[i] for n in numbers))
            parts.append(" or ".join(values))
            parts.append(text)
        out.append("".join(parts))
    return out


def _fp8_weights_ok(gpu: GPUProfile) -> bool:
    """vLLM Fp8Config.get_min_capability() == 75 (Marlin weight-only fp8 below 8.9; version rules
    in engines/vllm/v0_26/quantization.py)."""
    if gpu.fp8_supported:
        return True
    if gpu.compute_capability:
        try:
            major, minor = (int(x) for x in gpu.compute_capability.split(".")[:2])
            return major * 10 + minor >= 75
        except ValueError:
            pass
    return gpu.bf16_supported  # bf16 means Ampere or newer (>= 8.0)


def _dominates(a: tuple, b: tuple) -> bool:
    """a dominates b; both are (gpu id, GPUs, hourly cost or None, fp8 KV, fp8 weights): a needs
    no more GPUs, costs no more (same profile: fewer GPUs; both priced: cost; both unpriced:
    GPU count only; priced vs unpriced: incomparable), lowers precision no more, and is strictly
    better in GPUs or cost."""
    gid_a, n_a, cost_a, kv_a, q_a = a
    gid_b, n_b, cost_b, kv_b, q_b = b
    if n_a > n_b or (kv_a and not kv_b) or (q_a and not q_b):
        return False
    if gid_a == gid_b or (cost_a is None and cost_b is None):
        return n_a < n_b
    if cost_a is not None and cost_b is not None:
        return cost_a <= cost_b + 1e-12 and (cost_a < cost_b - 1e-12 or n_a < n_b)
    return False


def dominates(a: Option, b: Option) -> bool:
    """Option a dominates option b (see _dominates). A cheaper fp8 option never hides a bf16 one."""

    def facts(o: Option) -> tuple:
        return (o.gpu.id, o.num_gpus, o.hourly_cost, o.kv_cache_dtype.startswith("fp8"), bool(o.quantization))

    return _dominates(facts(a), facts(b))


def rank_key(o: Option) -> tuple:
    """Priced options first, by hourly cost then GPU count; unpriced after, by GPU count. Ties:
    checkpoint precision first; for unpriced options the GPU with less memory (right-sizing:
    kvplan does not guess prices); fewer pipeline stages; more headroom."""
    if o.hourly_cost is not None:
        return (0, o.hourly_cost, o.num_gpus, o.accuracy_rank, 0, o.pipeline_parallel_size, -o.achieved)
    return (1, 0.0, o.num_gpus, o.accuracy_rank, o.gpu.memory_bytes, o.pipeline_parallel_size, -o.achieved)


RANKED_BY_HOURLY_COST = ("by cost per hour of the GPUs that hold --concurrency (then GPU count); "
                         "add --workload and --slo to rank by cost per served request")
RANKED_BY_SERVED_REQUEST = ("by cost per served request: $/hour over the requests/hour kvplan perf predicts for "
                            "each option in a closed loop at --concurrency (its DP engines together)")


def served_requests_per_hour(o: Option, request_throughput: float | None) -> float | None:
    """Requests an option serves per hour: ``request_throughput`` (requests/s of one engine,
    kvplan perf's closed loop at the engine's share of --concurrency) x its DP engines x 3600;
    None when there is no prediction."""
    if request_throughput is None or not request_throughput > 0:
        return None
    return request_throughput * o.data_parallel_size * 3600.0


def cost_per_served_request(o: Option, request_throughput: float | None) -> float | None:
    """USD per served request: hourly_cost / served_requests_per_hour; None when either is
    unknown (an unpriced GPU, no prediction)."""
    per_hour = served_requests_per_hour(o, request_throughput)
    if o.hourly_cost is None or per_hour is None:
        return None
    return o.hourly_cost / per_hour


def served_rank_key(o: Option, request_throughput: float | None) -> tuple:
    """`plan --slo`'s order: options with a cost per served request first, cheapest per request
    first; then the rest in rank_key order (unpriced GPUs, no prediction). Ties: rank_key."""
    c = cost_per_served_request(o, request_throughput)
    return (0, c, *rank_key(o)) if c is not None else (1, 0.0, *rank_key(o))


def _approximations(spec, base: dict, candidates: list) -> tuple:
    """Why every option's figures are approximate: an option's own reasons (they share the model
    and --limit-mm-per-prompt), else the same rule on the base arguments."""
    if candidates:
        return candidates[0].plan.approximations
    from kvplan.capacity.estimate import estimate_approximations

    try:
        rules = versions.select(base.get("vllm_version") or versions.DEFAULT_VERSION)
    except KvplanError:
        return spec.approximations
    return estimate_approximations(spec, base.get("limit_mm_per_prompt"), rules)


def search(
    spec,
    target: Target,
    space: SearchSpace,
    base_args: dict | None = None,
    *,
    prices: dict[str, float] | None = None,
    workload=None,
    env: dict[str, str] | None = None,
) -> SearchResult:
    """Find the options that start and meet ``target``.

    Args:
        spec: the parsed ModelSpec (parsed once; reused for every planner call).
        base_args: other EngineArgs fields (gpu_memory_utilization, max_num_seqs, ...).
        prices: USD per GPU-hour by profile id, overriding the profiles' price_per_hour_usd.
        workload: a kvplan.capacity.workload.WorkloadModel; engine concurrency then counts real lengths.
        env: the environment vLLM would start with (VLLM_ALLOW_LONG_MAX_MODEL_LEN; None = unset).
    Returns:
        SearchResult; ``refusal`` is set (one line naming the flags) when no combination reached
        the sizing step - every one refused for the flags' own values (parallel sizes vLLM
        refuses, a quantization the checkpoint lacks, engines above max_gpus or a node, fp8
        where no GPU has it) - or when every engine sized was refused for
        --gpu-memory-utilization itself (above the memory free at start-up; ``refusal_hint``
        then names the largest value that works): the CLI reports that as bad input, not as
        "nothing fits".
    Raises:
        KvplanError: the target itself is invalid (max_model_len not a positive number of tokens
            or above the model's limit, concurrency not a finite number > 0) - exit 2.
    Rule source: kvplan.capacity.estimate (the version's rules); see the module docstring for the search rules.
    """
    from pydantic import ValidationError

    from kvplan.capacity.estimate import EngineArgs, plan

    t0 = time.perf_counter()
    c = target.concurrency
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not (math.isfinite(c) and c > 0):
        raise KvplanError(f"--concurrency: must be a finite number > 0, got {c!r}")
    m = target.max_model_len
    if isinstance(m, bool) or not isinstance(m, int) or m < 1:
        raise KvplanError(f"--max-model-len: must be a positive number of tokens, got {m!r}")
    from kvplan.capacity.estimate import allow_long_max_model_len

    if target.max_model_len > spec.max_len_limit and not allow_long_max_model_len(env):
        raise KvplanError(
            f"--max-model-len {target.max_model_len}: larger than the model's limit ({spec.max_len_limit} tokens); vLLM refuses it",
            hint=f"use --max-model-len {spec.max_len_limit} or less (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in vLLM)",
        )
    base = dict(base_args or {})
    # The version named in messages (an unknown one is refused by each estimate, as before).
    vllm = base.get("vllm_version") or versions.DEFAULT_VERSION
    prices = dict(prices or {})
    skipped: list[Skipped] = []
    candidates: list[Option] = []
    near: list[tuple[tuple, Option | None, str]] = []
    evaluated = combos = sized = 0
    invalid_parallel: dict[tuple[int, int], str] = {}
    util_refused: list = []  # sized plans refused for requesting more than the free memory
    tp_engines: dict = {}  # a MoE model's best TP x PP engine per (GPU, kv, quant): dp_ep_notes

    def skip(gpu, tp, pp, kv, q, cat, why, flag=None):
        skipped.append(Skipped(gpu.id, tp, pp, kv, q, cat, why, flag))

    ckpt = spec.quantization if spec.quantization is not None and spec.quantization.source == "checkpoint" else None
    prequantized = (ckpt.vllm_name or ckpt.method) if ckpt is not None else None
    checkpoint_fp8_kv = ckpt is not None and ckpt.kv_cache_fp8

    for gpu in space.gpus:
        price = prices.get(gpu.id, gpu.price_per_hour_usd)
        for kv in space.kv_cache_dtypes:
            for q in space.quantizations:
                for tp in space.tensor_parallel_sizes:
                    for pp in space.pipeline_parallel_sizes:
                        combos += 1
                        engine = tp * pp
                        if q is not None and prequantized and None in space.quantizations:
                            skip(gpu, tp, pp, kv, q, "same_engine", f"--quantization {q}: the checkpoint is already quantized ({prequantized}); the option without --quantization uses it as it is")
                            continue
                        if kv != "auto" and kv.startswith("fp8") and checkpoint_fp8_kv and "auto" in space.kv_cache_dtypes:
                            skip(gpu, tp, pp, kv, q, "same_engine", f"--kv-cache-dtype {kv}: the checkpoint's quantization config already makes `auto` store the KV cache in fp8")
                            continue
                        if kv.startswith("fp8") and not gpu.fp8_supported and space.require_fp8_support:
                            skip(gpu, tp, pp, kv, q, "no_fp8", f"--kv-cache-dtype {kv}: {gpu.display_name} has no fp8 support; kvplan does not propose an fp8 KV cache there", "--kv-cache-dtype")
                            continue
                        if q == "fp8" and not _fp8_weights_ok(gpu):
                            skip(gpu, tp, pp, kv, q, "no_fp8", f"--quantization fp8: fp8 weights need compute capability >= 7.5 (vLLM {vllm} Fp8Config); {gpu.display_name} has less", "--quantization")
                            continue
                        if tp > space.gpus_per_node:
                            skip(gpu, tp, pp, kv, q, "tp_exceeds_node", f"--tensor-parallel-size {tp}: exceeds a node of {space.gpus_per_node} GPUs (TP stays within a node; PP spans nodes)")
                            continue
                        if engine > space.max_gpus:
                            skip(gpu, tp, pp, kv, q, "max_gpus", f"--max-gpus {space.max_gpus}: TP x PP = {engine} GPUs exceeds it")
                            continue
                        if (tp, pp) in invalid_parallel:
                            skip(gpu, tp, pp, kv, q, "invalid_parallel", invalid_parallel[(tp, pp)])
                            continue
                        try:
                            args = EngineArgs(
                                **{
                                    **base,
                                    "tensor_parallel_size": tp,
                                    "pipeline_parallel_size": pp,
                                    "kv_cache_dtype": kv,
                                    "quantization": q,
                                    "max_model_len": target.max_model_len,
                                }
                            )
                            evaluated += 1
                            p = plan(spec, gpu, args, env)
                        except (KvplanError, ValidationError) as exc:
                            if isinstance(exc, KvplanError):
                                msg = exc.message
                                parallel = isinstance(exc, EstimateRefusal) and exc.kind is RefusalKind.INVALID_PARALLEL
                            else:
                                arg, msg = _engine_args_error(exc)
                                parallel = arg in ("tensor_parallel_size", "pipeline_parallel_size")
                            if parallel:
                                invalid_parallel[(tp, pp)] = msg
                                skip(gpu, tp, pp, kv, q, "invalid_parallel", msg)
                            else:
                                skip(gpu, tp, pp, kv, q, "unsupported", msg)
                            continue
                        sized += 1
                        if not p.fits and spec.moe is not None:
                            # one DP 1 engine does not start: DP shards the experts (capacity/ranks.py)
                            moe = moe_dp_options(spec, gpu, args, env, target, space.max_gpus // engine,
                                                 space.max_gpus // engine, price, space.gpus_per_node, workload,
                                                 space.expert_parallel, space.latency_layouts)
                            if moe:
                                candidates += moe
                                continue
                        if not p.fits:
                            if p.failure_info is not None and p.failure_info.kind is StartOutcome.UTILIZATION_REFUSED:
                                util_refused.append(p)
                            skip(gpu, tp, pp, kv, q, "does_not_start", p.failure or "does not start")
                            shape = f"{engine}x {gpu.display_name} (TP={tp}, PP={pp}, kv={kv}, quant={q or 'none'})"
                            lim = p.largest_max_model_len or 0
                            kv_bytes = min(s.budget.kv_cache_bytes for s in p.stages)
                            why = (f"{shape} starts only with --max-model-len {lim}" if lim else f"{shape} does not start: {p.failure}")
                            near.append(((0, lim, kv_bytes), None, why))
                            continue
                        cap = None
                        if workload is not None:
                            cap = workload.capacity(p)
                            per_engine = cap.requests
                            binding = cap.binding
                        else:
                            seqs = p.effective["max_num_seqs"]
                            per_engine = min(p.max_concurrency, float(seqs))
                            binding = "kv_cache" if p.max_concurrency < seqs else "max_num_seqs"
                        if per_engine <= 0:
                            skip(gpu, tp, pp, kv, q, "does_not_start", "no request fits")
                            continue
                        if spec.moe is not None:
                            note_tp_engine(tp_engines, gpu.id, kv, q, engine, per_engine, tp, pp)
                        max_dp = space.max_gpus // engine
                        # the same engine with decode context parallel over its TP ranks (more requests per engine)
                        if space.decode_context_parallel:
                            candidates += dcp_options(spec, gpu, args, env, target, max_dp, price,
                                                      space.gpus_per_node, workload)
                        dp = max(1, math.ceil(target.concurrency / per_engine - 1e-9))
                        if dp > max_dp:
                            best = Option(p, max_dp, per_engine, price, binding, target, space.gpus_per_node, cap)
                            near.append(((1, best.achieved / target.concurrency, 0), best, ""))
                            skip(
                                gpu, tp, pp, kv, q, "below_target",
                                f"one engine serves {per_engine:.2f} requests; {count_text(target.concurrency)} needs {dp} replicas "
                                f"({dp * engine} GPUs) > --max-gpus {space.max_gpus}",
                            )
                            continue
                        if spec.moe is not None and (dp > 1 or space.latency_layouts):
                            # vLLM shards a MoE model's experts over its DP engines (capacity/ranks.py):
                            # --data-parallel-size is not a replica of this engine; plan the DP layouts
                            # (with --slo also for an engine that holds the target alone: latency)
                            candidates += moe_dp_options(
                                spec, gpu, args, env, target, dp, max_dp, price, space.gpus_per_node, workload,
                                space.expert_parallel, space.latency_layouts,
                            )
                            if dp > 1:
                                continue
                        candidates.append(Option(p, dp, per_engine, price, binding, target, space.gpus_per_node, cap))
                        if space.latency_layouts and spec.moe is None:  # more replicas, smaller batches each
                            candidates += [Option(p, d, per_engine, price, binding, target, space.gpus_per_node, cap)
                                           for d in latency_dp_sizes(dp, max_dp)]

    # Best per (GPU, GPU count, kv dtype, quantization): the same bill, the simplest shape. With
    # --slo every shape stays (their latencies differ; the SLO screen ranks them all).
    best: dict[tuple, Option] = {}
    for o in candidates:
        k = (o.gpu.id, o.num_gpus, o.kv_cache_dtype, o.quantization)
        if space.latency_layouts:
            a = o.plan.args
            k += (o.tensor_parallel_size, o.pipeline_parallel_size, a.data_parallel_size, a.enable_expert_parallel,
                  a.decode_context_parallel_size)
        if k not in best or rank_key(o) < rank_key(best[k]):
            best[k] = o
    kept, dominated = [], []
    pool = sorted(best.values(), key=lambda o: o.num_gpus)
    facts = [(o.gpu.id, o.num_gpus, o.hourly_cost, o.kv_cache_dtype.startswith("fp8"), bool(o.quantization)) for o in pool]
    for i, o in enumerate(pool):
        by = next((pool[j] for j in range(len(pool)) if j != i and _dominates(facts[j], facts[i])), None)
        if by is None:
            kept.append(o)
        else:
            dominated.append(o)
            skipped.append(
                Skipped(o.gpu.id, o.tensor_parallel_size, o.pipeline_parallel_size, o.kv_cache_dtype, o.quantization, "dominated",
                        f"{o.label()} is dominated by {by.label()} (no more GPUs, no higher cost, no lower precision)")
            )
    kept.sort(key=rank_key)
    dominated.sort(key=rank_key)

    closest, note, refusal, refusal_hint = None, None, None, None
    if not kept and not sized and skipped:
        refusal = note = refusal_message(skipped, space, version=vllm)
    elif not kept and sized and len(util_refused) == sized:
        # Every engine sized was refused for --gpu-memory-utilization itself (a request above the
        # memory free at start-up, on every GPU tried): the flag's value, not the hardware, is the
        # problem - bad input (docs/plan.md: flag values no combination can satisfy), no "closest".
        note, refusal_hint = _utilization_refusal(util_refused, base.get("gpu_memory_utilization"))
        refusal = note
    elif not kept and near:
        near.sort(key=lambda t: (t[0], -(t[1].num_gpus if t[1] else 0)), reverse=True)
        top = near[0]
        closest = top[1]
        if closest is not None:
            note = f"closest: {closest.label()} serves {closest.achieved:.2f} of {count_text(target.concurrency)} requests ({closest.achieved / target.concurrency:.0%})"
        else:
            note = "closest: " + top[2]
    elif not kept:
        note = "no engine that starts serves a request (see --explain)"
    unpriced = sorted({o.gpu.id for o in kept if o.price_per_gpu_hour is None})
    return SearchResult(
        target=target,
        options=kept,
        dominated=dominated,
        skipped=skipped,
        closest=closest,
        closest_note=note,
        evaluated=evaluated,
        combinations=combos,
        elapsed_s=time.perf_counter() - t0,
        unpriced=unpriced,
        refusal=refusal,
        refusal_hint=refusal_hint,
        approximations=_approximations(spec, base, candidates),
        layout_notes=dp_ep_notes(spec, kept, tp_engines, env, workload),
    )
