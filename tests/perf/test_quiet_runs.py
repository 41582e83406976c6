"""Advancing runs of identical decode steps at once (Emulator fast=True) gives exactly what
stepping them one by one gives (fast=False): same steps, same per-request token times."""

from __future__ import annotations

import pytest

from kvplan.perf import (
    ClosedLoop, EngineConfig, Lengths, OpenLoop, SharedPrefix, linear_step_time, make_requests, simulate,
)

CASES = {
    "closed, caching, sync": (dict(async_scheduling=False), "closed"),
    "closed, caching, async": (dict(async_scheduling=True), "closed"),
    "open, async, seats bind": (dict(async_scheduling=True, max_num_seqs=8), "open"),
    "open, sync, no caching": (dict(async_scheduling=False, enable_prefix_caching=False), "open"),
    "tiny pool, preemptions, async": (dict(async_scheduling=True, num_gpu_blocks=120), "closed"),
    "tiny pool, preemptions, sync": (dict(async_scheduling=False, num_gpu_blocks=120), "closed"),
    # a hybrid: a full-attention group beside a recurrent-state group of 2 pages per request
    # (state first, as vLLM may order them): decodes never change the state pages
    "hybrid state group, async": (dict(async_scheduling=True, num_gpu_blocks=400, groups="hybrid"), "closed"),
    "hybrid state group, sync, open": (dict(async_scheduling=False, num_gpu_blocks=400, groups="hybrid"), "open"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fast_and_exact_stepping_agree(name):
    flags, kind = CASES[name]
    cfg = dict(num_gpu_blocks=5000, block_size=16, max_model_len=2048, max_num_batched_tokens=512,
               max_num_seqs=32, enable_prefix_caching=True, vllm_version="0.26.0")
    cfg.update(flags)
    if cfg.get("groups") == "hybrid":
        from kvplan.perf import GroupSpec

        cfg["groups"] = (GroupSpec("state", 16, None, 2), GroupSpec("full", 16))
    cfg = EngineConfig(**cfg)
    w = Lengths([(200, 40), (600, 90), (64, 150)], [1.0, 1.0, 1.0], "mix")
    reqs = tuple(make_requests(120, w, seed=4, shared_prefix=SharedPrefix(0.5, 100)))
    workload = ClosedLoop(reqs, 16) if kind == "closed" else OpenLoop(reqs, 40.0, seed=9)
    step = linear_step_time(0.004, 1e-5, 1e-7)
    fast = simulate(cfg, step, workload, fast=True)
    exact = simulate(cfg, step, workload, fast=False)
    assert fast.steps == exact.steps
    assert fast.requests == exact.requests
    if "preemptions" in name:
        assert sum(r.num_preemptions for r in exact.requests) > 0


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_every_block_is_returned_and_every_token_delivered(async_scheduling):
    # a hybrid full + sliding-window layout, prefix caching, preemptions: after the run all
    # usable blocks are free again, no block is referenced, each request got its tokens in order
    from kvplan.perf import Emulator, GroupSpec

    cfg = EngineConfig(num_gpu_blocks=400, block_size=16, max_model_len=4096, max_num_batched_tokens=1024,
                       max_num_seqs=32, groups=(GroupSpec("full", 16), GroupSpec("sliding", 16, 128)),
                       enable_prefix_caching=True, async_scheduling=async_scheduling, vllm_version="0.26.0")
    reqs = tuple(make_requests(150, Lengths([(300, 50), (900, 120)], None, "x"), seed=2, shared_prefix=SharedPrefix(0.6, 256)))
    em = Emulator(cfg, linear_step_time(0.004, 1e-5, 1e-7))
    res = em.run(ClosedLoop(reqs, 24))
    assert em.pool.num_free == em.pool.num_usable == 399
    assert not any(em.pool.ref)
    assert sum(r.num_preemptions for r in res.requests) > 0
    assert res.approximate  # sliding-window prefix hits are labelled approximate
    for r in res.requests:
        assert len(r.token_times_s) == r.output_tokens
        assert list(r.token_times_s) == sorted(r.token_times_s)
    assert max(s.num_tokens for s in res.steps) <= 1024 and max(s.num_seqs for s in res.steps) <= 32
