"""The HTTP API's requests -> the CLI's commands -> the CLI's documents (no arithmetic here).

A request body is a JSON object whose keys are the command's parameter names as the CLI's
functions name them (vLLM's names for engine arguments: ``tensor_parallel_size``,
``max_model_len``, ...; ``model`` for the MODEL argument). Each key becomes the flag `kvplan
<command>` takes (``{"tensor_parallel_size": 4}`` -> ``--tensor-parallel-size 4``) and the
command line is parsed by the command's own click parser, so a value is checked, and refused
with the same one line, as on the terminal. A command that gains a flag (``-dp``, ``-ep``)
gains the key with it.

``estimate`` runs in this process (the CLI's prepare_estimate / estimate_document / estimate_text,
under one lock); ``plan``, ``perf``, ``check`` and ``estimate`` with ``perf`` run the CLI itself
as a child process (``python -m kvplan ...``) with a time limit, killed when it runs over.
Keys that would read or write a path on the server's disk are refused unless the server was
started with --allow-local-paths (see Policy).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kvplan.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, KvplanError

# Where `kvplan <command> --format F` is asked for, which formats the API serves.
FORMATS = {"estimate": ("json", "yaml", "serve"), "plan": ("json",), "perf": ("json",), "check": ("json",)}
# Keys the API never takes: they write files on the server's disk or only shape terminal output.
NEVER = {"plot", "junit_xml", "verbose", "curves_only", "files", "stdin_name", "fmt"}
# Keys naming files on the server's disk: taken only with --allow-local-paths.
PATH_KEYS = {"gpu_profiles"}
# The environment variable that makes kvplan.sources refuse local model paths (set for the
# server's own process and its children unless --allow-local-paths).
DENY_ENV = "KVPLAN_DENY_LOCAL_PATHS"


@dataclass(frozen=True)
class Policy:
    """What the server was started to allow.

    Attributes:
        allow_local_paths: local model directories, --workload files and --gpu-profiles files
            on the server's disk may be named (--allow-local-paths).
        timeout_s: seconds one child command (plan, perf, check) may run before it is killed.
        max_jobs: child commands running at once; one more is refused with 503.
    """

    allow_local_paths: bool = False
    timeout_s: float = 30.0
    max_jobs: int = 2


@dataclass
class Reply:
    """One API answer: HTTP status, body bytes, content type, and the CLI's exit code (0 it
    fits / passes, 1 it does not, 2 bad input, 3 missing environment; None for no command)."""

    status: int
    body: bytes
    content_type: str = "application/json"
    exit_code: int | None = None
    headers: dict = field(default_factory=dict)


def error_reply(status: int, message: str, hint: str | None = None, exit_code: int | None = EXIT_BAD_INPUT) -> Reply:
    """{"error": one line, "hint": ..., "exit_code": ...} with ``status``."""
    doc = {"error": message, "hint": hint, "exit_code": exit_code}
    return Reply(status, json.dumps(doc).encode(), exit_code=exit_code)


def json_reply(doc, exit_code: int | None = 0) -> Reply:
    """A 200 answer holding ``doc`` as JSON (indented as the CLI prints it)."""
    return Reply(200, json.dumps(doc, indent=2).encode(), exit_code=exit_code)


# ----------------------------------------------------------------------------- the commands


@lru_cache(maxsize=None)
def command(name: str):
    """The click command of `kvplan NAME`, built from the CLI module's own register()."""
    import importlib

    import typer
    import typer.main

    app = typer.Typer(add_completion=False)
    importlib.import_module(f"kvplan.cli.{name}").register(app)
    return typer.main.get_command(app)


def parameters(name: str) -> dict:
    """{parameter name: click parameter} of `kvplan NAME`, the API's keys (less NEVER)."""
    return {p.name: p for p in command(name).params if p.name not in NEVER and p.name != "help"}


