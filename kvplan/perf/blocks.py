"""vLLM's KV block pool and per-group block tables, restated for the emulator.

Rules (vLLM, as the versions kvplan has rules for do it; the policy object says which apply):

* v1/core/block_pool.py ``BlockPool``: ``num_gpu_blocks`` blocks shared by every KV-cache group;
  block 0 is the null block (placeholder for skipped blocks, never handed out). The free queue
  holds free blocks in eviction order: blocks freed without a hash go to its head (taken first),
  hashed blocks to its tail (least recently freed evicted first). Taking a block evicts its hash.
  A prefix-cache hit on a free block takes it out of the queue (``touch``).
* v1/core/single_type_kv_cache_manager.py ``get_num_blocks_to_allocate`` /
  ``allocate_new_blocks`` / ``remove_skipped_blocks`` / ``cache_blocks``: a group needs
  ``cdiv(tokens, block_size)`` table entries; sliding-window groups replace the blocks wholly
  before ``computed - window + 1`` by the null block and free them (tail first).
* v1/core/kv_cache_utils.py block hashes: block i of a request is identified by every token up
  to its end (a chained hash), so two requests share block i exactly when their first
  ``(i + 1) * block_size`` tokens are identical; only full blocks are hashed.

Token content is abstract here: a request's first ``shared_prefix_tokens`` tokens are those of
its prefix group, the rest are its own. Units: blocks, tokens (int).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from kvplan.errors import KvplanError

NULL_BLOCK = 0
_IDX_BITS = 24  # block index bits inside a content key
_GROUP_BITS = 6  # group id bits of a hash key (<= 64 groups)


@dataclass(frozen=True)
class GroupSpec:
    """One KV-cache group as the scheduler sees it.

    Attributes:
        kind: "full" (full attention and MLA: every block kept until the request ends),
            "sliding" (blocks before the window freed as the request advances) or "state" (a
            recurrent layer's state -- Mamba, GDN, short conv: a fixed number of pages per request,
            whatever its length).
        block_size: tokens per block of this group (for a state group, vLLM's hybrid block size:
            it only aligns the attention groups' blocks).
        sliding_window: the window in tokens (sliding groups only).
        pages_per_request: pages a request holds in a state group from admission to finish
            (the version's kv_spec blocks_per_request: 1 in vLLM's mamba_cache_mode "none", 2 in
            "align", + 1 prefill checkpoint for Mamba-2 and FlashInfer GDN where the version has them).
            vLLM v1/core/single_type_kv_cache_manager.py MambaManager: in "align" mode the table
            follows the token positions but remove_skipped_blocks frees all but the live state
            blocks, so the live count is at most this; kvplan holds the most throughout (upper
            bound, labelled by the emulator).
    """

    kind: str
    block_size: int
    sliding_window: int | None = None
    pages_per_request: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("full", "sliding", "state"):
            raise KvplanError(
                f"KV-cache group kind {self.kind!r}: the scheduler emulator models full-attention, "
                "sliding-window and recurrent-state groups only",
                hint="chunked-local and mixed-page layouts are not emulated",
            )
        if self.kind == "state" and self.pages_per_request < 1:
            raise KvplanError("pages_per_request: a recurrent-state group needs >= 1 page per request")
        if self.block_size < 1:
            raise KvplanError(f"block_size: must be >= 1, got {self.block_size}")
        if self.kind == "sliding" and not (self.sliding_window and self.sliding_window >= 1):
            raise KvplanError("sliding_window: a sliding-window group needs a window >= 1 token")


# Group kinds of kvplan's allocator (engines/vllm/vX_Y/allocator.py KVCacheGroup.kind) the
# emulator can stand behind, and how it treats them.
_LAYOUT_KINDS = {"full": "full", "mla": "full", "sliding": "sliding", "mamba": "state", "mamba2": "state", "gdn": "state"}


def groups_from_layout(layout) -> tuple[GroupSpec, ...]:
    """The groups of kvplan's KV-cache layout (an allocator ``KVCacheLayout``) as GroupSpecs.

    Raises:
        KvplanError: a group kind the emulator does not model (chunked-local attention, or the
            mixed single group of differing pages), naming it.
    """
    out = []
    for g in layout.groups:
        kind = g.kind  # the mixed single group keeps its layers' kind; a block is one id
        if kind not in _LAYOUT_KINDS:
            raise KvplanError(
                f"KV-cache group kind {kind!r}: the scheduler emulator models full-attention, MLA, "
                "sliding-window and recurrent-state (Mamba, GDN) groups only"
            )
        mapped = _LAYOUT_KINDS[kind]
        # a state group's pages per request do not depend on lengths (kv_spec blocks_per_request)
        pages = g.blocks_per_request(1, 1) if mapped == "state" else 0
        out.append(GroupSpec(mapped, g.block_size, g.sliding_window if kind == "sliding" else None, pages))
    return tuple(out)


def content_key(uid: int, prefix_group: int, shared_tokens: int, block_index: int, block_size: int) -> int:
    """The identity of a request's block ``block_index`` (what vLLM's chained block hash
    distinguishes): the prefix group's when the whole block lies in the shared prefix, else the
    request's own."""
    if prefix_group >= 0 and (block_index + 1) * block_size <= shared_tokens:
        owner = 2 * prefix_group + 2
    else:
        owner = 2 * uid + 1
    return (owner << _IDX_BITS) | block_index


