"""`kvplan verify --bench MODEL`: start vLLM's OpenAI server with dummy weights (or use
``--endpoint``), run a workload grid, write a benchmark record (docs/bench.md).

Called by kvplan.cli.verify when --bench is given; thin: checks the flags (each bad one is one
line, exit 2, before anything starts or is written) -> kvplan.verify.bench.runner -> a table
or JSON of the per-point summaries. Exit 0: every request of every point completed; 1: some
requests failed (the record says which and why) or no point could run; 3: the server did not
start.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from kvplan.errors import EXIT_FAIL, EXIT_OK, KvplanError

# verify flags that mean nothing for a benchmark (flag, VerifyFlags attribute, the unset value)
_NOT_WITH_BENCH = (
    ("--from-log", "from_log", None), ("--batch", "batch", None), ("--start", "start", None),
    ("--deadline", "deadline", None), ("--skip-existing", "skip_existing", False), ("--name", "name", None),
    ("--usage", "usage", None), ("--gpu", "gpu", None), ("--gpu-memory", "gpu_memory", None),
)


def check_record_file(value: Optional[str]) -> Optional[Path]:
    """--record FILE for --bench: a path whose folder exists and is writable, not a directory.

    Raises:
        KvplanError: empty, a directory, or its folder missing or not writable (exit 2).
    """
    if value is None:
        return None
    if not value.strip():
        raise KvplanError("--record: empty file name", hint="with --bench, --record FILE names the JSON record to write")
    path = Path(value).expanduser()
    if path.is_dir():
        raise KvplanError(f"--record: {value} is a directory; with --bench it names the record file (e.g. {value.rstrip('/')}/bench.json)")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise KvplanError(f"--record: {value}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise KvplanError(f"--record: {value}: the folder {parent} is not writable")
    return path


def extra_serve_args(text: Optional[str]) -> list[str]:
    """--serve-args: a shell-quoted string of more `vllm serve` flags -> argv tokens.

    Raises:
        KvplanError: unbalanced quotes, or a token that is not a flag or a flag's value, or a flag
            kvplan sets itself (--model, --host, --port, --load-format) (exit 2).
    """
    import shlex

    if text is None:
        return []
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise KvplanError(f"--serve-args: {exc} in {text!r}") from None
    if tokens and not tokens[0].startswith("--"):
        raise KvplanError(f"--serve-args: {tokens[0]!r} is not a flag; give `vllm serve` flags such as '--async-scheduling'")
    for t in tokens:
        if t.split("=", 1)[0] in ("--model", "--host", "--port", "--load-format"):
            raise KvplanError(f"--serve-args: {t.split('=', 1)[0]} is set by kvplan verify --bench; leave it out")
    return tokens


def check_bench_flags(kw, grid: str, seconds: Optional[float], token_limit: int, endpoint: Optional[str]):
    """The --bench flags, checked. Returns (Endpoint or None, record Path or None).

    Raises:
        KvplanError: naming the flag (exit 2).
    """
    from kvplan.verify.bench.http import parse_endpoint
    from kvplan.verify.bench.workload import GRIDS

    for flag, attr, unset in _NOT_WITH_BENCH:
        if getattr(kw, attr) != unset:
            raise KvplanError(f"{flag}: not used with --bench")
    if grid not in GRIDS:
        raise KvplanError(f"--grid: unknown grid {grid!r}", hint="use " + " or ".join(GRIDS))
    if seconds is not None and not (math.isfinite(seconds) and 0 < seconds <= 3600):
        raise KvplanError(f"--bench-seconds: must be a number of seconds > 0 and <= 3600, got {seconds}")
    if token_limit <= 0:
        raise KvplanError(f"--bench-token-limit: must be a number of prompt tokens > 0, got {token_limit}")
    if not (math.isfinite(kw.timeout) and kw.timeout > 0):
        raise KvplanError(f"--timeout: must be a finite number of seconds > 0, got {kw.timeout}")
    if kw.fmt not in ("table", "json"):
        raise KvplanError(f"--format: unknown value {kw.fmt!r}", hint="use table or json")
    if not kw.model:
        raise KvplanError("MODEL: missing", hint="kvplan verify --bench MODEL_DIR (a directory holding config.json)")
    extra_serve_args(kw.serve_args)
    ep = parse_endpoint(endpoint) if endpoint is not None else None
    return ep, check_record_file(kw.record)


def run_bench_command(kw, options: dict, grid: str, seconds: Optional[float], token_limit: int, endpoint: Optional[str]) -> int:
    """Run ``kvplan verify --bench`` for the parsed flags; the exit code."""
    from kvplan.engines.vllm.flags import serve_args
    from kvplan.verify import predict
    from kvplan.verify.bench.runner import run_bench

    ep, record_path = check_bench_flags(kw, grid, seconds, token_limit, endpoint)
    engine_args = predict.options_to_engine_kwargs(options)
    flags = serve_args(engine_args, None) + extra_serve_args(kw.serve_args)
    workdir = Path(tempfile.mkdtemp(prefix="kvplan-bench-"))
    try:
        model_dir, config = predict._materialize_model(kw.model, kw.revision, workdir, True)
        if config is None:
            from kvplan.sources.local import read_config

            config = read_config(Path(model_dir) / "config.json")
        record = run_bench(
            model_dir=model_dir, config=config, engine_args=engine_args, serve_flags=flags, endpoint=ep, grid_name=grid,
            seconds=seconds, token_limit=token_limit, record_path=record_path, start_timeout_s=kw.timeout,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    failed = sum(p.summary.failed for p in record.points)
    if kw.fmt == "json":
        print(json.dumps({
            "record": None if record_path is None else str(record_path),
            "vllm_version": record.vllm_version, "gpu_name": record.gpu_name, "grid": record.grid,
            "skipped": record.skipped,
            "points": [{"name": p.name, "workload": p.workload.model_dump(), "summary": p.summary.model_dump(),
                        "metrics_delta": p.metrics_delta} for p in record.points],
        }, indent=2))
    else:
        _print_points(record)
        if record_path is not None:
            print(f"record: {record_path}")
    return EXIT_FAIL if failed or not record.points else EXIT_OK


def _print_points(record) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    console = Console(highlight=False, width=max(console.width, 110))  # one row per point, never cut
    console.print(f"{record.model} - vLLM {record.vllm_version or '?'} - GPU: {record.gpu_name or '?'} - grid {record.grid}")
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("point", no_wrap=True)
    for col in ("done", "fail", "req/s", "out tok/s", "TTFT p50/p99", "TPOT p50", "E2E p50", "preempt"):
        t.add_column(col, justify="right", no_wrap=True)
    f = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    for p in record.points:
        s = p.summary
        pre = p.metrics_delta.get("num_preemptions")
        t.add_row(
            p.name, str(s.completed), str(s.failed), f"{s.req_s:.2f}", f"{s.output_tok_s:,.0f}",
            f"{f(s.ttft_ms.p50)}/{f(s.ttft_ms.p99)}", f(s.tpot_ms.p50), f(s.e2e_ms.p50), "-" if pre is None else f"{pre:.0f}",
        )
    console.print(t)
    console.print("latencies in ms")
    for s in record.skipped:
        console.print(f"skipped {s['name']}: {s['reason']}", markup=False)
