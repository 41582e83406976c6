"""One vLLM server found in a file (``Deployment``: its flags as ``Setting``s, its model, GPU
and targets) and reading `vllm serve` arguments onto it (``parse_serve_args``).

vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.check.diagnostics import (
    ABBREVIATED_FLAG,
    DUPLICATE_FLAG,
    IGNORED_FLAG,
    INVALID_VALUE,
    LITERAL_VARIABLE,
    NEWER_FLAG,
    REMOVED_FLAG,
    UNKNOWN_FLAG,
    UNRESOLVED_VALUE,
    Diagnostic,
    Severity,
)
from kvplan.check.sources.shell import _POSITIONAL, _VAR, Directive, expand_word
from kvplan.engines.vllm.serve_flags import FlagCatalogue


class FileLine(int):
    """A 1-based line in another file than the deployment's own: a line of the --config YAML
    that a script's `vllm serve --config FILE` names. Deployment.diag reports it in that file."""

    file: str

    def __new__(cls, line: int, file: str) -> "FileLine":
        obj = int.__new__(cls, line)
        obj.file = file
        return obj


@dataclass
class Tok:
    """One `vllm serve` argument with where it came from."""

    text: str
    line: int | None
    key: str | None = None  # how a --config YAML spelled it (the YAML key)
    unresolved: tuple[str, ...] = ()  # $VARIABLES that could not be expanded
    literal: tuple[str, ...] = ()  # $VARIABLES the platform passes on as text (exec form)
    value_of: str | None = None  # the --config YAML key this is the value of (never a positional)


@dataclass
class Setting:
    """One flag as the deployment sets it.

    Attributes:
        flag: canonical long name ("max-model-len").
        value: str (value flags), bool (switches), list[str] (list flags), True (bare optional).
        line: 1-based line.
        key: as written ("--max-model-len", "-tp", "max_model_len").
        unresolved: $VARIABLES left in the value (unknown where kvplan runs).
        literal: $VARIABLES that reach vLLM as text (the platform does not expand them).
    """

    flag: str
    value: Any
    line: int | None
    key: str
    unresolved: tuple[str, ...] = ()
    literal: tuple[str, ...] = ()


@dataclass
class Deployment:
    """One vLLM server found in a file: its flags, its model, its GPU and its targets."""

    name: str
    file: str
    line: int | None
    kind: str
    settings: dict[str, Setting] = field(default_factory=dict)
    model: str | None = None
    model_line: int | None = None
    model_key: str = "MODEL"
    model_unresolved: tuple[str, ...] = ()
    model_literal: tuple[str, ...] = ()
    model_null_line: int | None = None  # `model:` with no value in a --config file
    invalid: set = field(default_factory=set)  # flags whose value was refused while reading
    literal_reason: str = ""  # why $VARIABLES are passed as text (exec form, Kubernetes ...)
    process_env: dict[str, str] = field(default_factory=dict)  # vLLM's process environment (prefix, env, ENV, export)
    var_notes: dict = field(default_factory=dict)  # $NAME -> why it is unset at runtime
    targets: dict[str, Any] = field(default_factory=dict)
    target_lines: dict[str, int | None] = field(default_factory=dict)
    target_keys: dict[str, str] = field(default_factory=dict)
    gpu_hint: str | None = None  # why no GPU could be found (k8s node selector without mapping)
    # a k8s nvidia.com/gpu.product node label no node_selectors mapping covers: (value, line, key)
    gfd_product: tuple[str, int | None, str] | None = None
    gpu_count: int | None = None  # from the platform (k8s resources, compose devices)
    # the container's memory limit in bytes (k8s resources.limits.memory), with its line and key
    memory_limit: tuple[int, int | None, str] | None = None
    gpu_count_line: int | None = None
    gpu_count_key: str | None = None
    # CUDA_VISIBLE_DEVICES of the vLLM process: (value or None when unknown, line, why unknown)
    visible_devices: tuple | None = None
    # a LeaderWorkerSet leader: (this pod's GPUs, group size, leader pod's GPUs, worker pod's GPUs)
    gpu_group: tuple | None = None
    # where it runs beside other deployments of the file (check.rules.shared_gpus): deployments with
    # the same ``host`` run on one machine (a compose file's services, a script's commands); None:
    # its own machine or GPUs. ``host_gpus``: the host's GPU ids it can see (compose device_ids /
    # count, NVIDIA_VISIBLE_DEVICES), None for all of them, () for none.
    host: str | None = None
    host_gpus: tuple[str, ...] | None = None
    background: bool = False  # a script's `vllm serve ... &`: the next command starts beside it
    gpu_use: tuple | None = None  # (gpu_memory_utilization, GPUs vLLM uses, its Setting), Checker.evaluate
    # False when the vLLM version is the run's default, not one the deployment pins (image tag,
    # kvplan.yaml) or --vllm-version names: a version-dependent finding is then a warning
    version_pinned: bool = True
    # the container image it runs in (k8s container / compose service image, Dockerfile FROM),
    # where kvplan.check.version reads the vLLM version from its tag
    image: str | None = None
    image_line: int | None = None
    image_key: str | None = None
    # a serving stack's container memory limit: (bytes, line, key) (check.sources.stack)
    host_memory: tuple[int, int | None, str] | None = None
    # the /dev/shm its container gets (check.sources.shm ShmSize); None: not a container kvplan reads
    shm: Any = None
    version_file: str | None = None  # the kvplan.yaml a `vllm_version` target was read from
    serve_read: Any = None  # what parse_serve_args read (ServeRead), for reread_serve_args
    # the manifest's top-level vllm_version (value, line) when the deployment names its own:
    # used if its own is invalid
    manifest_version: tuple[str, int | None] | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def diag(self, check_id: str, severity: Severity, message: str, *, line=None, key=None, hint=None) -> None:
        line = line if line is not None else self.line
        self.diagnostics.append(
            Diagnostic(
                check_id=check_id,
                severity=severity,
                file=getattr(line, "file", None) or self.file,  # a FileLine is in its own file
                line=int(line) if line is not None else None,
                key=key,
                message=message,
                hint=hint,
                deployment=self.name,
            )
        )

    def set_target(self, name: str, value: Any, line: int | None, key: str) -> None:
        self.targets[name] = value
        self.target_lines[name] = line
        self.target_keys[name] = key


