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
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.engines.vllm.rules import VllmRules

# version as `--vllm-version` spells it -> the package whose RULES are that version's rules.
_PACKAGES: dict[str, str] = {
    "0.26.0": "kvplan.engines.vllm.v0_26",
    "0.33.0": "kvplan.engines.vllm.v0_33",
}
DEFAULT_VERSION = "0.26.0"


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
