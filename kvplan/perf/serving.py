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
from dataclasses import dataclass, field, replace
from typing import Callable

from kvplan.errors import EXIT_FAIL, KvplanError
from kvplan.perf.blocks import groups_from_layout
from kvplan.perf.emulator import EngineConfig, SimulationResult, simulate
from kvplan.perf.metrics import Summary, kv_usage_over_time, steady_state, summarize
from kvplan.perf.workload import ClosedLoop, Lengths, OpenLoop, SharedPrefix, make_requests

UNCALIBRATED_LABEL = "uncalibrated (physics priors)"
# The latency-against-load runs of the saturation search send this many requests at most (one run per rate).
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
        if self.kind == "closed":
            return f"closed loop, concurrency {int(self.value)}"
        if math.isinf(self.value):
            return "open loop, every request sent at once"
        return f"open loop, {self.value:g} requests/s (Poisson)"


@dataclass(frozen=True)
class Calibration:
    """What the step times stand on.

    Attributes:
        status: "uncalibrated", "fitted" or "transferred" (a fit of another GPU of the same
            architecture and/or an earlier vLLM version: kvplan/perf/coefficients.py resolve).
        label: UNCALIBRATED_LABEL, "fitted on N records (...)" or "transferred from <GPU>
            (<version>): <the measured cross-GPU error, or that it is unmeasured>; ...".
        source: the coefficients' provenance line.
    """

    status: str
    label: str
    source: str


HYBRID_LABEL = "uncalibrated for hybrid layers (no hybrid record)"


def calibration_of(efficiency, hybrid: bool = False) -> Calibration:
    """The label of a step model's coefficients (kvplan/perf/coefficients.py Efficiency). A
    ``hybrid`` model (recurrent layers, which no fit covered) is "uncalibrated" whatever the
    coefficients: its label says what the other terms stand on."""
    if hybrid:
        inner = calibration_of(efficiency)
        rest = "physics priors" if inner.status == "uncalibrated" else inner.label
        return Calibration("uncalibrated", f"{HYBRID_LABEL}; other terms: {rest}", inner.source)
    if efficiency.status == "transferred":
        return Calibration("transferred", efficiency.transfer or "transferred", efficiency.source)
    if not efficiency.calibrated:
        return Calibration("uncalibrated", UNCALIBRATED_LABEL, efficiency.source)
    on = list(efficiency.fit.get("fitted_on") or [])
    shown = ", ".join(map(str, on[:3])) + (", ..." if len(on) > 3 else "")
    return Calibration("fitted", f"fitted on {len(on)} records ({shown})", efficiency.source)


def with_request_path(config: EngineConfig, efficiency) -> EngineConfig:
    """``config`` with the coefficients' request path (kvplan/perf/coefficients.py Efficiency):
    ``request_latency_ms`` (send -> WAITING: HTTP, the API server, the hop to the engine core)
    and ``request_serial_ms`` (the API server's time per request, one at a time) as the emulator's
    arrival_latency_s / arrival_service_s. ``efficiency`` None: no request path (a bare engine,
    e.g. a constant step time in tests)."""
    if efficiency is None:
        return config
    return replace(config, arrival_latency_s=efficiency.request_latency_ms / 1e3,
                   arrival_service_s=efficiency.request_serial_ms / 1e3)


def engine_config(plan, *, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                  efficiency=None) -> EngineConfig:
    """The emulator's engine for a plan that starts: its pool, groups and resolved flags
    (``max_num_seqs`` / ``max_num_batched_tokens`` override the plan's, for the same pool), and
    the request path of ``efficiency`` (with_request_path; None: none).

    Raises:
        KvplanError: the plan does not start (exit 1, vLLM's reason), or a KV-cache group the
            emulator does not model (exit 2).
    """
    if not plan.fits:
        raise KvplanError(f"vLLM would not start: {plan.failure}", exit_code=EXIT_FAIL)
    e = plan.effective
    return with_request_path(EngineConfig(
        num_gpu_blocks=plan.num_gpu_blocks,
        block_size=plan.block_size,
        max_model_len=int(e["max_model_len"]),
        max_num_batched_tokens=int(max_num_batched_tokens or e["max_num_batched_tokens"]),
        max_num_seqs=int(max_num_seqs or e["max_num_seqs"]),
        groups=groups_from_layout(plan.layout),
        enable_prefix_caching=bool(e["enable_prefix_caching"]),
        async_scheduling=bool(e["async_scheduling"]),
        vllm_version=str(e["vllm_version"]),
    ), efficiency)


