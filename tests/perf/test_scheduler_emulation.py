"""The emulated vLLM V1 scheduler against step-by-step hand arithmetic (rules of vLLM 0.26.0
v1/core/sched/scheduler.py, kv_cache_manager.py, block_pool.py; every expected number below is
worked out in the comments, not taken from the emulator)."""

from __future__ import annotations

import math

import pytest

from kvplan.errors import KvplanError
from kvplan.perf import (
    ClosedLoop,
    EngineConfig,
    GroupSpec,
    OpenLoop,
    RequestSpec,
    constant_step_time,
    simulate,
)

V = "0.26.0"


def config(**kw) -> EngineConfig:
    base = dict(
        num_gpu_blocks=10_000, block_size=16, max_model_len=16_384, max_num_batched_tokens=8192,
        max_num_seqs=256, enable_prefix_caching=False, async_scheduling=False, vllm_version=V,
    )
    base.update(kw)
    return EngineConfig(**base)


def at_once(*specs: RequestSpec) -> OpenLoop:
    return OpenLoop(tuple(specs), math.inf)


def run(cfg: EngineConfig, workload, seconds: float = 1.0):
    return simulate(cfg, constant_step_time(seconds), workload)


def test_a_batch_that_exactly_fills_the_token_budget():
    # budget 8192, five 2048-token prompts at t=0: four fill step 1 (4 x 2048 = 8192), the fifth
    # waits; step 2 = 4 decodes + the fifth's 2048 = 2052 tokens.
    res = run(config(), at_once(*[RequestSpec(2048, 4)] * 5))
    s1, s2 = res.steps[0], res.steps[1]
    assert (s1.num_tokens, s1.num_seqs, s1.num_waiting) == (8192, 4, 1)
    assert s1.kv_blocks_used == 4 * 2048 // 16  # 512 blocks
    assert (s2.num_tokens, s2.num_decodes, s2.num_prefill_tokens) == (2052, 4, 2048)
    assert [r.first_scheduled_s for r in res.requests] == [0, 0, 0, 0, 1]
    assert [r.first_token_s for r in res.requests] == [1, 1, 1, 1, 2]


def test_async_scheduling_plans_the_next_batch_while_one_runs():
    # async: step 2 is scheduled at t=0 while step 1 runs, with a placeholder for each first
    # token: 4 decodes + the fifth prompt, so the fifth is admitted at t=0 (sync: t=1).
    res = run(config(async_scheduling=True), at_once(*[RequestSpec(2048, 4)] * 5))
    assert [s.num_tokens for s in res.steps[:2]] == [8192, 2052]
    assert res.requests[4].first_scheduled_s == 0
    assert res.requests[4].first_token_s == 2
    # each request's 4 tokens come one step apart and none is computed twice
    assert res.requests[0].token_times_s == (1, 2, 3, 4)


def test_async_frees_a_finished_requests_seat_one_step_later():
    # max_num_seqs 2; C (4 in, 10 out), A (4 in, 2 out), B (4 in, 1 out) at t=0, 1 s steps.
    # sync: A's last token at t=2 frees its seat before step 3 is scheduled -> B runs [2,3].
    # async: step 3 is scheduled at t=1 (A still running, its last token in flight: not
    # rescheduled), so B enters step 4, scheduled at t=2, run [3,4].
    w = at_once(RequestSpec(4, 10), RequestSpec(4, 2), RequestSpec(4, 1))
    sync = run(config(max_num_seqs=2, max_num_batched_tokens=64), w)
    asyn = run(config(max_num_seqs=2, max_num_batched_tokens=64, async_scheduling=True), w)
    assert (sync.requests[2].first_scheduled_s, sync.requests[2].finish_s) == (2, 3)
    assert (asyn.requests[2].first_scheduled_s, asyn.requests[2].finish_s) == (2, 4)
    assert sync.requests[1].finish_s == asyn.requests[1].finish_s == 2


def test_a_prefix_hit_skips_whole_blocks_only():
    # block 16, shared prefix 40: blocks 0-1 (tokens 0..31) lie in the prefix, block 2
    # (32..47) does not -> a later request hits 2 blocks = 32 tokens and computes 50-32 = 18
    # (8 of the prefix recomputed). A partial block is never a hit.
    cfg = config(enable_prefix_caching=True)
    a = RequestSpec(50, 2, prefix_group=0, shared_prefix_tokens=40)
    w = OpenLoop((a, a, RequestSpec(40, 2, 0, 40), RequestSpec(32, 2, 0, 32)), 1e-9)
    w = _spaced(w, 10.0)
    res = run(cfg, w)
    assert [r.cached_tokens for r in res.requests] == [0, 32, 32, 16]
    # request 1's prefill step: 18 new tokens on 32 cached
    step = next(s for s in res.steps if s.start_s == 10.0)
    assert step.num_tokens == 18
    # request 3 (32 tokens, all in the cache): the hit leaves the last token to compute, and
    # whole blocks only: floor(31 / 16) = 1 block = 16 tokens.


def _spaced(w: OpenLoop, gap: float) -> OpenLoop:
    class Spaced(OpenLoop):
        def arrival_times(self):
            return [i * gap for i in range(len(self.requests))]

    return Spaced(w.requests, w.request_rate)


