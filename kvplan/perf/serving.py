"""One serving prediction: kvplan's plan (the exact pool and the resolved flags) -> the scheduler
emulator (kvplan/perf/emulator.py) timed by a step-time function -> the client's metrics, the
saturation rate and the labels the numbers carry.

Nothing is defaulted silently here: the pool, block size, KV-cache groups, --max-model-len,
--max-num-seqs, --max-num-batched-tokens, prefix caching and async scheduling are the plan's
resolved values (kvplan/capacity/estimate.py ``Plan.effective``, the version's defaults filled
in); chunked prefill and the long-prefill threshold are the vLLM version's scheduler defaults
(engines/vllm/vX_Y/scheduler.py), since kvplan takes no flag for them.

Units: seconds (float), requests/s, tokens/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from kvplan.errors import EXIT_FAIL, KvplanError
from kvplan.perf.blocks import groups_from_layout
from kvplan.perf.emulator import EngineConfig, SimulationResult, simulate
from kvplan.perf.metrics import Summary, is_stable, kv_usage_over_time, summarize
from kvplan.perf.workload import ClosedLoop, Lengths, OpenLoop, SharedPrefix, make_requests

UNCALIBRATED_LABEL = "uncalibrated (physics priors)"
# Open-loop runs of the saturation search send this many requests at most (each rate is one run).
SATURATION_REQUESTS = 200


@dataclass(frozen=True)
class Load:
    """How the client sends: a closed loop at ``concurrency`` or an open loop at ``request_rate``.

    Attributes:
        kind: "closed" or "open".
        value: concurrency (requests in flight, int >= 1) or request rate (requests/s, > 0, inf = all at once).
    """

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in ("closed", "open"):
            raise KvplanError(f"load: unknown kind {self.kind!r}")
        if self.kind == "closed" and not (self.value >= 1 and float(self.value).is_integer()):
            raise KvplanError(f"--concurrency: must be a whole number >= 1, got {self.value:g}")
        if self.kind == "open" and not self.value > 0:
            raise KvplanError(f"--request-rate: must be > 0 requests/s, got {self.value:g}")

    def workload(self, requests: tuple, seed: int):
        """The emulator's ClosedLoop / OpenLoop over ``requests``."""
        if self.kind == "closed":
            return ClosedLoop(requests, int(self.value))
        return OpenLoop(requests, float(self.value), seed=seed)

    def describe(self) -> str:
        return f"closed loop, concurrency {int(self.value)}" if self.kind == "closed" else f"open loop, {self.value:g} requests/s (Poisson)"


@dataclass(frozen=True)
class Calibration:
    """What the step times stand on.

    Attributes:
        status: "uncalibrated" or "fitted".
        label: UNCALIBRATED_LABEL or "fitted on N records (...)".
        source: the coefficients' provenance line.
    """

    status: str
    label: str
    source: str


def calibration_of(efficiency) -> Calibration:
    """The label of a step model's coefficients (kvplan/perf/coefficients.py Efficiency)."""
    if not efficiency.calibrated:
        return Calibration("uncalibrated", UNCALIBRATED_LABEL, efficiency.source)
    on = list(efficiency.fit.get("fitted_on") or [])
    shown = ", ".join(map(str, on[:3])) + (", ..." if len(on) > 3 else "")
    return Calibration("fitted", f"fitted on {len(on)} records ({shown})", efficiency.source)


def engine_config(plan, *, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None) -> EngineConfig:
    """The emulator's engine for a plan that starts: its pool, groups and resolved flags
    (``max_num_seqs`` / ``max_num_batched_tokens`` override the plan's, for the same pool).

    Raises:
        KvplanError: the plan does not start (exit 1, vLLM's reason), or a KV-cache group the
            emulator does not model (exit 2).
    """
    if not plan.fits:
        raise KvplanError(f"vLLM would not start: {plan.failure}", exit_code=EXIT_FAIL)
    e = plan.effective
    return EngineConfig(
        num_gpu_blocks=plan.num_gpu_blocks,
        block_size=plan.block_size,
        max_model_len=int(e["max_model_len"]),
        max_num_batched_tokens=int(max_num_batched_tokens or e["max_num_batched_tokens"]),
        max_num_seqs=int(max_num_seqs or e["max_num_seqs"]),
        groups=groups_from_layout(plan.layout),
        enable_prefix_caching=bool(e["enable_prefix_caching"]),
        async_scheduling=bool(e["async_scheduling"]),
        vllm_version=str(e["vllm_version"]),
    )


