"""The benchmark record (``kvplan verify --bench --record FILE``): pydantic models, JSON.

One record is one vLLM start and its whole grid. Per request it keeps the client's timestamps,
compactly: ``sent_s`` (seconds after the point started), ``gaps_us`` (microseconds from the
send to the first chunk, then between consecutive chunks: gaps_us[0] is the TTFT),
``chunk_tokens`` (tokens per chunk; empty when every chunk held one token) and ``done_us``
(send to ``[DONE]``). Summaries are derived from those by ``summarize`` (so a replay can
recompute them). Units: ms for latencies, tokens/s and requests/s for rates.

Definitions (the ones vLLM's own ``vllm bench serve`` uses, benchmarks/lib/endpoint_request_func
and serve.py calculate_metrics): TTFT = first chunk - send; E2E = [DONE] - send; TPOT =
(E2E - TTFT) / (output tokens - 1) per request with more than one token; ITL = each gap after
the first chunk (a chunk of n tokens counts n gaps of gap/n); throughput = tokens of the
completed requests / (last end - first send) of the point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
RECORD_KIND = "kvplan-bench"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestRecord(_Model):
    """One request (see the module docstring for the time fields)."""

    index: int
    prompt_tokens: int
    max_tokens: int
    sent_s: float
    gaps_us: list[int] = Field(default_factory=list)
    chunk_tokens: list[int] = Field(default_factory=list)
    done_us: Optional[int] = None
    output_tokens: int = 0
    server_prompt_tokens: Optional[int] = None
    error: Optional[str] = None


class Percentiles(_Model):
    """p50/p90/p99 and mean in ms (None: no values)."""

    mean: Optional[float] = None
    p50: Optional[float] = None
    p90: Optional[float] = None
    p99: Optional[float] = None


class Summary(_Model):
    """A point's figures from its completed requests."""

    completed: int
    failed: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    output_tok_s: float
    total_tok_s: float
    req_s: float
    max_in_flight: int
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles


class Workload(_Model):
    """The point as specified and as actually sent."""

    mode: str
    input_len: int
    output_len: int
    concurrency: Optional[int] = None
    rate: Optional[float] = None
    rate_of: Optional[str] = None
    rate_factor: Optional[float] = None
    seconds: float
    min_requests: int
    drain_s: float
    seed: int
    sent: int = 0
    sending_s: float = 0.0
    cancelled: int = 0


class PointRecord(_Model):
    """One point: workload, requests, summary, and the server's /metrics around it."""

    name: str
    workload: Workload
    summary: Summary
    metrics_before: dict[str, float] = Field(default_factory=dict)
    metrics_after: dict[str, float] = Field(default_factory=dict)
    metrics_delta: dict[str, float] = Field(default_factory=dict)
    # [seconds after the point started, kv_cache_usage_perc, num_requests_running, num_requests_waiting]
    samples: list[list[Optional[float]]] = Field(default_factory=list)
    requests: list[RequestRecord] = Field(default_factory=list)


class BenchRecord(_Model):
    """A whole benchmark run (one server start, one grid)."""

    schema_version: int = SCHEMA_VERSION
    kind: str = RECORD_KIND
    kvplan_version: str
    vllm_version: Optional[str] = None
    gpu_name: Optional[str] = None
    gpu_count: Optional[int] = None
    model: str
    served_model: str
    model_config_json: Optional[dict] = Field(default=None, alias="model_config")
    vocab_size: int
    engine_args: dict = Field(default_factory=dict)
    serve_command: Optional[list[str]] = None
    env: dict[str, str] = Field(default_factory=dict)
    endpoint: str
    started_server: bool
    grid: str
    seed: int
    token_limit: int
    started_at: str
    client_event_loop: str = "asyncio"
    wall_s: float = 0.0
    startup_s: Optional[float] = None
    cache_config: dict = Field(default_factory=dict)
    server_log: dict = Field(default_factory=dict)
    skipped: list[dict] = Field(default_factory=list)
    # requests sent before the grid (not measured): JIT/autotune and allocator warm-up
    warmup: list[dict] = Field(default_factory=list)
    points: list[PointRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True, protected_namespaces=())

    def to_json(self) -> str:
        """Compact JSON (no indentation: a full grid holds ~10^6 per-chunk gaps)."""
        return self.model_dump_json(by_alias=True)


def percentile(values: list[float], q: float) -> Optional[float]:
    """The q-th percentile (0..100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _pcts(values: list[float]) -> Percentiles:
    if not values:
        return Percentiles()
    r = lambda v: None if v is None else round(v, 3)  # noqa: E731
    return Percentiles(mean=r(sum(values) / len(values)), p50=r(percentile(values, 50)), p90=r(percentile(values, 90)), p99=r(percentile(values, 99)))


def max_in_flight(requests: list[RequestRecord]) -> int:
    """The most requests open at one time (send .. end, failed ones to their last chunk)."""
    events = []
    for r in requests:
        end = r.done_us if r.done_us is not None else sum(r.gaps_us)
        events.append((r.sent_s, 1))
        events.append((r.sent_s + end / 1e6, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def summarize(requests: list[RequestRecord]) -> Summary:
    """The Summary of a point's requests (definitions in the module docstring)."""
    ok = [r for r in requests if r.error is None and r.done_us is not None]
    ttft, tpot, itl, e2e = [], [], [], []
    for r in ok:
        if r.gaps_us:
            ttft.append(r.gaps_us[0] / 1e3)
        e2e.append(r.done_us / 1e3)
        if r.output_tokens > 1 and r.gaps_us:
            tpot.append((r.done_us - r.gaps_us[0]) / 1e3 / (r.output_tokens - 1))
        tokens = r.chunk_tokens or [1] * len(r.gaps_us)
        for gap, n in zip(r.gaps_us[1:], tokens[1:]):
            itl.extend([gap / 1e3 / n] * n)
    if ok:
        first = min(r.sent_s for r in ok)
        last = max(r.sent_s + r.done_us / 1e6 for r in ok)
        duration = max(last - first, 1e-9)
    else:
        duration = 0.0
    inp = sum(r.prompt_tokens for r in ok)
    out = sum(r.output_tokens for r in ok)
    rate = (lambda n: round(n / duration, 3)) if duration else (lambda n: 0.0)
    return Summary(
        completed=len(ok), failed=len(requests) - len(ok), duration_s=round(duration, 6), input_tokens=inp,
        output_tokens=out, output_tok_s=rate(out), total_tok_s=rate(inp + out), req_s=rate(len(ok)),
        max_in_flight=max_in_flight(requests), ttft_ms=_pcts(ttft), tpot_ms=_pcts(tpot), itl_ms=_pcts(itl), e2e_ms=_pcts(e2e),
    )


def load_record(path: Path) -> BenchRecord:
    """Read and validate a record file (pydantic errors propagate as ValueError)."""
    return BenchRecord.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
