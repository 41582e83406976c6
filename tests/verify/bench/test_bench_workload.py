"""Workload drivers and grids: closed loop keeps exactly c requests in flight, open loop sends
at seeded Poisson times, the full grid skips points over the prompt-token limit, and the
summary's percentiles and rates follow from the timestamps by hand arithmetic."""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_vllm_server import FakeServer  # noqa: E402

from kvplan.verify.bench.http import Endpoint
from kvplan.verify.bench.record import RequestRecord, max_in_flight, percentile, summarize
from kvplan.verify.bench.runner import request_records
from kvplan.verify.bench.workload import PointSpec, grid, poisson_gaps, resolve_rate, run_point, warmup_points


@pytest.fixture
def server():
    s = FakeServer(ttft_s=0.03, itl_s=0.01, max_num_seqs=64)
    s.start()
    yield s
    s.stop()


def test_closed_loop_keeps_exactly_c_in_flight(server):
    spec = PointSpec("closed-c5-16x4", "closed", 16, 4, concurrency=5, seconds=0.6, min_requests=5, drain_s=10)
    run = asyncio.run(run_point(spec, Endpoint("127.0.0.1", server.port), "fake-model", 1000, seed=1))
    assert server.max_running == 5
    recs = request_records(run)
    assert max_in_flight(recs) == 5
    assert all(r.error is None for r in recs)
    # each request lasts ~60 ms (30 ms + 3 x 10 ms): 0.6 s keeps 5 senders busy ~10 rounds
    assert len(recs) >= 5 * 4
    # after sending stopped no sender started another request
    assert all(r.sent_s <= run.send_stop - run.start + 1e-6 for r in recs)
    assert run.cancelled == 0


def test_closed_loop_sends_at_least_min_requests(server):
    spec = PointSpec("closed-c2-16x2", "closed", 16, 2, concurrency=2, seconds=0.0, min_requests=2, drain_s=10)
    run = asyncio.run(run_point(spec, Endpoint("127.0.0.1", server.port), "fake-model", 1000))
    assert len(run.timings) == 2


def test_poisson_gaps_are_seeded_and_have_mean_one_over_rate():
    a = list(itertools.islice(poisson_gaps(4.0, 0, "p"), 20000))
    b = list(itertools.islice(poisson_gaps(4.0, 0, "p"), 20000))
    c = list(itertools.islice(poisson_gaps(4.0, 1, "p"), 20000))
    assert a == b and a != c
    # exponential with rate 4/s: mean 0.25 s; the mean of 20,000 draws is within 3 % (6 sigma)
    assert abs(sum(a) / len(a) - 0.25) < 0.0075


def test_open_loop_sends_at_the_seeded_arrival_times(server):
    spec = PointSpec("open-x", "open", 16, 2, rate=40.0, seconds=0.5, min_requests=3, drain_s=10)
    run = asyncio.run(run_point(spec, Endpoint("127.0.0.1", server.port), "fake-model", 1000, seed=3))
    recs = request_records(run)
    gaps = list(itertools.islice(poisson_gaps(40.0, 3, "open-x"), len(recs)))
    due = [sum(gaps[:i]) for i in range(len(recs))]  # the first request goes at once
    for r, d in zip(recs, due):
        assert d - 0.002 <= r.sent_s <= d + 0.05, (r.index, r.sent_s, d)
    # requests arriving while others run are not held back (open loop)
    assert len(recs) == sum(1 for d in due if d < 0.5) or len(recs) == 3


def test_open_loop_without_a_rate_is_refused(server):
    spec = PointSpec("open-y", "open", 16, 2, seconds=0.1)
    with pytest.raises(ValueError):
        asyncio.run(run_point(spec, Endpoint("127.0.0.1", server.port), "fake-model", 1000))


def test_full_grid_skips_points_over_the_prompt_token_limit():
    points, skipped = grid("full")
    names = [p.name for p in points]
    # 256 x 8192 = 2,097,152 > 600,000 is skipped; 64 x 8192 = 524,288 and 256 x 2048 = 524,288 stay
    assert [s["name"] for s in skipped] == ["closed-c256-8192x64"]
    assert "closed-c64-8192x64" in names and "closed-c256-2048x256" in names
    assert len([p for p in points if p.mode == "closed"]) == 11
    opens = [p for p in points if p.mode == "open"]
    assert [p.rate_factor for p in opens] == [0.25, 0.5, 1.0, 2.0]
    assert {p.rate_of for p in opens} == {"closed-c64-2048x256"}
    # a limit below 64 x 2048 = 131,072 drops the open loop's reference, and the open loop with it
    points, skipped = grid("full", token_limit=131_071)
    assert not [p for p in points if p.mode == "open"]
    assert sum(1 for s in skipped if s["name"].startswith("open-")) == 4


def test_open_rate_comes_from_the_reference_points_measured_rate():
    p = grid("quick")[0][2]
    resolved, why = resolve_rate(p, {p.rate_of: 10.0})
    assert resolved.rate == 5.0 and why is None
    none, why = resolve_rate(p, {})
    assert none is None and p.rate_of in why


def test_warmup_covers_every_input_length_and_the_largest_concurrency():
    points, _ = grid("full")
    w = warmup_points(points)
    assert [(p.input_len, p.concurrency) for p in w] == [(128, 1), (2048, 1), (8192, 1), (128, 256)]


def _req(i, sent, gaps, done, out, **kw):
    return RequestRecord(index=i, prompt_tokens=10, max_tokens=out, sent_s=sent, gaps_us=gaps, done_us=done, output_tokens=out, **kw)


def test_summary_by_hand():
    # two requests of 3 tokens: TTFT 100 and 300 ms, gaps 10/20 and 30/40 ms
    a = _req(0, 0.0, [100_000, 10_000, 20_000], 130_000, 3)
    b = _req(1, 0.5, [300_000, 30_000, 40_000], 370_000, 3)
    bad = _req(2, 0.1, [], None, 0, error="HTTP 400: no")
    s = summarize([a, b, bad])
    assert (s.completed, s.failed) == (2, 1)
    assert s.ttft_ms.p50 == 200.0 and s.ttft_ms.mean == 200.0
    assert s.ttft_ms.p90 == pytest.approx(100 + 0.9 * 200)
    # TPOT: (130 - 100) / 2 = 15 ms and (370 - 300) / 2 = 35 ms
    assert s.tpot_ms.p50 == 25.0
    # ITL: 10, 20, 30, 40 ms -> median 25, mean 25
    assert s.itl_ms.p50 == 25.0 and s.itl_ms.mean == 25.0
    # duration 0 .. 0.87 s: 6 output tokens, 26 total tokens, 2 requests
    assert s.duration_s == pytest.approx(0.87)
    assert s.output_tok_s == pytest.approx(6 / 0.87, abs=1e-3)
    assert s.total_tok_s == pytest.approx(26 / 0.87, abs=1e-3)
    assert s.req_s == pytest.approx(2 / 0.87, abs=1e-3)


def test_a_chunk_of_several_tokens_counts_as_that_many_itl_gaps():
    r = _req(0, 0.0, [50_000, 30_000], 80_000, 4, chunk_tokens=[1, 3])
    s = summarize([r])
    assert s.itl_ms.p50 == 10.0 and s.itl_ms.mean == 10.0
    assert s.tpot_ms.p50 == 10.0


def test_percentile_interpolates_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    assert percentile([], 50) is None
