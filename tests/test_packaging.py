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


def test_every_package_of_the_source_tree_is_listed_for_the_wheel():
    # pyproject.toml lists packages by hand (model_specs/ is mapped into kvplan.model_specs);
    # a folder of modules missing from the list installs in editable mode and is absent from
    # a wheel, so `pip install kvplan` would fail on import.
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "kvplan").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk - listed == set(), f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"