# Layer kinds of a hybrid model that the step-time model and the scheduler emulator do not model,
# and how a message names them (model/spec.py LayerKind values).
_HYBRID_LAYER_NAMES = {"mamba": "Mamba", "linear_attention": "GDN (linear-attention)", "none": "KV-less ('none')"}
# KV-cache group kinds of such models (engines/vllm/vX_Y/allocator.py KVCacheGroup.kind).
_HYBRID_GROUP_NAMES = {"mamba": "Mamba", "gdn": "GDN (linear-attention)", "linear_attention": "GDN (linear-attention)"}


def check_modelled(plan) -> None:
    """kvplan's serving model covers the plan's model: no Mamba, GDN (linear-attention) or
    KV-less ('none') layers, and no KV-cache group of such layers. This is a limitation of
    kvplan (its step-time rules and block emulator cover attention only), not bad input; the
    number is refused because kvplan cannot stand behind it.

    Raises:
        KvplanError: exit 2, "kvplan perf does not model <kind> layers yet (<model>): serving
            performance is not predicted for hybrid models".
    """
    kinds = [k.value for k in plan.spec.layer_kinds if k.value in _HYBRID_LAYER_NAMES]
    names = [_HYBRID_LAYER_NAMES[k] for k in dict.fromkeys(kinds)]
    if not names and plan.layout is not None:
        names = list(dict.fromkeys(_HYBRID_GROUP_NAMES[g.kind] for g in plan.layout.groups if g.kind in _HYBRID_GROUP_NAMES))
    if names:
        raise KvplanError(
            f"kvplan perf does not model {' and '.join(names)} layers yet ({plan.spec.name}): "
            "serving performance is not predicted for hybrid models",
            hint="a kvplan limitation, not a problem with the flags; `kvplan estimate` still sizes the KV cache",
        )


def check_shared_prefix(shared_prefix: SharedPrefix | None, lengths: Lengths) -> None:
    """The shared prefix fits inside every prompt (a prompt starts with it; kvplan never clips it
    silently).

    Raises:
        KvplanError: exit 2 naming --shared-prefix, the prefix and the shortest prompt.
    """
    if shared_prefix is None or not shared_prefix.tokens or not shared_prefix.fraction:
        return
    shortest = min(p for p, _ in lengths.pairs)
    if shared_prefix.tokens > shortest:
        flag = "--input-len" if lengths.description.startswith("fixed ") else "the shortest --workload prompt"
        raise KvplanError(
            f"--shared-prefix: the {shared_prefix.tokens}-token prefix is longer than the {shortest}-token prompt ({flag})",
            hint="the prefix is part of the prompt: make it at most the prompt length",
        )


# A closed loop of fewer requests than this many times its concurrency is mostly ramp-up and drain.
CLOSED_LOOP_MIN_RATIO = 3


def short_run_note(load: Load, num_requests: int) -> str | None:
    """The caveat of a closed loop too short for steady state (fewer than CLOSED_LOOP_MIN_RATIO x
    concurrency requests), else None."""
    if load.kind != "closed" or num_requests >= CLOSED_LOOP_MIN_RATIO * load.value:
        return None
    return (f"closed loop: {num_requests} requests at concurrency {int(load.value)} (fewer than "
            f"{CLOSED_LOOP_MIN_RATIO}x the concurrency): the run is mostly ramp-up and drain, not steady state; "
            "raise --num-requests")


def check_lengths(lengths: Lengths, max_model_len: int) -> None:
    """Every request (prompt + output) fits --max-model-len (vLLM refuses a longer one).

    Raises:
        KvplanError: names the flag the lengths came from (--input-len/--output-len for fixed
            lengths, else --workload), the longest pair and the limit.
    """
    worst = max(lengths.pairs, key=lambda po: po[0] + po[1])
    flag = "--input-len/--output-len" if lengths.description.startswith("fixed ") else "--workload"
    if worst[0] + worst[1] > max_model_len:
        raise KvplanError(
            f"{flag}: a request of {worst[0]} + {worst[1]} tokens exceeds --max-model-len {max_model_len}",
            hint="shorten the request or raise --max-model-len",
        )