class BlockPool:
    """The free-block queue, reference counts and the prefix cache of one engine.

    Args:
        num_gpu_blocks: blocks in the pool (kvplan's estimate), including the null block.
        enable_caching: whether full blocks are registered for prefix-cache hits.
    """

    __slots__ = ("num_gpu_blocks", "enable_caching", "ref", "hash_of", "cached", "free_unhashed", "free_hashed")

    def __init__(self, num_gpu_blocks: int, enable_caching: bool):
        if num_gpu_blocks < 2:
            raise KvplanError(f"num_gpu_blocks: needs >= 2 (one is vLLM's null block), got {num_gpu_blocks}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.ref = [0] * num_gpu_blocks
        self.hash_of: list[int | None] = [None] * num_gpu_blocks
        self.cached: dict[int, list[int]] = {}
        # The queue's head: blocks without a hash (interchangeable). Its tail: hashed blocks in
        # eviction order (OrderedDict front = evicted first).
        self.free_unhashed = list(range(num_gpu_blocks - 1, 0, -1))
        self.free_hashed: OrderedDict[int, None] = OrderedDict()

    @property
    def num_free(self) -> int:
        """Free blocks (including cached blocks no request holds), without the null block."""
        return len(self.free_unhashed) + len(self.free_hashed)

    @property
    def num_usable(self) -> int:
        """Blocks requests can hold: num_gpu_blocks - 1 (the null block)."""
        return self.num_gpu_blocks - 1

    def take(self, n: int) -> list[int]:
        """``n`` blocks off the head of the free queue, evicting their hashes (BlockPool.get_new_blocks)."""
        unhashed = self.free_unhashed
        if n <= len(unhashed):
            out = unhashed[len(unhashed) - n:]
            del unhashed[len(unhashed) - n:]
        else:
            out = unhashed[:]
            unhashed.clear()
            popitem = self.free_hashed.popitem
            hash_of, cached = self.hash_of, self.cached
            for _ in range(n - len(out)):
                b, _ = popitem(last=False)
                key = hash_of[b]
                ids = cached[key]
                ids.remove(b)
                if not ids:
                    del cached[key]
                hash_of[b] = None
                out.append(b)
        ref = self.ref
        for b in out:
            ref[b] = 1
        return out

    def touch(self, blocks: list[int]) -> None:
        """A prefix-cache hit takes ``blocks``: free ones leave the queue; refcounts rise."""
        ref = self.ref
        for b in blocks:
            if b == NULL_BLOCK:
                continue
            if ref[b] == 0:
                del self.free_hashed[b]
            ref[b] += 1

    def free(self, blocks) -> None:
        """Release ``blocks`` given in eviction order (first evicted first) (BlockPool.free_blocks)."""
        ref, hash_of = self.ref, self.hash_of
        for b in blocks:
            if b == NULL_BLOCK:
                continue
            ref[b] -= 1
            if ref[b] == 0:
                if hash_of[b] is None:
                    self.free_unhashed.append(b)
                else:
                    self.free_hashed[b] = None

    def register(self, block: int, key: int) -> None:
        """Register a full block under its hash key (BlockPool.cache_full_blocks)."""
        if self.hash_of[block] is not None:
            return
        self.hash_of[block] = key
        ids = self.cached.get(key)
        if ids is None:
            self.cached[key] = [block]
        else:
            ids.append(block)

    def lookup(self, key: int) -> int | None:
        """A cached block with hash ``key``, or None."""
        ids = self.cached.get(key)
        return ids[0] if ids else None

    def is_evictable(self, block: int) -> bool:
        """A cached block no request holds (its hit takes a free block)."""
        return self.ref[block] == 0
