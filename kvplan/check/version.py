"""The vLLM version check uses when none is given, and where check finds a version's own rules.

The default is kvplan's (kvplan.engines.vllm.versions.DEFAULT_VERSION). INTEGRATOR: let
check_rules return that version's rules (``versions.select(version)``, with the v0_26 module
below attached to the rules object or imported by its package).
"""

from __future__ import annotations

from kvplan.engines.vllm.versions import DEFAULT_VERSION as DEFAULT_VLLM_VERSION

__all__ = ["DEFAULT_VLLM_VERSION", "check_rules"]


def check_rules(version: str):
    """The module of check-only rules for vLLM ``version`` (switches on by default ...).

    ``version`` has been validated already (FlagCatalogue / defaults.check_version): kvplan
    holds rules for one version.
    """
    from kvplan.engines.vllm.v0_26 import check_rules as rules

    return rules
