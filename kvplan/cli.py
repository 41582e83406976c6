"""kvplan's command line (typer). Thin: parse flags -> typed inputs -> core -> render.

Flags are spelled as `vllm serve` spells them. Errors the user can fix print one line
("error: ...") and exit 2; "does not fit" exits 1; a missing environment exits 3. No tracebacks.
Other commands register themselves from their own modules (see _COMMAND_MODULES).
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Optional

import typer

from kvplan import __version__
from kvplan.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK, KvplanError

app = typer.Typer(
    name="kvplan",
    help="Predict vLLM's KV-cache blocks, concurrency and memory before you rent the GPU.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Commands that live in their own modules, each exposing `register(app)`. They are registered
# only when invoked (or for --help), so `kvplan estimate` does not pay for building every other
# command's options.
_COMMAND_MODULES = {
    "verify": "kvplan.cli_verify",
    "check": "kvplan.cli_check",
    "schema": "kvplan.cli_check",
    "plan": "kvplan.cli_plan",
}
_registered: set[str] = set()


def _version(value: bool) -> None:
    if value:
        print(f"kvplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """kvplan: vLLM KV-cache planning."""


def fail(message: str, hint: str | None = None, code: int = EXIT_BAD_INPUT) -> None:
    """Print one error line (plus an optional hint line) to stderr and exit."""
    line = f"error: {message}"
    if hint:
        line += f"\n  hint: {hint}"
    print(line, file=sys.stderr)
    raise typer.Exit(code)


def parse_max_model_len(value: Optional[str]) -> Optional[int]:
    """--max-model-len as `vllm serve` reads it: tokens, "32k" (x1000) / "32K" (x1024), or "auto" (-1).

    Raises:
        KvplanError: not a positive number or auto (names the flag).
    """
    if value is None:
        return None
    from kvplan.engines.vllm.serve_flags import parse_max_model_len as vllm_parse

    try:
        n = vllm_parse(value)
    except ValueError:
        raise KvplanError(
            f"--max-model-len: expected a number of tokens (8192, 32k = 32000, 32K = 32768) or 'auto', got {value!r}"
        ) from None
    if n != -1 and n <= 0:
        raise KvplanError(f"--max-model-len: must be positive, got {value!r}")
    return n


def parse_kv_cache_memory(value: Optional[str]) -> Optional[int]:
    """--kv-cache-memory-bytes as `vllm serve` reads it ("80g" = 80e9, "80G" = 80 GiB) or with
    an IEC unit ("80GiB"). Raises KvplanError naming the flag as typed (--kv-cache-memory or
    --kv-cache-memory-bytes)."""
    if value is None:
        return None
    from kvplan.engines.vllm.serve_flags import parse_human_int
    from kvplan.units import parse_bytes

    flag = _flag_typed("--kv-cache-memory", "--kv-cache-memory-bytes")
    try:
        n = parse_human_int(value)
    except ValueError:
        n = parse_bytes(value, what=flag)
    if n <= 0:
        raise KvplanError(f"{flag}: must be a positive number of bytes, got {value!r}")
    return n


def _flag_typed(*spellings: str) -> str:
    """Which of an option's ``spellings`` the command line used (the last one given, as click
    keeps the last value), for messages; all of them joined by "/" when none is on it."""
    used = None
    for a in sys.argv[1:]:
        for flag in spellings:
            if a == flag or a.startswith(flag + "="):
                used = flag
    return used or "/".join(spellings)


def positive(name: str, value: Optional[int]) -> Optional[int]:
    if value is not None and value < 1:
        raise KvplanError(f"{name}: must be >= 1, got {value}")
    return value


def build_engine_args(**kw):
    """EngineArgs from CLI values; pydantic errors become one line naming the flag."""
    from pydantic import ValidationError

    from kvplan.planner import EngineArgs

    try:
        return EngineArgs(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "argument"
        flag = "--" + field.replace("_", "-")

        raise KvplanError(f"{flag}: {_plain_message(err)} (got {err.get('input')!r})") from None


def _plain_message(err: dict) -> str:
    """A pydantic error as a short sentence (no pydantic phrasing)."""
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "less_than":
        return f"must be < {ctx.get('lt')}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return "must be a finite number"
    return err["msg"].removeprefix("Value error, ")


@app.command()
def estimate(
    model: str = typer.Argument(..., metavar="MODEL", help="Hub repo id, local directory with config.json, or bundled spec id."),
    gpu: str = typer.Option("H200", "--gpu", metavar="GPU", help="GPU profile id or alias (see `kvplan gpus`)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", metavar="SIZE", help="Override CUDA-visible memory: bytes or 80GiB / 81920MiB."),
    gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", metavar="FILE", help="Extra GPU profile YAML file(s)."),
    tensor_parallel_size: int = typer.Option(1, "--tensor-parallel-size", "-tp", metavar="N"),
    pipeline_parallel_size: int = typer.Option(1, "--pipeline-parallel-size", "-pp", metavar="N"),
    max_model_len: Optional[str] = typer.Option(None, "--max-model-len", metavar="TOKENS", help="Tokens, or 'auto' for the largest that fits."),
    gpu_memory_utilization: Optional[float] = typer.Option(None, "--gpu-memory-utilization", metavar="FRACTION"),
    kv_cache_dtype: str = typer.Option("auto", "--kv-cache-dtype", metavar="DTYPE", help="auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2"),
    block_size: Optional[int] = typer.Option(None, "--block-size", metavar="TOKENS"),
    dtype: str = typer.Option("auto", "--dtype", metavar="DTYPE"),
    quantization: Optional[str] = typer.Option(None, "--quantization", "-q", metavar="METHOD"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", metavar="N"),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens", metavar="TOKENS"),
    enforce_eager: bool = typer.Option(False, "--enforce-eager"),
    kv_cache_memory: Optional[str] = typer.Option(
        None, "--kv-cache-memory-bytes", "--kv-cache-memory", metavar="BYTES", help="KV-cache bytes (bypasses --gpu-memory-utilization)."
    ),
    revision: Optional[str] = typer.Option(None, "--revision", metavar="REVISION"),
    vllm_version: str = typer.Option("0.26.0", "--vllm-version", metavar="VERSION"),
    usage: str = typer.Option("serve", "--usage", metavar="USAGE", help="serve (vllm serve defaults) or llm (offline LLM class defaults)."),
    fmt: str = typer.Option(
        "table", "--format", metavar="FORMAT", help="table, json, yaml (a vLLM --config file) or serve (the `vllm serve` line only)."
    ),
    workload: Optional[str] = typer.Option(
        None, "--workload", metavar="WORKLOAD", help="Request lengths: 'prompt=MEAN[,P95] output=MEAN[,P95]' or a CSV/JSONL file."
    ),
    shared_prefix_tokens: int = typer.Option(0, "--shared-prefix-tokens", metavar="TOKENS", help="System-prompt tokens shared by all requests."),
    n: int = typer.Option(1, "--n", "--beam-width", metavar="N", help="Parallel samples / beams per request."),
    enable_prefix_caching: Optional[bool] = typer.Option(
        None, "--enable-prefix-caching/--no-enable-prefix-caching"
    ),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE", help="Write concurrency curves and memory breakdown (PNG/SVG)."),
    curves: bool = typer.Option(False, "--curves", help="Print concurrency curves in the terminal."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also print notes on kvplan's own uncertainty (always in --format json)."
    ),
) -> None:
    """Predict vLLM's KV-cache blocks, tokens and max concurrency for MODEL on a GPU."""
    try:
        code = run_estimate(**locals())
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)
        return
    raise typer.Exit(code)


