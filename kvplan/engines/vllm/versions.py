"""THE table of vLLM versions kvplan has rules for. Nothing else branches on a version string:
an estimate selects its rules once (``select(args.vllm_version)``) and passes them down.

The table names each version's package as a string, and a version's rules are built when first
selected: code that only needs the names (``kvplan check --help``, the version ``check``
defaults to) imports this module without importing any version's rule modules.

To add a version: write its package (engines/vllm/vX_Y/ building ``RULES``) and add one line to
_PACKAGES.

Every other release kvplan has read (releases.json beside this module, written by
benchmarks/vllm_fingerprints.py: the ast fingerprint of each vLLM function the rules restate,
and the release's `vllm serve` flags) is served by a modelled version's rules: as that
version when the fingerprints are identical ("sizing source identical to vLLM X.Y.Z"), else by
the modelled version with the fewest changed functions, labelled approximate with their names
(release_choice). The data is read on first use.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engines.vllm.rules import VllmRules

# version as `--vllm-version` spells it -> the package whose RULES are that version's rules.
_PACKAGES: dict[str, str] = {
    "0.26.0": "kvplan.engines.vllm.v0_26",
    "0.33.0": "kvplan.engines.vllm.v0_33",
    "0.34.0": "kvplan.engines.vllm.v0_34",
}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


# The newest version kvplan has rules for: the default when no vllm package is installed, and
# the Python API's default (EngineArgs.vllm_version). The CLI's default is resolve(None).
DEFAULT_VERSION = max(_PACKAGES, key=_key)


class _Rules(MutableMapping):
    """version -> VllmRules, importing a version's package on first lookup. Iterates the
    versions in table order without importing anything. (Mutable so that a test can register a
    fictitious version: ``monkeypatch.setitem(versions.SUPPORTED, "9.9.9", rules)``.)"""

    def __init__(self, packages: dict[str, str]):
        self._packages = dict(packages)
        self._loaded: dict[str, VllmRules] = {}

    def __getitem__(self, version: str) -> VllmRules:
        rules = self._loaded.get(version)
        if rules is None:
            rules = importlib.import_module(self._packages[version]).RULES
            self._loaded[version] = rules
        return rules

    def __setitem__(self, version: str, rules: VllmRules) -> None:
        self._loaded[version] = rules
        self._packages.setdefault(version, "")

    def __delitem__(self, version: str) -> None:
        del self._packages[version]
        self._loaded.pop(version, None)

    def __contains__(self, version: object) -> bool:
        return version in self._packages

    def __iter__(self) -> Iterator[str]:
        return iter(self._packages)

    def __len__(self) -> int:
        return len(self._packages)


SUPPORTED: MutableMapping[str, VllmRules] = _Rules(_PACKAGES)


def select(version: str) -> VllmRules:
    """The rules of vLLM ``version``.

    Raises:
        KvplanError: kvplan has no rules for it (exit 2, names --vllm-version).
    """
    if version not in SUPPORTED:
        raise KvplanError(
            f"--vllm-version: kvplan has no rules for vLLM {version!r}",
            hint="supported: " + ", ".join(SUPPORTED),
        )
    return SUPPORTED[version]


def default() -> VllmRules:
    """The rules of DEFAULT_VERSION."""
    return SUPPORTED[DEFAULT_VERSION]


# --- which version: the flag, a file, a log, the installed package, else the newest -------------

# How the CLI's default is chosen, for --help (estimate, plan, check, verify, schema).
DEFAULT_HELP = (
    "Default: the version of the installed vllm package (read from its metadata, not imported) when "
    "kvplan has rules for it or has fingerprinted it (0.20.0 on; labelled unless its sizing source is "
    "identical to a supported version's), the nearest supported one (labelled) otherwise, else the "
    "newest supported."
)

_RELEASE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class VersionChoice:
    """The vLLM version an answer uses and why.

    Attributes:
        version: the version whose rules are used ("0.33.0"; always in SUPPORTED).
        reason: where it came from, for people: "--vllm-version", "installed vllm 0.26.0",
            "newest supported; no vllm installed", "image tag vllm/vllm-openai:v0.33.0 in deploy.yaml".
        wanted: the release the source named when it is not ``version`` ("0.30.1"); None when
            the source's version is ``version``, or when the source named none (no vllm
            installed, an image tag such as ``latest``).
        basis: how ``version``'s rules stand for ``wanted``: "identical" (kvplan fingerprinted
            ``wanted`` and its sizing source equals ``version``'s), "derived" (fingerprinted; the
            functions in ``changed`` differ), "nearest" (not fingerprinted: the nearest supported
            version). Meaningless when ``wanted`` is None.
        changed: "file::function" of vLLM ``wanted`` whose source differs from ``version``'s
            (basis "derived").
    """

    version: str
    reason: str
    wanted: Optional[str] = None
    basis: str = "nearest"
    changed: tuple[str, ...] = ()

    @property
    def substituted(self) -> bool:
        """The source named a release whose sizing source kvplan does not hold as ``version``'s
        (derived with changes, or not fingerprinted): its numbers are approximate, with a warning."""
        return self.wanted is not None and self.basis != "identical"

    @property
    def identical(self) -> bool:
        """The source named a release whose sizing source is identical to ``version``'s."""
        return self.wanted is not None and self.basis == "identical"

    def _changes(self, limit: int = 6) -> str:
        names = [c.split("::", 1)[1] for c in self.changed]
        shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
        return f"{len(names)} function{'s' if len(names) != 1 else ''} ({shown})"

    def label(self) -> str:
        """One line: "vLLM 0.33.0 (installed vllm 0.33.0)"; for a fingerprinted release
        "vLLM 0.27.1, sizing source identical to vLLM 0.26.0 (--vllm-version)" or "vLLM 0.30.0,
        approximated by vLLM 0.33.0's rules: its sizing source differs in 4 functions (...)
        (--vllm-version)"; for any other "vLLM 0.33.0, the nearest supported to 0.35.1 (...;
        kvplan has no rules for 0.35.1)"."""
        if self.wanted is None:
            return f"vLLM {self.version} ({self.reason})"
        if self.basis == "identical":
            return f"vLLM {self.wanted}, sizing source identical to vLLM {self.version} ({self.reason})"
        if self.basis == "derived":
            return (f"vLLM {self.wanted}, approximated by vLLM {self.version}'s rules: its sizing source differs in "
                    f"{self._changes(3)} ({self.reason})")
        return (f"vLLM {self.version}, the nearest supported to {self.wanted} ({self.reason}; "
                f"kvplan has no rules for {self.wanted})")

    def warning(self) -> Optional[str]:
        """The warning of a substitute (None otherwise): names the wanted and the version used
        and, for a fingerprinted release, the functions that differ."""
        if not self.substituted:
            return None
        if self.basis == "derived":
            return (f"vLLM {self.wanted} ({self.reason}): kvplan has no rules of its own for it; using vLLM "
                    f"{self.version}'s, whose sizing source differs from {self.wanted}'s in {self._changes(100)}: "
                    "the numbers are approximate")
        return (f"vLLM {self.wanted} ({self.reason}): kvplan has no rules for it; using the nearest supported "
                f"version, {self.version}, whose numbers may differ from {self.wanted}'s "
                "(pass --vllm-version to choose)")

    def evidence_note(self) -> Optional[str]:
        """What the evidence lists as not checked because ``version``'s rules stand in for
        ``wanted`` (None when they are its own or its sizing source is identical)."""
        if not self.substituted:
            return None
        if self.basis == "derived":
            return (f"vLLM {self.wanted} itself, approximated by the rules of {self.version}: its sizing source "
                    f"differs in {self._changes(6)}")
        return f"vLLM {self.wanted} itself (these are the rules of {self.version}, the nearest supported)"

    def apply_to(self, evidence):
        """``evidence`` (rules.Evidence, or None) as it stands for this choice: an identical
        release names itself (the label says "sizing source identical to vLLM X"), a substitute
        adds evidence_note to what is unchecked."""
        from dataclasses import replace

        if evidence is None or self.wanted is None:
            return evidence
        if self.identical:
            return replace(evidence, identical_release=self.wanted)
        return replace(evidence, unchecked=(self.evidence_note(), *evidence.unchecked))

    @property
    def flag_release(self) -> str:
        """The release whose `vllm serve` flags apply: ``wanted`` when it names a release
        ("0.10.2", "0.33.0rc1"), else ``version`` (serve_flags.catalogue takes either)."""
        return self.wanted if self.wanted is not None and release(self.wanted) is not None else self.version

    def to_dict(self) -> dict:
        """JSON: {"version", "reason", ["requested"]} (requested when the source named another release)."""
        out: dict = {"version": self.version, "reason": self.reason}
        if self.wanted is not None:
            out["requested"] = self.wanted
        return out


