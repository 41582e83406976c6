"""The error translation at each of kvplan's boundaries, in one place: what a user typed or a
file held becomes one line naming the flag, key or file (kvplan.errors.KvplanError, exit 2).

- flags: a click usage error (``usage_error_message``), an EngineArgs validation error for a
  flag (``engine_args_error``, "--max-num-seqs: must be >= 1 (got 0)");
- config keys: the same validation error for a key read from a file or a log
  (``engine_args_error(exc, prefix="engine_args.")``);
- files: an OSError that no reader turned into a message (``os_error_message``).
"""

from __future__ import annotations

import math

import sys

# typer 0.29 words type errors like pydantic; kvplan says them plainly.
_TYPE_ERRORS = (
    ("valid integer", "must be a whole number"),
    ("valid number", "must be a number"),
    ("valid boolean", "must be true or false"),
)


def plain_message(err: dict) -> str:
    """A pydantic error (one entry of ``ValidationError.errors()``) as a short sentence (no
    pydantic phrasing): "must be >= 1", "must be a whole number", the validator's own text."""
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    given = err.get("input")
    if isinstance(given, float) and not math.isfinite(given):
        # nan fails every bound check ("must be <= 1048576.0 (got nan)" would read as a size)
        return "must be a finite number"
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


def engine_args_error(exc, prefix: str = "--"):
    """The first error of an EngineArgs ``ValidationError`` as a KvplanError: the field as a flag
    (``prefix`` "--": "--max-num-seqs: must be >= 1 (got 0)") or as a key (``prefix``
    "engine_args.": "engine_args.max_num_seqs: ...")."""
    from kvplan.errors import KvplanError

    err = exc.errors()[0]
    if prefix == "--":
        field = str(err["loc"][0]) if err["loc"] else "argument"
        name = "--" + field.replace("_", "-")
    else:
        name = prefix + (str(err["loc"][0]) if err["loc"] else "engine_args")
    return KvplanError(f"{name}: {plain_message(err)} (got {err.get('input')!r})")


def given_value(flag: str, argv: list[str] | None = None) -> str | None:
    """The text given after ``flag`` on the command line (``argv``, default sys.argv[1:]), if any."""
    argv = sys.argv[1:] if argv is None else argv
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def usage_error_message(exc) -> str:
    """A click usage error as one line naming the flag once ("--max-num-seqs: must be a whole
    number, got 'x'"), without the "error: " prefix."""
    msg = exc.format_message().replace("\n", " ")
    param = getattr(exc, "param", None)
    if param is not None and getattr(param, "opts", None):
        name = max(param.opts, key=len)
        for phrase, plain in _TYPE_ERRORS:
            if phrase in msg:
                got = next((v for v in map(given_value, param.opts) if v is not None), None)
                msg = f"{name}: {plain}" + (f", got {got!r}" if got is not None else "")
                break
        if name not in msg:
            msg = f"{name}: {msg}"
    return msg


def os_error_message(e: OSError) -> tuple[str, bool] | None:
    """An OSError that reached the top as (line without "error: ", whether it was writing
    kvplan's own output), or None when it is not one kvplan words (re-raise it).

    No file name: writing the output failed (a full disk, a closed pipe's peer). A path too long
    to open: "<name>: cannot read: File name too long" (the name shortened, kvplan.io.files).
    """
    if getattr(e, "filename", None) is None:
        return f"cannot write the output: {e.strerror or e}", True
    import errno

    if e.errno == errno.ENAMETOOLONG:  # a user path no reader has checked first
        from kvplan.io.files import shown_name

        return f"{shown_name(e.filename)}: cannot read: {e.strerror}", False
    return None
