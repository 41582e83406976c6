"""Serving metrics of an emulated run, defined as vLLM's benchmark client defines them
(vllm bench serve, vLLM benchmarks/serve.py calculate_metrics). The saturation rate is
kvplan/perf/serving.py find_saturation's.

* TTFT: first token time - send time. E2E: last token time - send time.
* TPOT per request: (E2E - TTFT) / (output_tokens - 1), requests with one output token left out.
* ITL: every gap between consecutive tokens of a request, pooled over requests.
* Throughputs over the benchmark duration (first send to last token): output tokens/s, total
  (prompt + output) tokens/s, requests/s.
* Percentiles: linear interpolation between closest ranks (numpy.percentile's default, which the
  client uses).

Units: seconds (float), tokens/s, requests/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.perf.emulator import SimulationResult

PERCENTILES = (50, 90, 99)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between closest
    ranks (numpy.percentile, method="linear"); nan for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Distribution:
    """Mean and p50/p90/p99 of one latency (seconds); nan when there are no samples."""

    mean: float
    p50: float
    p90: float
    p99: float
    count: int

    @classmethod
    def of(cls, values: list[float]) -> "Distribution":
        mean = sum(values) / len(values) if values else math.nan
        return cls(mean, *(percentile(values, q) for q in PERCENTILES), len(values))

    def to_dict(self) -> dict:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p99": self.p99, "count": self.count}


@dataclass(frozen=True)
class Summary:
    """The run summarized.

    Attributes:
        duration_s: first send to last token.
        completed: requests finished.
        output_throughput / total_token_throughput: tokens/s; request_throughput: requests/s.
        ttft / tpot / itl / e2e: Distributions in seconds.
        preemptions: preemptions over all requests.
        kv_usage_mean: step-duration-weighted mean of held blocks / usable blocks (0..1).
        kv_usage_max: the highest step's.
        approximate: the emulator's reasons the numbers are approximate (empty = exact rules).
    """

    duration_s: float
    completed: int
    output_throughput: float
    total_token_throughput: float
    request_throughput: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    preemptions: int
    kv_usage_mean: float
    kv_usage_max: float
    approximate: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "duration_s": self.duration_s,
            "completed": self.completed,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
            "request_throughput": self.request_throughput,
            "ttft_s": self.ttft.to_dict(),
            "tpot_s": self.tpot.to_dict(),
            "itl_s": self.itl.to_dict(),
            "e2e_s": self.e2e.to_dict(),
            "preemptions": self.preemptions,
            "kv_usage_mean": self.kv_usage_mean,
            "kv_usage_max": self.kv_usage_max,
            "approximate": list(self.approximate),
        }


def summarize(result: SimulationResult) -> Summary:
    """The benchmark client's metrics of ``result`` (see the module docstring)."""
    reqs = result.requests
    if not reqs:
        raise KvplanError("workload: no requests were run")
    start = min(r.arrival_s for r in reqs)
    end = max(r.finish_s for r in reqs)
    duration = end - start
    out_tokens = sum(r.output_tokens for r in reqs)
    in_tokens = sum(r.prompt_tokens for r in reqs)
    ttft, tpot, e2e, itl = [], [], [], []
    for r in reqs:
        t = r.first_token_s - r.arrival_s
        e = r.finish_s - r.arrival_s
        ttft.append(t)
        e2e.append(e)
        if r.output_tokens > 1:
            tpot.append((e - t) / (r.output_tokens - 1))
        times = r.token_times_s
        itl.extend(b - a for a, b in zip(times, times[1:]))
    usable = result.kv_blocks_usable
    weighted = total = 0.0
    peak = 0.0
    for s in result.steps:
        d = s.end_s - s.start_s
        u = s.kv_blocks_used / usable
        weighted += u * d
        total += d
        peak = max(peak, u)
    rate = (lambda x: x / duration) if duration > 0 else (lambda x: math.inf)
    return Summary(
        duration_s=duration,
        completed=len(reqs),
        output_throughput=rate(out_tokens),
        total_token_throughput=rate(in_tokens + out_tokens),
        request_throughput=rate(len(reqs)),
        ttft=Distribution.of(ttft),
        tpot=Distribution.of(tpot),
        itl=Distribution.of(itl),
        e2e=Distribution.of(e2e),
        preemptions=sum(r.num_preemptions for r in reqs),
        kv_usage_mean=weighted / total if total else 0.0,
        kv_usage_max=peak,
        approximate=result.approximate,
    )


