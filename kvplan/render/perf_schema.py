"""The JSON Schema of ``kvplan perf --format json`` (and of ``estimate --perf``'s ``perf``
section), as pydantic models mirroring kvplan/render/perf.py key for key (unknown keys
forbidden, types strict). ``kvplan schema perf`` prints it.

Times are seconds, throughputs tokens/s or requests/s; a statistic without samples is null.
"""

from __future__ import annotations

from typing import Any, Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Num = Optional[float]
Point = Annotated[list[float], Field(min_length=2, max_length=2)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Calibration(_Strict):
    """What the step times stand on."""

    status: Literal["uncalibrated", "fitted", "transferred"]
    label: str = Field(min_length=1, description="'uncalibrated (physics priors)', 'fitted on N records (...)' or "
                       "'transferred from <GPU> (<vLLM version>): <cross-GPU / cross-version error, measured or unmeasured>; ...'")
    source: str


class Engine(_Strict):
    """The emulated engine, every flag resolved."""

    num_gpu_blocks: int = Field(ge=1)
    block_size: int = Field(ge=1)
    max_model_len: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)
    enable_prefix_caching: bool
    enable_chunked_prefill: bool
    async_scheduling: bool


class Load(_Strict):
    kind: Literal["closed", "open"]
    concurrency: Optional[int] = Field(default=None, ge=1)
    request_rate: Num = None


class SharedPrefix(_Strict):
    fraction: float = Field(ge=0, le=1)
    tokens: int = Field(ge=0)


class Workload(_Strict):
    lengths: str
    load: Load
    num_requests: int = Field(ge=1)
    seed: int
    shared_prefix: Optional[SharedPrefix]


class Dist(_Strict):
    """Seconds; null without samples."""

    mean: Num
    p50: Num
    p90: Num
    p99: Num
    count: int = Field(ge=0)


class Metrics(_Strict):
    """The benchmark client's metrics (kvplan/perf/metrics.py)."""

    duration_s: Num
    completed: int = Field(ge=0)
    output_throughput: Num = Field(description="output tokens/s")
    total_token_throughput: Num = Field(description="prompt + output tokens/s")
    request_throughput: Num = Field(description="requests/s")
    ttft_s: Dist
    tpot_s: Dist
    itl_s: Dist
    e2e_s: Dist
    preemptions: int = Field(ge=0)


class KVUsage(_Strict):
    mean: Num = Field(description="step-time weighted mean of used / usable blocks")
    max: Num
    timeline: list[Point] = Field(description="[time s, used fraction] per step, at most 100 points")


class SaturationPoint(_Strict):
    request_rate: Num
    stable: bool
    ttft_p50_s: Num
    ttft_p99_s: Num
    tpot_p50_s: Num
    tpot_p99_s: Num
    request_throughput: Num


class Saturation(_Strict):
    rate: Num = Field(description="the highest sustained throughput of the emulated engine, requests/s "
                      "(closed loop, steady state): Poisson arrivals below it are served, above it the queue grows")
    bounded: bool = Field(description="always true (kept for compatibility): the search ends where the rate stops rising, "
                          "the KV pool binds or --max-num-seqs caps it")
    lower_bound: bool = Field(description="always false (kept for compatibility: the rate is not a lower bound)")
    concurrency: int = Field(ge=0, description="requests in flight of the closed-loop run that reached the rate")
    note: str = Field(description="what the points are: open loops measured over their steady state")
    requests: int = Field(ge=1, description="requests of the longest open-loop (latency against load) run: each sends "
                          "max(the requests asked, 100, 4 x its fraction x concurrency)")
    points: list[SaturationPoint] = Field(description="open-loop runs at fractions of the rate: latency against load "
                                          "over each run's steady state (the requests sent in the middle half of "
                                          "its sending window); stable = the run kept up with its arrivals "
                                          "(as many finished as arrived, within 10%); request_throughput = "
                                          "requests/s served in that window")


class Check(_Strict):
    key: str
    value_s: Num
    limit_s: float = Field(gt=0)
    met: bool


