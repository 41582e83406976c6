"""A ``vllm serve --config`` YAML file as vLLM's loader reads it: keys to `vllm serve` tokens
(true -> bare flag, false dropped, lists, JSON), values its parser cannot take, duplicate keys,
several documents, and the deployment it describes.

vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.check.diagnostics import (
    DUPLICATE_FLAG,
    FALSE_DROPPED,
    INVALID_KVPLAN_KEY,
    INVALID_VALUE,
    KVPLAN_KEY_IN_VLLM_CONFIG,
)
from kvplan.check.deployment import Deployment, Tok, parse_serve_args
from kvplan.check.engine_flags import _READ_FLAGS
from kvplan.check.messages import _yaml_shown
from kvplan.check.version import check_rules
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import YamlDoc


def kvplan_key_warning(dep: Deployment, line, cat: FlagCatalogue) -> None:
    """The warning for a ``kvplan:`` key in a vLLM --config file (at ``line``): vLLM's loader
    makes it a flag, and `vllm serve` of ``cat.version`` exits."""
    dep.diag(
        KVPLAN_KEY_IN_VLLM_CONFIG,
        "warning",
        "vLLM's --config loader turns every top-level key into a flag, and `vllm serve` "
        f"{cat.version} exits with 'unrecognized arguments: --kvplan'",
        line=line,
        key="kvplan",
        hint="strip the kvplan block before deploying, or move the targets to kvplan.yaml",
    )


def config_tokens(dep: Deployment, mapping: dict, lines_of, cat: FlagCatalogue, key_prefix: str = "") -> list[Tok]:
    """A --config YAML mapping as `vllm serve` tokens, the way vLLM
    utils/argparse_utils.py load_config_file builds them (true -> bare flag, false -> nothing,
    list -> values, mapping -> JSON, other -> str(value), so null -> "None"); ``lines_of(key)``
    gives a key's line.

    A value whose YAML type the flag cannot take (a list for a one-value flag, anything but
    true/false for a switch, null where vLLM reads "None" as text) is reported at its key as an
    invalid-value error and left out (the flag goes into ``dep.invalid``), so nothing is
    evaluated with a stray word of it; ``model: null`` sets ``dep.model_null_line``.
    """
    toks: list[Tok] = []
    for raw_key, value in mapping.items():
        k = str(raw_key)
        line = lines_of(k)
        shown = key_prefix + k
        m = cat.resolve("--" + k)
        known = m.status in ("ok", "abbreviation") and m.dotted is None
        if isinstance(value, bool):
            if value:
                toks.append(Tok("--" + k, line, key=shown))
            else:
                if m.flag in check_rules(cat.version).DEFAULT_ON_SWITCHES and not m.negated:
                    dep.diag(
                        FALSE_DROPPED,
                        "warning",
                        f"vLLM's --config loader drops `false`, so --{m.flag} stays on (its default)",
                        line=line,
                        key=shown,
                        hint=f"write `no-{m.flag}: true` to turn it off",
                    )
                elif m.status in ("unknown", "ambiguous", "removed"):
                    toks.append(Tok("--" + k, line, key=shown))  # still report the unknown key
            continue
        if known:
            problem = _config_value_problem(m.flag, m.arity, value, k, cat)
            if problem == "model-null":
                dep.model_null_line, dep.model_key = line, shown
                continue
            if problem == "unset":
                continue
            if problem is not None:
                dep.diag(INVALID_VALUE, "error", problem, line=line, key=shown)
                dep.invalid.add(m.flag)
                continue
        if isinstance(value, list):
            if value:
                toks.append(Tok("--" + k, line, key=shown))
                toks += [Tok(str(v), line, value_of=shown) for v in value]
            continue
        if isinstance(value, dict):
            toks += [Tok("--" + k, line, key=shown), Tok(json.dumps(value, default=str), line, value_of=shown)]
            continue
        toks += [Tok("--" + k, line, key=shown), Tok(str(value), line, value_of=shown)]
    return toks


def _config_value_problem(flag: str, arity: str, value: Any, key: str, cat: FlagCatalogue) -> str | None:
    """Why a --config value of this YAML type cannot be what the flag means (a message), or
    "model-null" / "unset" for a null vLLM reads as no model / as the flag's default, or None.

    Rule source: vLLM utils/argparse_utils.py load_config_file (the tokens it builds),
    engine/arg_utils.py optional_type ("None" -> None only for flags typed ``X | None``).
    """
    if isinstance(value, bool):
        return None
    switch = arity in ("bool", "negatable")
    if value is None:
        if flag == "model":
            return "model-null"
        if flag in cat.none_is_unset:
            return "unset"
        if switch:
            return (
                f"--{flag} is a switch: null is neither true nor false; vLLM's --config loader passes "
                f"`--{key} None` and `vllm serve` reads 'None' as another argument"
            )
        if flag in _READ_FLAGS:
            return (
                f"null: vLLM's --config loader passes the text 'None', which --{flag} does not accept; "
                "`vllm serve` exits"
            )
        return None
    if switch:
        words = " ".join(str(v) for v in value) if isinstance(value, list) else _yaml_shown(value)
        return (
            f"--{flag} is a switch: write true or false, not {_yaml_shown(value)} (vLLM's --config loader "
            f"passes `--{key} {words}` and `vllm serve` reads {words!r} as another argument)"
        )
    if isinstance(value, list) and value and arity != "list":
        words = " ".join(str(v) for v in value)
        return (
            f"--{flag} takes one value, got a list {_yaml_shown(value)}: vLLM's --config loader passes "
            f"`--{key} {words}`, which `vllm serve` cannot read"
        )
    return None


def _targets_from_mapping(dep: Deployment, block: Any, lines_of, key_prefix: str, line: int | None) -> None:
    if not isinstance(block, dict):
        dep.diag(INVALID_KVPLAN_KEY, "error", "must be a mapping (gpu, gpu_count, min_concurrency, ...)", line=line, key=key_prefix.rstrip("."))
        return
    for k, v in block.items():
        dep.set_target(str(k), v, lines_of(str(k)), key_prefix + str(k))


def _warn_duplicate_keys(dep, doc, duplicates, where) -> None:
    """One duplicate-flag warning per top-level key given twice in a --config YAML, naming both
    lines; the key's line becomes the last one (yaml.safe_load keeps the last value, and so does
    vLLM's load_config_file). ``where`` turns a line number into the finding's position."""
    for key, prev, line in duplicates:
        doc.lines[(key,)] = line
        dep.diag(
            DUPLICATE_FLAG,
            "warning",
            f"`{key}` is given twice in this YAML file (line {prev} and line {line}); vLLM's --config loader "
            f"(yaml.safe_load) silently keeps the last one, line {line}",
            line=where(line),
            key=key,
            hint=f"remove one of the two `{key}:` lines",
        )


def duplicate_top_keys(text: str) -> list[list[tuple[str, int, int]]]:
    """Per YAML document (the documents load_yaml returns, in order): each top-level key given
    again, as (key, previous line, line), 1-based. yaml.safe_load keeps the last value silently.

    Call only on text load_yaml has read (aliases are not expanded here)."""
    import yaml

    from kvplan.io.files import _yaml_loader

    loader = _yaml_loader()(text)
    out: list[list[tuple[str, int, int]]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            dups: list[tuple[str, int, int]] = []
            if isinstance(node, yaml.MappingNode):
                seen: dict[str, int] = {}
                for k, _ in node.value:
                    if isinstance(k, yaml.ScalarNode):
                        line = k.start_mark.line + 1
                        if k.value in seen:
                            dups.append((k.value, seen[k.value], line))
                        seen[k.value] = line
            out.append(dups)
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return out


def deployment_from_config(
    doc: YamlDoc, file: str, cat: FlagCatalogue, *, name: str | None = None, duplicates=()
) -> Deployment:
    """The deployment described by a ``vllm serve --config`` YAML file (and its ``kvplan:`` block).

    ``duplicates``: (key, previous line, line) of top-level keys given twice (duplicate_top_keys);
    each is a duplicate-flag warning naming both lines, and the key's line becomes the last one
    (yaml.safe_load keeps the last value).

    Rule source: vLLM utils/argparse_utils.py load_config_file / _pull_args_from_config.
    """
    data = dict(doc.data)
    dep = Deployment(name=name or file, file=file, line=doc.line, kind="vllm-config")
    _warn_duplicate_keys(dep, doc, duplicates, lambda line: line)
    block = data.pop("kvplan", None)
    if "kvplan" in doc.data:
        line = doc.lines.get(("kvplan",))
        kvplan_key_warning(dep, line, cat)
        _targets_from_mapping(dep, block, lambda k: doc.lines.get(("kvplan", k), line), "kvplan.", line)
    toks = config_tokens(dep, data, lambda k: doc.lines.get((k,), doc.line), cat)
    parse_serve_args(dep, toks, cat, positional_model=False)
    return dep


def _separator_line(raw: list[str], doc: YamlDoc) -> int:
    """The line of the ``---`` that starts ``doc`` (searching up from its first line)."""
    for no in range(min(doc.line, len(raw)), 0, -1):
        if raw[no - 1].startswith("---"):
            return no
    return doc.line


def multiple_documents_problem(docs: list[YamlDoc], raw: list[str]) -> tuple[int, str, str] | None:
    """(line, message, hint) when a vLLM --config file holds more than one YAML document: vLLM
    reads it with ``yaml.safe_load`` (utils/argparse_utils.py load_config_file), which
    raises "expected a single document in the stream" even for an empty second document."""
    if len(docs) < 2:
        return None
    line = _separator_line(raw, docs[1])
    empty = all(d.data is None for d in docs[1:])
    message = (
        f"{len(docs)} YAML documents (the `---` on line {line} starts another): vLLM's --config loader "
        "reads one document with yaml.safe_load, so `vllm serve` exits with 'expected a single document "
        "in the stream'"
    )
    hint = f"delete the `---` on line {line}" if empty else "give each vLLM config its own file"
    return line, message, hint


def describe_yaml(docs: list[YamlDoc]) -> str:
    """What a YAML file holds, for a no-deployment message ("is empty", "holds a list" ...)."""
    data = [d.data for d in docs if d.data is not None]
    if not docs:
        return "is empty (no YAML document)"
    if not data:
        return "holds only an empty YAML document" if len(docs) == 1 else "holds only empty YAML documents"
    first = data[0]
    if isinstance(first, list):
        what = "a list, not a mapping (a vLLM --config file is one mapping of flags)"
    elif isinstance(first, dict):
        keys = ", ".join(str(k) for k in list(first)[:5]) + (", ..." if len(first) > 5 else "")
        what = (
            f"a mapping whose keys ({keys}) are not `vllm serve` flags, a Kubernetes object "
            "(apiVersion, kind), a compose file (services) or a kvplan.yaml (deployments)"
        )
    else:
        what = f"a single value ({type(first).__name__}), not a mapping"
    return f"holds {what}"
