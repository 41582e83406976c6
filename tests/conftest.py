"""Shared test setup: tests never touch the internet."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# A CI runner's step summary file (GitHub Actions sets it) is not the tests' to append to:
# `kvplan check` appends there when it is set (tests/check/test_step_summary.py sets its own).
os.environ.pop("GITHUB_STEP_SUMMARY", None)

import signal

import pytest


@pytest.fixture(autouse=True)
def _keep_sigpipe_ignored():
    """kvplan.cli.main sets SIGPIPE to SIG_DFL (`kvplan ... | head` dies quietly, as Unix tools
    do). Tests run the CLI in-process (helpers.run_cli), so without this a later test that
    writes to a closed socket (the web server's tests) would kill the whole pytest run with
    SIGPIPE (exit 141) instead of getting BrokenPipeError. Restore Python's own setting after
    every test."""
    before = signal.getsignal(signal.SIGPIPE) if hasattr(signal, "SIGPIPE") else None
    yield
    if before is not None:
        signal.signal(signal.SIGPIPE, before)
