"""kvplan's command line (typer): the app, main() and the registration of the commands, one
module each (estimate, gpus, verify, check and schema, plan, perf, web), each thin: parse flags -> typed
inputs -> core -> render.

Flags are spelled as `vllm serve` spells them (the engine arguments' options are derived from
kvplan.engines.vllm.args.ENGINE_ARGS, see kvplan.cli.options). Errors the user can fix print one
line ("error: ...") and exit 2; "does not fit" exits 1; a missing environment exits 3. No
tracebacks. A command's module is imported only when that command runs (or for --help; see
_COMMAND_MODULES), so `kvplan estimate` does not pay for building every other command's options.
Nothing below kvplan.cli imports it.
"""

from __future__ import annotations

import importlib
import sys

import typer

from kvplan import __version__
from kvplan.errors import EXIT_BAD_INPUT, KvplanError

app = typer.Typer(
    name="kvplan",
    help="Predict vLLM's KV-cache blocks, concurrency and memory before you rent the GPU.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # The root's own --help, when a command's is the one given, defaults to False instead of None:
    # typer 0.29 coerces an unset flag's None through a pydantic TypeAdapter it builds on the spot,
    # so `kvplan check --help` imported pydantic (~50 ms) for nothing. A click default_map entry
    # reaches only the root's parameters (a command's default_map is default_map[command]).
    context_settings={"default_map": {"help": False}},
)

# command -> the module exposing `register(app)`, in --help order. A module is registered only
# when its command is invoked (or for --help), so `kvplan estimate` does not pay for building
# every other command's options.
_COMMAND_MODULES = {
    "estimate": "kvplan.cli.estimate",
    "gpus": "kvplan.cli.gpus",
    "verify": "kvplan.cli.verify",
    "check": "kvplan.cli.check",
    "schema": "kvplan.cli.schema",
    "plan": "kvplan.cli.plan",
    "perf": "kvplan.cli.perf",
    "web": "kvplan.cli.web",
}
_registered: set[str] = set()

# command -> the first paragraph of its help, which `kvplan --help` lists. With these, the root
# help registers a placeholder per command instead of importing every command module (and with
# them pydantic and every version's rules): 4x faster. A command missing here is imported for
# the root help as before. tests/cli/test_startup_structure.py checks each line against the
# command's own docstring, so a reworded command cannot list stale text.
_SUMMARIES = {
    "estimate": "Predict vLLM's KV-cache blocks, tokens and max concurrency for MODEL on a GPU.",
    "gpus": "List GPU profiles (CUDA-visible memory, fp8 support, price).",
    "verify": "Start vLLM with these arguments (or read its log) and compare with kvplan's prediction.",
    "check": "Check vLLM deployment files before a GPU is rented (exit 0 pass, 1 fail, 2 unreadable input).",
    "schema": "Print the JSON Schema of the config format (for editors: yaml-language-server).",
    "plan": "Find the cheapest GPUs that serve CONCURRENCY requests of MAX_MODEL_LEN tokens.",
    "perf": "Predict vLLM's throughput, TTFT/TPOT/ITL/E2E and saturation rate for MODEL on a GPU.",
    "web": "Serve a local web page and JSON API (/api/v1/...) over the CLI's documents.",
}
_placeholders: list = []  # the typer CommandInfo of each placeholder now in app.registered_commands


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


# Moved to kvplan.capacity.options and kvplan.cli.options (issue 11); importers outside the CLI
# still read them here (kvplan.cli.plan_from_options, kvplan.cli.parse_max_model_len, ...). These
# aliases go when every importer is updated. Imported when first read (see __getattr__).
_MOVED = {
    "_plain_message": "kvplan.capacity.options", "build_engine_args": "kvplan.capacity.options",
    "plan_from_options": "kvplan.capacity.options",
    "parse_max_model_len": "kvplan.cli.options", "parse_kv_cache_memory": "kvplan.cli.options",
    "positive": "kvplan.cli.options", "_flag_typed": "kvplan.cli.options",
    "estimate": "kvplan.cli.estimate", "run_estimate": "kvplan.cli.estimate", "_warn_multi_node": "kvplan.cli.estimate",
    "gpus": "kvplan.cli.gpus",
}


