"""Serving performance: vLLM's V1 scheduler emulated step by step on kvplan's exact block pool,
the request streams that drive it, the benchmark client's metrics, and the per-step time model
(step_time, with its GPU data and coefficients).

Layering: perf imports engines, model, capacity, io and errors; never render/cli/check/verify.
The step time (seconds per engine step) is the caller's function of a StepBatch.
"""

from kvplan.perf.batch import PrefillChunk, StepBatch, StepTime, constant_step_time, linear_step_time
from kvplan.perf.blocks import GroupSpec, groups_from_layout
from kvplan.perf.emulator import EngineConfig, Emulator, RequestRecord, SimulationResult, StepRecord, simulate
from kvplan.perf.metrics import Distribution, Summary, kv_usage_over_time, percentile, summarize
from kvplan.perf.workload import ClosedLoop, Lengths, OpenLoop, RequestSpec, SharedPrefix, make_requests

__all__ = [
    "ClosedLoop", "Distribution", "Emulator", "EngineConfig", "GroupSpec", "Lengths", "OpenLoop",
    "PrefillChunk", "RequestRecord", "RequestSpec", "SharedPrefix", "SimulationResult", "StepBatch",
    "StepRecord", "StepTime", "Summary", "constant_step_time", "groups_from_layout",
    "kv_usage_over_time", "linear_step_time", "make_requests", "percentile",
    "simulate", "summarize",
]
