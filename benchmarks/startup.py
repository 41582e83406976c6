"""Start-up of the `kvplan` command, side by side with hf-mem's (issue 22 item 5: `kvplan check`
runs in pre-commit on every commit). Goal: `kvplan estimate` on a bundled model takes no longer
than `hf-mem --help` (ratio <= 1.0).

Every command runs N times, interleaved (one of each, N rounds), so a machine busy with other
work slows all of them alike; the medians of wall time and of CPU time (user + system of the
child) are printed with their ratio to hf-mem's. The kvplan package is byte-compiled first, as
`pip install` does (with PYTHONDONTWRITEBYTECODE set, an editable install would otherwise compile
every module on every run). The "floor" row imports only the libraries the estimate path needs
(typer, pydantic, rich, PyYAML) in a bare interpreter: kvplan cannot start faster than that. The
"library:" rows import one of them alone, to show which the goal cannot carry (typer 0.29 itself
requires pydantic: it parses every option through a pydantic TypeAdapter).

    python benchmarks/startup.py [N] [--against DIR]

hf-mem (https://pypi.org/project/hf-mem/) is the reference, not a dependency: install it into
the same environment for the benchmark (`pip install hf-mem`). --against DIR adds the kvplan
commands run from another checkout's source (e.g. an older commit unpacked with `git archive`),
so before/after numbers come from one run.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "meta-llama/Meta-Llama-3-8B"  # bundled: no network
CHECK_FILE = str(ROOT / "tests" / "data" / "check" / "pass" / "chat-llama8b.yaml")
FLOOR = "import typer, rich.console, rich.table, yaml; from pydantic import BaseModel"
ENTRY = "import sys; sys.argv[0] = 'kvplan'; from kvplan._entry import main; main()"
LIBRARIES = {
    "library: pydantic (BaseModel)": "from pydantic import BaseModel",
    "library: typer": "import typer",
    "library: rich (console, table)": "import rich.console, rich.table",
    "library: PyYAML": "import yaml",
}

KVPLAN_ARGS = {
    "kvplan --version": ["--version"],
    "kvplan --help": ["--help"],
    "kvplan check --help": ["check", "--help"],
    f"kvplan estimate (bundled, --gpu H200)": ["estimate", MODEL, "--gpu", "H200"],
    "kvplan estimate --format json": ["estimate", MODEL, "--gpu", "H200", "--format", "json"],
    "kvplan check (one passing file)": ["check", CHECK_FILE, "--gpu", "H100"],
}
GOAL_ROW = "kvplan estimate (bundled, --gpu H200)"


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run, in env's KVPLAN_BENCH_CWD (or here)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=False, capture_output=True, env=env, cwd=env.get("KVPLAN_BENCH_CWD"))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(against: Path | None) -> dict[str, tuple[list[str], dict]]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    bindir = Path(sys.executable).parent
    kvplan = shutil.which("kvplan", path=str(bindir)) or shutil.which("kvplan")
    hf_mem = shutil.which("hf-mem", path=str(bindir)) or shutil.which("hf-mem")
    if kvplan is None or hf_mem is None:
        sys.exit("needs the kvplan and hf-mem commands in this environment: pip install -e . hf-mem")
    rows: dict[str, tuple[list[str], dict]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env),
        "hf-mem --help": ([hf_mem, "--help"], env),
        "floor: import typer, pydantic, rich, yaml": ([sys.executable, "-c", FLOOR], env),
    }
    rows |= {name: ([sys.executable, "-c", code], env) for name, code in LIBRARIES.items()}
    rows |= {name: ([kvplan, *args], env) for name, args in KVPLAN_ARGS.items()}
    if against is not None:
        # run in that checkout: `python -c` puts the working directory first on sys.path
        old_env = dict(env, PYTHONPATH=str(against), KVPLAN_BENCH_CWD=str(against))
        rows |= {f"{name} [{against.name}]": ([sys.executable, "-c", ENTRY, *args], old_env)
                 for name, args in KVPLAN_ARGS.items()}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=11, help="rounds (default 11)")
    parser.add_argument("--against", type=Path, help="another checkout whose kvplan to time beside this one")
    opts = parser.parse_args()
    for src in filter(None, (ROOT, opts.against)):
        compileall.compile_dir(str(src / "kvplan"), quiet=1)
        compileall.compile_dir(str(src / "model_specs"), quiet=1)
    rows = commands(opts.against)
    walls: dict[str, list[float]] = {k: [] for k in rows}
    cpus: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(opts.n):
        for name, (cmd, env) in rows.items():
            wall, cpu = timed(cmd, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    ref = "hf-mem --help"
    print(f"median of {opts.n} interleaved runs; ratio = this / hf-mem --help")
    print(f"{'command':52} {'wall ms':>8} {'ratio':>6} {'cpu ms':>8} {'ratio':>6}")
    for name in rows:
        print(f"{name:52} {wall[name] * 1000:8.1f} {wall[name] / wall[ref]:6.2f} "
              f"{cpu[name] * 1000:8.1f} {cpu[name] / cpu[ref]:6.2f}")
    ratio = wall[GOAL_ROW] / wall[ref]
    print(f"\n{GOAL_ROW} / hf-mem --help = {ratio:.2f} (wall), {cpu[GOAL_ROW] / cpu[ref]:.2f} (cpu); goal <= 1.0: "
          + ("met" if ratio <= 1.0 else "NOT met"))
    floor = "floor: import typer, pydantic, rich, yaml"
    print(f"the floor alone (the estimate path's libraries, nothing of kvplan) = {wall[floor] / wall[ref]:.2f} x hf-mem --help")


if __name__ == "__main__":
    main()
