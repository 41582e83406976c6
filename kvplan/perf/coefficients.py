"""Efficiency coefficients of the step-time model, per GPU: physics priors or fitted values.

Five numbers turn the vendor peaks into time (kvplan/perf/step_time.py):

    bandwidth_fraction    achieved / peak DRAM bandwidth (weights, KV cache)
    matmul_fraction       achieved / peak dense tensor throughput (GEMMs and attention FLOPs)
    step_overhead_ms      fixed time per engine step: scheduler, input preparation, sampling,
                          kernel launches / CUDA-graph replay, output processing
    per_request_us        time per scheduled request per step (sampling row, detokenizing, its
                          slots in the metadata)
    request_serial_ms     the API server's time per request, one request at a time (a burst of c
                          sends reaches the scheduler spread over c x this)
    per_layer_us          fixed GPU time per decoder layer per step (its kernels' floor)
    moe_layer_us          the extra fixed GPU time of a MoE layer per step (router, top-k, sorting
                          tokens by expert, the weighted sum)
    moe_bandwidth_fraction / moe_matmul_fraction
                          the same fractions for the routed experts' grouped GEMMs (MoE only;
                          None = the dense ones)
    eager_layer_us        host time per decoder layer to launch a step that runs outside a CUDA
                          graph (more tokens than vLLM captures, or --enforce-eager): the GPU
                          cannot finish such a step before the host has issued all its kernels
    eager_moe_layer_us    the extra launch time of a MoE layer in such a step (the routed
                          experts' Python path: top-k, alignment, two grouped GEMMs, the sum)
    request_latency_ms    time from the client's send to the request waiting in the engine core's
                          queue (HTTP, the API server's input processing, IPC); the emulator
                          delays every arrival by it (kvplan/perf/emulator.py), so it adds to TTFT
                          and E2E, not to the step time
    allreduce_latency_us  fixed time of one TP all-reduce (only TP > 1; never fitted here: our
                          measurements are TP = 1)

The PRIORS are not measurements; every result computed with them is labelled "uncalibrated":
  * bandwidth_fraction 0.8: large streaming reads on HBM reach roughly 80-90 % of the datasheet
    peak (memcpy/STREAM-style benchmarks); the lower end is taken.
  * matmul_fraction 0.6: large bf16 GEMMs reach roughly 60-75 % of the dense peak on Hopper; a
    serving step's mixed shapes do worse; the lower end is taken.
  * step_overhead_ms 1.5 and per_request_us 10: the order of vLLM's V1 per-step CPU work and
    per-request bookkeeping seen in public profiles; no particular reading.
  * request_serial_ms, per_layer_us, moe_layer_us, eager_layer_us and eager_moe_layer_us 0: off
    until fitted.
  * request_latency_ms 2: the order of a local HTTP request through a Python API server.
  * allreduce_latency_us 8: the order of a small NCCL/custom all-reduce on NVLink.

FITTED values are read from kvplan/perf/coefficients.yaml, written by benchmarks/fit_perf.py,
keyed by GPU profile id and vLLM version; each entry records the records it was fitted on, when,
and its residuals. A fitted entry is used only for its own GPU id and vLLM version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import yaml

from kvplan.errors import KvplanError

FITTED_NAMES = ("bandwidth_fraction", "matmul_fraction", "step_overhead_ms", "per_request_us")
# fitted through the emulator only (benchmarks/calibrate_perf.py), not by the step-time fitter
EMULATOR_NAMES = ("request_latency_ms", "request_serial_ms", "per_layer_us", "moe_layer_us", "moe_bandwidth_fraction", "moe_matmul_fraction",
                  "eager_layer_us", "eager_moe_layer_us")
DATA_FILE = "coefficients.yaml"


@dataclass(frozen=True)
class Efficiency:
    """The step model's coefficients for one GPU (see the module docstring for meanings/units).

    Attributes:
        status: "uncalibrated" (the priors) or "fitted".
        source: where the numbers come from (for fitted: the fit's provenance line).
    """

    bandwidth_fraction: float = 0.8
    matmul_fraction: float = 0.6
    step_overhead_ms: float = 1.5
    per_request_us: float = 10.0
    request_latency_ms: float = 2.0
    request_serial_ms: float = 0.0
    per_layer_us: float = 0.0
    moe_layer_us: float = 0.0
    eager_layer_us: float = 0.0
    eager_moe_layer_us: float = 0.0
    moe_bandwidth_fraction: float | None = None
    moe_matmul_fraction: float | None = None
    allreduce_latency_us: float = 8.0
    status: str = "uncalibrated"
    source: str = "physics priors (kvplan/perf/coefficients.py), not fitted on any measurement"
    fit: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in ("bandwidth_fraction", "matmul_fraction", "moe_bandwidth_fraction", "moe_matmul_fraction"):
            v = getattr(self, name)
            if v is None and name.startswith("moe_"):
                continue
            if not (0 < v <= 1.5):
                raise KvplanError(f"step-time coefficient {name}: {v!r} is not a fraction in (0, 1.5]")
        for name in ("step_overhead_ms", "per_request_us", "request_latency_ms", "request_serial_ms", "per_layer_us",
                     "moe_layer_us", "eager_layer_us", "eager_moe_layer_us", "allreduce_latency_us"):
            if getattr(self, name) < 0:
                raise KvplanError(f"step-time coefficient {name}: {getattr(self, name)!r} is negative")

    @property
    def expert_bandwidth_fraction(self) -> float:
        """moe_bandwidth_fraction, or bandwidth_fraction when not set."""
        return self.moe_bandwidth_fraction if self.moe_bandwidth_fraction is not None else self.bandwidth_fraction

    @property
    def expert_matmul_fraction(self) -> float:
        """moe_matmul_fraction, or matmul_fraction when not set."""
        return self.moe_matmul_fraction if self.moe_matmul_fraction is not None else self.matmul_fraction

    @property
    def calibrated(self) -> bool:
        """True only for coefficients fitted on measurements."""
        return self.status == "fitted"


PRIORS = Efficiency()


def parse_entries(text: str, origin: str) -> dict[tuple[str, str], Efficiency]:
    """The fitted entries of one coefficients file, by (gpu id, vLLM version).

    File shape::

        fits:
        - gpu: h200
          vllm_version: X.Y.Z
          coefficients: {bandwidth_fraction: ..., matmul_fraction: ..., step_overhead_ms: ..., per_request_us: ...}
          fitted_on: [record files / points]
          fitted_at: ISO date
          residuals: {...}
    Raises:
        KvplanError: not YAML or not that shape (names origin and the key).
    """
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise KvplanError(f"{origin}: not valid YAML ({exc})") from None
    fits = data.get("fits") if isinstance(data, dict) else None
    if fits is None:
        fits = []
    if not isinstance(fits, list):
        raise KvplanError(f"{origin}: fits: expected a list")
    out: dict[tuple[str, str], Efficiency] = {}
    for i, entry in enumerate(fits):
        if not isinstance(entry, dict) or not {"gpu", "vllm_version", "coefficients"} <= set(entry):
            raise KvplanError(f"{origin}: fits[{i}]: expected gpu, vllm_version and coefficients")
        c = entry["coefficients"]
        if not isinstance(c, dict):
            raise KvplanError(f"{origin}: fits[{i}].coefficients: expected a mapping")
        unknown = sorted(set(c) - set(FITTED_NAMES) - set(EMULATOR_NAMES))
        if unknown:
            raise KvplanError(f"{origin}: fits[{i}].coefficients.{unknown[0]}: unknown coefficient")
        try:
            values = {k: float(c[k]) for k in FITTED_NAMES + EMULATOR_NAMES if k in c}
        except (TypeError, ValueError):
            raise KvplanError(f"{origin}: fits[{i}].coefficients: expected numbers") from None
        on = entry.get("fitted_on") or []
        source = (
            f"fitted by {str(entry.get('fitted_by') or 'benchmarks/fit_perf.py').split(' ')[0]} on {len(on)} record(s) ({', '.join(map(str, on[:3]))}"
            f"{', ...' if len(on) > 3 else ''}) at {entry.get('fitted_at', '?')}"
        )
        out[(str(entry["gpu"]), str(entry["vllm_version"]))] = Efficiency(
            **values, status="fitted", source=source, fit=dict(entry)
        )
    return out


@lru_cache(maxsize=1)
def _bundled() -> dict[tuple[str, str], Efficiency]:
    text = resources.files("kvplan.perf").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse_entries(text, f"kvplan/perf/{DATA_FILE}")


def coefficients_for(gpu_id: str, vllm_version: str) -> Efficiency:
    """The fitted coefficients of ``gpu_id`` under ``vllm_version`` if the bundled file has them,
    else PRIORS (status "uncalibrated")."""
    return _bundled().get((gpu_id, vllm_version), PRIORS)
