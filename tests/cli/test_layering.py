"""The command line sits on top: no module below kvplan.cli imports it (checked with ast over
every module of the package, imports inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "kvplan"
# Aliases left at the old paths of the CLI modules (issue 11); they are the CLI itself.
CLI_ALIASES = {"cli_plan.py", "cli_check.py", "cli_verify.py", "_entry.py", "__main__.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_nothing_below_the_cli_imports_it():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] == "cli" or (len(rel.parts) == 1 and rel.name in CLI_ALIASES):
            continue
        bad = sorted(m for m in _imports(path) if m == "kvplan.cli" or m.startswith(("kvplan.cli.", "kvplan.cli_")))
        if bad:
            offenders.append(f"{rel}: {', '.join(bad)}")
    assert not offenders, offenders


def test_the_console_entry_point_is_kvplan_entry_main():
    import tomllib

    project = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["kvplan"] == "kvplan._entry:main"