def json_type(param) -> str:
    """The JSON type of a parameter's value: "boolean", "integer", "number" or "string" (from the
    annotation typer keeps; click's own ``type`` where there is one)."""
    import typing

    if getattr(param, "is_flag", False):
        return "boolean"
    desc = getattr(param, "type_descriptor", None)
    kind = getattr(desc, "annotation", None)
    if kind is None:
        name = getattr(getattr(param, "type", None), "name", "")
        return {"integer": "integer", "float": "number", "boolean": "boolean"}.get(name, "string")
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    while args and typing.get_origin(kind) is not None:  # Optional[int], list[str]
        kind = args[0]
        args = [a for a in typing.get_args(kind) if a is not type(None)]
    return {bool: "boolean", int: "integer", float: "number"}.get(kind, "string")


def _long_flag(param) -> str:
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def _aliases(params: dict) -> dict:
    """{alias key: (click parameter, its flag)} for every further long flag of a parameter, as a
    key (``--num-prompts`` of num_requests -> "num_prompts"), so a request may use either name,
    as the command line may."""
    out = {}
    for p in params.values():
        for opt in p.opts:
            key = opt[2:].replace("-", "_")
            if opt.startswith("--") and key != p.name and key not in params:
                out[key] = (p, opt)
    return out


def to_argv(name: str, body: dict) -> list[str]:
    """The `kvplan NAME` command line (without the command and --format) for request ``body``.
    A key is a parameter's name or one of its other long flags' (``num_prompts`` for
    ``num_requests``, as ``--num-prompts`` is ``--num-requests``).

    Raises:
        KvplanError: a key the command does not take, a parameter given under two names, or a
            value of the wrong JSON shape.
    """
    params = parameters(name)
    aliases = _aliases(params)
    positional, options = [], []
    seen: dict[str, str] = {}
    for key, value in body.items():
        if key not in params and key not in aliases:
            known = ", ".join(sorted(params))
            raise KvplanError(f"{key}: not a parameter of `kvplan {name}` over the API", hint=f"known keys: {known}")
        # an alias passes its own flag, so a bad value's error names the name the request used
        p, flag = (params[key], None) if key in params else aliases[key]
        if p.name in seen:
            raise KvplanError(f"{seen[p.name]}/{key}: the same parameter twice (one is an alias of the other); give one")
        seen[p.name] = key
        if value is None:
            continue
        if p.param_type_name == "argument":
            if not isinstance(value, str):
                raise KvplanError(f"{key}: expected a string, got {json.dumps(value)[:60]}")
            positional.append(value)
            continue
        flag = flag or _long_flag(p)
        if getattr(p, "is_flag", False):
            if not isinstance(value, bool):
                raise KvplanError(f"{flag}: expected true or false, got {json.dumps(value)[:60]}")
            if value:
                options.append(flag)
            elif p.secondary_opts:
                options.append(p.secondary_opts[0])
            continue
        values = value if (p.multiple and isinstance(value, list)) else [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise KvplanError(f"{flag}: expected a single value, got {json.dumps(v)[:60]}")
            options.append(f"{flag}={v}")
    return positional + options


def _check_paths(name: str, body: dict, policy: Policy) -> None:
    """Refuse what would read the server's disk unless --allow-local-paths (see module doc).

    Raises:
        KvplanError: names the key and the flag that allows it.
    """
    if policy.allow_local_paths:
        return
    hint = "start the server with `kvplan web --allow-local-paths` to read files on its disk"
    for key in PATH_KEYS & body.keys():
        if body[key]:
            raise KvplanError(f"{key}: files on the server's disk are not readable from the web API", hint=hint)
    model = body.get("model")
    if isinstance(model, str) and _looks_local(model):
        raise KvplanError(f"{model}: local model directories are not readable from the web API", hint=hint)
    wl = body.get("workload")
    if isinstance(wl, str) and ("=" not in wl or _exists(wl)):
        raise KvplanError("--workload: files on the server's disk are not readable from the web API",
                          hint="write 'prompt=MEAN[,P95] output=MEAN[,P95]', or " + hint)


def _exists(text: str) -> bool:
    try:
        return Path(text).expanduser().exists()
    except (OSError, ValueError):
        return True  # a name the file system cannot look up is refused, not guessed at


def _looks_local(model: str) -> bool:
    """A model string kvplan.sources would read from disk (see kvplan.sources.resolve_model; an
    empty one is left to it: "MODEL: empty model name")."""
    if not model.strip():
        return False
    return model.startswith((".", "/", "~")) or "\\" in model or model.count("/") > 1 or _exists(model)


# ----------------------------------------------------------------------------- running them

_LOCK = threading.Lock()  # one in-process estimate at a time (the CLI's code reads sys.argv)


def run(name: str, body: dict, policy: Policy, fmt: str = "json", stdin: str | None = None,
        jobs: threading.Semaphore | None = None, extra_argv: tuple[str, ...] = ()) -> Reply:
    """Answer one API call of `kvplan NAME` with request ``body`` (see module doc);
    ``extra_argv`` goes first on the command line (check's ``- --stdin-name NAME``).

    Returns:
        200 with the CLI's document (exit code 0 or 1 in Reply.exit_code), 400 bad input (the
        CLI's one line), 503 busy or a missing environment, 504 over the time limit.
    """
    if not isinstance(body, dict):
        return error_reply(400, "request body: expected a JSON object of the command's parameters")
    if fmt not in FORMATS[name]:
        return error_reply(400, f"--format: {fmt!r} is not served over the API", hint="use " + " or ".join(FORMATS[name]))
    try:
        _check_paths(name, body, policy)
        argv = [*extra_argv, *to_argv(name, body), f"--format={fmt}"]
    except KvplanError as e:
        return error_reply(400, e.message, e.hint)
    if name == "estimate" and not body.get("perf"):
        return _estimate_here(argv, fmt)
    if jobs is not None and not jobs.acquire(blocking=False):
        return error_reply(503, f"busy: {policy.max_jobs} plan/perf/check requests are already running; try again shortly",
                           exit_code=None)
    try:
        return run_child(name, argv, policy, stdin)
    finally:
        if jobs is not None:
            jobs.release()


def _estimate_here(argv: list[str], fmt: str) -> Reply:
    """`kvplan estimate ARGV` in this process: the CLI's parser, prepare_estimate and renderers."""
    from kvplan.cli.estimate import estimate_document, estimate_flags, estimate_text, prepare_estimate
    from kvplan.io.errors import usage_error_message

    cmd = command("estimate")
    with _LOCK:
        saved = sys.argv
        sys.argv = ["kvplan", "estimate", *argv]  # messages name the flag as typed (flag_typed)
        try:
            try:
                ctx = cmd.make_context("estimate", list(argv))
            except Exception as e:  # click's usage errors (its exception classes vary by version)
                if not hasattr(e, "format_message"):
                    raise
                return error_reply(400, usage_error_message(e))
            flags = estimate_flags(ctx.params)
            prepared = prepare_estimate(flags)
            if fmt == "json":
                return json_reply(estimate_document(prepared), prepared.exit_code)
            text = estimate_text(prepared)
            kind = "application/yaml" if fmt == "yaml" else "text/plain; charset=utf-8"
            return Reply(200, text.encode(), kind, prepared.exit_code)
        except KvplanError as e:
            return error_reply(_status(e.exit_code), e.message, e.hint, e.exit_code)
        finally:
            sys.argv = saved


def _status(exit_code: int) -> int:
    return 503 if exit_code == EXIT_ENVIRONMENT else 400


def run_child(name: str, argv: list[str], policy: Policy, stdin: str | None = None) -> Reply:
    """`python -m kvplan NAME ARGV` as a child process in an empty directory, killed after
    policy.timeout_s. Its stdout is the answer (exit 0 or 1); its `error:` line is a 400 (exit 2)
    or 503 (exit 3); anything else (a crash) is a 500 whose text stays in the server's log."""
    env = dict(os.environ)
    if not policy.allow_local_paths:
        env[DENY_ENV] = "1"
    cmd = [sys.executable, "-m", "kvplan", name, *argv]
    with tempfile.TemporaryDirectory(prefix="kvplan-web-") as cwd:
        try:
            done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=policy.timeout_s,
                                  cwd=cwd, env=env, stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return error_reply(
                504, f"{name}: ran longer than the server's limit of {policy.timeout_s:g} s and was stopped",
                hint="ask for less work (fewer --num-requests, --no-saturation), or start the server with a larger --timeout",
                exit_code=None,
            )
    if done.returncode in (0, 1, EXIT_BAD_INPUT) and done.stdout.strip():
        # a document: estimate/plan/perf print one only for exit 0/1; check also for exit 2 (a
        # file it could not read or resolve is a finding of its report): bad input, so a 422
        status = 422 if done.returncode == EXIT_BAD_INPUT else 200
        return Reply(status, done.stdout.encode(), "application/json", done.returncode)
    message, hint = _error_lines(done.stderr)
    if done.returncode in (EXIT_BAD_INPUT, EXIT_ENVIRONMENT) and message:
        return error_reply(_status(done.returncode), message, hint, done.returncode)
    print(f"kvplan web: `kvplan {name}` exited {done.returncode}:\n{done.stderr}", file=sys.stderr)
    return error_reply(500, f"{name}: kvplan failed unexpectedly (exit {done.returncode}); the server's log has the details",
                       exit_code=done.returncode)


def _error_lines(stderr: str) -> tuple[str | None, str | None]:
    """The CLI's "error: ..." line and its "hint: ..." line, without the prefixes."""
    message = hint = None
    for line in stderr.splitlines():
        s = line.strip()
        if s.startswith("error: ") and message is None:
            message = s[len("error: "):]
        elif s.startswith("hint: ") and message is not None and hint is None:
            hint = s[len("hint: "):]
    return message, hint


# ----------------------------------------------------------------------------- lists


def gpus_document() -> list:
    """`kvplan gpus --format json` (the bundled GPU profiles)."""
    from kvplan.cli.gpus import gpus_document as doc

    return doc(None)


def models_document(policy: Policy) -> dict:
    """{"bundled": the bundled model ids, "local_paths_allowed": bool}."""
    from kvplan.sources.bundled import bundled_ids

    return {"bundled": list(bundled_ids()), "local_paths_allowed": policy.allow_local_paths}


def options_document(policy: Policy) -> dict:
    """What the page needs to build its form: each command's keys ({key: {"flag", "type",
    "default", "multiple"}}), the supported vLLM versions, the KV-cache dtypes and quantization
    methods vLLM takes (kvplan's engine tables), and the server's policy."""
    from kvplan.capacity.estimate import QUANTIZATIONS, VLLM_QUANTIZATION_METHODS
    from kvplan.engines.vllm import versions

    def describe(p) -> dict:
        kind = json_type(p)
        default = p.default if isinstance(p.default, (str, int, float, bool, type(None))) else None
        return {"flag": None if p.param_type_name == "argument" else _long_flag(p), "type": kind,
                "default": default,
                "multiple": bool(getattr(p, "multiple", False) or getattr(p, "nargs", 1) == -1)}

    return {
        "commands": {n: {k: describe(p) for k, p in parameters(n).items()} for n in FORMATS},
        "vllm_versions": list(versions.SUPPORTED),
        "default_vllm_version": versions.DEFAULT_VERSION,
        "kv_cache_dtypes": list(versions.default().kv_spec.KV_CACHE_DTYPES),
        "quantizations": sorted(set(QUANTIZATIONS) | set(VLLM_QUANTIZATION_METHODS)),
        "local_paths_allowed": policy.allow_local_paths,
        "timeout_s": policy.timeout_s,
    }
