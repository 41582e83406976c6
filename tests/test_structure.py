"""The package's shape (issue 11): small modules, imports that only go downward, one home for
each vLLM version's literals. Read with ``ast`` and text only: nothing here imports kvplan.

* no module in kvplan/ is over 800 lines;
* the graph of kvplan-internal imports (module level and inside functions alike) has no cycle;
* nothing outside kvplan/cli/ imports kvplan.cli;
* a vLLM version literal ("0.26", "0.33") appears only in the version packages
  (kvplan/engines/vllm/v0_26/, v0_33/ ...; one version's rules may name the version they differ
  from) and in the one table that lists supported versions, kvplan/engines/vllm/versions.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "kvplan"
MAX_LINES = 800
VERSION_PACKAGE = re.compile(r"engines/vllm/v\d+_\d+/")
VERSION_TABLE = "engines/vllm/versions.py"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The kvplan module an import names (a ``from pkg import sub`` may name a submodule)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("kvplan"):
                    found.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("kvplan"):
                continue
            found.add(target)
            for a in node.names:
                found.add(f"{target}.{a.name}")
    out = {_resolve(n, modules) for n in found}
    return {m for m in out if m and m != mod and not mod.startswith(m + ".") and m != "kvplan"}


def test_no_module_over_800_lines():
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycle():
    modules = _modules()
    graph = {m: _imports(m, p, modules) for m, p in modules.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:10])


def test_nothing_below_cli_imports_cli():
    modules = _modules()
    bad = {
        m: sorted(n for n in _imports(m, p, modules) if n == "kvplan.cli" or n.startswith("kvplan.cli."))
        for m, p in modules.items()
        if not (m == "kvplan.cli" or m.startswith("kvplan.cli.") or m in ("kvplan._entry", "kvplan.__main__"))
    }
    bad = {m: v for m, v in bad.items() if v}
    assert not bad, f"modules below kvplan/cli/ importing it: {bad}"


def test_version_literals_live_in_the_version_rules():
    pattern = re.compile(r"\b0\.(26|33)\b")
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if VERSION_PACKAGE.match(rel) or rel == VERSION_TABLE:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                bad.append(f"{rel}:{i}: {line.strip()[:80]}")
    assert not bad, "version literals outside engines/vllm/vX_Y/ and versions.py:\n" + "\n".join(bad)


def test_the_checks_can_fail(tmp_path):
    # The cycle finder and the line counter see what they are meant to see (so a green run is
    # not an empty check): two modules importing each other form a cycle.
    a = tmp_path / "kvplan" / "a.py"
    a.parent.mkdir()
    (a.parent / "__init__.py").write_text("")
    a.write_text("from kvplan import b\n")
    (a.parent / "b.py").write_text("import kvplan.a\n")
    mods = {"kvplan.a": a, "kvplan.b": a.parent / "b.py", "kvplan": a.parent / "__init__.py"}
    assert _imports("kvplan.a", a, mods) == {"kvplan.b"}
    assert _imports("kvplan.b", a.parent / "b.py", mods) == {"kvplan.a"}
