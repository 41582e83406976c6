"""Shared test setup: tests never touch the internet."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# A CI runner's step summary file (GitHub Actions sets it) is not the tests' to append to:
# `kvplan check` appends there when it is set (tests/check/test_step_summary.py sets its own).
os.environ.pop("GITHUB_STEP_SUMMARY", None)
