"""THE table of vLLM versions kvplan has rules for. Nothing else branches on a version string:
an estimate selects its rules once (``select(args.vllm_version)``) and passes them down.

The table names each version's package as a string, and a version's rules are built when first
selected: code that only needs the names (``kvplan check --help``, the version ``check``
defaults to) imports this module without importing any version's rule modules.

To add a version: write its package (engines/vllm/vX_Y/ building ``RULES``) and add one line to
_PACKAGES.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
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
    "kvplan has rules for it, the nearest supported one (labelled) when it has none, else the "
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
        wanted: the version the source named when kvplan has no rules for it ("0.30.1"; ``version``
            is then the nearest supported one); None when the source's version is ``version``, or
            when the source named none (no vllm installed, an image tag such as ``latest``).
    """

    version: str
    reason: str
    wanted: Optional[str] = None

    @property
    def substituted(self) -> bool:
        """The source named a version kvplan has no rules for, and the nearest one is used."""
        return self.wanted is not None

    def label(self) -> str:
        """One line: "vLLM 0.33.0 (installed vllm 0.33.0)", or for a substitute
        "vLLM 0.33.0, the nearest supported to 0.30.1 (installed vllm 0.30.1; kvplan has no rules for 0.30.1)"."""
        if self.wanted is None:
            return f"vLLM {self.version} ({self.reason})"
        return (f"vLLM {self.version}, the nearest supported to {self.wanted} ({self.reason}; "
                f"kvplan has no rules for {self.wanted})")

    def warning(self) -> Optional[str]:
        """The warning of a substitute (None otherwise): names the wanted and the nearest version."""
        if self.wanted is None:
            return None
        return (f"vLLM {self.wanted} ({self.reason}): kvplan has no rules for it; using the nearest supported "
                f"version, {self.version}, whose numbers may differ from {self.wanted}'s "
                "(pass --vllm-version to choose)")

    def to_dict(self) -> dict:
        """JSON: {"version", "reason", ["requested"]} (requested only for a substitute)."""
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
    with ``reason`` saying where it was read. A release kvplan has rules for is used as such; any
    other (v0.30.1, v0.34.0, 0.33.0rc1) is replaced by the nearest supported version, and the
    choice says so (``wanted``; its ``warning``). Text naming no release at all ("latest") gives
    the newest supported, wanted = the text.

    Raises nothing: the callers warn, label or (``check --strict``) fail.
    """
    base = release(text)
    if base is None:
        return VersionChoice(DEFAULT_VERSION, reason, wanted=text)
    exact = text.strip().lstrip("v")
    exact = exact.split("+", 1)[0].split("-", 1)[0]
    if base in SUPPORTED and exact in (base, base.rsplit(".0", 1)[0] if base.endswith(".0") else base):
        return VersionChoice(base, reason)
    return VersionChoice(nearest(base), reason, wanted=exact)


def installed_vllm() -> Optional[str]:
    """The version of the installed ``vllm`` distribution (read from its dist-info without
    importing vllm, as importlib.metadata reads it: kvplan.io.distributions), or None when none
    is installed."""
    from kvplan.io.distributions import installed_version

    try:
        return installed_version("vllm")
    except Exception:  # noqa: BLE001 - a broken dist-info is treated as none installed
        return None


def resolve(flag: Optional[str]) -> VersionChoice:
    """The version a command uses when nothing more specific names one: the ``--vllm-version``
    flag (``flag``), else the installed vllm package's version (the nearest supported, labelled,
    when kvplan has no rules for it), else the newest supported.

    Raises:
        KvplanError: the flag names a version kvplan has no rules for (exit 2, names --vllm-version).
    """
    if flag is not None:
        select(flag)
        return VersionChoice(flag, "--vllm-version")
    installed = installed_vllm()
    if installed is None:
        return VersionChoice(DEFAULT_VERSION, "newest supported; no vllm installed")
    return choose(installed, f"installed vllm {installed}")
