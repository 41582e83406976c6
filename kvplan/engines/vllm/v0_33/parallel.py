"""vLLM 0.33.0's multi-GPU layout rules that differ from 0.26.0 (see v0_26/parallel.py).

* PCP_WITH_DP: 0.33.0 config/parallel.py _validate_parallel_config no longer refuses PCP with
  DP (the 0.26.0 "PCP does not support data parallelism yet" check is gone).
* BLOCKS_MIN_OVER_WORLD: unchanged (False; get_kv_cache_configs has no cross-DP min).
* redundant_experts: unchanged (EPLBConfig.num_redundant_experts default 0).
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26.parallel import BLOCKS_MIN_OVER_WORLD, redundant_experts  # noqa: F401

PCP_WITH_DP = True


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/parallel.py', 'ParallelConfig._validate_parallel_config'),
    ('config/parallel.py', 'EPLBConfig.num_redundant_experts'),
    ('v1/core/kv_cache_planning.py', 'get_kv_cache_configs'),
)
