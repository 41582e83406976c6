"""One pipeline stage's plan: the figures of one GPU of that stage (plan()'s unit of work).

Its own module so that the steps after budgeting (capacity/start_failure.py) can read it
without importing the planner.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm import versions

# The default version's rule modules, for the field types (every version's classes share them).
_DEFAULT = versions.default()
memory = _DEFAULT.memory
act_mod = _DEFAULT.activation
KVCacheLayout = _DEFAULT.allocator.KVCacheLayout


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage (the figures are per GPU of that stage)."""

    pipeline_rank: int
    layers: range
    budget: memory.MemoryBudget
    weights_breakdown: dict[str, int]
    activation: act_mod.ActivationEstimate
    layout: KVCacheLayout
    num_blocks: int
    bytes_for_max_len: int
