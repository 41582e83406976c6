"""The benchmark client's metric definitions (vllm bench serve) on hand-built runs, and the
saturation finder on a run whose capacity is known by arithmetic."""

from __future__ import annotations

import math

import pytest

from kvplan.perf import (
    EngineConfig,
    OpenLoop,
    RequestRecord,
    RequestSpec,
    SimulationResult,
    StepRecord,
    constant_step_time,
    is_stable,
    percentile,
    saturation_rate,
    simulate,
    summarize,
)


def _result(*records, steps=()) -> SimulationResult:
    cfg = EngineConfig(num_gpu_blocks=11, block_size=16, max_model_len=64, max_num_batched_tokens=64, max_num_seqs=4)
    return SimulationResult(cfg, tuple(records), tuple(steps), 10)


def _rec(i, arrival, times, prompt=10) -> RequestRecord:
    return RequestRecord(i, prompt, len(times), 0, arrival, arrival, times[0], times[-1], tuple(times), 0)


def test_percentile_interpolates_linearly_like_numpy():
    # numpy.percentile([1, 2, 4], 90) = 2 + 0.8 * (4 - 2) = 3.6 (position 0.9 * 2 = 1.8)
    assert percentile([4, 1, 2], 90) == pytest.approx(3.6)
    assert percentile([4, 1, 2], 50) == 2
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))


def test_ttft_tpot_itl_e2e_definitions():
    # tokens at 1, 3, 4, 8 for a request sent at 0: TTFT 1, E2E 8,
    # TPOT = (8 - 1) / (4 - 1) = 7/3, ITLs 2, 1, 4. A one-token request has no TPOT.
    s = summarize(_result(_rec(0, 0.0, (1.0, 3.0, 4.0, 8.0)), _rec(1, 2.0, (4.0,))))
    assert s.ttft.mean == pytest.approx((1 + 2) / 2)
    assert s.e2e.p50 == pytest.approx((8 + 2) / 2)
    assert s.tpot.count == 1 and s.tpot.p50 == pytest.approx(7 / 3)
    assert s.itl.count == 3 and s.itl.p50 == 2 and s.itl.mean == pytest.approx(7 / 3)
    # duration 0 -> 8: 5 output tokens, 20 prompt tokens, 2 requests
    assert s.duration_s == 8
    assert s.output_throughput == pytest.approx(5 / 8)
    assert s.total_token_throughput == pytest.approx(25 / 8)
    assert s.request_throughput == pytest.approx(2 / 8)


def test_kv_usage_is_weighted_by_step_duration():
    # 10 usable blocks: 2 blocks for 1 s then 8 blocks for 3 s -> (0.2 * 1 + 0.8 * 3) / 4 = 0.65
    steps = (StepRecord(0, 1, 1, 1, 0, 1, 1, 0, 2, 0), StepRecord(1, 4, 1, 0, 1, 1, 1, 0, 8, 0))
    s = summarize(_result(_rec(0, 0.0, (1.0, 4.0)), steps=steps))
    assert s.kv_usage_mean == pytest.approx(0.65)
    assert s.kv_usage_max == pytest.approx(0.8)


def test_saturation_rate_found_near_the_arithmetic_capacity():
    # one seat (max_num_seqs 1), 1-token outputs, 1 s steps: every request takes exactly one
    # step, so the engine serves 1 request/s; Poisson arrivals above 1/s queue without bound.
    # 2000 requests: the middle half (1000 arrivals) has a Poisson count noise of ~3 %.
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=64, max_num_batched_tokens=64,
                       max_num_seqs=1, async_scheduling=False, vllm_version="0.26.0")
    reqs = tuple([RequestSpec(8, 1)] * 2000)

    def run_at(rate):
        return simulate(cfg, constant_step_time(1.0), OpenLoop(reqs, rate, seed=11))

    assert is_stable(run_at(0.5)) and not is_stable(run_at(2.0))
    sat = saturation_rate(run_at, 0.25, 4.0, rel_tol=0.02)
    # within the 0.9-1.1x band the issue asks stable/overloaded to be right outside of
    assert 0.9 <= sat <= 1.1
