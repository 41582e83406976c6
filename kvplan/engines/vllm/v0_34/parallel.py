"""vLLM 0.34.0's multi-GPU layout rules that differ from 0.33.0 (see v0_26/parallel.py for the hooks).

* PCP_WITH_DP: unchanged from 0.33.0 (allowed).
* blocks_min_over_world: with the extensible KV cache every worker measures its own budget and the
  block count is then reduced over the whole world group (gpu_worker.py _min_across_ranks, 34:L138;
  kv_cache_planning.py finalize_extensible_kv_cache, 34:L1864): a MoE model's DP engines, which
  form one world, all take the smallest pool. On the estimate path (--kv-cache-memory-bytes) each
  engine keeps its own minimum, as in 0.33.0.
* redundant_experts: with --enable-eplb and no configured count, config/parallel.py
  compute_eplb_num_redundant_experts (34:L652) adds the fewest replicas that make the experts
  divide the expert group evenly: (ep - E mod ep) mod ep, ep = TP x PCP x DP.
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_33.parallel import BLOCKS_MIN_OVER_WORLD, PCP_WITH_DP  # noqa: F401
from kvplan.engines.vllm.v0_34.defaults import extensible_kv_cache


def blocks_min_over_world(args) -> bool:
    """Whether all DP engines of a MoE model share one block count (the world-group min) for
    engine ``args`` (EngineArgs): on the extensible KV-cache path only."""
    return extensible_kv_cache(args)


def redundant_experts(configured: int | None, *, num_experts: int, ep_size: int, enable_eplb: bool) -> int:
    """Redundant expert replicas over the ``ep_size`` GPUs of the expert group for ``num_experts``
    routed experts: the configured count, else with EPLB the fewest that divide evenly, else 0."""
    if configured is not None:
        return configured
    if enable_eplb:
        return (ep_size - num_experts % ep_size) % ep_size
    return 0


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/parallel.py', 'ParallelConfig._validate_parallel_config'),
    ('config/parallel.py', 'ParallelConfig.compute_eplb_num_redundant_experts'),
    ('v1/worker/gpu_worker.py', '_min_across_ranks'),
    ('v1/core/kv_cache_planning.py', 'finalize_extensible_kv_cache'),
)


# The vLLM functions these rules restate (file under vllm/, qualified name): benchmarks/vllm_fingerprints.py
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/parallel.py', 'ParallelConfig._validate_parallel_config'),
    ('config/parallel.py', 'ParallelConfig.compute_eplb_num_redundant_experts'),
    ('v1/worker/gpu_worker.py', '_min_across_ranks'),
    ('v1/core/kv_cache_planning.py', 'get_kv_cache_configs'),
    ('v1/core/kv_cache_planning.py', 'finalize_extensible_kv_cache'),
)