def test_preemption_when_the_pool_runs_dry():
    # 7 blocks (6 usable, block 0 is the null block), block 4; A and B: 8 in, 8 out, at t=0.
    # step 1: both prefill (2 blocks each, 2 free). steps 2-5: slots 9..12 need 3 blocks each
    # (step 2 takes the last 2). step 6: A needs slot 13 -> a 4th block, none free -> the
    # newest running request (B) is preempted (frees 3), A takes 1 (2 free). B (8 + 5 outputs
    # = 13 tokens = 4 blocks) cannot be readmitted until A finishes after step 8 (its 8th
    # token); step 9 recomputes B's 13 tokens, its tokens 6..8 come at t = 9, 10, 11.
    cfg = config(num_gpu_blocks=7, block_size=4, max_model_len=64, max_num_batched_tokens=64, max_num_seqs=4)
    res = run(cfg, at_once(RequestSpec(8, 8), RequestSpec(8, 8)))
    a, b = res.requests
    assert (a.num_preemptions, b.num_preemptions) == (0, 1)
    assert a.token_times_s == (1, 2, 3, 4, 5, 6, 7, 8)
    assert b.token_times_s == (1, 2, 3, 4, 5, 9, 10, 11)
    assert [s.num_preempted for s in res.steps] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    assert [s.num_tokens for s in res.steps] == [16, 2, 2, 2, 2, 1, 1, 1, 13, 1, 1]
    assert [s.kv_blocks_used for s in res.steps][:6] == [4, 6, 6, 6, 6, 4]


def test_chunked_prefill_splits_a_long_prompt_and_serves_decodes_first():
    # budget 64. A (10 in, 5 out) at 0; B (150 in, 2 out) at 1.5 (seen at the t=2 step).
    # step 3: A's decode first, B gets 63; step 4: 1 + 63; step 5: A's last decode + B's last
    # 24 (150 - 126), which samples B's first token at t=5; step 6: B's second token.
    cfg = config(max_num_batched_tokens=64, max_num_seqs=4)

    class Two(OpenLoop):
        def arrival_times(self):
            return [0.0, 1.5]

    res = run(cfg, Two((RequestSpec(10, 5), RequestSpec(150, 2)), 1.0))
    got = [(s.num_decodes, s.num_prefill_tokens) for s in res.steps]
    assert got == [(0, 10), (1, 0), (1, 63), (1, 63), (1, 24), (1, 0)]
    b = res.requests[1]
    assert (b.first_scheduled_s, b.first_token_s, b.finish_s) == (2, 5, 6)
    assert b.first_token_s - b.arrival_s == 3.5


def test_max_num_seqs_caps_the_running_requests():
    # 2 seats, three 4-token prompts with 3 outputs: the third waits until the first two finish
    # (their 3rd token at t=3), runs steps [3,4], [4,5], [5,6].
    res = run(config(max_num_seqs=2, max_num_batched_tokens=64), at_once(*[RequestSpec(4, 3)] * 3))
    assert max(s.num_seqs for s in res.steps) == 2
    third = res.requests[2]
    assert (third.first_scheduled_s, third.first_token_s, third.finish_s) == (3, 4, 6)


def test_long_prefill_threshold_rule_differs_by_version():
    # one 64-token prompt, --long-prefill-token-threshold 16: vLLM 0.26.0 caps it even alone
    # (4 prefill steps), 0.33.0 lifts the cap when only one request is queued or running.
    w = at_once(RequestSpec(64, 1))
    old = run(config(long_prefill_token_threshold=16, vllm_version="0.26.0"), w)
    new = run(config(long_prefill_token_threshold=16, vllm_version="0.33.0"), w)
    assert [s.num_tokens for s in old.steps] == [16, 16, 16, 16]
    assert [s.num_tokens for s in new.steps] == [64]


def test_sliding_window_group_frees_blocks_behind_the_window():
    # window 8, block 4, 4 in + 20 out: at computed c, blocks before (c - 7) // 4 are freed,
    # so a request holds at most cdiv(c+1, 4) - (c-7)//4 <= 3 blocks; full attention would
    # hold cdiv(4 + 19, 4) = 6 at the last step.
    w = at_once(RequestSpec(4, 20))
    slide = run(config(block_size=4, groups=(GroupSpec("sliding", 4, 8),)), w)
    full = run(config(block_size=4), w)
    assert max(s.kv_blocks_used for s in slide.steps) == 3
    assert max(s.kv_blocks_used for s in full.steps) == 6


def test_closed_loop_keeps_the_concurrency_in_flight():
    res = run(config(max_num_batched_tokens=1024), ClosedLoop(tuple(RequestSpec(16, 3 + i % 4) for i in range(10)), 3))
    finishes = sorted(r.finish_s for r in res.requests)
    # the first three are sent at 0, every later one exactly when an earlier one finished
    assert [r.arrival_s for r in res.requests[:3]] == [0, 0, 0]
    assert all(r.arrival_s in finishes for r in res.requests[3:])
    for r in res.requests:
        t = r.arrival_s
        in_flight = sum(1 for q in res.requests if q.arrival_s <= t < q.finish_s)
        assert in_flight <= 3


def test_bad_input_is_refused_naming_the_key():
    with pytest.raises(KvplanError, match="max-model-len"):
        run(config(max_model_len=100), at_once(RequestSpec(90, 20)))
    with pytest.raises(KvplanError, match="pool"):
        run(config(num_gpu_blocks=3, block_size=4), at_once(RequestSpec(12, 1)))
    with pytest.raises(KvplanError, match="max-num-seqs"):
        run(config(max_num_batched_tokens=8, max_num_seqs=16), at_once(RequestSpec(4, 1)))
    with pytest.raises(KvplanError, match="mamba"):
        GroupSpec("mamba", 16)
    with pytest.raises(KvplanError, match="vllm-version"):
        run(config(vllm_version="9.9.9"), at_once(RequestSpec(4, 1)))
