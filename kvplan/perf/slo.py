"""Latency targets (``--slo ttft_p99=2s,tpot_p50=50ms``) and goodput.

An SLO is a list of targets, each a latency of the benchmark client (kvplan/perf/metrics.py:
ttft, tpot, itl, e2e) at a statistic of the run (p50, p90, p99 or mean) with a limit in seconds.
A run *meets* the SLO when every target's statistic is at or below its limit.

Goodput: the run's request throughput (requests/s) when it meets the SLO, 0 when it misses any
target. The SLO is stated on percentiles of the whole run, so a run either serves its requests
within it or does not; vLLM's benchmark client (vllm bench serve ``--goodput``) counts single
requests against per-request limits instead, which a percentile target does not define.

Units: seconds (float), requests/s (float).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvplan.errors import KvplanError

METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("p50", "p90", "p99", "mean")
_PER_SECOND = {"s": 1.0, "ms": 1e3, "us": 1e6}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)\s*$")
FLAG = "--slo"


@dataclass(frozen=True)
class Target:
    """One latency target.

    Attributes:
        metric: "ttft" | "tpot" | "itl" | "e2e".
        stat: "p50" | "p90" | "p99" | "mean".
        limit_s: the limit in seconds (> 0).
    """

    metric: str
    stat: str
    limit_s: float

    @property
    def key(self) -> str:
        """As written on the command line: ``ttft_p99``."""
        return f"{self.metric}_{self.stat}"

    def value(self, summary) -> float:
        """This target's statistic of a metrics.Summary (seconds; nan without samples)."""
        return getattr(getattr(summary, self.metric), self.stat)

    def met(self, summary) -> bool:
        """The statistic is at or below the limit (a metric without samples, such as TPOT of
        one-token outputs, cannot meet a target)."""
        v = self.value(summary)
        return not math.isnan(v) and v <= self.limit_s


@dataclass(frozen=True)
class SLO:
    """The targets of one ``--slo`` value, in the order given."""

    targets: tuple[Target, ...]

    @property
    def text(self) -> str:
        """Normalised spelling (limits in ms): ``ttft_p99=2000ms,tpot_p50=50ms``."""
        return ",".join(f"{t.key}={t.limit_s * 1e3:g}ms" for t in self.targets)

    def meets(self, summary) -> bool:
        """Every target met by the run's metrics.Summary."""
        return all(t.met(summary) for t in self.targets)

    def check(self, summary) -> list[dict]:
        """Per target: key, value_s, limit_s, met."""
        return [{"key": t.key, "value_s": t.value(summary), "limit_s": t.limit_s, "met": t.met(summary)} for t in self.targets]

    def goodput(self, summary) -> float:
        """Requests/s served within the SLO: the run's request throughput when it meets every
        target, else 0.0 (see the module docstring)."""
        return summary.request_throughput if self.meets(summary) else 0.0

    def worst_ratio(self, summary) -> float:
        """The largest value / limit over the targets (< 1 = every target met with room);
        inf when a statistic has no samples. Used to order runs of equal goodput."""
        out = 0.0
        for t in self.targets:
            v = t.value(summary)
            out = max(out, math.inf if math.isnan(v) else v / t.limit_s)
        return out


def parse_duration(text: str, key: str) -> float:
    """A time with its unit (``2s``, ``50ms``, ``800us``) in seconds.

    Raises:
        KvplanError: no unit, not a number, or not > 0 (names --slo and ``key``).
    """
    m = _TIME.match(text)
    if not m:
        raise KvplanError(f"{FLAG}: {key}: expected a time with its unit (2s, 50ms, 800us), got {text!r}")
    seconds = float(m.group(1)) / _PER_SECOND[m.group(2)]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise KvplanError(f"{FLAG}: {key}: must be a time > 0, got {text!r}")
    return seconds


def parse_slo(text: str) -> SLO:
    """``--slo ttft_p99=2s,tpot_p50=50ms`` -> SLO.

    Keys are METRIC_STAT with METRIC one of ttft, tpot, itl, e2e and STAT one of p50, p90, p99,
    mean; values are times with a unit (s, ms, us). Each key at most once.

    Raises:
        KvplanError: one line naming --slo and the key at fault (exit 2).
    """
    if text is None or not text.strip():
        raise KvplanError(f"{FLAG}: empty value", hint="e.g. --slo ttft_p99=2s,tpot_p50=50ms")
    targets: list[Target] = []
    seen: set[str] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise KvplanError(f"{FLAG}: empty entry in {text!r}", hint="separate KEY=TIME entries by single commas")
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep:
            raise KvplanError(f"{FLAG}: {key}: expected KEY=TIME, got {item!r}", hint="e.g. ttft_p99=2s")
        metric, _, stat = key.partition("_")
        if metric not in METRICS or stat not in STATS:
            raise KvplanError(
                f"{FLAG}: unknown key {key!r}",
                hint=f"use METRIC_STAT with METRIC one of {', '.join(METRICS)} and STAT one of {', '.join(STATS)}",
            )
        if key in seen:
            raise KvplanError(f"{FLAG}: {key}: given twice")
        seen.add(key)
        targets.append(Target(metric, stat, parse_duration(value, key)))
    return SLO(tuple(targets))