def release(text: str) -> Optional[str]:
    """The X.Y.Z release a version text names ("0.30.1", "v0.26.0-cu130" -> "0.26.0",
    "0.33.0+cu130" -> "0.33.0", "0.11" -> "0.11.0"); None when it names none ("latest", "nightly").
    A pre-release or dev build ("0.33.0rc1", "0.34.0.dev12") names its base release, which the
    caller treats as a version kvplan may have no rules for (see choose)."""
    m = _RELEASE.match(text.strip())
    if not m:
        return None
    return f"{m.group(1)}.{m.group(2)}.{m.group(3) or 0}"


def nearest(version: str) -> str:
    """The supported version closest to ``version`` ("X.Y.Z"): the newest supported one for a
    version after all of them, the oldest for one before all of them, else the one with the
    smallest difference in (major, minor, patch), compared in that order (a tie goes to the
    newer one)."""
    want = _key(version)
    ordered = sorted(SUPPORTED, key=_key)
    if want >= _key(ordered[-1]):
        return ordered[-1]
    if want <= _key(ordered[0]):
        return ordered[0]

    def distance(v: str) -> tuple:
        have = _key(v)
        return (*(abs(a - b) for a, b in zip(have, want)), tuple(-x for x in have))

    return min(ordered, key=distance)


