"""kvplan/perf/tune.py: the --max-num-seqs / --max-num-batched-tokens grid under an SLO."""

from __future__ import annotations

from kvplan.capacity.options import plan_from_options
from kvplan.perf.batch import constant_step_time
from kvplan.perf.serving import Load
from kvplan.perf.slo import parse_slo
from kvplan.perf.tune import grid, recommend
from kvplan.perf.workload import Lengths


def _plan(**kw):
    return plan_from_options(model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", gpu="H200", gpu_memory=None,
                             gpu_profiles=None, revision=None, vllm_version="0.26.0", **kw)[0]


def test_grid_keeps_pairs_vllm_accepts():
    pairs = grid(16, 1024, 2048)
    assert (4, 256) in pairs and (16, 2048) in pairs
    assert all(m >= s for s, m in pairs)  # vLLM: max_num_batched_tokens >= max_num_seqs
    assert grid(1024, 512, 2048) and all(m >= s for s, m in grid(1024, 512, 2048))
    # chunked prefill off: the budget must hold a whole max_model_len sequence
    assert all(m >= 2048 for _, m in grid(16, 1024, 2048, chunked_prefill=False))


def test_picks_the_budget_that_prefills_in_one_step():
    # One request at a time, 1536-token prompts, 10 ms per step. A prompt needs
    # ceil(1536 / budget) steps: 256 -> 6, 512 -> 3, 1024 -> 2, 2048 -> 1. TTFT p50 <= 15 ms
    # (one step) is met only with --max-num-batched-tokens 2048; every seats value >= 1 gives the
    # same run, so the tie goes to the fewest changed flags: --max-num-seqs stays 16.
    p = _plan(max_num_seqs=16, max_num_batched_tokens=1024)
    rec = recommend(p, constant_step_time(0.010), Lengths.fixed(1536, 8), Load("closed", 1),
                    parse_slo("ttft_p50=15ms"), num_requests=6)
    assert rec.best is not None
    assert (rec.best.max_num_seqs, rec.best.max_num_batched_tokens) == (16, 2048)
    assert rec.best.summary.ttft.p50 == 0.010 or abs(rec.best.summary.ttft.p50 - 0.010) < 1e-9
    for c in rec.candidates:
        assert c.meets == (c.max_num_batched_tokens >= 1536), c
    # the default pair's TTFT is two steps
    default = next(c for c in rec.candidates if (c.max_num_seqs, c.max_num_batched_tokens) == (16, 1024))
    assert abs(default.summary.ttft.p50 - 0.020) < 1e-9


def test_no_pair_meets_an_impossible_slo():
    p = _plan(max_num_seqs=16, max_num_batched_tokens=1024)
    rec = recommend(p, constant_step_time(0.010), Lengths.fixed(128, 8), Load("closed", 1),
                    parse_slo("ttft_p50=5ms"), num_requests=4)
    assert rec.best is None and all(c.goodput == 0.0 for c in rec.candidates)


def test_the_winner_is_run_again_at_the_headline_length():
    # the same case with confirm_requests=12 (the headline's length): the winner (16, 2048) and the
    # flags as given (16, 1024) run again on 12 requests; TTFT one step (10 ms) against two (20 ms)
    p = _plan(max_num_seqs=16, max_num_batched_tokens=1024)
    rec = recommend(p, constant_step_time(0.010), Lengths.fixed(1536, 8), Load("closed", 1),
                    parse_slo("ttft_p50=15ms"), num_requests=6, confirm_requests=12)
    assert rec.confirmed_requests == 12 and not rec.keeps_given_flags
    assert (rec.best.max_num_seqs, rec.best.max_num_batched_tokens) == (16, 2048)
    assert rec.best.summary.completed == 12 and rec.default.summary.completed == 12
    assert abs(rec.default.summary.ttft.p50 - 0.020) < 1e-9


def test_the_flags_as_given_are_not_recommended():
    # 128-token prompts prefill in one step with every budget >= 256 of the grid around 1024, so
    # every pair gives the same run: the tie goes to the fewest changed flags, the flags as given.
    # That is no recommendation: keeps_given_flags, no serve line, and the table says so.
    import io

    from rich.console import Console

    from kvplan.render.perf import print_recommendation, recommendation_dict

    p = _plan(max_num_seqs=16, max_num_batched_tokens=1024)
    rec = recommend(p, constant_step_time(0.010), Lengths.fixed(128, 8), Load("closed", 1),
                    parse_slo("ttft_p50=15ms"), num_requests=6, confirm_requests=12)
    assert rec.keeps_given_flags
    assert (rec.best.max_num_seqs, rec.best.max_num_batched_tokens) == (16, 1024)
    d = recommendation_dict(rec)
    assert d["keeps_given_flags"] is True and d["serve_command"] is None
    buf = io.StringIO()
    print_recommendation(rec, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "no change recommended" in text and "vllm serve" not in text
