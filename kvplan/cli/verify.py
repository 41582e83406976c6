"""`kvplan verify`: start vLLM (or read its log) and diff what it measured against kvplan's plan.

Registered by kvplan.cli through ``register(app)``. Thin: flags -> kvplan.verify (run, from_log, batch) -> tables.
Exit codes: 0 pass, 1 mismatch or vLLM refused the config for memory, 2 bad input, 3 environment
missing (no GPU, no vLLM, another vLLM version, timeout) or vLLM failed before sizing memory for
another reason (not a memory prediction). See docs/verify.md.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from kvplan.cli.options import ALIASES, engine_option
from kvplan.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAIL, EXIT_OK, KvplanError
from kvplan.engines.vllm.versions import DEFAULT_HELP

GiB = 1 << 30


@dataclass
class VerifyFlags:
    """The flags of one ``kvplan verify`` call, as typer parsed them (names as the parameters).

    ``record`` is replaced by the checked directory (a Path) before anything runs.
    """

    model: Optional[str]
    gpu: Optional[str]
    gpu_memory: Optional[str]
    gpu_profiles: Optional[list[str]]
    tensor_parallel_size: Optional[int]
    pipeline_parallel_size: Optional[int]
    max_model_len: Optional[str]
    gpu_memory_utilization: Optional[float]
    kv_cache_dtype: Optional[str]
    block_size: Optional[int]
    dtype: Optional[str]
    quantization: Optional[str]
    max_num_seqs: Optional[int]
    max_num_batched_tokens: Optional[int]
    enforce_eager: bool
    kv_cache_memory: Optional[str]
    revision: Optional[str]
    vllm_version: Optional[str]
    usage: Optional[str]
    dummy_weights: bool
    tolerance: float
    timeout: float
    record: Optional[str | Path]
    name: Optional[str]
    from_log: Optional[str]
    start: Optional[int]
    batch: Optional[str]
    deadline: Optional[float]
    skip_existing: bool
    fmt: str
    bench: bool = False
    grid: str = "full"
    bench_seconds: Optional[float] = None
    bench_token_limit: int = 600_000
    endpoint: Optional[str] = None
    serve_args: Optional[str] = None
    addons: Optional[dict] = None  # the add-on flags given (cli/options.py ADDON_FIELDS)


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""
    from kvplan.cli.options import with_addon_options

    app.command("verify")(with_addon_options(verify))


def verify(
    model: Optional[str] = typer.Argument(
        None, help="Hub repo id, local directory with config.json, or bundled spec id (with --from-log: overrides the log's model)."
    ),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU profile for the prediction (default: the GPU the run measured)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", help="Override CUDA-visible memory for the prediction."),
    gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", help="Extra GPU profile YAML file(s)."),
    tensor_parallel_size: Optional[int] = engine_option("tensor_parallel_size", None),
    pipeline_parallel_size: Optional[int] = engine_option("pipeline_parallel_size", None),
    max_model_len: Optional[str] = engine_option("max_model_len", None, help="Tokens, or 'auto'."),
    gpu_memory_utilization: Optional[float] = engine_option("gpu_memory_utilization", None),
    kv_cache_dtype: Optional[str] = engine_option("kv_cache_dtype", None),
    block_size: Optional[int] = engine_option("block_size", None),
    dtype: Optional[str] = engine_option("dtype", None),
    quantization: Optional[str] = engine_option("quantization", None),
    max_num_seqs: Optional[int] = engine_option("max_num_seqs", None),
    max_num_batched_tokens: Optional[int] = engine_option("max_num_batched_tokens", None),
    enforce_eager: bool = engine_option("enforce_eager", False),
    kv_cache_memory: Optional[str] = engine_option(
        "kv_cache_memory_bytes", None, flags=ALIASES["kv_cache_memory_bytes"], help="KV-cache bytes (bypasses --gpu-memory-utilization)."
    ),
    revision: Optional[str] = typer.Option(None, "--revision"),
    vllm_version: Optional[str] = engine_option(
        "vllm_version", None,
        help="The vLLM version to verify against. With --from-log: default the version the log names. " + DEFAULT_HELP,
    ),
    usage: Optional[str] = typer.Option(
        None, "--usage", help="llm (offline LLM class; the default for runs) or serve (`vllm serve` defaults)."
    ),
    dummy_weights: bool = typer.Option(False, "--dummy-weights", help="Random weights, no tokenizer: only config.json is needed."),
    tolerance: float = typer.Option(1.0, "--tolerance", help="Allowed num_gpu_blocks error in percent (exit 1 above)."),
    timeout: float = typer.Option(900.0, "--timeout", help="Seconds to wait for vLLM to start (default 15 min)."),
    record: Optional[str] = typer.Option(
        None, "--record", metavar="DIR", help="Write <name>.json (calibration shape) and <name>.log here (created when a start is recorded); with --bench: the record FILE (its server log beside it, .log)."
    ),
    name: Optional[str] = typer.Option(None, "--name", help="Record name (default: model and arguments)."),
    from_log: Optional[str] = typer.Option(None, "--from-log", help="Read a vLLM start-up log (or a calibration JSON record) instead of starting vLLM."),
    start: Optional[int] = typer.Option(
        None, "--start", metavar="N", help="With --from-log: which vLLM start of the log to compare (1 = first; default: the last)."
    ),
    batch: Optional[str] = typer.Option(None, "--batch", help="YAML file of cases to run one after another."),
    deadline: Optional[float] = typer.Option(None, "--deadline", help="With --batch: start no case after this many seconds."),
    skip_existing: bool = typer.Option(False, "--skip-existing", help="With --batch --record: do not rerun cases already recorded there."),
    fmt: str = typer.Option("table", "--format", help="table or json."),
    bench: bool = typer.Option(False, "--bench", help="Measure serving performance: start vLLM's OpenAI server (dummy weights) and run a workload grid (docs/bench.md)."),
    grid: str = typer.Option("full", "--grid", help="With --bench: full or quick."),
    bench_seconds: Optional[float] = typer.Option(None, "--bench-seconds", help="With --bench: sending time per point (s; default 8, quick 1)."),
    bench_token_limit: int = typer.Option(600_000, "--bench-token-limit", help="With --bench: skip closed-loop points whose concurrency x input length exceeds this many prompt tokens."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="With --bench: benchmark the vLLM server already running at http://HOST:PORT instead of starting one."),
    serve_args: Optional[str] = typer.Option(None, "--serve-args", help="With --bench: more `vllm serve` flags for the server, verbatim (one shell-quoted string, e.g. '--async-scheduling')."),
    addons: Optional[dict] = None,
) -> None:
    """Start vLLM with these arguments (or read its log) and compare with kvplan's prediction."""
    from kvplan.cli import fail

    try:
        code = _run(
            VerifyFlags(model=model, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles, tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization, kv_cache_dtype=kv_cache_dtype, block_size=block_size, dtype=dtype, quantization=quantization, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, enforce_eager=enforce_eager, kv_cache_memory=kv_cache_memory, revision=revision, vllm_version=vllm_version, usage=usage, dummy_weights=dummy_weights, tolerance=tolerance, timeout=timeout, record=record, name=name, from_log=from_log, start=start, batch=batch, deadline=deadline, skip_existing=skip_existing, fmt=fmt, bench=bench, grid=grid, bench_seconds=bench_seconds, bench_token_limit=bench_token_limit, endpoint=endpoint, serve_args=serve_args, addons=addons)
        )
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)
        return
    except KeyboardInterrupt:
        print("interrupted: the vLLM child process was stopped", file=sys.stderr)
        raise typer.Exit(130)
    raise typer.Exit(code)


