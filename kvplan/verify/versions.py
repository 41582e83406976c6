"""The vLLM version ``kvplan verify`` checks against: the one place verify/ names it.

INTEGRATOR (issue 11): when kvplan/engines/vllm/versions.py lands, this module becomes
``from kvplan.engines.vllm.versions import DEFAULT_VERSION as VERIFIED_VLLM`` (one line).
"""

from __future__ import annotations

VERIFIED_VLLM = "0.26.0"  # INTEGRATOR: kvplan.engines.vllm.versions.DEFAULT_VERSION
