"""The `vllm serve` flag catalogue, keyed by vLLM version: which flags exist, which take a value.

The machinery is here; each version's data (names and arities read out of that version's
argument definitions) is in its rules package (engines/vllm/v0_26/flag_catalogue.py), found
through engines/vllm/versions.py. The data covers:

* ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args``
  (explicit ``add_argument`` calls; a config-dataclass field typed ``bool`` becomes a
  ``--flag/--no-flag`` pair through ``argparse.BooleanOptionalAction`` in ``_compute_kwargs``,
  ``list[...]`` fields take ``nargs="+"``, config-dataclass fields take one JSON value);
* ``vllm/entrypoints/openai/cli_args.py`` ``make_arg_parser`` (``--config``, ``--headless``,
  ``--api-server-count``, ``--grpc``) and the fields of ``BaseFrontendArgs``/``FrontendArgs``
  (``--host``, ``--port``, ``--api-key`` ...).

How `vllm serve` reads a token (vLLM ``vllm/utils/argparse_utils.py``
``FlexibleArgumentParser.parse_args`` over Python's argparse, which kvplan mirrors in
``FlagCatalogue.resolve``):

* underscores in a long flag's name become dashes (``--max_model_len`` == ``--max-model-len``);
* ``--flag=value`` and ``--flag value`` are the same; ``--section.key value`` builds a JSON value;
* ``-O3`` / ``-O 3`` mean ``--optimization-level 3``;
* argparse's ``allow_abbrev`` is on, so an unambiguous prefix of a long flag is that flag
  (``--kv-cache-memory`` is ``--kv-cache-memory-bytes``); an ambiguous prefix is an error;
* an unknown flag makes `vllm serve` exit with "unrecognized arguments" before loading anything.

A YAML file given to ``vllm serve --config`` is turned into the same tokens
(``FlexibleArgumentParser.load_config_file``): ``key: value`` -> ``--key value``, ``key: true`` ->
``--key``, ``key: false`` -> nothing, a list -> ``--key v1 v2``, a mapping -> ``--key '<json>'``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache

from kvplan.errors import KvplanError

@dataclass(frozen=True)
class FlagCatalogue:
    """The flags one vLLM version's `vllm serve` accepts.

    Attributes:
        version: the vLLM version (a key of engines/vllm/versions.py SUPPORTED).
        arity: canonical long name (no dashes in front, e.g. "max-model-len") -> arity.
        short: single-dash alias ("-tp") -> long name.
        ignored: long name -> why vLLM accepts it but does nothing with it.
        removed: long name of an older release's flag -> why it is gone / what to use.
        cache_dtypes / model_dtypes: accepted --kv-cache-dtype / --dtype values.
        none_is_unset: value flags for which "None" (a YAML null in a --config file) means unset.
        based_on: "" when the table is ``version``'s own (read from its source); else the
            release whose table stands in for it (kvplan has not read ``version``: v0.10.2, a
            release newer than all it has read, a release candidate). Then kvplan cannot tell a
            flag ``version`` lacks from one it has, and check reports a flag missing from the
            table as a warning, not an error (see ``exact``).
    """

    version: str
    arity: dict
    short: dict
    ignored: dict
    removed: dict
    cache_dtypes: tuple
    model_dtypes: tuple
    none_is_unset: frozenset = frozenset()
    based_on: str = ""
    # long name -> the first read release that has it, for the flags kvplan knows are newer than
    # ``version`` (every read release that has them is newer): "not yet in vLLM <version>"
    newer: dict = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """The table is the version's own: a flag missing from it makes `vllm serve` exit."""
        return not self.based_on

    def option_strings(self) -> list[str]:
        """Every long option string argparse registers ("--x" and "--no-x" twins)."""
        out = []
        for name, kind in self.arity.items():
            out.append("--" + name)
            if kind == "negatable":
                out.append("--no-" + name)
        return out

    def resolve(self, token: str) -> "FlagMatch":
        """Read one command-line token that starts with "-" the way `vllm serve` would.

        Args:
            token: e.g. "--max_model_len=32k", "-tp", "--no-enable-prefix-caching",
                "--compilation-config.mode", "-O3", "--kv-cache-memory".
        Returns:
            a FlagMatch; ``status`` is "ok", "abbreviation", "ambiguous", "removed" or
            "unknown" (with close matches in ``suggestions``).
        Rule source: vLLM utils/argparse_utils.py (version rules in engines/vllm/v0_26) FlexibleArgumentParser.parse_args and
            Python argparse _parse_optional (allow_abbrev).
        """
        explicit = None
        text = token
        if token.startswith("-O") and not token.startswith("--") and token != "-O":
            level = token[3:] if token[2:3] == "=" else token[2:]
            return FlagMatch(token, "optimization-level", "value", "ok", explicit=level)
        if token == "-O":
            return FlagMatch(token, "optimization-level", "value", "ok")
        if "=" in text:
            text, explicit = text.split("=", 1)
        if not text.startswith("--"):
            long = self.short.get(text)
            if long is None:
                return FlagMatch(token, None, None, "unknown", explicit=explicit, suggestions=self.suggest(text))
            return FlagMatch(token, long, self.arity[long], "ok", explicit=explicit)
        name = text[2:]
        dotted = None
        if "." in name:
            name, dotted = name.split(".", 1)
        name = name.replace("_", "-")
        negated = False
        if name in self.arity:
            long = name
        elif name.startswith("no-") and self.arity.get(name[3:]) == "negatable":
            long, negated = name[3:], True
        elif name in self.removed:
            # argparse would still take a unique prefix match (--device -> --device-ids).
            prefixed = tuple(o for o in self.option_strings() if o.startswith("--" + name))
            return FlagMatch(token, name, None, "removed", explicit=explicit, note=self.removed[name], suggestions=prefixed)
        else:
            matches = [o for o in self.option_strings() if o.startswith("--" + name)]
            if len(matches) == 1:
                full = matches[0][2:]
                negated = full.startswith("no-") and full[3:] in self.arity and full not in self.arity
                long = full[3:] if negated else full
                return FlagMatch(
                    token, long, self.arity[long], "abbreviation", explicit=explicit, negated=negated, dotted=dotted
                )
            if len(matches) > 1:
                return FlagMatch(token, None, None, "ambiguous", explicit=explicit, suggestions=tuple(sorted(matches)[:5]))
            return FlagMatch(token, None, None, "unknown", explicit=explicit, suggestions=self.suggest(name))
        return FlagMatch(token, long, self.arity[long], "ok", explicit=explicit, negated=negated, dotted=dotted)

    def suggest(self, name: str) -> tuple[str, ...]:
        """Up to three close flag names for a misspelt one ("did you mean"), as "--name"."""
        key = name.lstrip("-").replace("_", "-")
        pool = list(self.arity) + [s.lstrip("-") for s in self.short]
        close = difflib.get_close_matches(key, pool, n=3, cutoff=0.6)
        out = []
        for c in close:
            flag = ("--" + c) if c in self.arity else ("-" + c)
            if flag not in out:
                out.append(flag)
        return tuple(out)


