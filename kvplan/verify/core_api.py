"""kvplan's planning API as verify uses it, through one indirection (issue 11).

``plan_from_options`` (the path ``kvplan estimate`` takes) and the pydantic-error wording live in
kvplan.capacity.options; nothing in kvplan/verify/ imports kvplan.cli (the CLI sits above it).
"""

from __future__ import annotations

from typing import Any


def plan_from_options(**options: Any):
    """(Plan, ModelSource) for kvplan estimate ``options`` (model, gpu, gpu_memory, gpu_profiles,
    revision, usage, vllm_version and the engine options; bytes as int).

    Raises:
        KvplanError: bad options or model (exit 2).
    """
    from kvplan.capacity.options import plan_from_options as _impl

    return _impl(**options)


def plain_message(err: dict) -> str:
    """A pydantic error (one entry of ``ValidationError.errors()``) as a short sentence."""
    from kvplan.capacity.options import _plain_message as _impl

    return _impl(err)