def choose(text: str, reason: str) -> VersionChoice:
    """The version a file, log or installed package names (``text``, e.g. "v0.33.0-cu130"),
    with ``reason`` saying where it was read. A release kvplan has rules for is used as such; a
    release it has fingerprinted (0.20.0 ... 0.34.x) is served as release_choice says (identical
    sizing source, or derived with the changed functions named); any other (v0.10.2, v0.35.0,
    0.33.0rc1), or a fingerprinted one release_choice refuses, is replaced by the nearest
    supported version, and the choice says so (``wanted``; its ``warning``). Text naming no
    release at all ("latest") gives the newest supported, wanted = the text.

    Raises nothing: the callers warn, label or (``check --strict``) fail.
    """
    base = release(text)
    if base is None:
        return VersionChoice(DEFAULT_VERSION, reason, wanted=text)
    exact = text.strip().lstrip("v")
    exact = exact.split("+", 1)[0].split("-", 1)[0]
    if exact == base.rsplit(".0", 1)[0] and base.endswith(".0"):
        exact = base  # "0.11" names 0.11.0
    if base in SUPPORTED and exact == base:
        return VersionChoice(base, reason)
    if exact == base and fingerprinted(base):
        served = release_choice(base, reason)
        if served is not None:
            return served
    return VersionChoice(nearest(base), reason, wanted=exact)


# --- every release kvplan has fingerprinted (releases.json) ---------------------------------------

_DATA = Path(__file__).with_name("releases.json")


