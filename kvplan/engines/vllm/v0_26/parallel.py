"""vLLM 0.26.0's multi-GPU layout rules that differ between versions (the rest of the world of
ranks is one rule for every supported version: kvplan/capacity/ranks.py).

* PCP_WITH_DP: 0.26.0 config/parallel.py ParallelConfig._validate_parallel_config raises
  "PCP does not support data parallelism yet" when PCP > 1 and DP > 1.
* BLOCKS_MIN_OVER_WORLD: False, each engine's pool is the min over its own workers.
* redundant_experts: config/parallel.py EPLBConfig.num_redundant_experts defaults to 0 and is
  taken as given (``--eplb-config '{"num_redundant_experts": R}'``); a later version may add a
  default (the hook a newer package overrides).
"""

from __future__ import annotations

PCP_WITH_DP = False

# Each DP engine of a MoE model sizes its own KV pool (v1/core/kv_cache_utils.py
# get_kv_cache_configs: the min over one engine's workers; no cross-DP min). A later version
# whose block count is the min over the whole world group (all DP engines) sets this True.
BLOCKS_MIN_OVER_WORLD = False


def redundant_experts(configured: int | None, *, num_experts: int, ep_size: int, enable_eplb: bool) -> int:
    """Redundant expert replicas vLLM adds over the ``ep_size`` GPUs of the expert group for a
    model of ``num_experts`` routed experts: the configured count (None = unset = 0)."""
    return configured or 0


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/parallel.py', 'ParallelConfig._validate_parallel_config'),
    ('config/parallel.py', 'EPLBConfig.num_redundant_experts'),
    ('v1/core/kv_cache_utils.py', 'get_kv_cache_configs'),
)