def plan_from_options(
    *,
    model: str,
    gpu: str,
    gpu_memory: Optional[str],
    gpu_profiles: Optional[list[str]],
    revision: Optional[str],
    **engine_kw,
):
    """Resolve model + GPU + flags into (Plan, ModelSource). Shared by estimate/verify/check."""
    from kvplan.engines.vllm.defaults import check_version
    from kvplan.gpus import check_gpu_memory_flag, find_gpu, load_profiles
    from kvplan.planner import plan
    from kvplan.sources import load_spec
    from kvplan.units import parse_bytes

    check_version(engine_kw.get("vllm_version") or "0.26.0")
    args = build_engine_args(**engine_kw)
    profile = find_gpu(gpu, load_profiles(gpu_profiles))
    if gpu_memory is not None:
        profile = profile.with_memory(check_gpu_memory_flag(parse_bytes(gpu_memory, what="--gpu-memory"), gpu_memory))
    spec, source = load_spec(model, revision)
    import os

    # vLLM reads VLLM_ALLOW_LONG_MAX_MODEL_LEN from its environment; kvplan runs in the one the user
    # would start vLLM from (config/model.py _get_and_verify_max_len).
    return plan(spec, profile, args, env=dict(os.environ)), source


def run_estimate(**kw) -> int:
    fmt = kw.pop("fmt")
    if fmt not in ("table", "json", "yaml", "serve"):
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use table, json, yaml or serve")
    positive("--tensor-parallel-size", kw["tensor_parallel_size"])
    positive("--pipeline-parallel-size", kw["pipeline_parallel_size"])
    positive("--max-num-seqs", kw["max_num_seqs"])
    positive("--max-num-batched-tokens", kw["max_num_batched_tokens"])
    positive("--block-size", kw["block_size"])
    if kw["gpu_memory_utilization"] is not None and not (0 < kw["gpu_memory_utilization"] <= 1):
        raise KvplanError(f"--gpu-memory-utilization: must be in (0, 1], got {kw['gpu_memory_utilization']}")
    kw["kv_cache_memory_bytes"] = parse_kv_cache_memory(kw.pop("kv_cache_memory"))
    kw["max_model_len"] = parse_max_model_len(kw["max_model_len"])
    revision = kw.get("revision")
    verbose = kw.pop("verbose", False)
    extras = {"plot": kw.pop("plot"), "curves": kw.pop("curves")}
    wl_args = (kw.pop("workload"), kw.pop("shared_prefix_tokens"), kw.pop("n"), kw.get("enable_prefix_caching"))
    if wl_args[0] is not None or wl_args[1] or wl_args[2] != 1 or extras["plot"] is not None or extras["curves"]:
        from kvplan.cli_plan import estimate_extras, validate_plot, workload_model_from_flags

        validate_plot(extras["plot"])  # exit 2 (bad path) or 3 (no matplotlib) before any output
        extras["workload"] = workload_model_from_flags(*wl_args)  # bad input fails before any output
    else:
        estimate_extras = None
    plan, source = plan_from_options(**kw)
    _warn_multi_node(plan)

    from kvplan import render

    if fmt == "json":
        doc = render.to_dict(plan, source.provenance | {"origin": source.origin}, revision)
        if estimate_extras:
            estimate_extras(plan, fmt=fmt, doc=doc, **extras)
        print(json.dumps(doc, indent=2))
    elif fmt in ("yaml", "serve"):
        if not plan.fits:
            from kvplan.recommend import recommendations

            fixes = [f"{r.flag} {r.value}" for r in recommendations(plan) if r.in_serve_line]
            fix = (
                "; the line below adds kvplan's fixes: " + ", ".join(fixes)
                if fixes
                else "; kvplan found no flag that fixes it (`kvplan estimate` without --format says why)"
            )
            print(f"warning: this configuration does not start: {plan.failure}{fix}", file=sys.stderr)
        sys.stdout.write(render.config_yaml(plan, revision) if fmt == "yaml" else render.serve_command(plan, revision) + "\n")
        if estimate_extras:
            estimate_extras(plan, fmt=fmt, **extras)
    else:
        from rich.console import Console

        console = Console()
        render.print_table(plan, console, revision, verbose=verbose)
        if estimate_extras:
            estimate_extras(plan, fmt=fmt, console=console, **extras)
    return EXIT_OK if plan.fits else EXIT_FAIL


