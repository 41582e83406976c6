"""Benchmark workloads: the grid of points, and the closed- and open-loop drivers.

A point is one workload run against the server for a sending budget of seconds:

* closed loop at concurrency c: c senders, each sends its next request as soon as its last one
  finished, so exactly c requests are in flight while sending lasts;
* open loop at rate r: requests are sent at Poisson arrival times (exponential gaps of mean
  1/r s, from a seeded generator), however many are in flight.

Sending stops when the budget is spent and at least ``min_requests`` were sent (closed loop:
at least one per sender); then the driver waits for the requests in flight, at most
``drain_s``; requests still running then are cancelled (the client closes their connections,
which makes vLLM abort them) and recorded as failed. Every request's prompt is fresh random
token ids (seeded per point and request), so no two requests share a cached prefix block.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Optional

from kvplan.verify.bench.client import Timing, random_prompt, send_completion
from kvplan.verify.bench.http import Endpoint

DEFAULT_SECONDS = 8.0
DEFAULT_DRAIN_S = 90.0
DEFAULT_TOKEN_LIMIT = 600_000


@dataclass(frozen=True)
class PointSpec:
    """One point of a grid.

    Attributes:
        name: unique in the grid, e.g. ``closed-c64-2048x256``.
        mode: "closed" (``concurrency`` senders) or "open" (Poisson at ``rate`` req/s).
        input_len / output_len: prompt tokens / generated tokens of every request.
        concurrency: senders (closed loop).
        rate: requests per second (open loop); None until resolved from ``rate_of``.
        rate_of / rate_factor: the open loop's rate is ``rate_factor`` x the req/s measured at
            the closed-loop point named ``rate_of`` (in the same run).
        seconds: sending budget (s). min_requests: sent at least this many.
        drain_s: the longest wait for requests in flight after sending stopped (s).
    """

    name: str
    mode: str
    input_len: int
    output_len: int
    concurrency: Optional[int] = None
    rate: Optional[float] = None
    rate_of: Optional[str] = None
    rate_factor: Optional[float] = None
    seconds: float = DEFAULT_SECONDS
    min_requests: int = 1
    drain_s: float = DEFAULT_DRAIN_S


def _closed(c: int, i: int, o: int, seconds: float, drain_s: float) -> PointSpec:
    return PointSpec(f"closed-c{c}-{i}x{o}", "closed", i, o, concurrency=c, seconds=seconds, min_requests=c, drain_s=drain_s)


def _open(factor: float, ref: PointSpec, seconds: float, drain_s: float, min_requests: int) -> PointSpec:
    return PointSpec(
        f"open-{factor:g}x-{ref.input_len}x{ref.output_len}", "open", ref.input_len, ref.output_len,
        rate_of=ref.name, rate_factor=factor, seconds=seconds, min_requests=min_requests, drain_s=drain_s,
    )


FULL_CONCURRENCY = (1, 8, 64, 256)
FULL_SHAPES = ((128, 512), (2048, 256), (8192, 64))
OPEN_FACTORS = (0.25, 0.5, 1.0, 2.0)
GRIDS = ("full", "quick")


def grid(name: str, seconds: Optional[float] = None, token_limit: int = DEFAULT_TOKEN_LIMIT) -> tuple[list[PointSpec], list[dict]]:
    """The points of grid ``name`` ("full" or "quick") and the points skipped, with why.

    full: closed loop at concurrency 1/8/64/256 for input/output 128/512, 2048/256, 8192/64
    (a point whose concurrency x input_len exceeds ``token_limit`` prompt tokens is skipped),
    then open loop at 0.25/0.5/1/2 x the req/s measured at closed-c64-2048x256.
    quick: closed c=1 and c=4 at 32/8, open at 0.5x and 2x of closed-c4-32x8 (for tests and a
    smoke run; 1 s budgets).

    Raises:
        ValueError: unknown grid name.
    """
    if name == "full":
        s = DEFAULT_SECONDS if seconds is None else seconds
        points, skipped = [], []
        for i, o in FULL_SHAPES:
            for c in FULL_CONCURRENCY:
                p = _closed(c, i, o, s, DEFAULT_DRAIN_S)
                if c * i > token_limit:
                    skipped.append({"name": p.name, "reason": f"concurrency x input_len = {c * i:,} prompt tokens > the limit {token_limit:,}"})
                else:
                    points.append(p)
        ref = _closed(64, 2048, 256, s, DEFAULT_DRAIN_S)
        for f in OPEN_FACTORS:
            p = _open(f, ref, s, DEFAULT_DRAIN_S, 8)
            if ref.name in {q.name for q in points}:
                points.append(p)
            else:
                skipped.append({"name": p.name, "reason": f"its reference point {ref.name} is skipped"})
        return points, skipped
    if name == "quick":
        s = 1.0 if seconds is None else seconds
        ref = _closed(4, 32, 8, s, 20.0)
        points = [_closed(1, 32, 8, s, 20.0), ref] + [_open(f, ref, s, 20.0, 4) for f in (0.5, 2.0)]
        return points, []
    raise ValueError(f"unknown grid {name!r}")


def warmup_points(points: list[PointSpec]) -> list[PointSpec]:
    """Requests sent before the grid and not measured: one request per input length of the
    grid (4 output tokens; the prefill shapes), then a burst at the grid's largest concurrency
    of the shortest input with 16 output tokens (decode batches of every size up to it). They
    take the first-use costs (Triton JIT and autotuning, allocator growth) out of the points."""
    if not points:
        return []
    out = []
    for i in sorted({p.input_len for p in points}):
        out.append(PointSpec(f"warmup-c1-{i}x4", "closed", i, 4, concurrency=1, seconds=0.0, min_requests=1, drain_s=300.0))
    c = max(p.concurrency or 1 for p in points)
    i = min(p.input_len for p in points)
    out.append(PointSpec(f"warmup-c{c}-{i}x16", "closed", i, 16, concurrency=c, seconds=0.0, min_requests=c, drain_s=300.0))
    return out


@dataclass
class PointRun:
    """What a driver did at one point: the spec as run (rate resolved), the timings, and the
    perf_counter times sending started and stopped and the last request ended."""

    spec: PointSpec
    timings: list[Timing] = field(default_factory=list)
    start: float = 0.0
    send_stop: float = 0.0
    end: float = 0.0
    cancelled: int = 0


def _prompt_rng(seed: int, point: str, index: int) -> random.Random:
    return random.Random(f"kvplan-bench:{seed}:{point}:{index}")


def poisson_gaps(rate: float, seed: int, point: str):
    """An endless iterator of exponential gaps (s) of mean 1/``rate``, seeded by (seed, point)."""
    rng = random.Random(f"kvplan-bench-arrivals:{seed}:{point}")
    while True:
        yield rng.expovariate(rate)


async def _drain(tasks: set, drain_s: float) -> int:
    """Wait for ``tasks`` at most ``drain_s``; cancel the rest; how many were cancelled."""
    if not tasks:
        return 0
    done, pending = await asyncio.wait(tasks, timeout=drain_s)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)
    return len(pending)


async def run_point(
    spec: PointSpec,
    endpoint: Endpoint,
    model: str,
    vocab_size: int,
    seed: int = 0,
    on_sent: Callable[[int], None] = lambda n: None,
) -> PointRun:
    """Run one point (closed or open loop, ``spec.rate`` resolved) and return what happened.

    Cancelled requests (still running after ``drain_s``) are kept with error "cancelled".
    """
    run = PointRun(spec=spec)
    clock = time.perf_counter
    results: dict[int, Timing] = {}
    counter = {"sent": 0}

    async def one(index: int) -> None:
        prompt = random_prompt(_prompt_rng(seed, spec.name, index), spec.input_len, vocab_size)
        placeholder = Timing(index=index, prompt_tokens=spec.input_len, max_tokens=spec.output_len, sent=clock())
        results[index] = placeholder
        try:
            results[index] = await send_completion(endpoint, model, prompt, spec.output_len, index)
        except asyncio.CancelledError:
            placeholder.error = "cancelled: still running when the drain time ran out"
            raise

    def next_index() -> int:
        i = counter["sent"]
        counter["sent"] += 1
        on_sent(counter["sent"])
        return i

    run.start = clock()
    deadline = run.start + spec.seconds
    tasks: set = set()
    if spec.mode == "closed":
        c = spec.concurrency or 1

        async def sender(k: int) -> None:
            while True:
                if clock() >= deadline and counter["sent"] >= spec.min_requests:
                    return
                await one(next_index())
                if clock() >= deadline and counter["sent"] >= max(spec.min_requests, c):
                    return

        senders = {asyncio.ensure_future(sender(k)) for k in range(c)}
        # sending stops at the deadline; the senders' last requests are the drain
        await asyncio.wait(senders, timeout=max(0.0, deadline - clock()))
        run.send_stop = clock()
        run.cancelled = await _drain({t for t in senders if not t.done()}, spec.drain_s)
    elif spec.mode == "open":
        if not spec.rate or spec.rate <= 0:
            raise ValueError(f"{spec.name}: open loop without a positive rate")
        gaps = poisson_gaps(spec.rate, seed, spec.name)
        due = run.start
        while True:
            # every arrival due before the deadline is sent (and at least min_requests)
            if due >= deadline and counter["sent"] >= spec.min_requests:
                break
            now = clock()
            if due > now:
                await asyncio.sleep(due - now)
            tasks.add(asyncio.ensure_future(one(next_index())))
            due += next(gaps)
        run.send_stop = clock()
        tasks = {t for t in tasks if not t.done()}
        run.cancelled = await _drain(tasks, spec.drain_s)
    else:
        raise ValueError(f"{spec.name}: unknown mode {spec.mode!r}")
    run.end = clock()
    run.timings = [results[i] for i in sorted(results)]
    return run


def resolve_rate(spec: PointSpec, measured_req_s: dict[str, float]) -> tuple[Optional[PointSpec], Optional[str]]:
    """An open point with its rate set from its reference point's measured req/s, or None and why."""
    if spec.mode != "open" or spec.rate is not None:
        return spec, None
    ref = measured_req_s.get(spec.rate_of or "")
    if not ref or ref <= 0:
        return None, f"no request rate measured at its reference point {spec.rate_of}"
    return replace(spec, rate=ref * (spec.rate_factor or 1.0)), None
