"""The vLLM version ``kvplan verify`` checks against: kvplan's default version, from the one
version table (kvplan/engines/vllm/versions.py; importing it loads no rule modules)."""

from __future__ import annotations

from kvplan.engines.vllm.versions import DEFAULT_VERSION as VERIFIED_VLLM  # noqa: F401
