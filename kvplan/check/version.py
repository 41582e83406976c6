"""The vLLM version check uses when none is given, and where check finds a version's own rules.

Both come from the one version table, kvplan/engines/vllm/versions.py (importing it loads no
version's rule modules, so `kvplan check --help` stays cheap).
"""

from __future__ import annotations

from kvplan.engines.vllm.versions import DEFAULT_VERSION as DEFAULT_VLLM_VERSION  # noqa: F401


def check_rules(version: str):
    """The module of check-only rules for vLLM ``version`` (switches on by default ...):
    ``check_rules`` of the version's package (engines/vllm/v0_26/check_rules.py).

    ``version`` has been validated already (FlagCatalogue / versions.select).
    """
    from kvplan.engines.vllm import versions

    return versions.select(version).check_rules