class SLO(_Strict):
    targets: dict[str, float]
    met: bool
    goodput: Num = Field(description="request throughput when every target is met, else 0")
    checks: list[Check]


class Candidate(_Strict):
    max_num_seqs: int = Field(ge=1)
    max_num_batched_tokens: int = Field(ge=1)
    num_gpu_blocks: Optional[int]
    meets_slo: bool
    goodput: Num
    worst_ratio: Num
    metrics: Optional[Metrics]
    skipped: Optional[str]


class Recommendation(_Strict):
    requests_per_run: int = Field(ge=1, description="requests of each grid run")
    confirmed_requests: int = Field(ge=0, description="requests of the runs that confirmed best against the flags "
                                    "as given (the headline's length; 0: best is from the grid runs)")
    keeps_given_flags: bool = Field(description="the best pair is the flags as given: nothing is recommended "
                                    "(serve_command null)")
    best: Optional[Candidate]
    serve_command: Optional[str]
    candidates: list[Candidate]


class PerfSection(_Strict):
    """The prediction (``estimate --perf``'s ``perf`` key has exactly this shape)."""

    calibration: Calibration
    approximate: list[str] = Field(description="every reason the numbers are approximate; empty = none")
    engine: Engine
    workload: Workload
    metrics: Metrics
    kv_usage: KVUsage
    saturation: Optional[Saturation]
    slo: Optional[SLO]
    recommendation: Optional[Recommendation]


class PerfVllm(_Strict):
    """``vllm``: which vLLM version's rules were used, and why (engines/vllm/versions.VersionChoice;
    the same keys as the estimate document's ``vllm``, kvplan/render/schema.py VllmChoice)."""

    version: str = Field(description="the version whose rules were used (vllm_version)")
    reason: str = Field(min_length=1, description='why: "--vllm-version", "installed vllm X", "newest supported; no vllm installed"')
    requested: Optional[str] = Field(default=None, description="the version the source named when kvplan has no rules for it")


class PerfEvidence(_Strict):
    """``evidence``: what the plan's numbers stand on (engines/vllm/rules.Evidence; the estimate
    document's ``evidence``)."""

    checked: bool
    real_starts: int = Field(ge=0)
    unchecked: list[str]
    label: str = Field(min_length=1)


class DataParallelDoc(BaseModel):
    """``data_parallel``: the DP engines (kvplan/cli/perf.py data_parallel_section): a dense
    model's independent engines, or a MoE model's engines stepping in lockstep; every other
    figure of the document is one engine's (for a MoE model the one with the fewest KV blocks)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    engines: int = Field(ge=2)
    figures_are_per_engine: bool
    lockstep: bool = Field(description="a MoE model's engines: every step lasts the slowest engine's (vLLM DPEngineCoreProc)")
    output_throughput: float = Field(ge=0, description="tokens/s, the engines together")
    total_token_throughput: float = Field(ge=0, description="tokens/s, the engines together")
    request_throughput: float = Field(ge=0, description="requests/s, the engines together")
    balancer: str = Field(min_length=1)


class PerfDocument(PerfSection):
    """The whole ``kvplan perf --format json`` document."""

    data_parallel: Optional[DataParallelDoc] = Field(
        default=None, description="--data-parallel-size > 1; absent otherwise"
    )

    kvplan_version: str
    model: str
    gpu: str
    tensor_parallel_size: int = Field(ge=1)
    vllm_version: str
    vllm: PerfVllm
    evidence: Optional[PerfEvidence]
    speculative: Optional[dict[str, Any]] = Field(
        default=None,
        description="only with --speculative-config and --spec-acceptance (kvplan/perf/speculative.py "
        "SpeculativeEffect): the step model's verify-and-draft step over the stated acceptance; the document's "
        "metrics, SLO verdict and goodput already include it (speculative_summary); labelled approximate",
    )


def perf_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of the ``kvplan perf --format json`` document."""
    schema = PerfDocument.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvplan perf --format json"
    return schema
