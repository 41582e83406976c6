"""How vLLM 0.34.0 turns KV bytes into blocks, tokens and concurrency: 0.33.0's grouping,
page unification, concurrency and token figures (v0_33/allocator.py; get_kv_cache_configs,
get_max_concurrency_for_kv_cache_config and update_kv_cache_capacity are unchanged), plus the
extensible KV cache's physical rounding.

The extensible KV cache (v1/worker/extensible_kv_cache.py) commits physical memory per segment
in granules: in the default layer-outermost, block-compact layout every layer's region is one
segment whose stride is that layer's page (``ExtensibleKVCache._segments``), and a commit of n
blocks maps ``sum over segments of roundup(n x stride, granule)`` bytes
(``physical_bytes_for``); ``blocks_within(B)`` is the largest n whose mapping fits in B bytes,
capped at the capacity the profiling estimate reserved. The granule is the driver's allocation
granularity, at least 2 MiB (utils/extensible_tensor.py granule_size; 2 MiB on CUDA). Each
layer therefore loses at most one granule: Llama-3-8B's 32 layers at most 64 MiB (8 blocks of 64
tokens). Groups share their layers' tensors (one tensor per layer slot of the group size), so a
rank has ``group_size`` segments of one page each. The estimate path allocates plain tensors:
``num_blocks = available // bytes_per_block`` as in 0.33.0.

Units: bytes (int), tokens, blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.v0_26 import allocator as _a26
from kvplan.engines.vllm.v0_33 import allocator as _a33
from kvplan.engines.vllm.v0_33.allocator import KVCacheGroup  # noqa: F401  (unchanged)
from kvplan.engines.vllm.v0_33.kv_spec import LayerCacheSpec

MiB = 1 << 20
# utils/extensible_tensor.py _MIN_GRANULARITY, and the CUDA driver's VMM granularity on
# Hopper/Blackwell (cuMemGetAllocationGranularity): the commit granule.
GRANULE_BYTES = 2 * MiB


@dataclass(frozen=True)
class KVCacheLayout(_a33.KVCacheLayout):
    """0.33.0's layout, plus the extensible KV cache's segments and granule rounding."""

    def segment_strides(self) -> tuple[int, ...]:
        """The block stride (bytes) of every segment the extensible KV cache commits on this
        rank: one page per layer slot of the group size. The single mixed group of differing
        pages (one tensor per layer) is taken as ``num_layers`` segments of its mean page, so
        its rounding is approximate."""
        if not self.groups:
            return ()
        if self.mixed_single_group:
            n = max(self.groups[0].num_layers, 1)
            return (-(-self.bytes_per_block // n),) * n
        return (self.groups[0].page_size_bytes,) * self.group_size

    def physical_bytes_for(self, num_blocks: int, granule: int = GRANULE_BYTES) -> int:
        """Bytes a commit of ``num_blocks`` maps: every segment rounded up to the granule
        (vLLM 0.34.0 ExtensibleKVCache.physical_bytes_for)."""
        return sum(-(-num_blocks * s // granule) * granule for s in self.segment_strides())

    def blocks_within(self, available_bytes: int, capacity_blocks: int, granule: int = GRANULE_BYTES) -> int:
        """The most blocks whose physical mapping fits in ``available_bytes``, at most
        ``capacity_blocks`` (vLLM 0.34.0 ExtensibleKVCache.blocks_within: start at
        available // bytes_per_block and step down). Attention-free layouts: 1, as num_blocks."""
        if not self.groups:
            return 1
        n = min(max(int(available_bytes), 0) // self.bytes_per_block, capacity_blocks)
        strides = self.segment_strides()
        if len(set(strides)) == 1:
            # one stride: k x roundup(n x p, g) <= B  <=>  n x p <= floor(B / k) rounded down to g
            k, p = len(strides), strides[0]
            return max(min(n, (int(available_bytes) // k) // granule * granule // p), 0)
        while n > 0 and self.physical_bytes_for(n, granule) > available_bytes:
            n -= 1
        return max(n, 0)


def _convert(layout: _a26.KVCacheLayout) -> KVCacheLayout:
    return KVCacheLayout(
        groups=tuple(KVCacheGroup(**g.__dict__) for g in layout.groups),
        group_size=layout.group_size,
        bytes_per_block=layout.bytes_per_block,
        mixed_single_group=layout.mixed_single_group,
    )


def build_layout(layers: list[LayerCacheSpec], *, disable_hybrid_kv_cache_manager: bool = False) -> KVCacheLayout:
    """Group one rank's layer specs as vLLM 0.34.0 does (0.33.0's grouping), as this version's
    classes."""
    return _convert(_a33.build_layout(layers, disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager))


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/kv_cache_planning.py', 'get_kv_cache_configs'),
    ('v1/core/kv_cache_planning.py', 'check_enough_kv_cache_memory'),
    ('v1/core/kv_cache_utils.py', 'get_max_concurrency_for_kv_cache_config'),
    ('v1/worker/extensible_kv_cache.py', 'extend_kv_cache'),
    ('utils/extensible_tensor.py', 'granule_size'),
    ('utils/extensible_tensor.py', '_MIN_GRANULARITY'),
)
