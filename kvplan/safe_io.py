"""Guarded reading of user files (configs, profiles, deployment files): size cap, NUL/UTF-8
checks, and YAML with safe_load semantics plus an alias-expansion budget ("billion laughs")
and key line numbers. Shared by kvplan check and the GPU-profile loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 2 * 1024 * 1024  # larger inputs are refused, not read
MAX_YAML_NODES = 100_000  # a YAML document expanding (through aliases) past this is refused


class InputError(Exception):
    """A file cannot be read or parsed (becomes a parse-error Diagnostic)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


def read_text(path: Path) -> str:
    """Read a UTF-8 text file of at most MAX_FILE_BYTES bytes.

    Raises:
        InputError: missing, a directory, too large, binary or not UTF-8.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputError("no such file") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if path.is_dir():
        raise InputError("is a directory, not a file")
    if size > MAX_FILE_BYTES:
        raise InputError(f"file is {size:,} bytes; kvplan reads at most {MAX_FILE_BYTES:,} bytes per file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"file is over {MAX_FILE_BYTES:,} bytes")
    if b"\x00" in data:
        raise InputError("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class YamlDoc:
    """One YAML document: its data (safe_load semantics) and where its keys are.

    ``lines[path]`` is the 1-based line of a mapping key or sequence item (path: tuple of keys
    as strings and list indices); ``spans[path]`` is (first, last) line of a scalar value.
    """

    data: Any
    lines: dict
    spans: dict
    line: int

    def line_of(self, path: tuple, default: int | None = None) -> int | None:
        """The line of ``path`` or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return default if default is not None else self.line


def _expanded_size(node, memo: dict, active: set) -> int:
    """Nodes ``node`` stands for once aliases are expanded; raises InputError past the budget."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise InputError("recursive YAML alias", node.start_mark.line + 1)
    active.add(key)
    total = 1
    value = node.value
    if isinstance(value, list):
        for item in value:
            if isinstance(item, tuple):
                total += _expanded_size(item[0], memo, active) + _expanded_size(item[1], memo, active)
            else:
                total += _expanded_size(item, memo, active)
            if total > MAX_YAML_NODES:
                raise InputError(
                    f"YAML document expands to more than {MAX_YAML_NODES:,} nodes (alias bomb?)", node.start_mark.line + 1
                )
    active.discard(key)
    memo[key] = total
    return total


def _collect_lines(node, path: tuple, lines: dict, spans: dict, budget: list) -> None:
    import yaml

    budget[0] += 1
    if budget[0] > MAX_YAML_NODES:
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark.line)
            sub = path + (key,)
            lines.setdefault(sub, k.start_mark.line + 1)
            if isinstance(v, yaml.ScalarNode):
                spans.setdefault(sub, (v.start_mark.line + 1, v.end_mark.line + 1))
            _collect_lines(v, sub, lines, spans, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = path + (i,)
            lines.setdefault(sub, item.start_mark.line + 1)
            if isinstance(item, yaml.ScalarNode):
                spans.setdefault(sub, (item.start_mark.line + 1, item.end_mark.line + 1))
            _collect_lines(item, sub, lines, spans, budget)


def load_yaml(text: str) -> list[YamlDoc]:
    """All documents of a YAML stream with safe_load semantics, plus key line numbers.

    Raises:
        InputError: a syntax error (with its line), a recursive alias, or a document whose
            aliases expand past MAX_YAML_NODES nodes (a "billion laughs" bomb).
    """
    import yaml

    loader = _yaml_loader()(text)
    docs: list[YamlDoc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _expanded_size(node, {}, set())
            data = loader.construct_document(node)
            lines: dict = {}
            spans: dict = {}
            _collect_lines(node, (), lines, spans, [0])
            docs.append(YamlDoc(data=data, lines=lines, spans=spans, line=node.start_mark.line + 1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML: {problem}", mark.line + 1 if mark is not None else None) from None
    except RecursionError:
        raise InputError("YAML nesting too deep") from None
    finally:
        loader.dispose()
    return docs