@dataclass(frozen=True)
class Saturation:
    """The saturation rate and the open-loop runs that found it.

    Attributes:
        rate: the highest stable open-loop rate found, requests/s (metrics.is_stable by bisection).
        requests: requests each rate's run sent.
        points: (request rate, stable, Summary) per run, ascending rate (latency against load).
        bounded: False when the search stopped at the edge of the rates it tried.
        lower_bound: a higher rate read as overloaded on a run too short to tell (judged): the
            true rate may be higher.
    """

    rate: float
    requests: int
    points: tuple[tuple[float, bool, Summary], ...]
    bounded: bool = True
    lower_bound: bool = False

    @property
    def caveat(self) -> str:
        """The approximation this search makes (every output names it)."""
        if self.lower_bound:
            return (
                f"saturation rate: a lower bound: {self.requests}-request open-loop runs are too short to tell "
                "whether a higher rate is stable (fewer than 10x the requests in flight); raise kvplan perf --num-requests"
            )
        return f"saturation rate: bisection on {self.requests}-request open-loop runs (metrics.is_stable)"


def judged(result: SimulationResult, n: int) -> bool:
    """Whether an open-loop run of ``n`` requests is long enough for metrics.is_stable to tell:
    its window (the middle half of the sending times) must start after the first requests could
    finish, i.e. the first quarter of the requests must outnumber those in flight
    (Little's law: completed requests/s x mean E2E)."""
    s = summarize(result)
    in_flight = s.request_throughput * s.e2e.mean
    return math.isfinite(in_flight) and n >= 4 * in_flight


