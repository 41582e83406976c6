"""Benchmark records -> step-time observations (shared by fit_perf.py and perf_vs_peers.py).

A record is the JSON `kvplan verify --bench --record FILE` writes (kvplan/verify/bench/record.py:
model, gpu_name, vllm_version, engine_args, server_log, points[].workload / .summary). It is read
here as plain JSON so that these scripts also run on hand-made or synthetic records.

Only closed-loop points become observations, each a weighted sum of engine steps:

* TPOT (p50) at concurrency c, input I, output O: c requests decode at a mean context of
  I + O/2. During one request's O-1 decode steps the c-1 others each start again about
  (O-1)/O times, and each restart puts an I-token prompt (chunked by the token budget) into one
  step. So TPOT = T(c decodes) + (c-1)/O x [T(c decodes + the prompt) - T(c decodes)].
* TTFT (p50) at concurrency 1: the prompt's step(s): I tokens in chunks of at most
  max_num_batched_tokens (the server log's, else the record's engine args, else 8192, said).

The approximation is the fitter's, not the scheduler's: the emulator (kvplan/perf/emulator.py)
replays the real step sequence.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kvplan.engines.vllm.args import ENGINE_ARGS, EngineArgs
from kvplan.errors import KvplanError
from kvplan.gpus import bundled_profiles, find_gpu
from kvplan.perf.step_time import Chunk, StepModel, step_model
from kvplan.sources import load_spec

DEFAULT_BUDGET = 8192
_ARG_NAMES = {a.name for a in ENGINE_ARGS}


@dataclass(frozen=True)
class Step:
    """One engine step with a weight: ``weight`` x T(prefills, decodes)."""

    weight: float
    prefills: tuple[Chunk, ...] = ()
    num_decodes: int = 0
    decode_context_tokens: int = 0
    max_decode_context: int = 0


@dataclass
class Observation:
    """A measured latency and the steps the model sums to predict it (ms)."""

    record: str
    point: str
    kind: str  # "tpot" or "ttft"
    measured_ms: float
    steps: tuple[Step, ...]
    model: StepModel
    concurrency: int
    input_len: int
    output_len: int
    notes: list[str] = field(default_factory=list)

    @property
    def group(self) -> tuple[str, str]:
        """(gpu id, vLLM version) — one coefficient set per group."""
        return self.model.gpu_id, self.vllm_version

    vllm_version: str = ""
    synthetic: bool = False

    def predict(self, model: StepModel | None = None) -> float:
        m = model or self.model
        return sum(s.weight * m.step_ms(s.prefills, s.num_decodes, s.decode_context_tokens, s.max_decode_context) for s in self.steps)

    def row(self, model: StepModel) -> tuple[float, float, float, float]:
        """(bandwidth_ms, matmul_ms, requests, fixed_ms) summed over the steps (StepModel.fit_row)."""
        b = m = r = f = 0.0
        for s in self.steps:
            sb, sm, sr, sf = model.fit_row(s.prefills, s.num_decodes, s.decode_context_tokens, s.max_decode_context)
            if sr:
                b += s.weight * sb
                m += s.weight * sm
                r += s.weight * sr
                f += s.weight * sf
        return b, m, r, f

    @property
    def steps_weight(self) -> float:
        """How many steps' fixed overhead the observation holds (sum of non-empty step weights)."""
        return sum(s.weight for s in self.steps if s.prefills or s.num_decodes)


def _chunks(tokens: int, budget: int, decodes: int) -> tuple[Chunk, ...]:
    out = []
    done = 0
    room = max(1, budget - decodes)
    while done < tokens:
        n = min(room, tokens - done)
        out.append(Chunk(n, done))
        done += n
    return tuple(out)


def _spec_of(rec: dict):
    try:
        return load_spec(rec["model"])[0]
    except KvplanError:
        cfg = rec.get("model_config")
        if not isinstance(cfg, dict):
            raise
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "config.json").write_text(json.dumps(cfg))
            return load_spec(d)[0]


