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
    # a wheel, so `pip install kvplan-vllm` would fail on import.
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "kvplan").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk - listed == set(), f"packages missing from pyproject.toml: {sorted(on_disk - listed)}"


# --- the distribution name (issue 22 item 4) -------------------------------------------------
# "kvplan" on PyPI is another project ("Plan vLLM deployments without the GPU"): this one is
# published as kvplan-vllm, and its command and import name stay kvplan.

INSTALL = re.compile(r"\b(?:pip|pipx|uv pip|uv tool)\s+install\b([^\n`]*)")


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_distribution_is_kvplan_vllm_and_the_command_stays_kvplan():
    import kvplan

    project = _project()
    assert project["name"] == kvplan.DISTRIBUTION == "kvplan-vllm"
    assert project["scripts"] == {"kvplan": "kvplan._entry:main"}


def _install_targets(text: str) -> list[str]:
    """The requirement names each install line of ``text`` names (flags and paths skipped)."""
    names = []
    for m in INSTALL.finditer(text):
        command = re.split(r"&&|\|\||;|\|", m.group(1))[0]  # the install command only, not what follows it
        for word in command.split():
            if word.startswith("#"):
                break  # a comment
            word = word.strip("'\"),;")
            if not word or word.startswith(("-", ".", "/", "$", "git+", "<")) or "://" in word:
                continue
            names.append(re.split(r"[<>=!~\[;]", word, maxsplit=1)[0].lower())
    return names


def _texts_with_install_lines():
    paths = [ROOT / "README.md", ROOT / "action.yml", ROOT / ".pre-commit-hooks.yaml"]
    paths += [p for p in (ROOT / "docs").glob("*.md")]  # docs/review/ keeps old reviews verbatim
    paths += list((ROOT / "kvplan").rglob("*.py")) + list((ROOT / "benchmarks").rglob("*.py"))
    return [p for p in paths if p.exists()]


def test_no_install_line_installs_the_other_kvplan():
    offenders = {}
    for path in _texts_with_install_lines():
        bad = [n for n in _install_targets(path.read_text(encoding="utf-8")) if n == "kvplan"]
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_the_install_line_reader_sees_the_forms_docs_use():
    # the reader above must be able to fail: these are the lines it exists to catch
    assert _install_targets("pip install kvplan") == ["kvplan"]
    assert _install_targets("run: pip install 'kvplan[plot]'  # extra") == ["kvplan"]
    assert _install_targets('hint="pip install kvplan==0.1.0"') == ["kvplan"]
    assert _install_targets("pip install -e '.[test]' && kvplan estimate x") == []
    assert _install_targets("pip install 'kvplan-vllm[verify]'") == ["kvplan-vllm"]


def test_the_hints_name_the_distribution():
    from kvplan import DISTRIBUTION

    for rel in ("kvplan/render/plots.py", "kvplan/verify/run.py", "kvplan/verify/child.py"):
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert "DISTRIBUTION" in text or f"{DISTRIBUTION}[verify]" in text, rel
