"""The benchmark client's metric definitions (vllm bench serve) on hand-built runs, and the
saturation rate (the closed-loop capacity) on engines whose capacity is known by arithmetic."""

from __future__ import annotations

import math

import pytest

from kvplan.perf.serving import closed_loop_capacity, find_saturation
from kvplan.perf import (
    EngineConfig,
    Lengths,
    OpenLoop,
    RequestRecord,
    RequestSpec,
    SimulationResult,
    StepRecord,
    constant_step_time,
    percentile,
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


def test_saturation_rate_is_the_arithmetic_capacity_of_one_seat():
    # one seat (max_num_seqs 1), 1-token outputs, 1 s steps, no async lag: every request takes
    # exactly one step, so the engine serves 1 request/s, whatever the arrivals.
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=64, max_num_batched_tokens=64,
                       max_num_seqs=1, async_scheduling=False, vllm_version="0.26.0")
    sat = find_saturation(cfg, constant_step_time(1.0), Lengths.fixed(8, 1), num_requests=8)
    assert sat.rate == pytest.approx(1.0)
    assert sat.concurrency == 1 and sat.bounded and not sat.lower_bound
    # latency against load at fixed fractions of the rate, all below it (above it a finite run's
    # latency only says how long the run was); each open loop sends at least 100 requests
    # (serving._OPEN_LOOP_MIN: 8 leave 4 arrivals to judge by), and one seat of 1 s keeps up with
    # Poisson arrivals at 0.9 req/s over them
    assert [round(r, 6) for r, _, _ in sat.points] == [0.25, 0.5, 0.75, 0.9]
    assert sat.requests == 100
    assert all(st for _, st, _ in sat.points)
    # what each point served in its steady window: about what was offered, never the 1 req/s seat's
    # capacity exceeded by more than the window's noise
    for r, _, s in sat.points:
        assert 0.7 * r < s.request_throughput < 1.1


def test_saturation_rate_of_four_seats_by_hand():
    # 4 seats, 128 in / 16 out, 10 ms steps, no async lag: a request holds its seat for 16 steps
    # (the prefill step samples the first token, 15 decodes the rest) and its replacement is
    # scheduled the next step, so 4 seats serve 4 / 0.160 s = 25 requests/s. The search starts at
    # min(8, max_num_seqs) = 4 in flight and cannot double past --max-num-seqs.
    cfg = EngineConfig(num_gpu_blocks=1000, block_size=16, max_model_len=256, max_num_batched_tokens=2048,
                       max_num_seqs=4, async_scheduling=False, vllm_version="0.26.0")
    sat = find_saturation(cfg, constant_step_time(0.010), Lengths.fixed(128, 16), num_requests=8)
    assert sat.rate == pytest.approx(25.0)
    assert sat.concurrency == 4


def test_saturation_search_stops_when_the_pool_binds():
    # 41 usable blocks, requests of 112 + 16 tokens: admission takes 7 blocks (112 / 16) and a
    # request grows to 8, so 5 run at once (35 blocks; a 6th finds 6 free < 7). A closed loop of 8
    # cannot run 8, so the search stops at 8 without doubling to 16 (max_num_seqs 64). 5 seats of
    # 16 steps (1 prefill + 15 decodes) of 10 ms serve at most 5 / 0.16 s = 31.25 req/s.
    cfg = EngineConfig(num_gpu_blocks=42, block_size=16, max_model_len=256, max_num_batched_tokens=2048,
                       max_num_seqs=64, async_scheduling=False, vllm_version="0.26.0")
    sat = find_saturation(cfg, constant_step_time(0.010), Lengths.fixed(112, 16), num_requests=8)
    assert sat.concurrency == 8
    assert 0 < sat.rate <= 5 / 0.16 + 1e-9


def test_closed_loop_capacity_counts_whole_waves():
    # 2 in flight, 24 requests finishing in waves of 2 at 3, 4, 5, ... 14 s (the first wave late:
    # ramp-up). The window runs from the 2nd finish (3 s) to the 22nd (13 s): 20 completions in
    # 10 s -> 2 requests/s. The whole run would say 24 / 14 = 1.71; starting the window at the
    # first finish of the second wave (4 s) would say 19 / 9 = 2.11.
    recs = [_rec(i, 0.0, (3.0 + i // 2,)) for i in range(24)]
    assert closed_loop_capacity(_result(*recs), 2) == pytest.approx(2.0)
