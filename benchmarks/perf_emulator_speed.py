"""Speed of the scheduler emulator, as a ratio to a fixed pure-Python reference loop (so a busy
machine slows both alike). Prints the wall time of a 1,000-request run per workload and its ratio
to the reference; exits 1 when a ratio is above the limit.

The limit: a 1,000-request run (1024 in / 256 out, closed loop at 64, prefix caching on) must
stay under RATIO_LIMIT reference loops. The reference (REF_ITERS iterations of a small
arithmetic body) takes ~0.05 s on an idle 2020s x86 core, so a ratio of 20 is ~1 s there.

Run: python benchmarks/perf_emulator_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvplan.perf import (  # noqa: E402
    ClosedLoop, EngineConfig, Lengths, OpenLoop, SharedPrefix, linear_step_time, make_requests, simulate,
)

from speed_reference import RATIO_LIMIT, reference  # noqa: E402


def best_of(fn, n=3) -> float:
    return min(fn() for _ in range(n))


def main() -> int:
    cfg = EngineConfig(num_gpu_blocks=20_000, block_size=16, max_model_len=8192, max_num_batched_tokens=8192,
                       max_num_seqs=256, enable_prefix_caching=True, vllm_version="0.26.0")
    step = linear_step_time(0.005, 2e-5, 1e-8)
    reqs = tuple(make_requests(1000, Lengths.fixed(1024, 256), seed=1, shared_prefix=SharedPrefix(0.5, 512)))
    cases = {
        "closed c=64 1024/256": ClosedLoop(reqs, 64),
        "open 20 req/s 1024/256": OpenLoop(reqs, 20.0, seed=3),
        "closed c=256 128/512": ClosedLoop(tuple(make_requests(1000, Lengths.fixed(128, 512), seed=2)), 256),
    }
    ref = best_of(reference)
    worst = 0.0
    print(f"reference loop: {ref:.3f} s")
    for name, wl in cases.items():
        def once():
            t = time.perf_counter()
            simulate(cfg, step, wl)
            return time.perf_counter() - t
        wall = best_of(once, 2)
        ratio = wall / ref
        worst = max(worst, ratio) if name.startswith("closed c=64") else worst
        print(f"{name:28s} {wall:6.3f} s  ratio {ratio:5.1f}")
    print(f"limit (closed c=64): ratio {RATIO_LIMIT}")
    return 0 if worst <= RATIO_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