@lru_cache(maxsize=1)
def release_data() -> dict:
    """releases.json: {"keys": ["file::function", ...], "modelled": {version: [key index, ...]},
    "releases": {release: {"fingerprints": [hash or None per key], "flags" | "flags_added" /
    "flags_removed", "short", "cache_dtypes", "model_dtypes", ...}}} (see benchmarks/vllm_fingerprints.py).

    Raises:
        KvplanError: the file is missing or unreadable (a broken install).
    """
    try:
        data = json.loads(_DATA.read_text())
    except (OSError, ValueError) as e:
        raise KvplanError(f"kvplan's release table {_DATA} cannot be read: {e}", hint="reinstall kvplan") from e
    keys = data["keys"]
    data["modelled"] = {v: [keys[i] if isinstance(i, int) else i for i in ks] for v, ks in data["modelled"].items()}
    return data


def reload_release_data() -> None:
    """Forget the cached releases.json (the fingerprint tool rewrote it)."""
    release_data.cache_clear()


def fingerprinted(version: str) -> bool:
    """kvplan has read release ``version`` ("X.Y.Z") and stored its fingerprints and flags."""
    return version in release_data()["releases"]


def changed_against(version: str, modelled: str) -> tuple[str, ...]:
    """The "file::function" keys that modelled version ``modelled``'s rules restate and whose
    source in release ``version`` differs from ``modelled``'s (absent counts as different), in
    key order. Both must be fingerprinted releases."""
    data = release_data()
    fps = dict(zip(data["keys"], data["releases"][version]["fingerprints"]))
    ref = dict(zip(data["keys"], data["releases"][modelled]["fingerprints"]))
    return tuple(k for k in data["modelled"].get(modelled, ()) if fps.get(k) != ref.get(k))


# What the memory budget stands on in every modelled version: when a release has none of these
# where any modelled version has it (the function is gone, not changed), no modelled rules
# describe how it sizes the KV cache, and kvplan refuses it instead of approximating.
_CORE = ("Worker.determine_available_memory", "memory_profiling", "request_memory", "get_kv_cache_configs")


def _refusal(version: str, modelled: str) -> Optional[str]:
    """Why ``modelled``'s rules cannot stand for release ``version`` (None when they can)."""
    data = release_data()
    fps = dict(zip(data["keys"], data["releases"][version]["fingerprints"]))
    for name in _CORE:
        keys = [k for k in data["keys"] if k.endswith("::" + name)]
        if keys and all(fps.get(k) is None for k in keys):
            return f"vLLM {version} has no {name} (kvplan's rules size the KV cache from it)"
    return None


def release_choice(version: str, reason: str = "--vllm-version") -> Optional[VersionChoice]:
    """How a fingerprinted release is served: ``version`` itself when kvplan models it; the
    modelled version whose restated functions are all identical (the nearest when several);
    else the modelled version with the fewest changed functions (then the nearest), labelled
    "derived" with them. None when the changes leave no modelled rules meaningful (_refusal) or
    ``version`` is not fingerprinted."""
    if version in SUPPORTED:
        return VersionChoice(version, reason)
    if not fingerprinted(version):
        return None
    modelled = [m for m in SUPPORTED if fingerprinted(m) and m in release_data()["modelled"]]
    if not modelled or _refusal(version, modelled[0]) is not None:
        return None
    closeness = {m: _distance(m, version) for m in modelled}
    changed = {m: changed_against(version, m) for m in modelled}
    best = min(modelled, key=lambda m: (len(changed[m]), closeness[m]))
    if not changed[best]:
        return VersionChoice(best, reason, wanted=version, basis="identical")
    return VersionChoice(best, reason, wanted=version, basis="derived", changed=changed[best])


def release_verdict(version: str) -> str:
    """How kvplan knows a fingerprinted release, in words (docs/versions.md's table, the
    fingerprint tool): calibrated / sizing source identical to X / derived from X with the
    changed functions named / refused and why."""
    if version in SUPPORTED:
        return SUPPORTED[version].evidence
    choice = release_choice(version)
    if choice is None:
        modelled = [m for m in SUPPORTED if fingerprinted(m)]
        why = _refusal(version, modelled[0]) if modelled else "no modelled release is fingerprinted"
        return f"refused: {why}"
    if choice.identical:
        return f"sizing source identical to vLLM {choice.version}"
    names = ", ".join(c.split("::", 1)[1] for c in choice.changed)
    return f"derived from vLLM {choice.version}'s rules; {len(choice.changed)} restated functions differ: {names}"


