"""How vLLM 0.26.0 turns available KV bytes into blocks, tokens and concurrency.

Restates vllm/v1/core/kv_cache_utils.py (get_kv_cache_groups, unify_kv_cache_spec_page_size,
_get_kv_cache_groups_uniform_page_size, get_kv_cache_config_from_groups, get_num_blocks,
_max_memory_usage_bytes_from_groups, get_max_concurrency_for_kv_cache_config,
get_kv_cache_capacity, _estimate_max_model_len_from_groups) and the per-spec
``max_memory_usage_bytes`` rules of vllm/v1/kv_cache_interface.py.

Units: bytes (int), tokens, blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from kvplan.engines.vllm.v0_26.kv_spec import CACHE_KINDS, FullAttentionSpec, LayerCacheSpec


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVCacheGroup:
    """Layers sharing one block table.

    Attributes:
        kind: layer kind of the group ("full", "sliding", "chunked", "mla", "mamba", or "mixed"
            for vLLM's one-group-of-differing-pages layout).
        num_layers: real layers in the group.
        padding_layers: empty slots added so every group has ``group_size`` layers.
        block_size: tokens per block.
        page_size_bytes: bytes of one page of one layer of the group (uniform across groups,
            or the sum over layers for the single mixed group).
        speculative_blocks: extra state pages a recurrent group holds per request under
            speculative decoding (vLLM 0.26.0 model_executor/layers/mamba/abstract.py
            MambaBase.get_kv_cache_spec: ``num_speculative_blocks = num_speculative_tokens``,
            counted by kv_cache_interface.py MambaSpec.max_memory_usage_bytes); 0 otherwise
            and for attention groups. Set by capacity/addons.py with_speculative_state_blocks.
    """

    kind: str
    num_layers: int
    padding_layers: int
    block_size: int
    page_size_bytes: int
    sliding_window: int | None = None
    chunk_size: int | None = None
    layer_indices: tuple[int, ...] = field(default=())
    speculative_blocks: int = 0

    @property
    def cache_kind(self) -> type[LayerCacheSpec]:
        """The layer-cache class of this group's kind (kv_spec.CACHE_KINDS)."""
        return CACHE_KINDS[self.kind]

    def blocks_per_request(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """Blocks one request of ``max_model_len`` tokens holds in this group at most.

        vLLM 0.26.0 kv_cache_interface.py max_memory_usage_bytes / page_size:
        full/MLA: cdiv(len, block); sliding: cdiv(min(window-1+in_flight, len), block) + 1;
        chunked: cdiv(min(chunk+in_flight, len), block); mamba: one state page, plus
        ``speculative_blocks`` state pages under speculative decoding (MambaSpec:
        ``page x (1 + num_speculative_blocks)``; later versions' align mode adds them the same way)."""
        base = self.cache_kind.blocks_per_request(
            max_model_len, max_in_flight_tokens, self.block_size, self.sliding_window, self.chunk_size
        )
        return base + (self.speculative_blocks if self.cache_kind.one_state_block else 0)


@dataclass(frozen=True)
class KVCacheLayout:
    """The grouping of one rank's layers.

    Attributes:
        groups: the KV-cache groups.
        group_size: layers (incl. padding) per group = number of shared memory pools.
        bytes_per_block: bytes one block id costs across all pools
            (page_size_bytes * group_size, or the summed page for the mixed single group).
    """

    groups: tuple[KVCacheGroup, ...]
    group_size: int
    bytes_per_block: int
    mixed_single_group: bool = False

    @property
    def padding_layers(self) -> int:
        return sum(g.padding_layers for g in self.groups)

    def num_blocks(self, available_bytes: int) -> int:
        """num_gpu_blocks for ``available_bytes`` of KV memory (vLLM get_num_blocks: floor)."""
        if not self.groups:
            return 1
        return max(int(available_bytes) // self.bytes_per_block, 0)

    def bytes_for_max_len(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """KV bytes one request of ``max_model_len`` tokens needs (vLLM
        _max_memory_usage_bytes_from_groups): the start-up admission check."""
        if not self.groups:
            return 0
        if self.mixed_single_group:
            g = self.groups[0]
            return g.blocks_per_request(max_model_len, max_in_flight_tokens) * g.page_size_bytes
        blocks = sum(g.blocks_per_request(max_model_len, max_in_flight_tokens) for g in self.groups)
        return self.group_size * self.groups[0].page_size_bytes * blocks

    def blocks_per_request(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        """Block ids one max-length request needs across groups (vLLM
        get_max_concurrency_for_kv_cache_config: cdiv(per-request bytes, bytes per block))."""
        if not self.groups:
            return 1
        if self.mixed_single_group:
            return self.groups[0].blocks_per_request(max_model_len, max_in_flight_tokens)
        per_request = self.group_size * sum(
            g.blocks_per_request(max_model_len, max_in_flight_tokens) * g.page_size_bytes for g in self.groups
        )
        return _cdiv(per_request, self.bytes_per_block)

    def max_concurrency(self, num_blocks: int, max_model_len: int, max_in_flight_tokens: int) -> float:
        """vLLM's "Maximum concurrency for N tokens per request" figure."""
        return num_blocks / self.blocks_per_request(max_model_len, max_in_flight_tokens)

    def kv_cache_tokens(self, num_blocks: int, max_model_len: int, max_in_flight_tokens: int) -> int:
        """vLLM's "GPU KV cache size: N tokens" = int(max_concurrency * max_model_len)."""
        return int(self.max_concurrency(num_blocks, max_model_len, max_in_flight_tokens) * max_model_len)

    def largest_max_model_len(self, available_bytes: int, upper: int, max_in_flight_tokens: int) -> int:
        """The largest max_model_len in [1, upper] whose one request fits ``available_bytes``
        (vLLM _estimate_max_model_len_from_groups, a binary search); 0 if none. Cached: plan
        sweeps ask the same layout the same question for many GPUs."""
        return _largest_max_model_len(self, int(available_bytes), upper, max_in_flight_tokens)

    def _search_max_model_len(self, available_bytes: int, upper: int, max_in_flight_tokens: int) -> int:
        if self.bytes_for_max_len(1, max_in_flight_tokens) > available_bytes:
            return 0
        lo, hi, best = 1, upper, 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.bytes_for_max_len(mid, max_in_flight_tokens) <= available_bytes:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best


@lru_cache(maxsize=16384)
def _largest_max_model_len(layout: KVCacheLayout, available_bytes: int, upper: int, max_in_flight_tokens: int) -> int:
    return layout._search_max_model_len(available_bytes, upper, max_in_flight_tokens)


def _same(a: LayerCacheSpec, b: LayerCacheSpec) -> bool:
    return a == b


def build_layout(layers: list[LayerCacheSpec], *, disable_hybrid_kv_cache_manager: bool = False) -> KVCacheLayout:
    """Group one rank's layer specs the way vLLM 0.26.0 get_kv_cache_groups does.

    1. All layers identical -> one group of all layers.
    2. All the same type but different pages -> one mixed group; a block costs the sum of pages.
    3. Otherwise (hybrid): pages unified by scaling the block size of smaller pages; layers
       grouped by spec; group size = the smallest type count (or the largest when it is below
       1.5x the smallest); shorter groups padded with empty layers.
    With ``--disable-hybrid-kv-cache-manager`` sliding/chunked layers become full attention first.
    """
    indexed = list(enumerate(layers))
    if not indexed:
        return KVCacheLayout(groups=(), group_size=0, bytes_per_block=1)

    if disable_hybrid_kv_cache_manager:
        full = next((s for s in layers if isinstance(s, FullAttentionSpec)), None)
        if full is not None and any(s.full_without_hybrid_manager for s in layers):
            indexed = [
                (i, full if s.full_without_hybrid_manager else s) for i, s in indexed
            ]
            layers = [s for _, s in indexed]

    first = layers[0]
    if all(_same(first, s) for s in layers):
        g = KVCacheGroup(
            kind=first.kind,
            num_layers=len(layers),
            padding_layers=0,
            block_size=first.block_size,
            page_size_bytes=first.page_size_bytes,
            sliding_window=first.sliding_window,
            chunk_size=first.chunk_size,
            layer_indices=tuple(i for i, _ in indexed),
        )
        return KVCacheLayout(groups=(g,), group_size=len(layers), bytes_per_block=first.page_size_bytes * len(layers))

    same_type = (
        len({(s.kind, s.sliding_window, s.chunk_size, s.block_size) for s in layers}) == 1
        and not first.one_state_block
    )
    if same_type:
        total_page = sum(s.page_size_bytes for s in layers)
        g = KVCacheGroup(
            kind=first.kind,
            num_layers=len(layers),
            padding_layers=0,
            block_size=first.block_size,
            page_size_bytes=total_page,
            sliding_window=first.sliding_window,
            chunk_size=first.chunk_size,
            layer_indices=tuple(i for i, _ in indexed),
        )
        return KVCacheLayout(groups=(g,), group_size=1, bytes_per_block=total_page, mixed_single_group=True)

    # Hybrid: unify page sizes to the largest by scaling block sizes.
    max_page = max(s.page_size_bytes for s in layers)
    unified: list[tuple[int, LayerCacheSpec]] = []
    for i, s in indexed:
        if s.page_size_bytes == max_page:
            unified.append((i, s))
        elif s.one_state_block:
            unified.append((i, type(s)(s.block_size, max_page)))
        elif max_page % s.page_size_bytes == 0:
            unified.append((i, s.with_block_size(s.block_size * (max_page // s.page_size_bytes))))
        else:
            from kvplan.errors import KvplanError

            raise KvplanError(
                "vLLM 0.26.0 cannot unify this model's KV page sizes "
                f"({s.page_size_bytes} does not divide {max_page}); it would refuse to start"
            )

    by_spec: dict[LayerCacheSpec, list[int]] = {}
    for i, s in unified:
        by_spec.setdefault(s, []).append(i)
    counts = [len(v) for v in by_spec.values()]
    group_size = min(counts)
    if max(counts) < group_size * 1.5:
        group_size = max(counts)
    groups: list[KVCacheGroup] = []
    for s, idxs in by_spec.items():
        n_groups = _cdiv(len(idxs), group_size)
        for j in range(n_groups):
            members = idxs[j::n_groups]
            groups.append(
                KVCacheGroup(
                    kind=s.kind,
                    num_layers=len(members),
                    padding_layers=group_size - len(members),
                    block_size=s.block_size,
                    page_size_bytes=s.page_size_bytes,
                    sliding_window=s.sliding_window,
                    chunk_size=s.chunk_size,
                    layer_indices=tuple(members),
                )
            )
    return KVCacheLayout(groups=tuple(groups), group_size=group_size, bytes_per_block=max_page * group_size)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/kv_cache_utils.py', 'get_kv_cache_groups'),
    ('v1/core/kv_cache_utils.py', 'unify_kv_cache_spec_page_size'),
    ('v1/core/kv_cache_utils.py', 'get_num_blocks'),
    ('v1/core/kv_cache_utils.py', 'get_max_concurrency_for_kv_cache_config'),
    ('v1/core/kv_cache_utils.py', 'get_kv_cache_configs'),
    ('v1/core/kv_cache_utils.py', 'check_enough_kv_cache_memory'),
    ('v1/kv_cache_interface.py', 'KVCacheSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'FullAttentionSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'SlidingWindowSpec.max_memory_usage_bytes'),
    ('v1/kv_cache_interface.py', 'MambaSpec.max_memory_usage_bytes'),
)