def kv_usage_over_time(result: SimulationResult) -> list[tuple[float, float]]:
    """(step end time s, held blocks / usable blocks) per step."""
    return [(s.end_s, s.kv_blocks_used / result.kv_blocks_usable) for s in result.steps]


# --- stable versus overloaded (docs/perf.md "Stable versus overloaded") ---------------------------
def _window(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(lo, hi, d) of a run's (send, finish) pairs sorted by send: the middle half of the sending
    window (25th to 75th percentile send time) and the unloaded latency d (the median
    send-to-finish time of the first quarter sent: no queue had built yet)."""
    n = len(pairs)
    lo, hi = pairs[n // 4][0], pairs[(3 * n) // 4][0]
    first = sorted(f - s for s, f in pairs[: max(1, n // 4)])
    return lo, hi, first[len(first) // 2]


def kept_up(sends: list[float], finishes: list[float], tolerance: float = 0.1) -> bool:
    """Whether an open-loop run kept up with its arrivals (seconds; one send and one finish per
    request, same order).

    Over the middle half of the sending window [lo, hi) A requests arrived; a server that keeps
    up finishes about as many in the same window shifted by its unloaded latency d (_window). An
    overloaded server finishes at most its capacity per second, below the arrival rate, and its
    latency grows, so fewer finish there. Stable when finished >= (1 - tolerance) x A. It does
    not need the run to be long against the latency (the bench records send for ~8 s and a
    2048/256 request takes 1-5 s). The rule of docs/perf.md "Stable versus overloaded", applied
    to measured (verify/bench/replay.py) and emulated runs alike.

    Raises:
        KvplanError: fewer than 8 requests or lengths differ.
    """
    if len(sends) != len(finishes) or len(sends) < 8:
        raise KvplanError("stability: needs at least 8 requests with a send and a finish time each")
    pairs = sorted(zip(sends, finishes))
    lo, hi, d = _window(pairs)
    if hi <= lo:
        return False
    arrived = sum(1 for s, _ in pairs if lo <= s < hi)
    finished = sum(1 for _, f in pairs if lo + d <= f < hi + d)
    return finished >= (1.0 - tolerance) * arrived


def steady_state(result: SimulationResult) -> tuple[bool, Summary]:
    """An open-loop run judged and measured in its steady state: (kept_up, the Summary of the
    requests sent in the middle half of the sending window, with ``request_throughput`` the
    those requests over the time from the first of them to finish to the last - the rate the
    engine served while arrivals were steady, comparable with the offered rate). The first
    quarter (the batch still filling) and the last (the queue draining with no arrivals, every
    step a decode step) are left out of the latencies: in a run short against its latency they
    would dominate them (TPOT falling as load rises was that artifact).

    Raises:
        KvplanError: fewer than 8 requests.
    """
    from dataclasses import replace

    reqs = result.requests
    if len(reqs) < 8:
        raise KvplanError("stability: needs at least 8 requests with a send and a finish time each")
    stable = kept_up([r.arrival_s for r in reqs], [r.finish_s for r in reqs])
    pairs = sorted((r.arrival_s, r.finish_s) for r in reqs)
    lo, hi, d = _window(pairs)
    middle = tuple(r for r in reqs if lo <= r.arrival_s < hi) or reqs
    summ = summarize(replace(result, requests=middle))
    # served: the middle requests over the time from their first finish to their last (a queue
    # that grows stretches it: fewer per second than arrived)
    ends = [r.finish_s for r in middle]
    served = len(middle) / (max(ends) - min(ends)) if len(middle) > 1 and max(ends) > min(ends) else summ.request_throughput
    return stable, replace(summ, request_throughput=served)
