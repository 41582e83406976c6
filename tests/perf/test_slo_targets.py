"""--slo parsing (one line naming the key, exit 2 through the CLI) and goodput on hand-made summaries."""

from __future__ import annotations

import math

import pytest

from kvplan.errors import KvplanError
from kvplan.perf.metrics import Distribution, Summary
from kvplan.perf.slo import parse_slo


def _summary(ttft_p99: float, tpot_p50: float, rps: float = 4.0) -> Summary:
    d = lambda v: Distribution(v, v, v, v, 10)  # noqa: E731
    return Summary(10.0, 40, 100.0, 500.0, rps, d(ttft_p99), d(tpot_p50), d(tpot_p50), d(1.0), 0, 0.1, 0.2)


def test_units_and_keys():
    slo = parse_slo("ttft_p99=2s,tpot_p50=50ms, itl_p90=800us,e2e_mean=1.5s")
    assert [(t.key, t.limit_s) for t in slo.targets] == [
        ("ttft_p99", 2.0), ("tpot_p50", 0.05), ("itl_p90", 0.0008), ("e2e_mean", 1.5),
    ]


def test_goodput_is_throughput_only_when_every_target_is_met():
    slo = parse_slo("ttft_p99=2s,tpot_p50=50ms")
    assert slo.meets(_summary(1.9, 0.049)) and slo.goodput(_summary(1.9, 0.049, 4.0)) == 4.0
    assert slo.goodput(_summary(2.1, 0.049)) == 0.0  # TTFT missed
    assert slo.goodput(_summary(1.0, 0.051)) == 0.0  # TPOT missed
    assert slo.worst_ratio(_summary(1.0, 0.025)) == pytest.approx(0.5)  # 1.0/2 and 0.025/0.05
    assert not slo.meets(_summary(1.0, math.nan))  # no TPOT samples cannot meet a TPOT target


@pytest.mark.parametrize("text, fragment", [
    ("ttft_p99=2", "--slo: ttft_p99: expected a time with its unit (2s, 50ms, 800us), got '2'"),
    ("ttft_p95=2s", "--slo: unknown key 'ttft_p95'"),
    ("latency_p99=2s", "--slo: unknown key 'latency_p99'"),
    ("ttft_p99=2s,ttft_p99=3s", "--slo: ttft_p99: given twice"),
    ("ttft_p99=0ms", "--slo: ttft_p99: must be a time > 0, got '0ms'"),
    ("ttft_p99", "--slo: ttft_p99: expected KEY=TIME"),
    ("ttft_p99=2s,,tpot_p50=1s", "--slo: empty entry"),
    ("", "--slo: empty value"),
])
def test_bad_slo_names_the_key(text, fragment):
    with pytest.raises(KvplanError) as e:
        parse_slo(text)
    assert fragment in e.value.message
    assert "\n" not in e.value.message
