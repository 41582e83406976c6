"""The vLLM version ``kvplan verify`` checks against: the one place verify/ names it (kvplan's
default version, kvplan.engines.vllm.versions.DEFAULT_VERSION).
"""

from __future__ import annotations

from kvplan.engines.vllm.versions import DEFAULT_VERSION as VERIFIED_VLLM

__all__ = ["VERIFIED_VLLM"]
