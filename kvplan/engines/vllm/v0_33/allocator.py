"""How vLLM 0.33.0 turns available KV bytes into blocks, tokens and concurrency.

The grouping, page unification, num_blocks = available // bytes_per_block, the minimum over ranks
and the token / concurrency figures are 0.26.0's (v0_26/allocator.py): the code moved to
v1/core/kv_cache_planning.py (get_kv_cache_configs, _pool_bytes_per_block_from_builder) and
kv_cache_config_builder.py, with the same numbers for every standard spec; the concurrency is
num_blocks / sum over groups of cdiv(max_memory_usage, page), equal to 0.26.0's whenever every
group's per-request bytes are whole pages (always, for the specs kvplan models).

Changed:
* The null block (block id 0, never handed to a request) is subtracted before the "can serve one
  request" check and the max_model_len auto-fit (kv_cache_planning.py check_enough_kv_cache_memory
  / auto-fit: ``available - bytes_per_block``). kvplan folds it into ``bytes_for_max_len`` (what the
  check compares with the available memory). num_gpu_blocks itself is unchanged.
* Recurrent groups hold 2 (+1 prefill checkpoint for GDN and Mamba-2) pages per request in mode
  ``align`` (kv_spec.MambaAlignSpec / Mamba2AlignSpec / GDNAlignSpec), looked up through this
  version's CACHE_KINDS; max concurrency = num_blocks / those block ids per max-length request,
  and the logged tokens int(concurrency x max_model_len) (kv_cache_utils.py
  get_kv_cache_capacity), checked on granite4h-small_eager and qwen3-next-80b_fp8_eager.
Units: bytes (int), tokens, blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.v0_26 import allocator as _a26
from kvplan.engines.vllm.v0_33.kv_spec import CACHE_KINDS, LayerCacheSpec


@dataclass(frozen=True)
class KVCacheGroup(_a26.KVCacheGroup):
    """0.26.0's group, its kind looked up in 0.33.0's CACHE_KINDS."""

    @property
    def cache_kind(self) -> type[LayerCacheSpec]:
        return CACHE_KINDS[self.kind]


@dataclass(frozen=True)
class KVCacheLayout(_a26.KVCacheLayout):
    """0.26.0's layout with the null block reserved in the start-up check and the auto-fit."""

    def bytes_for_max_len(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """KV bytes the start-up check needs for one request of ``max_model_len`` tokens: the
        request's pages plus the null block (module docstring)."""
        if not self.groups:
            return 0
        return super().bytes_for_max_len(max_model_len, max_in_flight_tokens) + self.bytes_per_block


def _convert(layout: _a26.KVCacheLayout) -> KVCacheLayout:
    groups = tuple(KVCacheGroup(**g.__dict__) for g in layout.groups)
    return KVCacheLayout(
        groups=groups,
        group_size=layout.group_size,
        bytes_per_block=layout.bytes_per_block,
        mixed_single_group=layout.mixed_single_group,
    )


def build_layout(layers: list[LayerCacheSpec], *, disable_hybrid_kv_cache_manager: bool = False) -> KVCacheLayout:
    """Group one rank's layer specs as vLLM 0.33.0 get_kv_cache_groups does (0.26.0's grouping,
    v0_26.allocator.build_layout), as this version's classes."""
    return _convert(_a26.build_layout(layers, disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager))


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/kv_cache_planning.py', 'get_kv_cache_configs'),
    ('v1/core/kv_cache_planning.py', 'check_enough_kv_cache_memory'),
    ('v1/core/kv_cache_planning.py', '_pool_bytes_per_block_from_builder'),
    ('v1/core/kv_cache_planning.py', 'unify_kv_cache_spec_page_size'),
    ('v1/core/kv_cache_utils.py', 'get_max_concurrency_for_kv_cache_config'),
    ('v1/kv_cache_interface.py', 'KVCacheSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'FullAttentionSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'SlidingWindowSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'MambaSpec.max_memory_usage_bytes'),
)
