"""Helpers shared by tests: run the CLI in-process and capture output and exit code."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run `kvplan ARGS` through kvplan.cli.main; return (exit code, stdout, stderr)."""
    from kvplan import cli

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["kvplan", *args]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv
    return code, out.getvalue(), err.getvalue()