_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_option(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _NEG_NUMBER.match(text)


@dataclass
class ServeRead:
    """What one parse_serve_args call read, so that reread_serve_args can read the same
    arguments again with another release's flags: the tokens, the catalogue's release, the
    settings and model fields it set (with their values before), and its diagnostics."""

    toks: list
    positional_model: bool
    version: str
    before: dict
    model_before: tuple
    diagnostics: list
    after: dict
    model_after: tuple


_MODEL_FIELDS = ("model", "model_line", "model_key", "model_unresolved", "model_literal")


def parse_serve_args(dep: Deployment, toks: list[Tok], cat: FlagCatalogue, *, positional_model: bool = True) -> None:
    """Read `vllm serve` arguments into ``dep.settings`` / ``dep.model``, adding diagnostics for
    unknown, removed, ignored, abbreviated, duplicate and malformed flags (recorded in
    ``dep.serve_read`` for reread_serve_args).

    Args:
        toks: the arguments after ``vllm serve`` (or after ``-m vllm.entrypoints.openai.api_server``).
        positional_model: whether a bare word is the model (`vllm serve MODEL`).
    Rule source: vLLM utils/argparse_utils.py FlexibleArgumentParser.parse_args (underscores,
        dotted JSON keys, -O), Python argparse (abbreviations, nargs, --no-x twins).
    """
    settings = dict(dep.settings)
    model = tuple(getattr(dep, f) for f in _MODEL_FIELDS)
    first = len(dep.diagnostics)
    _parse_serve_args(dep, toks, cat, positional_model=positional_model)
    changed = {k: settings.get(k) for k in set(dep.settings) | set(settings) if dep.settings.get(k) is not settings.get(k)}
    dep.serve_read = ServeRead(list(toks), positional_model, cat.version, changed, model, dep.diagnostics[first:],
                               {k: dep.settings.get(k) for k in changed}, tuple(getattr(dep, f) for f in _MODEL_FIELDS))


def reread_serve_args(dep: Deployment, cat: FlagCatalogue) -> None:
    """Read the deployment's `vllm serve` arguments again with ``cat`` (the release it runs,
    known only once its image tag or kvplan.yaml was read) when they were read with another
    release's flags: what the first reading set and reported is replaced."""
    read = getattr(dep, "serve_read", None)
    if read is None or read.version == cat.version:
        return
    ids = {id(d) for d in read.diagnostics}
    dep.diagnostics[:] = [d for d in dep.diagnostics if id(d) not in ids]
    # what a reader set after the first reading (the model of a stack manifest ...) stays: it
    # came after the arguments then, and does now
    later = {k: dep.settings.get(k) for k, v in read.after.items() if dep.settings.get(k) is not v}
    model_now = tuple(getattr(dep, f) for f in _MODEL_FIELDS)
    for key, value in read.before.items():
        if value is None:
            dep.settings.pop(key, None)
        else:
            dep.settings[key] = value
    for name, value in zip(_MODEL_FIELDS, read.model_before):
        setattr(dep, name, value)
    parse_serve_args(dep, read.toks, cat, positional_model=read.positional_model)
    for key, value in later.items():
        if value is None:
            dep.settings.pop(key, None)
        else:
            dep.settings[key] = value
    if model_now != read.model_after:
        for name, value in zip(_MODEL_FIELDS, model_now):
            setattr(dep, name, value)


def _unlisted(cat: FlagCatalogue) -> str:
    """Why a flag missing from a stand-in table is only a warning (cat.based_on)."""
    from kvplan.engines.vllm import versions

    read = sorted(versions.release_data()["releases"], key=versions._key)
    return (f"kvplan has no flag table for vLLM {cat.version} (it has read {read[0]} to {read[-1]}); "
            f"this is vLLM {cat.based_on}'s, so the flag may be valid in {cat.version}")


def _older_than_read(cat: FlagCatalogue) -> bool:
    """``cat`` stands in for a release older than every release kvplan has read (v0.10.2 read
    with 0.20.0's table): any flag of the table may be one that release lacks."""
    from kvplan.engines.vllm import versions

    base = versions.release(cat.version)
    read = versions.release_data()["releases"]
    return base is not None and bool(read) and versions._key(base) < min(versions._key(r) for r in read)


def _parse_serve_args(dep: Deployment, toks: list[Tok], cat: FlagCatalogue, *, positional_model: bool = True) -> None:
    positionals: list[Tok] = []
    # the flags a table standing in for an older, unread release lists (one warning names them)
    older = not cat.exact and _older_than_read(cat)
    unsure: list[tuple[str, int | None]] = []
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.text == "--":
            positionals.extend(toks[i + 1 :])
            break
        if not _looks_like_option(t.text):
            positionals.append(t)
            i += 1
            continue
        m = cat.resolve(t.text)
        key = t.key or t.text.split("=", 1)[0]
        i += 1
        if m.status in ("unknown", "ambiguous", "removed"):
            # An unknown flag's arity is unknown: take the next word as its value unless that
            # word is the only candidate left for the positional model.
            if t.key is not None and i < n and toks[i].value_of == t.key:
                # a --config key's value(s): its own, never the positional model (otherwise
                # `aws_secret_access_key: sk-...` would be reported, and echoed, as a second model)
                while i < n and toks[i].value_of == t.key:
                    i += 1
            elif m.explicit is None and i < n and not _looks_like_option(toks[i].text):
                model_pending = positional_model and not positionals and dep.model is None
                next_is_word = i + 1 < n and not _looks_like_option(toks[i + 1].text)
                if not model_pending or next_is_word:
                    i += 1
            flag = "--" + (t.text.lstrip("-").split("=", 1)[0])
            if m.status == "ambiguous":
                dep.diag(
                    UNKNOWN_FLAG,
                    "error",
                    f"ambiguous flag: vLLM {cat.version} could read it as {', '.join(m.suggestions)}; "
                    "`vllm serve` exits with 'ambiguous option'",
                    line=t.line,
                    key=key,
                    hint="spell the flag out in full",
                )
            elif m.status == "removed" and m.flag in cat.newer:
                dep.diag(
                    NEWER_FLAG,
                    "error",
                    f"--{m.flag} is not yet in vLLM {cat.version}: it first appears in vLLM {cat.newer[m.flag]} "
                    f"({m.note}); `vllm serve` exits with 'unrecognized arguments'",
                    line=t.line,
                    key=key,
                    hint=f"remove {key}, or run vLLM {cat.newer[m.flag]} or later",
                )
            elif m.status == "removed" and not cat.exact:
                dep.diag(
                    REMOVED_FLAG,
                    "warning",
                    f"--{m.flag} is not a vLLM {cat.based_on} flag ({m.note}); {_unlisted(cat)}",
                    line=t.line,
                    key=key,
                    hint=f"check that vLLM {cat.version} accepts {key}, or pin a release kvplan has read",
                )
            elif m.status == "removed":
                also = (
                    f"; argparse would read it as an abbreviation of {m.suggestions[0]}"
                    if len(m.suggestions) == 1
                    else "; `vllm serve` exits with 'unrecognized arguments'"
                )
                dep.diag(
                    REMOVED_FLAG,
                    "error",
                    f"--{m.flag} is not a vLLM {cat.version} flag ({m.note}){also}",
                    line=t.line,
                    key=key,
                    hint=f"remove {key}",
                )
            else:
                did = f"; did you mean {' or '.join(m.suggestions)}?" if m.suggestions else ""
                if not cat.exact:
                    dep.diag(
                        UNKNOWN_FLAG,
                        "warning",
                        f"{flag} is a flag of no vLLM release kvplan has read; {_unlisted(cat)}{did}",
                        line=t.line,
                        key=key,
                    )
                    continue
                dep.diag(
                    UNKNOWN_FLAG,
                    "error",
                    f"vLLM {cat.version} has no flag {flag}: `vllm serve` exits with 'unrecognized arguments'{did}",
                    line=t.line,
                    key=key,
                )
            continue
        assert m.flag is not None and m.arity is not None
        if m.status == "abbreviation":
            dep.diag(
                ABBREVIATED_FLAG,
                "info",
                f"read as --{'no-' if m.negated else ''}{m.flag} (argparse accepts an unambiguous prefix)",
                line=t.line,
                key=key,
                hint=f"spell it --{'no-' if m.negated else ''}{m.flag} so a future flag cannot make it ambiguous",
            )
        if m.flag in cat.newer:
            # a stand-in table (kvplan has not read ``cat.version``) lists a flag that only
            # releases newer than ``cat.version`` have
            dep.diag(
                NEWER_FLAG,
                "error",
                f"--{m.flag} is not yet in vLLM {cat.version}: it first appears in vLLM {cat.newer[m.flag]} "
                f"(kvplan reads vLLM {cat.version}'s flags from vLLM {cat.based_on or cat.version}'s table)",
                line=t.line,
                key=key,
                hint=f"remove {key}, or run vLLM {cat.newer[m.flag]} or later",
            )
        elif older:
            unsure.append((key, t.line))
        if m.flag in cat.ignored:
            dep.diag(IGNORED_FLAG, "warning", cat.ignored[m.flag], line=t.line, key=key, hint=f"remove {key}")
        value: Any
        unresolved, literal = t.unresolved, t.literal
        if m.arity in ("bool", "negatable"):
            if m.explicit is not None:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} is a switch and takes no value (got {m.explicit!r}); `vllm serve` exits "
                    "with 'ignored explicit argument'",
                    line=t.line,
                    key=key,
                )
                continue
            value = not m.negated
        elif m.arity == "optional":
            if m.explicit is not None:
                value = m.explicit
            elif i < n and not _looks_like_option(toks[i].text):
                value, unresolved, literal = toks[i].text, toks[i].unresolved, toks[i].literal
                i += 1
            else:
                value = True
        elif m.arity == "list":
            values = [m.explicit] if m.explicit is not None else []
            while i < n and not _looks_like_option(toks[i].text) and (m.explicit is None):
                values.append(toks[i].text)
                unresolved += toks[i].unresolved
                literal += toks[i].literal
                i += 1
            if not values:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} expects at least one value; `vllm serve` exits",
                    line=t.line,
                    key=key,
                )
                continue
            value = values
        else:  # value / json
            if m.explicit is not None:
                value = m.explicit
            elif i < n and not _looks_like_option(toks[i].text):
                value, unresolved, literal = toks[i].text, unresolved + toks[i].unresolved, literal + toks[i].literal
                i += 1
            else:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} expects a value; `vllm serve` exits with 'expected one argument'",
                    line=t.line,
                    key=key,
                )
                continue
        name = m.flag if m.dotted is None else f"{m.flag}.{m.dotted}"
        # a command-line flag over one of its --config file is vLLM's precedence, not a slip
        overrides = name in dep.settings and isinstance(dep.settings[name].line, FileLine) and not isinstance(t.line, FileLine)
        if name in dep.settings and m.dotted is None and not overrides:
            prev = dep.settings[name]
            dep.diag(
                DUPLICATE_FLAG,
                "warning",
                f"--{m.flag} is set twice (also on line {prev.line}); vLLM uses the last one",
                line=t.line,
                key=key,
            )
        if name == "model":
            if dep.model is not None and dep.model_line != t.line:
                dep.diag(INVALID_VALUE, "error", "the model is given twice; `vllm serve` exits", line=t.line, key=key)
            dep.model, dep.model_line, dep.model_key = str(value), t.line, key
            dep.model_unresolved, dep.model_literal = unresolved, literal
            continue
        dep.settings[name] = Setting(flag=name, value=value, line=t.line, key=key, unresolved=unresolved, literal=literal)
    if unsure:
        names = ", ".join(dict.fromkeys(k for k, _ in unsure))
        dep.diag(
            NEWER_FLAG,
            "warning",
            f"kvplan has no flag table for vLLM {cat.version}, older than every release it has read (the oldest "
            f"is {cat.based_on}): {names} are vLLM {cat.based_on} flags that vLLM {cat.version} may not have yet",
            line=unsure[0][1],
            key=unsure[0][0],
            hint=f"check that vLLM {cat.version} accepts them, or pin a release kvplan has read",
        )
    if positional_model and positionals:
        first = positionals[0]
        if dep.model is not None and isinstance(dep.model_line, FileLine) and not isinstance(first.line, FileLine):
            # `vllm serve MODEL --config FILE` with `model:` in FILE: the positional wins
            # (vLLM entrypoints/cli/serve.py: args.model = args.model_tag)
            dep.model = None
        if dep.model is not None:
            dep.diag(
                INVALID_VALUE,
                "error",
                f"the model is given twice ({dep.model_key} and {first.text!r}); `vllm serve` exits",
                line=first.line,
                key="MODEL",
            )
        else:
            dep.model, dep.model_line, dep.model_key, dep.model_unresolved = first.text, first.line, "MODEL", first.unresolved
            dep.model_literal = first.literal
        positionals = positionals[1:]
    for extra in positionals:
        if extra.literal:
            dep.diag(
                LITERAL_VARIABLE,
                "error",
                f"{extra.text!r} reaches `vllm serve` as text ({dep.literal_reason}); it exits with "
                "'unrecognized arguments'",
                line=extra.line,
                key=extra.text,
            )
        elif extra.unresolved:
            positional = any(_POSITIONAL.fullmatch(n) for n in extra.unresolved)
            dep.diag(
                UNRESOLVED_VALUE,
                "warning",
                f"unresolved argument {extra.text}: the script's own arguments are not known here; they may "
                "add flags kvplan cannot see"
                if positional
                else f"{extra.text} is not set in this file; it may add flags kvplan cannot see",
                line=extra.line,
                key=extra.text,
            )
        else:
            dep.diag(
                INVALID_VALUE,
                "error",
                f"unexpected argument {extra.text!r}; `vllm serve` exits with 'unrecognized arguments'",
                line=extra.line,
                key=extra.text,
            )


def expand_tokens(
    words: list[tuple[str, int | None]], env: dict[str, str], syntax: str = "shell", runtime: frozenset[str] | None = None
) -> list[Tok]:
    """Tokens with variables expanded as ``syntax`` says (see expand_word); in a shell, a word
    that is only ``$VAR`` is split like an unquoted expansion."""
    out: list[Tok] = []
    for text, line in words:
        new, missing, literal = expand_word(text, syntax, env, runtime)
        if syntax == "shell" and new != text and _VAR.fullmatch(text) and not missing and any(c.isspace() for c in new):
            for part in new.split():
                out.append(Tok(part, line))
        elif syntax == "shell" and new == "" and _VAR.fullmatch(text):
            continue  # an empty unquoted expansion vanishes
        else:
            out.append(Tok(new, line, unresolved=missing, literal=literal))
    return out


def _int_or_none(v: Any) -> int | None:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def _as_words(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return None


def apply_directives(dep: Deployment, directives: list[Directive]) -> None:
    """Give ``dep`` the targets of the comments above it (all of the file's when none is above)."""
    above = [d for d in directives if dep.line is None or d.line <= dep.line]
    for d in above or directives:
        for k, v in d.values.items():
            dep.set_target(k, v, d.line, f"kvplan.{k}")