def observations(path: str | Path, rec: dict | None = None, efficiency=None) -> list[Observation]:
    """The observations of one record file (see the module docstring).

    Raises:
        KvplanError: the record names no known GPU, or its model cannot be parsed.
    """
    path = Path(path)
    if rec is None:
        rec = json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())
    gpu = find_gpu(rec.get("gpu_name") or "", bundled_profiles())
    given = {k: v for k, v in (rec.get("engine_args") or {}).items() if k in _ARG_NAMES and v is not None}
    args = EngineArgs(**{k: v for k, v in given.items() if k in ("tensor_parallel_size", "dtype", "quantization", "kv_cache_dtype")})
    version = rec.get("vllm_version") or None
    # the steady-state shortcut sums host and GPU time (no async overlap): its linear fit
    # cannot choose the max(GPU, host) side; benchmarks/calibrate_perf.py fits the async form
    # through the emulator
    model = step_model(_spec_of(rec), gpu, args, vllm_version=version, efficiency=efficiency, async_scheduling=False)
    log = rec.get("server_log") or {}
    budget = log.get("max_num_batched_tokens") or given.get("max_num_batched_tokens")
    notes = [] if budget else [f"max_num_batched_tokens not in the record: {DEFAULT_BUDGET} assumed"]
    budget = int(budget or DEFAULT_BUDGET)
    out: list[Observation] = []
    for p in rec.get("points", []):
        w, s = p.get("workload", {}), p.get("summary", {})
        if w.get("mode") != "closed" or not w.get("concurrency"):
            continue
        c, isl, osl = int(w["concurrency"]), int(w["input_len"]), int(w["output_len"])
        c_eff = min(c, int(s.get("max_in_flight") or c))
        common = dict(record=path.name, point=p.get("name", ""), model=model, concurrency=c_eff, input_len=isl,
                      output_len=osl, notes=list(notes), vllm_version=version or "",
                      synthetic=bool(rec.get("synthetic")))
        tpot = (s.get("tpot_ms") or {}).get("p50")
        if tpot and osl > 1:
            ctx = isl + osl // 2
            dec = Step(1.0, (), c_eff, c_eff * ctx, ctx)
            steps = [dec]
            wgt = (c_eff - 1) / osl
            if wgt > 0:
                # each of the prompt's chunk steps also carries the c-1 decoding requests
                ch = _chunks(isl, budget, c_eff - 1)
                mixed = [Step(wgt, (x,), c_eff - 1, (c_eff - 1) * ctx, ctx) for x in ch]
                steps = [Step(max(0.0, 1.0 - wgt * len(ch)), (), c_eff, c_eff * ctx, ctx), *mixed]
            out.append(Observation(kind="tpot", measured_ms=float(tpot), steps=tuple(steps), **common))
        ttft = (s.get("ttft_ms") or {}).get("p50")
        if ttft and c_eff == 1:
            steps = tuple(Step(1.0, (x,)) for x in _chunks(isl, budget, 0))
            out.append(Observation(kind="ttft", measured_ms=float(ttft), steps=steps, **common))
    return out


def load_all(paths: list[str], efficiency=None) -> list[Observation]:
    """Observations of several record files, in file order."""
    obs: list[Observation] = []
    for p in paths:
        obs.extend(observations(p, efficiency=efficiency))
    return obs


def median(values: list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# The grid: closed-loop concurrency x (input, output).
GRID = [(c, i, o) for (i, o) in ((128, 512), (2048, 256), (8192, 64)) for c in (1, 8, 64, 256)]


def synthetic_record(model: str, gpu_name: str, efficiency, vllm_version: str | None = None,
                     grid=GRID, noise=None) -> dict:
    """A record-shaped dict whose TPOT/TTFT p50 are this module's own prediction with
    ``efficiency`` (times ``noise(i)`` if given): for testing the fitter (it must recover
    ``efficiency``) and for running the scripts before real records exist. Marked
    ``"synthetic": true``; never a measurement."""
    rec = {
        "kind": "kvplan-bench", "synthetic": True, "model": model, "gpu_name": gpu_name,
        "vllm_version": vllm_version, "engine_args": {}, "server_log": {"max_num_batched_tokens": DEFAULT_BUDGET},
        "points": [
            {"name": f"c{c}-{i}x{o}", "workload": {"mode": "closed", "concurrency": c, "input_len": i, "output_len": o},
             "summary": {"max_in_flight": c, "tpot_ms": {"p50": 1.0}, "ttft_ms": {"p50": 1.0}}}
            for c, i, o in grid
        ],
    }
    by_point = {}
    for ob in observations(Path("synthetic.json"), rec, efficiency=efficiency):
        by_point.setdefault(ob.point, {})[ob.kind] = ob.predict()
    for k, p in enumerate(rec["points"]):
        got = by_point.get(p["name"], {})
        f = noise(k) if noise else 1.0
        p["summary"]["tpot_ms"]["p50"] = round(got["tpot"] * f, 6) if "tpot" in got else None
        p["summary"]["ttft_ms"]["p50"] = round(got["ttft"] * f, 6) if "ttft" in got else None
    return rec
