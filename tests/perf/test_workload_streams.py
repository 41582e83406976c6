"""Request streams: seeded Poisson arrivals, fixed and distribution lengths, shared prefixes."""

from __future__ import annotations

import math

import pytest

from kvplan.capacity.workload_input import Workload
from kvplan.errors import KvplanError
from kvplan.perf import Lengths, OpenLoop, RequestSpec, SharedPrefix, make_requests


def _open(n: int, rate: float, seed: int) -> OpenLoop:
    return OpenLoop(tuple([RequestSpec(8, 8)] * n), rate, seed)


def test_poisson_arrivals_are_seeded_and_reproducible():
    a = _open(200, 5.0, 7).arrival_times()
    assert a == _open(200, 5.0, 7).arrival_times()
    assert a != _open(200, 5.0, 8).arrival_times()
    assert a[0] == 0.0 and a == sorted(a)


def test_poisson_gaps_have_mean_one_over_rate():
    # 20000 exponential gaps of mean 0.25 s: the sample mean's standard error is 0.25/sqrt(20000)
    # = 0.0018, so 3 % (0.0075) is > 4 standard errors.
    a = _open(20_001, 4.0, 1).arrival_times()
    assert a[-1] / 20_000 == pytest.approx(0.25, rel=0.03)


def test_infinite_rate_sends_everything_at_once():
    assert _open(5, math.inf, 0).arrival_times() == [0.0] * 5


def test_fixed_lengths_and_shared_prefix_fraction():
    reqs = make_requests(4000, Lengths.fixed(100, 10), seed=3, shared_prefix=SharedPrefix(0.25, 60))
    assert {(r.prompt_tokens, r.output_tokens) for r in reqs} == {(100, 10)}
    shared = [r for r in reqs if r.prefix_group == 0]
    assert all(r.shared_prefix_tokens == 60 for r in shared)
    # binomial(4000, 0.25): sd = sqrt(4000 * 0.25 * 0.75) = 27.4; 1000 +- 110 is 4 sd
    assert abs(len(shared) - 1000) < 110
    assert reqs == make_requests(4000, Lengths.fixed(100, 10), seed=3, shared_prefix=SharedPrefix(0.25, 60))


def test_prefix_longer_than_the_prompt_is_the_whole_prompt():
    reqs = make_requests(10, Lengths.fixed(30, 1), shared_prefix=SharedPrefix(1.0, 50))
    assert {r.shared_prefix_tokens for r in reqs} == {30}


def test_distribution_lengths_follow_the_workload_weights():
    w = Workload(pairs=((100, 10, 3.0), (1000, 50, 1.0)), description="two")
    reqs = make_requests(8000, Lengths.from_workload(w), seed=5)
    short = sum(1 for r in reqs if r.prompt_tokens == 100)
    # binomial(8000, 0.75): sd = 38.7; 6000 +- 160 is > 4 sd
    assert abs(short - 6000) < 160
    assert {(r.prompt_tokens, r.output_tokens) for r in reqs} == {(100, 10), (1000, 50)}


def test_bad_workload_values_are_refused():
    with pytest.raises(KvplanError, match="request_rate"):
        _open(3, 0.0, 0)
    with pytest.raises(KvplanError, match="fraction"):
        SharedPrefix(1.5, 10)
    with pytest.raises(KvplanError, match="num_requests"):
        make_requests(0, Lengths.fixed(1, 1))
    with pytest.raises(KvplanError, match="prompt and output"):
        Lengths.fixed(0, 5)