def _options(kw: VerifyFlags) -> dict:
    """kvplan estimate options the user gave (validated as `kvplan estimate` does)."""
    from kvplan.cli.options import check_fraction, parse_max_model_len, positive_engine_args
    from kvplan.io.units import parse_bytes

    positive_engine_args({
        "tensor_parallel_size": kw.tensor_parallel_size,
        "pipeline_parallel_size": kw.pipeline_parallel_size,
        "max_num_seqs": kw.max_num_seqs,
        "max_num_batched_tokens": kw.max_num_batched_tokens,
        "block_size": kw.block_size,
    })
    util = kw.gpu_memory_utilization
    check_fraction("gpu_memory_utilization", util)
    out = {
        "tensor_parallel_size": kw.tensor_parallel_size,
        "pipeline_parallel_size": kw.pipeline_parallel_size,
        "max_model_len": parse_max_model_len(kw.max_model_len),
        "gpu_memory_utilization": util,
        "kv_cache_dtype": kw.kv_cache_dtype,
        "block_size": kw.block_size,
        "dtype": kw.dtype,
        "quantization": kw.quantization,
        "max_num_seqs": kw.max_num_seqs,
        "max_num_batched_tokens": kw.max_num_batched_tokens,
        "enforce_eager": True if kw.enforce_eager else None,
        "kv_cache_memory_bytes": parse_bytes(kw.kv_cache_memory, what=ALIASES["kv_cache_memory_bytes"][0]) if kw.kv_cache_memory else None,
        **(kw.addons or {}),
    }
    return {k: v for k, v in out.items() if v is not None}


