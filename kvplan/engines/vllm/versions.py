"""THE table of vLLM versions kvplan has rules for. Nothing else branches on a version string:
an estimate selects its rules once (``select(args.vllm_version)``) and passes them down.

To add a version: write its package (engines/vllm/vX_Y/ building ``RULES``) and add one line to
SUPPORTED.
"""

from __future__ import annotations

from kvplan.engines.vllm import v0_26, v0_33
from kvplan.engines.vllm.rules import VllmRules
from kvplan.errors import KvplanError

SUPPORTED: dict[str, VllmRules] = {
    "0.26.0": v0_26.RULES,
    "0.33.0": v0_33.RULES,
}
DEFAULT_VERSION = "0.26.0"


def select(version: str) -> VllmRules:
    """The rules of vLLM ``version``.

    Raises:
        KvplanError: kvplan has no rules for it (exit 2, names --vllm-version).
    """
    rules = SUPPORTED.get(version)
    if rules is None:
        raise KvplanError(
            f"--vllm-version: kvplan has no rules for vLLM {version!r}",
            hint="supported: " + ", ".join(SUPPORTED),
        )
    return rules


def default() -> VllmRules:
    """The rules of DEFAULT_VERSION."""
    return SUPPORTED[DEFAULT_VERSION]