def _warn_multi_node(plan) -> None:
    """Add a warning when --tensor-parallel-size spans more GPUs than one node holds. GPU profiles
    record no node size, so kvplan assumes 8 (kvplan.gpus.GPUS_PER_NODE) and says so; `plan`
    keeps TP within --gpus-per-node instead."""
    from kvplan.gpus import GPUS_PER_NODE

    tp = plan.effective["tensor_parallel_size"]
    if tp > GPUS_PER_NODE:
        plan.warnings.append(
            f"--tensor-parallel-size {tp} spans more than one node (kvplan assumes {GPUS_PER_NODE} GPUs per node; "
            "GPU profiles do not record it): tensor parallelism across nodes all-reduces over the network "
            f"and is slow; prefer --tensor-parallel-size {GPUS_PER_NODE} with --pipeline-parallel-size "
            f"{max(1, tp // GPUS_PER_NODE) * plan.effective['pipeline_parallel_size']} (needs a Ray cluster)"
        )


@app.command()
def gpus(
    gpu_profiles: Optional[list[str]] = typer.Option(
        None, "--gpu-profiles", metavar="FILE", help="Extra GPU profile YAML file(s)."
    ),
    fmt: str = typer.Option("table", "--format", metavar="FORMAT", help="table or json."),
) -> None:
    """List GPU profiles (CUDA-visible memory, fp8 support, price)."""
    try:
        from kvplan.gpus import load_profiles

        profiles = load_profiles(gpu_profiles)
        if fmt == "json":
            print(json.dumps([p.model_dump() for p in profiles.values()], indent=2))
            return
        if fmt != "table":
            raise KvplanError(f"--format: unknown value {fmt!r}", hint="use table or json")
        from rich import box
        from rich.console import Console
        from rich.table import Table

        rows = list(profiles.values())
        priced = any(p.price_per_hour_usd is not None for p in rows)
        # Ids are what users copy into --gpu: never cut them; the other columns wrap instead.
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
        t.add_column("id", no_wrap=True, min_width=max((len(p.id) for p in rows), default=2))
        t.add_column("name", overflow="fold", min_width=10)
        t.add_column("GiB", justify="right", no_wrap=True)
        t.add_column("fp8", no_wrap=True)
        t.add_column("bf16", no_wrap=True)
        if priced:
            t.add_column("$/h", justify="right", no_wrap=True)
        t.add_column("aliases", overflow="fold", min_width=10)
        t.add_column("CUDA bytes", justify="right", no_wrap=True)
        for p in rows:
            cells = [
                p.id,
                p.display_name,
                f"{p.memory_bytes / 2**30:.2f}",
                "yes" if p.fp8_supported else "no",
                "yes" if p.bf16_supported else "no",
            ]
            if priced:
                cells.append("" if p.price_per_hour_usd is None else f"{p.price_per_hour_usd:.2f}")
            cells += [", ".join(p.aliases), f"{p.memory_bytes:,}"]
            t.add_row(*cells)
        Console().print(t)
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)