def _distance(a: str, b: str) -> tuple:
    """How far release ``a`` is from ``b``: (major, minor, patch) differences, newer first on a tie."""
    ka, kb = _key(a), _key(b)
    if ka[:2] != kb[:2]:
        # another minor series: its release nearest to ``b`` is its first one when ``b`` is older
        # (0.10.2 -> 0.20.0, not 0.20.2) and its last one when ``b`` is newer
        edge = ka[2] if ka > kb else -ka[2]
        return (abs(ka[0] - kb[0]), abs(ka[1] - kb[1]), edge, tuple(-x for x in ka))
    return (*(abs(x - y) for x, y in zip(ka, kb)), tuple(-x for x in ka))


def release_flag_tables(data: Optional[dict] = None) -> dict[str, dict]:
    """release -> {arity: "names"} with releases.json's stored differences applied, in release
    order (of ``data``, a releases.json document; None: the installed one)."""
    if data is None:
        data = release_data()
    out: dict[str, dict] = {}
    prev: dict[str, str] = {}
    for v in sorted(data["releases"], key=_key):
        rec = data["releases"][v]
        if "flags" in rec:
            flags = {n: kind for kind, names in rec["flags"].items() for n in names.split()}
        else:
            flags = {n: k for n, k in prev.items() if n not in set(rec.get("flags_removed", "").split())}
            flags.update({n: kind for kind, names in rec.get("flags_added", {}).items() for n in names.split()})
        grouped: dict[str, list[str]] = {}
        for n, kind in flags.items():
            grouped.setdefault(kind, []).append(n)
        out[v] = {k: " ".join(sorted(ns)) for k, ns in sorted(grouped.items())}
        prev = flags
    return out


def installed_vllm() -> Optional[str]:
    """The version of the installed ``vllm`` distribution (read from its dist-info without
    importing vllm, as importlib.metadata reads it: kvplan.io.distributions), or None when none
    is installed."""
    from kvplan.io.distributions import installed_version

    try:
        return installed_version("vllm")
    except Exception:  # noqa: BLE001 - a broken dist-info is treated as none installed
        return None


def for_flag(flag: str, reason: str = "--vllm-version") -> VersionChoice:
    """The choice ``--vllm-version flag`` makes: a modelled version as itself, a fingerprinted
    release as release_choice serves it (identical sizing source, or derived and labelled).

    Raises:
        KvplanError: kvplan has neither rules nor fingerprints for ``flag``, or refuses the
            release (exit 2, names --vllm-version and why).
    """
    if flag in SUPPORTED:
        return VersionChoice(flag, reason)
    if fingerprinted(flag):
        choice = release_choice(flag, reason)
        if choice is None:
            raise KvplanError(f"--vllm-version: kvplan refuses vLLM {flag}: {release_verdict(flag)}",
                              hint="supported: " + ", ".join(SUPPORTED))
        return choice
    known = sorted(release_data()["releases"], key=_key)
    raise KvplanError(
        f"--vllm-version: kvplan has no rules for vLLM {flag!r}",
        hint="supported: " + ", ".join(SUPPORTED) + (f"; also every release it has fingerprinted, {known[0]} to "
                                                     f"{known[-1]} (docs/versions.md)" if known else ""),
    )


def resolve(flag: Optional[str]) -> VersionChoice:
    """The version a command uses when nothing more specific names one: the ``--vllm-version``
    flag (``flag``), else the installed vllm package's version (the nearest supported, labelled,
    when kvplan has no rules for it), else the newest supported.

    Raises:
        KvplanError: the flag names a version kvplan has no rules for (exit 2, names --vllm-version).
    """
    if flag is not None:
        return for_flag(flag)
    installed = installed_vllm()
    if installed is None:
        return VersionChoice(DEFAULT_VERSION, "newest supported; no vllm installed")
    return choose(installed, f"installed vllm {installed}")
