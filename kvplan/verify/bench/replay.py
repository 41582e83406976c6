"""Replay a benchmark record through kvplan's scheduler emulator and step-time model.

For every point of a ``kvplan verify --bench`` record (kvplan/verify/bench/record.py) the
emulator (kvplan/perf/emulator.py) runs exactly that point's workload:

* closed loop: the point's concurrency and the requests the client really sent (their prompt and
  output lengths), the next one sent the moment one finishes;
* open loop: the send times the client really used (``sent_s``), not a new Poisson draw.

The engine is kvplan's own prediction for the record's model, GPU and flags (capacity/estimate.py
``plan``: num_gpu_blocks, block size, max_model_len, max_num_seqs, max_num_batched_tokens,
prefix caching; the version's scheduler policy supplies chunked prefill and async scheduling).
The pool vLLM really had (the server log's num_gpu_blocks) is kept beside it, for the check that
kvplan predicted it (``Replay.pool_error``).

Predicted and measured figures are compared per point: TTFT p50/p90/p99, TPOT p50, ITL p50,
E2E p50 (ms), output tokens/s and requests/s. Errors are signed relative ones,
(predicted - measured) / measured.

Units: ms for latencies, tokens/s and requests/s for rates.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from kvplan.capacity.estimate import plan as plan_for
from kvplan.engines.vllm.args import ENGINE_ARGS, EngineArgs
from kvplan.errors import KvplanError
from kvplan.gpus import bundled_profiles, find_gpu
from kvplan.perf.emulator import EngineConfig, SimulationResult, simulate
from kvplan.perf.metrics import kept_up as _kept_up
from kvplan.perf.metrics import summarize
from kvplan.perf.serving import engine_config, with_request_path
from kvplan.perf.step_time import StepModel, step_model
from kvplan.perf.workload import ClosedLoop, RequestSpec, TraceLoop
from kvplan.sources import load_spec
from kvplan.verify.bench.record import BenchRecord, PointRecord

# The figures compared, as (name, measured summary path, predicted summary getter in seconds).
METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "itl_p50", "e2e_p50", "output_tok_s", "req_s")
_ARG_NAMES = {a.name for a in ENGINE_ARGS}


def load(path: str | Path) -> BenchRecord:
    """A record from ``path`` (``.json`` or gzip-compressed ``.json.gz``).

    Raises:
        KvplanError: not readable JSON or not a bench record (names the file).
    """
    p = Path(path)
    try:
        raw = gzip.open(p, "rt", encoding="utf-8").read() if p.suffix == ".gz" else p.read_text(encoding="utf-8")
        return BenchRecord.model_validate(json.loads(raw))
    except (OSError, ValueError) as exc:
        raise KvplanError(f"{p}: not a kvplan bench record ({str(exc).splitlines()[0]})") from None


@dataclass(frozen=True)
class Engine:
    """What the replay runs: kvplan's engine for the record and the step-time model.

    Attributes:
        config: the emulator's EngineConfig (from kvplan's estimate, not from the log).
        model: the step-time model.
        predicted_blocks: kvplan's num_gpu_blocks. measured_blocks: the server log's (None: not
            in the record).
    """

    config: EngineConfig
    model: StepModel
    predicted_blocks: int
    measured_blocks: int | None

    @property
    def pool_error(self) -> float | None:
        """(kvplan's num_gpu_blocks - vLLM's) / vLLM's; None without a logged value."""
        if not self.measured_blocks:
            return None
        return (self.predicted_blocks - self.measured_blocks) / self.measured_blocks


def _spec(rec: BenchRecord):
    if rec.model_config_json is None:
        return load_spec(rec.model)[0]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps(rec.model_config_json))
        return load_spec(d)[0]


def engine_for(rec: BenchRecord, efficiency=None) -> Engine:
    """kvplan's engine and step model for ``rec``'s model, GPU, vLLM version and engine args.

    Args:
        rec: the record; its ``vllm_version`` selects the rules (required).
        efficiency: step-time coefficients (None: fitted for the GPU and version, else priors).
    Raises:
        KvplanError: no vLLM version or GPU in the record, an unknown GPU, or the estimate's own
            refusals.
    Rule source: the record's vLLM version's estimate rules (capacity/estimate.py plan) and
    scheduler policy (engines/vllm/vX_Y/scheduler.py).
    """
    if not rec.vllm_version:
        raise KvplanError("record: vllm_version is missing; the replay needs the version's rules")
    gpu = find_gpu(rec.gpu_name or "", bundled_profiles())
    given = {k: v for k, v in rec.engine_args.items() if k in _ARG_NAMES and v is not None}
    args = EngineArgs(**{**given, "vllm_version": rec.vllm_version})
    spec = _spec(rec)
    p = plan_for(spec, gpu, args)
    if not p.fits:
        raise KvplanError(f"record: kvplan predicts vLLM does not start ({p.failure})")
    logged = rec.cache_config.get("num_gpu_blocks")
    measured = int(logged) if isinstance(logged, int) or (isinstance(logged, str) and logged.isdigit()) else None
    model = step_model(spec, gpu, args, vllm_version=rec.vllm_version, efficiency=efficiency,
                       async_scheduling=p.effective.get("async_scheduling"))
    config = engine_config(p, efficiency=model.efficiency)  # the product's engine: pool, flags, request path
    return Engine(config, model, p.num_gpu_blocks, measured)


def with_efficiency(engine: Engine, efficiency) -> Engine:
    """The same engine with other coefficients (step model and request path)."""
    return replace(engine, model=engine.model.with_efficiency(efficiency), config=with_request_path(engine.config, efficiency))