@dataclass(frozen=True)
class FlagMatch:
    """What one token means to `vllm serve` (see FlagCatalogue.resolve).

    Attributes:
        token: the token as written.
        flag: canonical long name without dashes ("max-model-len"), None when unknown/ambiguous.
        arity: the flag's arity (see a version's flag_catalogue.FLAGS), None when unknown.
        status: "ok", "abbreviation", "ambiguous", "removed" or "unknown".
        explicit: the value after "=" (or after -O), if any.
        negated: the token was the --no-<flag> twin.
        dotted: the ".sub.key" part of "--compilation-config.sub.key", if any.
        suggestions: close known flags ("--name") for unknown/ambiguous tokens.
        note: why a removed flag is gone / what to use instead.
    """

    token: str
    flag: str | None
    arity: str | None
    status: str
    explicit: str | None = None
    negated: bool = False
    dotted: str | None = None
    suggestions: tuple[str, ...] = ()
    note: str | None = None




@lru_cache(maxsize=None)
def catalogue(version: str | None = None) -> FlagCatalogue:
    """The flag catalogue for a vLLM release (None: kvplan's default version).

    The flags come from the release's own table when kvplan has read it (releases.json, written
    by benchmarks/vllm_fingerprints.py from the release's arg_utils.py / cli_args.py), else from
    the modelled version's rules (``VllmRules.flag_table``). For any other release text (older
    or newer than every release read, a release candidate) the nearest read release stands in,
    marked ``based_on`` (not exact). What is not a flag list -- why a flag is ignored, which
    "None" means unset -- comes from the modelled version that serves the release.

    Raises:
        KvplanError: the text names no release at all (names --vllm-version).
    """
    from kvplan.engines.vllm import versions

    if version is None:
        version = versions.DEFAULT_VERSION
    tables = versions.release_flag_tables()
    if version in tables:
        return _from_release(version, version, tables)
    if version in versions.SUPPORTED:
        return _from_rules(version)
    base = versions.release(version)
    if base is None or not tables:
        raise KvplanError(
            f"--vllm-version: kvplan has no `vllm serve` flag table for vLLM {version!r}",
            hint="supported: " + ", ".join(sorted(versions.SUPPORTED)),
        )
    stand_in = min(tables, key=lambda v: versions._distance(v, base))
    return _from_release(version, stand_in, tables)


