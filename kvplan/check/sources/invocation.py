"""A Deployment from one `vllm serve` call found in a file: variables expanded as the platform
does, a ``--config FILE`` it names read in (inside the repository boundary only), flags parsed.

vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

from pathlib import Path

from kvplan.check.deployment import Deployment, FileLine, Tok, expand_tokens, parse_serve_args
from kvplan.check.diagnostics import INVALID_VALUE
from kvplan.check.paths import _display_path, outside_boundary
from kvplan.check.sources.shell import LITERAL_REASONS, Invocation
from kvplan.check.sources.vllm_config import (
    _targets_from_mapping,
    _warn_duplicate_keys,
    config_tokens,
    describe_yaml,
    duplicate_top_keys,
    kvplan_key_warning,
)
from kvplan.engines.vllm.serve_flags import FlagCatalogue
from kvplan.io.files import InputError, load_yaml, read_text


def _inline_config_file(dep: Deployment, toks: list[Tok], base_dir: Path, cat: FlagCatalogue) -> list[Tok]:
    """The arguments with ``--config FILE`` replaced by the flags of FILE, placed before the
    command line's own so that those win, as vLLM does (utils/argparse_utils.py
    _pull_args_from_config: cli > config > defaults; load_config_file). FILE is looked for next
    to the script (``base_dir``), then in the working directory. Findings on its keys are
    reported in FILE (FileLine). An unreadable FILE is an error at --config (vLLM exits)."""
    idx = next((i for i, t in enumerate(toks) if t.text == "--config" or t.text.startswith("--config=")), None)
    if idx is None:
        return toks
    t = toks[idx]
    if t.text == "--config":
        if idx + 1 >= len(toks):
            return toks  # parse_serve_args reports the missing value
        value_tok, n = toks[idx + 1], 2
    else:
        value_tok, n = Tok(t.text.split("=", 1)[1], t.line, unresolved=t.unresolved, literal=t.literal), 1
    if value_tok.unresolved or value_tok.literal:
        return toks  # a $VARIABLE path: the flags in it cannot be seen (reported as unresolved)
    rest = toks[:idx] + toks[idx + n :]
    raw_path = value_tok.text

    def refuse(message: str) -> list[Tok]:
        dep.diag(INVALID_VALUE, "error", f"--config {raw_path}: {message}", line=t.line, key="--config")
        dep.invalid.add("model")  # vLLM stops at the file: no second finding about the model
        return rest

    p = Path(raw_path)
    candidates = [p] if p.is_absolute() else [base_dir / p, Path.cwd() / p]
    found = next((c for c in candidates if c.exists() or c.is_symlink()), None)
    # A file outside the repository (or working directory) is never read,
    # so a PR cannot have CI echo values of /home/runner/secrets.yaml into annotations
    outside = outside_boundary(found if found is not None else candidates[0], base_dir, raw_path)
    if outside is not None and (found is not None or all(outside_boundary(c, base_dir, raw_path) for c in candidates)):
        dep.diag(INVALID_VALUE, "error", f"--config {outside[0]}", line=t.line, key="--config", hint=outside[1])
        dep.invalid.add("model")
        return rest
    if found is None:
        where = " or ".join(dict.fromkeys(_display_path(str(c.parent)) or "." for c in candidates))
        return refuse(f"no such file (looked in {where}); `vllm serve` exits ('Unable to read the config file')")
    if found.suffix.lower() not in (".yaml", ".yml"):
        return refuse("vLLM reads a --config file only when its name ends in .yaml or .yml; `vllm serve` exits")
    shown = _display_path(str(found))
    try:
        text = read_text(found)
        docs = load_yaml(text)
    except InputError as exc:
        return refuse(f"{shown}{':' + str(exc.line) if exc.line else ''}: {exc.message}; `vllm serve` exits")
    mappings = [d for d in docs if d.data is not None]
    if len(mappings) != 1 or not isinstance(mappings[0].data, dict):
        return refuse(f"{shown} must be one YAML mapping of `vllm serve` flags; it {describe_yaml(docs)}")
    doc = mappings[0]
    dups = duplicate_top_keys(text)
    _warn_duplicate_keys(dep, doc, dups[0] if dups else (), lambda line: FileLine(line, shown))
    data = dict(doc.data)
    if "kvplan" in data:
        kline = FileLine(doc.lines.get(("kvplan",), doc.line), shown)
        kvplan_key_warning(dep, kline, cat)
        _targets_from_mapping(dep, data.pop("kvplan"), lambda k: FileLine(doc.lines.get(("kvplan", k), kline), shown), "kvplan.", kline)
    cfg = config_tokens(dep, data, lambda k: FileLine(doc.lines.get((k,), doc.line), shown), cat)
    return cfg + rest


def deployment_from_invocation(
    inv: Invocation, file: str, name: str, kind: str, cat: FlagCatalogue, *, base_dir: Path | None = None
) -> Deployment:
    """A Deployment from one `vllm serve` call (variables expanded from the call's env).

    ``base_dir``: the directory of the script, where a ``--config FILE`` is looked for first
    (then the working directory); None leaves --config unread (a path inside a container)."""
    dep = Deployment(name=name, file=file, line=inv.line, kind=kind)
    dep.literal_reason = LITERAL_REASONS.get(inv.syntax, "")
    dep.var_notes = dict(inv.notes)
    dep.process_env = dict(inv.process_env)
    dep.visible_devices = inv.visible_devices
    dep.background = inv.background
    dep.image, dep.image_line = inv.image, inv.image_line
    dep.shm = inv.shm  # a `docker run`'s /dev/shm (check.sources.shm docker_run_shm)
    dep.image_key = (inv.image_key or "FROM") if inv.image else None
    for check_id, line, key, message, hint in inv.issues:
        dep.diag(check_id, "error", message, line=line, key=key, hint=hint)
    toks = expand_tokens(list(zip(inv.words, inv.lines)), inv.env, inv.syntax, inv.runtime)
    if base_dir is not None:
        toks = _inline_config_file(dep, toks, base_dir, cat)
    parse_serve_args(dep, toks, cat, positional_model=inv.entry == "serve")
    return dep
