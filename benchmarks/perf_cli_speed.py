"""Speed of `kvplan perf`'s main simulation (1,000 requests on the estimate's exact pool, timed
by the physics step model) as a ratio to a fixed pure-Python reference loop, so a busy machine
slows both alike; also the wall time of the saturation search and the --slo grid beside it
(reported, not limited: they are many runs by design).

The limit: the main 1,000-request run (Llama-3.1-8B-Instruct on H200, vLLM 0.26.0, 1024 in /
256 out, closed loop at 64) stays under RATIO_LIMIT reference loops (the reference takes
~0.05 s on an idle 2020s x86 core, so 20 is ~1 s there). Exits 1 above it.

Run: python benchmarks/perf_cli_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvplan.capacity.options import plan_from_options  # noqa: E402
from kvplan.perf.serving import Load, predict  # noqa: E402
from kvplan.perf.slo import parse_slo  # noqa: E402
from kvplan.perf.step_time import step_model  # noqa: E402
from kvplan.perf.tune import recommend  # noqa: E402
from kvplan.perf.workload import Lengths  # noqa: E402

from speed_reference import RATIO_LIMIT, reference  # noqa: E402


def main() -> int:
    plan, _ = plan_from_options(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H200", gpu_memory=None,
                                gpu_profiles=None, revision=None, vllm_version="0.26.0")
    sm = step_model(plan.spec, plan.gpu, plan.args, vllm_version="0.26.0")
    lengths, load = Lengths.fixed(1024, 256), Load("closed", 64)
    ref = min(reference() for _ in range(3))
    walls = []
    for _ in range(2):
        t = time.perf_counter()
        predict(plan, sm, lengths, load, num_requests=1000, saturation=False)
        walls.append(time.perf_counter() - t)
    main_wall = min(walls)
    t = time.perf_counter()
    r = predict(plan, sm, lengths, load, num_requests=1000)
    sat_wall = time.perf_counter() - t - main_wall
    t = time.perf_counter()
    recommend(plan, sm.seconds, lengths, load, parse_slo("ttft_p99=2s,tpot_p50=50ms"))
    grid_wall = time.perf_counter() - t
    ratio = main_wall / ref
    print(f"reference loop: {ref:.3f} s")
    print(f"main 1,000-request run: {main_wall:.3f} s  ratio {ratio:.1f} (limit {RATIO_LIMIT})")
    print(f"saturation search (closed loops up to {r.saturation.concurrency} in flight, then "
          f"{len(r.saturation.points)} open-loop runs of {r.saturation.requests}): {sat_wall:.3f} s")
    print(f"--slo grid: {grid_wall:.3f} s")
    return 0 if ratio <= RATIO_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