def queue_drains(result: SimulationResult) -> bool:
    """The waiting queue was empty after scheduling in at least half the steps of the middle half
    of the sending window: arrivals are admitted as they come, nothing piles up (metrics.is_stable
    alone counts finishes against arrivals, and Poisson noise between two windows of a short run
    can exceed its 2 % tolerance when nothing queues)."""
    arrivals = sorted(r.arrival_s for r in result.requests)
    n = len(arrivals)
    lo, hi = arrivals[n // 4], arrivals[(3 * n) // 4]
    window = [st for st in result.steps if lo <= st.start_s < hi]
    return bool(window) and sum(1 for st in window if st.num_waiting == 0) >= 0.5 * len(window)


def find_saturation(config: EngineConfig, step_time: Callable, lengths: Lengths, *, seed: int = 0,
                    shared_prefix: SharedPrefix | None = None, guess: float, num_requests: int = SATURATION_REQUESTS,
                    rel_tol: float = 0.05) -> Saturation:
    """The open-loop rate where the engine stops keeping up (metrics.is_stable), searched on a
    log scale around ``guess`` requests/s (bracketed by halving/doubling, at most 6 times each
    way, then bisection to ``rel_tol``), ``num_requests`` seeded requests per rate.

    Raises:
        KvplanError: guess not > 0, num_requests < 8.
    """
    if not (guess > 0 and math.isfinite(guess)):
        raise KvplanError(f"saturation: needs a positive starting rate, got {guess}")
    reqs = tuple(make_requests(num_requests, lengths, seed=seed, shared_prefix=shared_prefix))
    runs: dict[float, tuple[bool, Summary]] = {}
    unjudged: list[float] = []

    def stable(rate: float) -> bool:
        if rate not in runs:
            res = simulate(config, step_time, OpenLoop(reqs, rate, seed=seed))
            long_enough = judged(res, num_requests)
            ok = is_stable(res) or (long_enough and queue_drains(res))
            if not ok and not long_enough:
                unjudged.append(rate)  # read as overloaded, but the run could not tell
            runs[rate] = (ok, summarize(res))
        return runs[rate][0]

    low, high = guess / 2, guess * 2
    bounded = True
    for _ in range(6):
        if stable(low):
            break
        high, low = low, low / 2
    else:
        bounded = False
    for _ in range(6):
        if not stable(high):
            break
        low, high = high, high * 2
    else:
        bounded = False
    if bounded:
        while high / low > 1 + rel_tol:  # bisection on a log scale (as metrics.saturation_rate)
            mid = math.sqrt(low * high)
            if stable(mid):
                low = mid
            else:
                high = mid
        rate = low
    else:
        rate = high if stable(high) else low
    points = tuple((r, s, summ) for r, (s, summ) in sorted(runs.items()))
    lower_bound = any(r > rate for r in unjudged)
    return Saturation(rate, num_requests, points, bounded, lower_bound)


@dataclass(frozen=True)
class PerfResult:
    """One predicted serving run.

    Attributes:
        config: the engine emulated. load: how requests were sent. lengths: their description.
        num_requests / seed: the workload's size and seed.
        summary: the client's metrics. result: the emulator's per-step/per-request records.
        kv_usage: (step end s, used fraction) per step.
        saturation: the saturation rate (None when not asked for).
        calibration: the step model's calibration label.
        approximate: every reason the numbers are approximate (step model, emulator, estimate).
    """

    config: EngineConfig
    load: Load
    lengths: str
    num_requests: int
    seed: int
    shared_prefix: SharedPrefix | None
    summary: Summary
    result: SimulationResult
    kv_usage: list
    saturation: Saturation | None
    calibration: Calibration
    approximate: tuple[str, ...] = field(default=())


def predict(plan, step_model, lengths: Lengths, load: Load, *, num_requests: int = 1000, seed: int = 0,
            shared_prefix: SharedPrefix | None = None, saturation: bool = True,
            config: EngineConfig | None = None, step_time: Callable | None = None) -> PerfResult:
    """Emulate ``num_requests`` requests of ``lengths`` sent as ``load`` to the plan's engine,
    timed by ``step_model`` (kvplan/perf/step_time.py StepModel; ``step_time`` replaces its
    ``seconds`` when given, e.g. a constant stub in tests), and find the saturation rate.

    Raises:
        KvplanError: the plan does not start (exit 1); a hybrid model (check_modelled), a
            shared prefix longer than a prompt, a request longer than --max-model-len, bad load
            or a layout the emulator does not model (exit 2).
    """
    check_modelled(plan)
    check_shared_prefix(shared_prefix, lengths)
    cfg = config or engine_config(plan)
    check_lengths(lengths, cfg.max_model_len)
    timer = step_time or step_model.seconds
    reqs = tuple(make_requests(num_requests, lengths, seed=seed, shared_prefix=shared_prefix))
    res = simulate(cfg, timer, load.workload(reqs, seed))
    summ = summarize(res)
    sat = None
    if saturation:
        # is_stable compares finishes and arrivals over the middle half of the sending window,
        # which must start well after the first requests finish: 10x the requests in flight
        # (Little's law: throughput x mean E2E), at least SATURATION_REQUESTS, at most num_requests.
        in_flight = summ.request_throughput * summ.e2e.mean if math.isfinite(summ.e2e.mean) else 0.0
        wanted = max(SATURATION_REQUESTS, math.ceil(10 * in_flight))
        n = max(SATURATION_REQUESTS, min(num_requests, wanted))
        sat = find_saturation(cfg, timer, lengths, seed=seed, shared_prefix=shared_prefix,
                              guess=max(summ.request_throughput, 1e-6), num_requests=n)
        if n < wanted and not sat.lower_bound:
            # runs shorter than 10x the requests in flight: a rate read as overloaded may not be,
            # so the rate found is only a lower bound (never "stable" up to it on short evidence)
            from dataclasses import replace

            sat = replace(sat, lower_bound=True)
    labels = tuple(step_model.labels) if step_model is not None else ()
    short = short_run_note(load, num_requests)
    labels = labels + ((short,) if short else ())
    approx = tuple(dict.fromkeys(labels + tuple(res.approximate) + tuple(a.reason for a in plan.approximations)
                                 + ((sat.caveat,) if sat is not None else ())))
    cal = calibration_of(step_model.efficiency) if step_model is not None else Calibration(
        "uncalibrated", "step time given by the caller (not a GPU model)", "caller")
    return PerfResult(cfg, load, lengths.description, num_requests, seed, shared_prefix, summ, res,
                      kv_usage_over_time(res), sat, cal, approx)