def register_commands(argv: list[str] | None = None) -> None:
    """Register the command modules needed for ``argv`` (all of them when argv names none of
    kvplan's own commands, e.g. for --help). Idempotent."""
    wanted = None
    if argv is not None:
        first = next((a for a in argv if not a.startswith("-")), None)
        if first in ("estimate", "gpus"):
            return
        if first in _COMMAND_MODULES:
            wanted = {_COMMAND_MODULES[first]}
    for name in dict.fromkeys(_COMMAND_MODULES.values()):
        if name in _registered or (wanted is not None and name not in wanted):
            continue
        importlib.import_module(name).register(app)
        _registered.add(name)


_TYPE_ERRORS = (
    ("valid integer", "must be a whole number"),
    ("valid number", "must be a number"),
    ("valid boolean", "must be true or false"),
)


def _given_value(flag: str) -> str | None:
    """The text given after ``flag`` on the command line (for messages), if any."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _usage_error_types() -> tuple[tuple, tuple, tuple]:
    """(exit, abort, usage-error) exception classes of typer's click (vendored or not)."""
    exits, aborts, usage = [typer.Exit], [typer.Abort], [typer.BadParameter.__mro__[2]]
    click = sys.modules.get("click")  # typer < 0.29 raises plain click exceptions
    if click is not None:
        exits.append(click.exceptions.Exit)
        aborts.append(click.exceptions.Abort)
        usage.append(click.ClickException)
    return tuple(exits), tuple(aborts), tuple(usage)


def main() -> None:
    """Entry point: run the app, turning usage errors into one line + exit 2."""
    import signal

    if hasattr(signal, "SIGPIPE"):
        # `kvplan ... | head`: die quietly like other Unix tools instead of exiting 1.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if sys.stdout is None:
        # `kvplan ... >&-`: Python starts with sys.stdout None when file descriptor 1 is closed;
        # every command writes its answer there, so say so once instead of failing mid-way.
        # Checked first: a file kvplan opened later would otherwise take descriptor 1.
        if sys.stderr is not None:
            print("error: cannot write the output: standard output is closed", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if len(sys.argv) == 1:
        sys.argv.append("--help")
    register_commands(sys.argv[1:])
    exits, aborts, usage = _usage_error_types()
    try:
        rv = app(standalone_mode=False)
    except exits as e:
        sys.exit(getattr(e, "exit_code", 0))
    except (*aborts, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except usage as e:
        msg = e.format_message().replace("\n", " ")
        param = getattr(e, "param", None)
        if param is not None and getattr(param, "opts", None):
            name = max(param.opts, key=len)
            # typer 0.29 words type errors like pydantic; say it plainly, naming the flag once
            for phrase, plain in _TYPE_ERRORS:
                if phrase in msg:
                    got = next((v for v in map(_given_value, param.opts) if v is not None), None)
                    msg = f"{name}: {plain}" + (f", got {got!r}" if got is not None else "")
                    break
            if name not in msg:
                msg = f"{name}: {msg}"
        print(f"error: {msg}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KvplanError as e:
        print(f"error: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""), file=sys.stderr)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:
        if getattr(e, "filename", None) is None:  # writing our own output failed (e.g. a full disk)
            _quiet_stdout()
            print(f"error: cannot write the output: {e.strerror or e}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        raise
    try:
        sys.stdout.flush()
    except OSError as e:
        _quiet_stdout()
        print(f"error: cannot write the output: {e.strerror or e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(rv if isinstance(rv, int) else 0)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
