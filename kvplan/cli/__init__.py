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


# Moved to kvplan.capacity.options (issue 11); cli_plan and verify import them from here for now.
from kvplan.capacity.options import _plain_message, build_engine_args, plan_from_options  # noqa: E402,F401


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
        unpriced = [p.id for p in rows if p.price_per_hour_usd is None]
        # Ids are what users copy into --gpu: never cut them; the other columns wrap instead.
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
        t.add_column("id", no_wrap=True, min_width=max((len(p.id) for p in rows), default=2))
        t.add_column("name", overflow="fold", min_width=10)
        t.add_column("GiB", justify="right", no_wrap=True)
        t.add_column("fp8", no_wrap=True)
        t.add_column("bf16", no_wrap=True)
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
            cells.append("?" if p.price_per_hour_usd is None else f"{p.price_per_hour_usd:.2f}")
            cells += [", ".join(p.aliases), f"{p.memory_bytes:,}"]
            t.add_row(*cells)
        console = Console()
        console.print(t)
        from kvplan.render import hanging

        console.print(hanging(
            "$/h: ",
            "on-demand list price of one GPU (USD per hour; source and date: --format json, price_source)"
            + (
                "; ? = no price bundled: `kvplan plan` ranks it after priced GPUs (give one with --price GPU=USD)"
                if unpriced
                else ""
            ),
        ))
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)


def register_commands(argv: list[str] | None = None) -> None:
    """Register the command modules needed for ``argv`` (all of them when argv names none of
    kvplan's own commands, e.g. for --help). Idempotent."""
    wanted = None
    if argv is not None:
        first = next((a for a in argv if not a.startswith("-")), None)
        if first in ("estimate", "gpus"):
            _fill_metavars(app)
            return
        if first in _COMMAND_MODULES:
            wanted = {_COMMAND_MODULES[first]}
    for name in dict.fromkeys(_COMMAND_MODULES.values()):
        if name in _registered or (wanted is not None and name not in wanted):
            continue
        importlib.import_module(name).register(app)
        _registered.add(name)
    _fill_metavars(app)


# Help-text placeholders for options declared without a metavar (typer would print its own
# "<int>", "<str>", "<list[str]>"): a name saying what to write, else the kind of value.
_METAVARS = {
    "--format": "FORMAT", "--gpu": "GPU", "--gpus": "GPU[,GPU...]", "--gpu-memory": "SIZE", "--gpu-profiles": "FILE",
    "--price": "GPU=USD", "--plot": "FILE", "--workload": "SPEC|FILE", "--from-log": "FILE", "--batch": "FILE",
    "--junit-xml": "FILE", "--config": "FILE", "--max-model-len": "TOKENS", "--revision": "REVISION",
    "--vllm-version": "VERSION", "--usage": "llm|serve", "--kv-cache-dtype": "DTYPE", "--dtype": "DTYPE",
    "--quantization": "METHOD", "--tensor-parallel-size": "N", "--pipeline-parallel-size": "N",
    "--kv-cache-memory": "BYTES", "--gpu-memory-utilization": "FRACTION", "--block-size": "TOKENS",
    "--max-num-batched-tokens": "TOKENS", "--max-num-seqs": "N", "--name": "NAME", "--stdin-name": "NAME",
}
_TYPE_METAVARS = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def _plain_argument_help() -> None:
    """typer 0.29 prints an argument as "MODEL <str>" even when it has a metavar; show the
    metavar alone (help text only; parsing is untouched). Skipped if typer changes shape."""
    try:
        from typer.core import TyperArgument

        original = TyperArgument.display_type_rich
        if getattr(original, "_kvplan", False):
            return

        def display_type_rich(self, ctx):
            return None if self.metavar is not None else original(self, ctx)

        display_type_rich._kvplan = True
        TyperArgument.display_type_rich = display_type_rich
    except (ImportError, AttributeError):
        pass


def _fill_metavars(typer_app: typer.Typer) -> None:
    """Give every registered option and argument without a metavar a plain one (see _METAVARS;
    arguments: their name in capitals), so help never shows typer's "<int>" / "<list[str]>"."""
    import inspect
    import typing

    from typer.models import ArgumentInfo, OptionInfo

    _plain_argument_help()
    for cmd in typer_app.registered_commands:
        if cmd.callback is None:
            continue
        try:
            hints = typing.get_type_hints(cmd.callback)
        except Exception:  # noqa: BLE001 - a help nicety must never break the CLI
            hints = {}
        for name, param in inspect.signature(cmd.callback).parameters.items():
            info = param.default
            if not isinstance(info, (OptionInfo, ArgumentInfo)) or info.metavar is not None:
                continue
            if isinstance(info, ArgumentInfo):
                info.metavar = name.upper()
                continue
            kind = hints.get(name)
            args = [a for a in typing.get_args(kind) if a is not type(None)]
            base = args[0] if args else kind
            if typing.get_origin(base) is list:
                base = (typing.get_args(base) or (str,))[0]
            if base is bool:
                continue
            flags = [d for d in (info.param_decls or ()) if d.startswith("--")]
            info.metavar = next((_METAVARS[f] for f in flags if f in _METAVARS), _TYPE_METAVARS.get(base, "VALUE"))


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
    if sys.stderr is None:
        _stderr_to_devnull()
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
        import errno

        if e.errno == errno.ENAMETOOLONG:  # a user path no reader has checked first
            from kvplan.safe_io import shown_name

            print(f"error: {shown_name(e.filename)}: cannot read: {e.strerror}", file=sys.stderr)
            sys.exit(EXIT_BAD_INPUT)
        raise
    try:
        sys.stdout.flush()
    except OSError as e:
        _quiet_stdout()
        print(f"error: cannot write the output: {e.strerror or e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    sys.exit(rv if isinstance(rv, int) else 0)


def _stderr_to_devnull() -> None:
    """`kvplan ... 2>&-`: Python starts with sys.stderr None, and print(..., file=None) writes
    to standard output, so error lines and warnings would land in the answer (`--format json`
    would no longer be JSON). Messages are dropped instead, exit codes kept: descriptor 2 is
    pointed at os.devnull (so no file kvplan opens later can take it) and sys.stderr with it."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 2:
            os.dup2(fd, 2)
            os.close(fd)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
    except OSError:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