def measured_figures(point: PointRecord) -> dict[str, float | None]:
    """The point's measured figures (ms, tokens/s, requests/s) from its summary."""
    s = point.summary
    return {
        "ttft_p50": s.ttft_ms.p50, "ttft_p90": s.ttft_ms.p90, "ttft_p99": s.ttft_ms.p99,
        "tpot_p50": s.tpot_ms.p50, "itl_p50": s.itl_ms.p50, "e2e_p50": s.e2e_ms.p50,
        "output_tok_s": s.output_tok_s, "req_s": s.req_s,
    }


def workload_of(point: PointRecord):
    """The point's workload as the emulator takes it: a ClosedLoop at the point's concurrency
    over the completed requests, or a TraceLoop at their recorded send times (open loop).

    Raises:
        KvplanError: a point with failed requests (their lengths are not known) or an unknown mode.
    """
    reqs = [r for r in point.requests if r.error is None and r.done_us is not None]
    if len(reqs) != len(point.requests):
        raise KvplanError(f"point {point.name}: {len(point.requests) - len(reqs)} failed request(s); not replayable")
    reqs.sort(key=lambda r: (r.sent_s, r.index))
    specs = tuple(RequestSpec(r.server_prompt_tokens or r.prompt_tokens, r.output_tokens) for r in reqs)
    w = point.workload
    if w.mode == "closed":
        return ClosedLoop(specs, int(w.concurrency or 1))
    if w.mode == "open":
        t0 = reqs[0].sent_s
        return TraceLoop(specs, tuple(r.sent_s - t0 for r in reqs))
    raise KvplanError(f"point {point.name}: workload mode {w.mode!r} is not replayable")


def predicted_figures(result: SimulationResult) -> dict[str, float]:
    """The emulated run's figures in the record's units (ms, tokens/s, requests/s)."""
    s = summarize(result)
    return {
        "ttft_p50": s.ttft.p50 * 1e3, "ttft_p90": s.ttft.p90 * 1e3, "ttft_p99": s.ttft.p99 * 1e3,
        "tpot_p50": s.tpot.p50 * 1e3, "itl_p50": s.itl.p50 * 1e3, "e2e_p50": s.e2e.p50 * 1e3,
        "output_tok_s": s.output_throughput, "req_s": s.request_throughput,
    }


@dataclass
class PointReplay:
    """One point: measured and predicted figures, and signed relative errors."""

    record: str
    point: str
    mode: str
    concurrency: int | None
    rate: float | None
    input_len: int
    output_len: int
    measured: dict[str, float | None]
    predicted: dict[str, float]
    result: SimulationResult | None = field(default=None, repr=False)

    def error(self, name: str) -> float | None:
        """(predicted - measured) / measured of figure ``name``; None when not measured."""
        m = self.measured.get(name)
        if not m:
            return None
        return (self.predicted[name] - m) / m


def replay_point(engine: Engine, point: PointRecord, record_name: str = "",
                 step_time: Callable | None = None) -> PointReplay:
    """Emulate ``point`` on ``engine`` (step_time: override of engine.model.seconds)."""
    result = simulate(engine.config, step_time or engine.model.seconds, workload_of(point))
    w = point.workload
    return PointReplay(record_name, point.name, w.mode, w.concurrency, w.rate, w.input_len, w.output_len,
                       measured_figures(point), predicted_figures(result), result)


def replay(rec: BenchRecord, record_name: str = "", efficiency=None, engine: Engine | None = None) -> list[PointReplay]:
    """Every replayable point of ``rec`` (points with failed requests are left out)."""
    eng = engine or engine_for(rec, efficiency)
    out = []
    for p in rec.points:
        if any(r.error is not None or r.done_us is None for r in p.requests) or not p.requests:
            continue
        out.append(replay_point(eng, p, record_name))
    return out


# --- stable versus overloaded -------------------------------------------------------------------
# kept_up: the rule lives with the perf metrics (kvplan/perf/metrics.py), which judge emulated
# open-loop runs by it too; imported here for the records' points.
kept_up = _kept_up


def measured_stable(point: PointRecord, tolerance: float = 0.1) -> bool:
    """kept_up on the client's timestamps of an open-loop point.

    Raises:
        KvplanError: fewer than 8 completed requests.
    """
    reqs = [r for r in point.requests if r.done_us is not None and r.error is None]
    return kept_up([r.sent_s for r in reqs], [r.sent_s + r.done_us / 1e6 for r in reqs], tolerance)


def predicted_stable(result: SimulationResult, tolerance: float = 0.1) -> bool:
    """kept_up on an emulated run's send and finish times (the same rule as measured_stable)."""
    return kept_up([r.arrival_s for r in result.requests], [r.finish_s for r in result.requests], tolerance)


def measured_capacity(rec: BenchRecord, input_len: int, output_len: int) -> float | None:
    """The highest request rate (requests/s) the server sustained at this shape: the most req/s
    of its closed-loop points of ``input_len``/``output_len`` (None: no such point)."""
    rates = [p.summary.req_s for p in rec.points
             if p.workload.mode == "closed" and (p.workload.input_len, p.workload.output_len) == (input_len, output_len)]
    return max(rates) if rates else None


def predicted_saturation(engine: Engine, input_len: int, output_len: int, num_requests: int = 200,
                         seed: int = 0) -> float:
    """kvplan's saturation rate (requests/s) for fixed ``input_len``/``output_len`` requests, as
    ``kvplan perf`` finds it (kvplan/perf/serving.py find_saturation: the emulated engine's highest
    sustained closed-loop throughput), on the record's engine and request path."""
    from kvplan.perf.serving import find_saturation
    from kvplan.perf.workload import Lengths

    sat = find_saturation(engine.config, engine.model.seconds, Lengths.fixed(input_len, output_len),
                          seed=seed, num_requests=num_requests)
    return sat.rate
