"""The machine-speed yardstick the speed benchmarks divide by (benchmarks/perf_cli_speed.py,
benchmarks/perf_emulator_speed.py): REF_ITERS iterations of a small integer loop in plain Python.
A benchmark passes when its wall time stays under RATIO_LIMIT times this loop's, measured in the
same run, so the target does not depend on the machine."""

from __future__ import annotations

import time

REF_ITERS = 1_000_000
RATIO_LIMIT = 20.0


def reference() -> float:
    """Seconds of one pass of the reference loop."""
    t = time.perf_counter()
    acc = 0
    for i in range(REF_ITERS):
        acc += i & 7
    return time.perf_counter() - t