# Layer kinds the step-time model and the scheduler emulator do not model, and how a message
# names them (model/spec.py LayerKind values). Mamba, GDN and short-conv layers are modelled
# (kvplan/perf/recurrent.py, blocks.py "state" groups).
_UNMODELLED_LAYER_NAMES = {"none": "KV-less ('none')"}


def check_modelled(plan) -> None:
    """kvplan's serving model covers the plan's model: no KV-less ('none') layers (a KV-sharing
    layer reads another layer's cache, which the step model does not cost). This is a limitation
    of kvplan, not bad input; the number is refused because kvplan cannot stand behind it.

    Raises:
        KvplanError: exit 2, "kvplan perf does not model <kind> layers yet (<model>)".
    """
    kinds = [k.value for k in plan.spec.layer_kinds if k.value in _UNMODELLED_LAYER_NAMES]
    names = [_UNMODELLED_LAYER_NAMES[k] for k in dict.fromkeys(kinds)]
    if names:
        raise KvplanError(
            f"kvplan perf does not model {' and '.join(names)} layers yet ({plan.spec.name}): "
            "serving performance is not predicted for this model",
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


# The most requests one run emulates. The emulator steps every request (about 3 s per 10,000
# requests of 1024/256 tokens on one core of the development machine, and every request's token
# times are kept for the percentiles), so 10 million would run for hours; the metrics settle within
# a few thousand requests (a closed loop's steady state starts after its first wave).
MAX_REQUESTS = 100_000
# the flag and its alias (vllm bench serve's name): an error names both, whichever the user typed
NUM_REQUESTS_FLAGS = "--num-requests/--num-prompts"


def check_num_requests(num_requests: int) -> None:
    """--num-requests (--num-prompts) within 1..MAX_REQUESTS.

    Raises:
        KvplanError: exit 2 naming the flag with its alias (NUM_REQUESTS_FLAGS) and the cap.
    """
    if num_requests < 1:
        raise KvplanError(f"{NUM_REQUESTS_FLAGS}: must be >= 1, got {num_requests}")
    if num_requests > MAX_REQUESTS:
        raise KvplanError(
            f"{NUM_REQUESTS_FLAGS}: at most {MAX_REQUESTS:,} requests are emulated, got {num_requests:,}",
            hint="the metrics settle within a few thousand requests; the emulator steps every request "
                 "(about 3 s per 10,000 requests of 1024/256 tokens)",
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


def overload_note(rate: float, saturation: float) -> str:
    """The caveat of an open loop above the saturation rate: its queue grows without bound, so its
    latencies grow with the run's length (--num-requests), not to a steady value."""
    what = "every request at once" if math.isinf(rate) else f"--request-rate {rate:g} req/s"
    return (f"overloaded: {what} is above the saturation rate {saturation:.2f} req/s; the waiting queue grows "
            "without bound, so TTFT and E2E grow with --num-requests (no steady state)")


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
    """The saturation rate: the highest request rate the engine sustains, and the runs that found
    it and show latency against load.

    Attributes:
        rate: requests/s, the most completions per second of the closed-loop runs (steady-state
            window, see closed_loop_capacity); open-loop arrivals below it are served in the long
            run, above it the waiting queue grows without bound.
        requests: requests the longest open-loop (latency against load) run sent (the one
            at the highest load; each sends open_loop_requests for its share of the rate).
        points: (request rate, stable, Summary) per open-loop run at LOAD_FRACTIONS of ``rate``,
            ascending; stable: the run kept up with its arrivals (metrics.kept_up); the Summary is
            the steady-state window's (metrics.steady_state: requests sent in the middle half
            of the sending window; request_throughput the rate served there).
        concurrency: requests in flight of the closed-loop run that reached ``rate``.
        bounded / lower_bound: kept for the JSON schema, always True / False: the search ends
            only where the rate stops rising, the pool binds or --max-num-seqs caps it.
        note: what the table's saturation line adds (cli/perf.py with_speculation: the search ran
            without speculative decoding); empty = nothing.
    """

    rate: float
    requests: int
    points: tuple[tuple[float, bool, Summary], ...]
    concurrency: int = 0
    bounded: bool = True
    lower_bound: bool = False
    note: str = ""

    @property
    def caveat(self) -> str:
        """How the rate was found (every output names it)."""
        if not self.concurrency:
            return ("saturation rate: the emulated engine's highest sustained throughput (this open-loop run's "
                    "completions; the closed-loop search found less)")
        return (f"saturation rate: the emulated engine's highest sustained throughput (closed loop, up to "
                f"{self.concurrency} requests in flight)")


# Load fractions of the saturation rate the latency-against-load runs use (below it only: above it
# the queue grows without bound, so a finite run's latency says only how long the run was), and
# the closed loop's smallest concurrency and length (in multiples of its concurrency) of the
# capacity search.
LOAD_FRACTIONS = (0.25, 0.5, 0.75, 0.9)
_CAPACITY_START = 8
_CAPACITY_RUN = 3
# The capacity search stops when doubling the concurrency adds less than this fraction.
_CAPACITY_GAIN = 0.02


def closed_loop_capacity(result: SimulationResult, concurrency: int) -> float:
    """Completions per second (requests/s) of a closed-loop run in its steady-state window: the
    finishes after the ``concurrency``-th (the first requests, sent together, have all been
    replaced) up to the (n - concurrency)-th (after it the tail runs with fewer requests in
    flight), over the time between those two finishes. Requests of one length finish in waves of
    ``concurrency``; the window then spans whole waves. The whole run when it is too short.

    Raises:
        KvplanError: fewer than 2 requests finished.
    """
    finishes = sorted(r.finish_s for r in result.requests)
    n = len(finishes)
    if n < 2:
        raise KvplanError("saturation: needs at least 2 finished requests")
    a, b = concurrency - 1, n - concurrency - 1
    if b - a >= max(8, concurrency // 2) and finishes[b] > finishes[a]:
        return (b - a) / (finishes[b] - finishes[a])
    start = min(r.arrival_s for r in result.requests)
    return n / (finishes[-1] - start) if finishes[-1] > start else math.inf


def find_saturation(config: EngineConfig, step_time: Callable, lengths: Lengths, *, seed: int = 0,
                    shared_prefix: SharedPrefix | None = None, num_requests: int = SATURATION_REQUESTS,
                    sustained: tuple[float, int] | None = None) -> Saturation:
    """The saturation rate of ``config`` for requests of ``lengths``: the highest steady-state
    throughput of closed-loop runs at concurrency 8, 16, 32, ... up to --max-num-seqs, stopping
    once doubling adds less than 2 % (twice in a row for mixed lengths, whose short runs are
    noisy) or the KV pool binds (fewer ran at once than were in flight, or some were preempted: a
    preempting run of the search is not counted -- its 3 x concurrency requests are mostly the
    first waves, before recomputation sets the pace, so it overstates). ``sustained`` =
    (requests/s, concurrency or 0) of a run the caller made of the same engine and requests
    (``predict``'s own run): the rate is never below it, since the engine was just seen
    sustaining it. (The search stops at its first preempting concurrency and keeps the best
    below it; a longer run at a higher concurrency, preempting, can finish more: recomputing a
    few requests costs less than the seats the lower concurrency leaves empty. The 70B trial
    reported 1.48 req/s saturation after a run at 1.58.) In queueing terms this is the service capacity: with Poisson arrivals below
    it the V1 scheduler's batches grow until they keep up (vLLM's throughput rises with the number
    of running requests), above it nothing can. Then ``num_requests``-request open-loop runs at
    LOAD_FRACTIONS of it give latency against load.

    Units: requests/s. Raises:
        KvplanError: num_requests < 8.
    Rule source: the emulator's V1 scheduler (per vLLM version), no stability heuristic.
    """
    if num_requests < 8:
        raise KvplanError(f"saturation: needs at least 8 requests per run, got {num_requests}")
    best, best_c, c = 0.0, 0, min(_CAPACITY_START, config.max_num_seqs)
    flat = 0  # doublings in a row that added less than _CAPACITY_GAIN (mixed lengths make one noisy)
    while True:
        reqs = tuple(make_requests(_CAPACITY_RUN * c, lengths, seed=seed, shared_prefix=shared_prefix))
        res = simulate(config, step_time, ClosedLoop(reqs, c))
        x = closed_loop_capacity(res, c)
        # the KV pool binds: it could not admit them all, or it preempted (recomputed) some; more
        # in flight only queue or thrash, and a short preempting run overstates (docstring)
        preempted = any(r.num_preemptions for r in res.requests)
        pool_bound = preempted or max((st.num_running for st in res.steps), default=0) < c
        if preempted and best > 0:
            break
        flat = 0 if x > best * (1 + _CAPACITY_GAIN) else flat + 1
        if x > best:
            best, best_c = x, c
        if flat >= (1 if lengths.description.startswith("fixed ") else 2) or pool_bound or c >= config.max_num_seqs:
            break
        c = min(2 * c, config.max_num_seqs)
    if sustained is not None and sustained[0] > best:
        best, best_c = sustained
    points, most = [], 0
    for f in LOAD_FRACTIONS:
        rate = f * best
        # Little's law: at f x the rate about f x best_c are in flight (latency no longer than at the rate)
        n = open_loop_requests(num_requests, math.ceil(f * best_c))
        reqs = tuple(make_requests(n, lengths, seed=seed, shared_prefix=shared_prefix))
        stable, summ = steady_state(simulate(config, step_time, OpenLoop(reqs, rate, seed=seed)))
        points.append((rate, stable, summ))
        most = max(most, n)
    return Saturation(best, most, tuple(points), best_c)


# An open-loop point sends at least this many times the saturation run's concurrency: Little's
# law puts about that many requests in flight near the rate, and the batch takes about one
# request's latency to fill; 4x leaves the middle half of the sending window in steady state.
_OPEN_LOOP_RUN = 4
# ... and at least this many: the verdict counts the arrivals of the middle half of the sending
# window, and with a handful (8 requests: 4) one late finish flips it.
_OPEN_LOOP_MIN = 100


def open_loop_requests(num_requests: int, concurrency: int) -> int:
    """Requests a latency-against-load run sends: ``num_requests``, raised to _OPEN_LOOP_MIN
    and to _OPEN_LOOP_RUN x ``concurrency`` (the requests in flight at the run's rate: the
    fraction of the closed loop's in flight at the saturation rate),
    at most MAX_REQUESTS. A run of 200 requests at 25 req/s, each taking 9 s, never reaches
    steady state: every request is sent before the batch fills, and its latencies are those of
    one burst draining (Qwen3-30B-A3B 1024/256 on H200: TPOT fell from 37.8 to 33.2 ms as the
    load rose)."""
    return min(max(num_requests, _OPEN_LOOP_MIN, _OPEN_LOOP_RUN * concurrency), MAX_REQUESTS)


def sustained_rate(result: SimulationResult, load: Load) -> tuple[float, int]:
    """(requests/s, concurrency or 0) a run sustained: a closed loop's steady-state completions
    (closed_loop_capacity, the search's own measure), an open loop's completions over the run
    (its summary's request throughput), whichever of the two is higher for a closed loop (a short
    closed loop's window may be the whole run)."""
    whole = summarize(result).request_throughput
    if load.kind == "closed":
        c = int(load.value)
        steady = closed_loop_capacity(result, c) if len(result.requests) >= 2 else 0.0
        return max(whole, steady if math.isfinite(steady) else 0.0), c
    return whole, 0


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
    check_num_requests(num_requests)
    check_modelled(plan)
    check_shared_prefix(shared_prefix, lengths)
    cfg = config or engine_config(plan, efficiency=step_model.efficiency if step_model is not None else None)
    check_lengths(lengths, cfg.max_model_len)
    timer = step_time or step_model.seconds
    reqs = tuple(make_requests(num_requests, lengths, seed=seed, shared_prefix=shared_prefix))
    res = simulate(cfg, timer, load.workload(reqs, seed))
    summ = summarize(res)
    sat = None
    if saturation:
        sat = find_saturation(cfg, timer, lengths, seed=seed, shared_prefix=shared_prefix,
                              num_requests=max(8, min(num_requests, SATURATION_REQUESTS)),
                              sustained=sustained_rate(res, load))
    labels = tuple(step_model.labels) if step_model is not None else ()
    if sat is not None and load.kind == "open" and load.value > sat.rate:
        labels = labels + (overload_note(load.value, sat.rate),)
    short = short_run_note(load, num_requests)
    labels = labels + ((short,) if short else ())
    approx = tuple(dict.fromkeys(labels + tuple(res.approximate) + tuple(a.reason for a in plan.approximations)
                                 + ((sat.caveat,) if sat is not None else ())))
    cal = calibration_of(step_model.efficiency, getattr(step_model, "hybrid", False)) if step_model is not None else Calibration(
        "uncalibrated", "step time given by the caller (not a GPU model)", "caller")
    return PerfResult(cfg, load, lengths.description, num_requests, seed, shared_prefix, summ, res,
                      kv_usage_over_time(res), sat, cal, approx)
