"""Wall time of `kvplan estimate` on a bundled model as a ratio to `python -c pass`.

Measured in one run (median of N runs each), so the ratio does not depend on the machine's speed.
Goal (issue 6): <= 6x. Run: python benchmarks/startup.py [N]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def wall(cmd: list[str]) -> float:
    times = []
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for _ in range(N):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=False, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    kvplan = shutil.which("kvplan") or os.path.join(os.path.dirname(sys.executable), "kvplan")
    base = wall([sys.executable, "-c", "pass"])
    rows = [
        ("python -c pass", base),
        ("kvplan --version", wall([kvplan, "--version"])),
        ("kvplan estimate (bundled, json)", wall([kvplan, "estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--format", "json"])),
        ("kvplan estimate (bundled, table)", wall([kvplan, "estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200"])),
    ]
    for name, t in rows:
        print(f"{name:36} {t * 1000:8.1f} ms  {t / base:5.2f}x python -c pass")


if __name__ == "__main__":
    main()