def __getattr__(name: str):
    """The names that moved into the command modules, imported when first read (keeps start-up lean)."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name.lstrip("_") if name == "_flag_typed" else name)


def register_commands(argv: list[str] | None = None) -> None:
    """Register the command modules needed for ``argv`` (all of them when argv names a word
    that is none of kvplan's commands). Idempotent.

    When argv names no command at all (``kvplan --help``, ``kvplan``), only the root help is
    printed: each command with a line in _SUMMARIES gets a placeholder carrying that line, and
    its module is not imported. A later call that needs the real command replaces it."""
    wanted = None  # the modules to register; None = all
    root_help = False
    if argv is not None:
        first = next((a for a in argv if not a.startswith("-")), None)
        if first is None and "--version" in argv and "--help" not in argv:
            return  # `kvplan --version` prints and exits before any command is needed
        if first in _COMMAND_MODULES:
            wanted = {_COMMAND_MODULES[first]}
        root_help = first is None
    if root_help:
        _register_placeholders()
        wanted = {m for c, m in _COMMAND_MODULES.items() if c not in _SUMMARIES}
    elif _placeholders:
        app.registered_commands[:] = [c for c in app.registered_commands if c not in _placeholders]
        _placeholders.clear()
    for name in dict.fromkeys(_COMMAND_MODULES.values()):
        if name in _registered or (wanted is not None and name not in wanted):
            continue
        importlib.import_module(name).register(app)
        _registered.add(name)
    _fill_metavars(app)


def _register_placeholders() -> None:
    """One placeholder command per command of _SUMMARIES not yet registered, in _COMMAND_MODULES'
    order, for the root help (see register_commands)."""
    if _placeholders:
        return
    for command, module in _COMMAND_MODULES.items():
        if module in _registered or command not in _SUMMARIES:
            continue
        app.command(command, help=_SUMMARIES[command])(_placeholder)
        _placeholders.append(app.registered_commands[-1])


def _placeholder() -> None:  # pragma: no cover - never invoked: a command word registers the real one
    raise typer.Exit(0)


# Help-text placeholders for options declared without a metavar (typer would print its own
# "<int>", "<str>", "<list[str]>"): a name saying what to write, else the kind of value. The
# engine arguments' placeholders come from their table (see _metavars).
_METAVARS = {
    "--format": "FORMAT", "--gpu": "GPU", "--gpus": "GPU[,GPU...]", "--gpu-memory": "SIZE", "--gpu-profiles": "FILE",
    "--price": "GPU=USD", "--plot": "FILE", "--workload": "SPEC|FILE", "--from-log": "FILE", "--batch": "FILE",
    "--junit-xml": "FILE", "--config": "FILE", "--revision": "REVISION", "--usage": "llm|serve",
    "--name": "NAME", "--stdin-name": "NAME", "--vllm-version": "VERSION",
}
_TYPE_METAVARS = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def _metavars() -> dict[str, str]:
    """_METAVARS plus each engine argument's placeholder (ENGINE_ARGS), under every spelling.

    The table is read only when a registered command has already imported it (its options are
    engine options): importing it builds EngineArgs and loads the default version's rules,
    which `kvplan check --help` would otherwise pay for. _METAVARS names the one engine flag such
    a command declares by hand (--vllm-version), as the table spells it (a test keeps them equal).
    """
    out = dict(_METAVARS)
    if "kvplan.cli.options" not in sys.modules:
        return out
    from kvplan.cli.options import ALIASES, ENGINE_ARGS

    for arg in ENGINE_ARGS:
        if arg.metavar:
            out.update({f: arg.metavar for f in arg.flags + ALIASES.get(arg.name, ()) if f.startswith("--")})
    return out


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
    metavars = _metavars()
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
            info.metavar = next((metavars[f] for f in flags if f in metavars), _TYPE_METAVARS.get(base, "VALUE"))


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
        from kvplan.io.errors import usage_error_message

        message = usage_error_message(e)
        print(f"error: {message}", file=sys.stderr)
        if "unexpected extra argument" in message.lower() and any(
            a == "--workload" or a.startswith("--workload=") for a in sys.argv[1:]
        ):  # `--workload prompt=100,50 output=10` unquoted: the shell split it in two
            print("  hint: --workload takes one argument: quote it, e.g. --workload 'prompt=100,50 output=10'", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KvplanError as e:
        print(f"error: {e.message}" + (f"\n  hint: {e.hint}" if e.hint else ""), file=sys.stderr)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:
        from kvplan.io.errors import os_error_message

        worded = os_error_message(e)
        if worded is None:
            raise
        line, writing_output = worded
        if writing_output:  # e.g. a full disk: keep the interpreter's final flush from failing again
            _quiet_stdout()
        print(f"error: {line}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
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