def _check_numbers(kw: VerifyFlags, max_tolerance: float) -> None:
    """--tolerance in [0, max_tolerance] percent, --timeout and --deadline finite and > 0 seconds.

    Checked first, before the environment: `nan` compares false with every bound (a NaN
    tolerance turned an exact match into a mismatch; a NaN deadline never ended a batch).
    Raises:
        KvplanError: naming the flag and the value (exit 2).
    """
    tol = kw.tolerance
    if not (math.isfinite(tol) and 0 <= tol <= max_tolerance):
        raise KvplanError(f"--tolerance: must be a percentage from 0 to {max_tolerance:g}, got {tol}")
    for flag, value in (("--timeout", kw.timeout), ("--deadline", kw.deadline)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise KvplanError(f"{flag}: must be a finite number of seconds > 0, got {value}")


def _run(kw: VerifyFlags) -> int:
    from kvplan.verify import compare, from_log, predict, records, run

    fmt = kw.fmt
    if fmt not in ("table", "json"):
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use table or json")
    if kw.usage is not None and kw.usage not in ("llm", "serve"):
        raise KvplanError(f"--usage: must be 'llm' or 'serve', got {kw.usage!r}")
    _check_numbers(kw, compare.MAX_TOLERANCE_PCT)
    if kw.bench:
        from kvplan.cli.verify_bench import run_bench_command

        return run_bench_command(kw, _options(kw), kw.grid, kw.bench_seconds, kw.bench_token_limit, kw.endpoint)
    for flag, value, unset in (("--grid", kw.grid, "full"), ("--bench-seconds", kw.bench_seconds, None),
                               ("--bench-token-limit", kw.bench_token_limit, 600_000), ("--endpoint", kw.endpoint, None),
                               ("--serve-args", kw.serve_args, None)):
        if value != unset:
            raise KvplanError(f"{flag}: only with --bench")
    if kw.start is not None and not kw.from_log:
        raise KvplanError("--start: only with --from-log (it picks one start of the log)")
    if kw.from_log and kw.batch:
        raise KvplanError("--from-log and --batch: give one of them")
    options = _options(kw)
    kw.record = records.check_record_dir(kw.record)

    if kw.skip_existing and not (kw.batch and kw.record):
        raise KvplanError("--skip-existing: only with --batch and --record DIR")
    if kw.deadline is not None and not kw.batch:
        raise KvplanError("--deadline: only with --batch")
    if kw.batch:
        if kw.model:
            raise KvplanError(f"MODEL: not used with --batch (the cases name their models), got {kw.model!r}")
        return _run_batch(kw, fmt)

    if kw.from_log:
        if kw.record is not None:
            raise KvplanError(
                f"--record: not used with --from-log (a record is written from a run kvplan verify starts); got {kw.record}",
                hint="drop --record, or run `kvplan verify MODEL ... --record DIR` on a GPU machine",
            )
        doc, code = from_log.verify_log(
            kw.from_log,
            model=kw.model,
            gpu=kw.gpu,
            gpu_memory=kw.gpu_memory,
            gpu_profiles=kw.gpu_profiles,
            overrides=options,
            usage=kw.usage,
            tolerance_pct=kw.tolerance,
            revision=kw.revision,
            vllm_version=kw.vllm_version,
            start=kw.start,
        )
        _emit(doc, fmt)
        return code

    if not kw.model:
        raise KvplanError("MODEL: missing", hint="kvplan verify MODEL [flags], or --from-log FILE, or --batch FILE")
    from kvplan.engines.vllm.versions import resolve

    choice = resolve(kw.vllm_version)  # a live run checks the vLLM it starts: the installed one
    engine_args = predict.options_to_engine_kwargs(options)
    if kw.revision and not kw.dummy_weights:
        engine_args["revision"] = kw.revision
    with _Progress() as progress:
        result = run.run_case(
            model=kw.model,
            engine_args=engine_args,
            usage=kw.usage or "llm",
            dummy_weights=kw.dummy_weights,
            name=kw.name,
            gpu=kw.gpu,
            gpu_memory=kw.gpu_memory,
            gpu_profiles=kw.gpu_profiles,
            revision=kw.revision,
            tolerance_pct=kw.tolerance,
            timeout_s=kw.timeout,
            record_dir=kw.record,
            vllm_version=choice.version,
            on_stage=progress.stage,
        )
    if isinstance(result.doc, dict) and (result.doc.get("predicted_with") or {}).get("reason") == "given to the API":
        result.doc["predicted_with"] = choice.to_dict()  # the run's choice, said as the CLI made it
    _emit(result.doc, fmt)
    if result.record_path is not None and fmt == "table":
        print(f"record: {result.record_path}")
    return result.exit_code


def _run_batch(kw: VerifyFlags, fmt: str) -> int:
    from kvplan.engines.vllm.versions import resolve
    from kvplan.verify import batch

    record = kw.record
    results_out = []
    with _Progress() as progress:

        def on_case(i, n, case_name):
            progress.case = f"[{i + 1}/{n}] {case_name}"
            progress.stage("starting")

        def on_result(r):
            results_out.append(r)
            progress.line(_one_line(r))

        results, code = batch.run_batch(
            kw.batch,
            record_dir=record,
            tolerance_pct=None if kw.tolerance == batch.DEFAULT_TOLERANCE_PCT else kw.tolerance,
            timeout_s=None if kw.timeout == batch.DEFAULT_TIMEOUT_S else kw.timeout,
            deadline_s=kw.deadline,
            gpu_profiles=kw.gpu_profiles,
            vllm_version=resolve(kw.vllm_version).version,
            skip_existing=kw.skip_existing,
            on_case=on_case,
            on_stage=progress.stage,
            on_result=on_result,
        )
    if fmt == "json":
        print(json.dumps([dict(r.doc, exit_code=r.exit_code, error=r.error) for r in results], indent=2, default=str))
    else:
        _print_batch(results)
        if record is not None:
            print(f"records: {record}")
    return code


# ---------------------------------------------------------------------------------------------
# progress and rendering (rich)
# ---------------------------------------------------------------------------------------------


class _Progress:
    """A rich spinner on a terminal (stderr); plain stage lines otherwise (logs, CI, the device)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.case = ""
        self._status = None
        self._last = None

    def __enter__(self):
        if self.console.is_terminal:
            self._status = self.console.status("vLLM: starting")
            self._status.__enter__()
        return self

    def __exit__(self, *exc):
        if self._status is not None:
            self._status.__exit__(*exc)
        return False

    def stage(self, name: str) -> None:
        text = f"{self.case} vLLM: {name}".strip()
        if text == self._last:
            return
        self._last = text
        if self._status is not None:
            self._status.update(text)
        else:
            print(f"[kvplan verify] {text}", file=sys.stderr, flush=True)

    def line(self, text: str) -> None:
        if self._status is not None:
            self.console.print(text, highlight=False)
        else:
            print(f"[kvplan verify] {text}", file=sys.stderr, flush=True)


WARNING = "warning: "  # a note that is a warning (verify.compare.version_note, the version choice)


def _emit(doc: dict, fmt: str) -> None:
    if fmt == "json":
        for note in doc.get("notes", []):
            if note.startswith(WARNING):
                print(f"kvplan: {note}", file=sys.stderr)
        print(json.dumps(doc, indent=2, default=str))
        return
    from rich.console import Console

    print_comparison(doc, Console(highlight=False))


def _fmt_value(key: str, value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / GiB:,.3f}"
    if unit == "x":
        return f"{value:,.2f}x"
    return f"{int(value):,}"


def _fmt_error(key: str, err: dict | None, unit: str) -> tuple[str, str]:
    if not err:
        return "", ""
    diff = err["abs"]
    if unit == "bytes":
        text = f"{diff / GiB:+,.3f}"
    elif unit == "x":
        text = f"{diff:+,.2f}"
    else:
        text = f"{int(diff):+,}"
    if err.get("within_log_rounding"):
        text += "*"
    return text, _pct_text(err)


def _pct_text(err: dict | None) -> str:
    """``+0.123%``, or ``n/a`` when there is no percentage (a measured 0: no division by it)."""
    pct = (err or {}).get("pct")
    return "n/a" if pct is None else f"{pct:+.3f}%"


def print_comparison(doc: dict, console) -> None:
    """Predicted vs measured, side by side, with each error and the verdict."""
    from rich.table import Table
    from rich.text import Text

    from kvplan.render.table import hanging, title_line
    from kvplan.verify.compare import FIGURES

    head = f"{doc.get('model')}" + (f" - vLLM {doc['vllm_version']}" if doc.get("vllm_version") else "") + f" ({doc.get('usage')})"
    if doc.get("gpu"):
        head += f" - GPU: {doc['gpu']}"
    console.print(title_line(head))
    pw, ev = doc.get("predicted_with"), doc.get("evidence")
    if pw:
        said = f"vLLM {pw['version']} ({pw['reason']})" + (f", for {pw['requested']}" if pw.get("requested") else "")
        console.print(hanging(Text("predicted with: ", style="dim"), said + (f": {ev['label']}" if ev else "")))
    for reason in doc.get("approximate") or []:
        console.print(hanging(Text("approximate: ", style="yellow"), reason))
    if doc.get("engine_args"):
        console.print(hanging("engine args: ", ", ".join(f"{k}={v!r}" for k, v in doc["engine_args"].items())))
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col, justify in (("figure", "left"), ("predicted", "right"), ("measured", "right"), ("error", "right"), ("error %", "right"), ("measured from", "left")):
        t.add_column(col, justify=justify)
    pred, meas, errs, src = doc.get("predicted", {}), doc.get("measured", {}), doc.get("errors", {}), doc.get("measured_source", {})
    for key, label, unit in FIGURES:
        if pred.get(key) is None and meas.get(key) is None:
            continue
        e, pct = _fmt_error(key, errs.get(key), unit)
        style = "bold" if key == doc.get("compared_on") else None
        t.add_row(
            label + (" GiB" if unit == "bytes" else ""),
            _fmt_value(key, pred.get(key), unit),
            _fmt_value(key, meas.get(key), unit),
            e,
            pct,
            src.get(key, ""),
            style=style,
        )
    console.print(t)
    if any(err.get("within_log_rounding") for err in errs.values()):
        console.print(Text("* within the log's rounding (vLLM prints GiB to 2 decimals)", style="dim"))
    status = doc.get("status")
    on = doc.get("compared_on")
    if status == "pass":
        console.print(Text(f"PASS: {on} within {doc['tolerance_pct']:g}% ({_pct_text(errs.get(on))})", style="green"))
    elif status == "mismatch":
        for key in doc.get("mismatched_on") or [on]:
            console.print(Text(f"MISMATCH: {key} off by {_pct_text(errs.get(key))} (tolerance {doc['tolerance_pct']:g}%)", style="red"))
        if on not in (doc.get("mismatched_on") or [on]):
            console.print(Text(f"{on} within {doc['tolerance_pct']:g}% ({_pct_text(errs.get(on))})", style="dim"))
    elif status == "refused":
        r = doc.get("refusal") or {}
        console.print(hanging(Text("vLLM REFUSED the config: ", style="bold red"), str(r.get("message", ""))))
        if doc.get("kvplan_fits") is True:
            console.print(Text("kvplan predicted it would start: a mismatch", style="red"))
        elif doc.get("kvplan_fits") is False:
            console.print(hanging(Text("kvplan predicted this too: ", style="yellow"), str(doc.get("kvplan_failure"))))
            if r.get("estimated_max_model_len") is not None:
                console.print(
                    f"largest max_model_len: vLLM {r['estimated_max_model_len']:,}, kvplan {doc.get('kvplan_largest_max_model_len')}"
                )
        elif doc.get("prediction_error"):
            console.print(hanging(Text("kvplan refused it before planning: ", style="yellow"), doc["prediction_error"]))
    elif status == "failed":
        # not a memory refusal: vLLM stopped before sizing memory (exit 3, docs/verify.md)
        console.print(hanging(Text("FAILED: ", style="bold yellow"), str(doc.get("failure") or "")))
    elif status == "incomplete":
        if any(meas.get(k) == 0 for k in ("num_gpu_blocks", "gpu_kv_cache_tokens")):
            text = "INCOMPLETE: the log's num_gpu_blocks or KV tokens is 0: no percentage error of 0 (n/a)"
        else:
            text = "INCOMPLETE: the log has neither num_gpu_blocks nor the KV tokens"
        console.print(Text(text, style="yellow"))
    else:
        console.print(Text(f"{str(status).upper()}: " + str(doc.get("prediction_error") or ""), style="red"))
    if doc.get("error_lines"):
        console.print(Text("last error lines:", style="bold"))
        for line in doc["error_lines"][-8:]:
            console.print("  " + line, markup=False, highlight=False)
    for key, why in (doc.get("missing") or {}).items():
        if key in ("num_gpu_blocks",) and status not in ("refused", "error", "failed"):
            console.print(Text(f"{key}: {why}", style="dim"))
    for note in doc.get("notes", []):
        if note.startswith(WARNING):
            console.print(hanging(Text(WARNING, style="bold yellow"), note[len(WARNING):]))
        else:
            console.print(hanging(Text("note: ", style="yellow"), note))
    if doc.get("log"):
        console.print(f"log: {doc['log']}", markup=False, highlight=False)


def _one_line(r) -> str:
    d = r.doc
    if r.error:
        return f"{r.name}: {d.get('status')}: {r.error}"
    on = (d.get("mismatched_on") or [d.get("compared_on")])[0]
    err = (d.get("errors") or {}).get(on) if on else None
    tail = f" {on} {err['pct']:+.3f}%" if err and err.get("pct") is not None else ""
    return f"{r.name}: {d.get('status')}{tail}"


def _print_batch(results) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("case", "status", "blocks pred", "blocks meas", "tokens pred", "tokens meas", "error %", "KV err GiB", "start s"):
        t.add_column(col, justify="left" if col in ("case", "status") else "right")
    problems = []
    for r in results:
        d = r.doc
        p, m, e = d.get("predicted") or {}, d.get("measured") or {}, d.get("errors") or {}
        on = d.get("compared_on")
        pct = "" if not on or e.get(on, {}).get("pct") is None else f"{e[on]['pct']:+.3f}%"
        kv = e.get("kv_cache_bytes")
        if r.error:
            problems.append(f"{r.name}: {r.error}")
        t.add_row(
            r.name,
            str(d.get("status")),
            _fmt_value("", p.get("num_gpu_blocks"), "blocks"),
            _fmt_value("", m.get("num_gpu_blocks"), "blocks"),
            _fmt_value("", p.get("gpu_kv_cache_tokens"), "tokens"),
            _fmt_value("", m.get("gpu_kv_cache_tokens"), "tokens"),
            pct,
            "" if not kv else f"{kv['abs'] / GiB:+.3f}",
            "" if d.get("startup_s") is None else f"{d['startup_s']:.1f}",
        )
    console = Console(highlight=False)
    console.print(t)
    for line in problems:
        console.print(line, markup=False)


__all__ = ["register", "verify", "print_comparison", "EXIT_OK", "EXIT_FAIL", "EXIT_BAD_INPUT", "EXIT_ENVIRONMENT"]
