"""The project's set-up as the README gives it: extras and what they install."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _extras() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def _names(reqs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\\[; ]", r, maxsplit=1)[0].lower() for r in reqs}


def test_test_extra_installs_matplotlib_so_plot_tests_run():
    extras = _extras()
    assert "matplotlib" in _names(extras["plot"])
    assert "matplotlib" in _names(extras["test"])


def test_readme_names_the_plot_extra():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".[plot]" in readme