def _rules_table(version: str) -> tuple:
    from kvplan.engines.vllm import versions

    rules_version = version if version in versions.SUPPORTED else versions.choose(version, "flags").version
    return versions.SUPPORTED[rules_version].flag_table, rules_version


def _arity(flags: dict) -> dict:
    arity = {}
    for kind, names in flags.items():
        for name in names.split():
            arity[name] = kind
    arity["help"] = "bool"
    return arity


def _from_rules(version: str) -> FlagCatalogue:
    """A modelled version's hand-made table (its rules package's flag_catalogue)."""
    (flags, short, ignored, removed, cache, model, none_is_unset), _ = _rules_table(version)
    return FlagCatalogue(version=version, arity=_arity(flags), short=dict(short), ignored=dict(ignored),
                         removed=dict(removed), cache_dtypes=cache, model_dtypes=model, none_is_unset=none_is_unset)


def _from_release(version: str, table: str, tables: dict) -> FlagCatalogue:
    """``version``'s catalogue from release ``table``'s read flags (``table`` == ``version``
    unless it stands in). A flag of another read release, or one a modelled version lists as
    removed, that ``table`` lacks is "removed", with the releases that have it."""
    from kvplan.engines.vllm import versions

    record = versions.release_data()["releases"][table]
    (_, _, ignored, removed_notes, cache, model, none_is_unset), rules_version = _rules_table(table)
    arity = _arity(tables[table])
    removed = {}
    for other in versions.SUPPORTED:
        removed.update({k: v for k, v in versions.SUPPORTED[other].flag_table[3].items() if k not in arity})
    present: dict[str, list[str]] = {}
    for release, flags in tables.items():
        for names in flags.values():
            for name in names.split():
                present.setdefault(name, []).append(release)
    base = versions.release(version)
    oldest = min(tables, key=versions._key)
    newer = {}
    for name, releases in present.items():
        first = min(releases, key=versions._key)
        if base is not None and first != oldest and versions._key(first) > versions._key(base):
            # the flag appeared in a read release (``first``, not the oldest read) newer than
            # ``version``: ``version`` cannot have it, even where a stand-in table lists it
            newer[name] = first
        if name in arity:
            continue
        have = f"a flag of vLLM {releases[0]}" + (f" to {releases[-1]}" if len(releases) > 1 else "")
        removed[name] = f"{removed[name]}; {have}" if name in removed else have
    return FlagCatalogue(
        version=version,
        arity=arity,
        short=dict(record.get("short") or {}),
        # why a flag is accepted but unused was read for the modelled release only
        ignored={k: v for k, v in ignored.items() if k in arity} if table == rules_version else {},
        removed=removed,
        cache_dtypes=tuple(record.get("cache_dtypes") or cache),
        model_dtypes=tuple(record.get("model_dtypes") or model),
        none_is_unset=none_is_unset,
        based_on="" if table == version else table,
        newer=newer,
    )


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_human_int(text: str) -> int:
    """An integer as `vllm serve` reads --max-num-batched-tokens / --kv-cache-memory-bytes.

    Lower-case suffixes are decimal (``25.6k`` = 25,600; ``80g`` = 80,000,000,000), upper-case
    ones binary (``1K`` = 1,024; ``80G`` = 85,899,345,920; no decimals with them).

    Returns:
        the integer (tokens or bytes, depending on the flag).
    Raises:
        ValueError: not such a number (the message says why).
    Rule source: vLLM utils/argparse_utils.py (version rules in engines/vllm/v0_26) human_readable_int.
    """
    value = str(text).strip()
    m = _HUMAN_INT.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix {suffix} (did you mean {number}{suffix.lower()}?)")
        return int(number) * _BINARY[suffix]
    return int(value)


def parse_max_model_len(text: str) -> int:
    """--max-model-len as `vllm serve` reads it: a human-readable int, or -1 / "auto" (-1).

    Returns:
        tokens, or -1 for auto-fit.
    Raises:
        ValueError: not a number or "auto".
    Rule source: vLLM utils/argparse_utils.py (version rules in engines/vllm/v0_26) human_readable_int_or_auto.
    """
    value = str(text).strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return parse_human_int(value)
