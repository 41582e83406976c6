"""Moved (issue 11): the version's defaults to kvplan.engines.vllm.v0_26.defaults, the version
table and check to kvplan.engines.vllm.versions. This module goes when every importer is updated.

(A package rather than a file at the old path, so that the old file is deleted on this branch
and git's rename detection carries other branches' edits of it into the moved module.)"""

from kvplan.engines.vllm.v0_26.defaults import (  # noqa: F401
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    USAGE_CONTEXTS,
    GiB,
    batch_defaults,
    default_block_size,
    resolve_dtype,
    resolve_max_num_batched_tokens,
)
from kvplan.engines.vllm.versions import DEFAULT_VERSION as DEFAULT_VLLM_VERSION  # noqa: F401
from kvplan.engines.vllm.versions import SUPPORTED, select

SUPPORTED_VLLM_VERSIONS = tuple(SUPPORTED)


def check_version(version: str) -> str:
    """Return the version if kvplan has its rules, else raise (exit 2) naming --vllm-version
    (kvplan.engines.vllm.versions.select)."""
    select(version)
    return version
