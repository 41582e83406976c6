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

FITTED values are read from kvplan/perf/coefficients.yaml, written by benchmarks/calibrate_perf.py,
keyed by GPU profile id and vLLM version; each entry records the records it was fitted on, when,
and its residuals.

WHY THEY TRANSFER. None of the coefficients is a per-GPU constant: the fractions are fractions of
the GPU profile's datasheet peaks (bandwidth, dense tensor FLOP/s of the GEMM dtype), and the
overheads are fixed times of kernels and of the host. A fit on one GPU therefore predicts another
GPU of the same architecture -- the same compute capability, so vLLM picks the same kernels
(attention backend, GEMM and MoE kernels, CUDA-graph capture ceiling) and the same SM design runs
them -- through that GPU's own peaks. ``resolve`` applies this in order:

  1. a fit for the GPU under the version                        -> "fitted"
  2. a fit for another GPU of the same compute capability, and/or
     for an earlier vLLM version (the nearest)                  -> "transferred from <GPU> (<version>)"
  3. nothing of the architecture                                -> the priors, "uncalibrated"

A transferred entry says in its label the error of the transfer as measured
(``cross_gpu`` checks in the fit's entry: the fit's replay of another GPU's records,
benchmarks/calibrate_perf.py --check-gpu), or that it is unmeasured. What does not transfer by
physics: the host-side terms (per_request_us, request_latency_ms, request_serial_ms and the eager
launch time) are the host CPU's and vLLM's Python, not the GPU's; the label says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Callable

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
    transfer: str | None = None
    transfer_notes: tuple[str, ...] = ()

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
        """True only for coefficients fitted on measurements of this GPU under this vLLM version."""
        return self.status == "fitted"

    @property
    def from_fit(self) -> bool:
        """Fitted values, on this GPU and version or transferred from another ("fitted" or "transferred")."""
        return self.status in ("fitted", "transferred")


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
    else PRIORS (status "uncalibrated"). No transfer (see ``resolve``)."""
    return _bundled().get((gpu_id, vllm_version), PRIORS)


# Compute capability -> architecture name, for labels (NVIDIA's CUDA GPUs list).
_ARCHITECTURES = {"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.7": "Ampere", "8.9": "Ada",
                  "9.0": "Hopper", "10.0": "Blackwell", "10.3": "Blackwell Ultra", "12.0": "Blackwell", "12.1": "Blackwell"}


def architecture(compute_capability: str | None) -> str | None:
    """"sm_90 (Hopper)" for "9.0"; None when unknown. Two GPUs of one compute capability run the
    same vLLM kernels on the same SM design: the unit a fit transfers within."""
    if not compute_capability:
        return None
    name = _ARCHITECTURES.get(compute_capability)
    sm = "sm_" + compute_capability.replace(".", "")
    return f"{sm} ({name})" if name else sm


def _fit_compute_capability(gpu_id: str, entry: dict) -> str | None:
    """The compute capability of the GPU a fit was made on: the entry's own key, else the bundled
    profile of that id."""
    cc = entry.get("compute_capability")
    if cc:
        return str(cc)
    from kvplan.gpus import bundled_profiles

    prof = bundled_profiles().get(gpu_id)
    return prof.compute_capability if prof is not None else None


def _vkey(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in version.split("."))
    except ValueError:
        return ()


def _pct(res: dict, key: str) -> str | None:
    v = res.get(f"{key}_median_abs_pct")
    return None if v is None else f"{float(v):.0f} %"


def _cross_gpu_note(entry: dict, from_gpu: str, gpu_id: str) -> str:
    """What the fit's entry measured about its transfer to ``gpu_id`` (the ``cross_gpu`` list:
    {gpu, vllm_version, records, residuals: {tpot_p50_median_abs_pct, output_tok_s_median_abs_pct,
    ttft_p50_median_abs_pct}}), else that it is unmeasured (naming other GPUs it was measured on)."""
    checks = [c for c in entry.get("cross_gpu") or [] if isinstance(c, dict)]
    for c in checks:
        if str(c.get("gpu")) == gpu_id:
            res = c.get("residuals") or {}
            parts = [f"{n} {v}" for n, v in (("TPOT p50", _pct(res, "tpot_p50")), ("TTFT p50", _pct(res, "ttft_p50")),
                                                ("output tok/s", _pct(res, "output_tok_s"))) if v]
            recs = c.get("records") or []
            return (f"cross-GPU error measured on {len(recs)} {gpu_id} record(s): median |error| " + ", ".join(parts))
    others = sorted({str(c.get("gpu")) for c in checks if c.get("gpu")})
    also = f"; measured {from_gpu} -> {', '.join(others)} only" if others else ""
    return f"cross-GPU error unmeasured (no {gpu_id} records){also}"


HOST_TERMS_NOTE = ("transferred fit: its host-side terms (per request, request path, eager launch) are the "
                   "fitted machine's CPU and vLLM's Python, not the GPU's; a slower host is slower")


def resolve(gpu_id: str, compute_capability: str | None, vllm_version: str,
            runner_note: Callable[[str, str], "list[str]"] | None = None) -> Efficiency:
    """The coefficients a prediction for ``gpu_id`` (of ``compute_capability``) under
    ``vllm_version`` uses (the module docstring's order): the exact fit; else a transferred fit of
    the same compute capability (this GPU first, then others by id), under the same version or the
    nearest earlier one (a later version's fit is never carried back); else PRIORS.

    Args:
        runner_note: ``(fit's GPU id, fit's version) -> caveats``: what differs in how vLLM runs
            the model's steps there and here (another model runner, another MoE kernel tile
            config); they go into the prediction's labels.
    Returns:
        an Efficiency with status "fitted", "transferred" (``transfer`` holds the label:
        "transferred from <GPU> (<version>): same architecture (sm_XX (Name)), <cross-GPU error,
        measured or unmeasured>; <cross-version error unmeasured ...>", ``transfer_notes`` the
        caveats every output lists with it) or "uncalibrated".
    """
    fits = _bundled()
    exact = fits.get((gpu_id, vllm_version))
    if exact is not None:
        return exact
    want = _vkey(vllm_version)
    candidates = []
    for (g, v), eff in fits.items():
        if _vkey(v) > want or not compute_capability:
            continue
        if g != gpu_id and _fit_compute_capability(g, eff.fit) != compute_capability:
            continue
        # this GPU before others, the same version before earlier ones, then the nearest version
        candidates.append(((g != gpu_id, v != vllm_version, tuple(-x for x in _vkey(v)), g), g, v, eff))
    if not candidates:
        return PRIORS
    _, g, v, eff = min(candidates, key=lambda c: c[0])
    notes, caveats = [], []
    if g != gpu_id:
        notes.append(f"same architecture ({architecture(compute_capability)}), " + _cross_gpu_note(eff.fit, g, gpu_id))
        caveats.append(HOST_TERMS_NOTE)
    if v != vllm_version:
        notes.append(f"cross-version error unmeasured (no vLLM {vllm_version} records)")
    if runner_note is not None:
        caveats.extend(runner_note(g, v))
    label = f"transferred from {g} ({v}): " + "; ".join(notes)
    return replace(eff, status="transferred", transfer=label, transfer_notes=tuple(caveats),
                   source=f"the fit it transfers: {eff.source}")
