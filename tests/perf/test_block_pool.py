"""vLLM's block pool (0.26.0 v1/core/block_pool.py): null block, free-queue order, eviction."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.perf.blocks import BlockPool, content_key


def test_unhashed_blocks_are_reused_before_cached_ones_and_lru_evicts_first_freed():
    pool = BlockPool(5, enable_caching=True)  # 4 usable: block 0 is the null block
    assert pool.num_free == 4
    b = pool.take(4)
    assert 0 not in b and pool.num_free == 0
    pool.register(b[0], 100)
    pool.register(b[1], 101)
    pool.free([b[1], b[0]])  # eviction order: b1 first
    pool.free([b[2], b[3]])  # no hash
    got = pool.take(2)
    assert sorted(got) == sorted(b[2:])  # the unhashed ones
    assert pool.lookup(100) == b[0] and pool.lookup(101) == b[1]
    assert pool.take(1) == [b[1]]  # the first freed hashed block is evicted
    assert pool.lookup(101) is None and pool.lookup(100) == b[0]


def test_a_hit_on_a_free_cached_block_takes_it_out_of_the_queue():
    pool = BlockPool(3, enable_caching=True)
    (x,) = pool.take(1)
    pool.register(x, 7)
    pool.free([x])
    assert pool.num_free == 2
    pool.touch([x])
    assert pool.num_free == 1 and pool.ref[x] == 1


def test_content_keys_share_only_whole_blocks_of_the_prefix():
    # block 16, prefix 40: blocks 0 and 1 belong to the prefix group, block 2 to the request
    assert content_key(1, 0, 40, 1, 16) == content_key(2, 0, 40, 1, 16)
    assert content_key(1, 0, 40, 2, 16) != content_key(2, 0, 40, 2, 16)
    assert content_key(1, -1, 0, 0, 16) != content_key(2, -1, 0, 0, 16)


def test_a_pool_without_room_beside_the_null_block_is_refused():
    with pytest.raises(KvplanError, match="num_gpu_blocks"):
        BlockPool(1, enable_caching=False)


def test_groups_from_kvplans_layout():
    from kvplan.engines.vllm.v0_26.allocator import KVCacheGroup, KVCacheLayout
    from kvplan.perf import GroupSpec, groups_from_layout

    layout = KVCacheLayout(
        groups=(KVCacheGroup("full", 12, 0, 16, 4096), KVCacheGroup("sliding", 12, 0, 16, 4096, sliding_window=128)),
        group_size=12, bytes_per_block=2 * 12 * 4096,
    )
    assert groups_from_layout(layout) == (GroupSpec("full", 16), GroupSpec("sliding", 16, 128))
    # a recurrent-state group: vLLM 0.26.0 (mamba_cache_mode "none") keeps one state page per
    # request (kv_cache_interface.py MambaSpec.max_memory_usage_bytes: (1 + spec tokens) pages)
    mamba = KVCacheLayout(groups=(KVCacheGroup("mamba", 4, 0, 16, 4096),), group_size=4, bytes_per_block=4 * 4096)
    assert groups_from_layout(mamba) == (GroupSpec("state", 16, None, 1),)
    chunked = KVCacheLayout(groups=(KVCacheGroup("chunked", 4, 0, 16, 4096, chunk_size=64),), group_size=4, bytes_per_block=4 * 4096)
    with pytest.raises(KvplanError, match="chunked"):
        groups_from_layout(chunked)
