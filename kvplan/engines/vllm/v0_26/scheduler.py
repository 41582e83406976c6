"""How vLLM 0.26.0's V1 scheduler decides, step by step, which requests run and with how many
tokens: the version's policy as data, read by the emulator in kvplan/perf/.

Restated (in our own words) from vLLM 0.26.0:

* v1/core/sched/scheduler.py ``Scheduler.schedule``: one token budget per step
  (``max_num_scheduled_tokens``, defaulting to ``max_num_batched_tokens``). RUNNING requests are
  served first, in the order they entered RUNNING; each asks for every token it has not computed
  (prompt chunk or the one sampled token), capped by ``long_prefill_token_threshold`` (when > 0),
  by the budget left and by ``max_model_len - num_computed_tokens - 1``. When its KV slots cannot
  be allocated the LAST request of RUNNING is preempted (FCFS policy) and the allocation retried;
  if the request preempts itself the running pass stops. WAITING requests are admitted only when
  the step preempted nobody, FCFS, while budget is left and fewer than ``max_num_seqs`` requests
  run; a waiting request first takes its prefix-cache hit (at most ``num_tokens - 1`` tokens,
  whole blocks), then asks for the rest (chunked to the budget when chunked prefill is on; with
  it off a request that does not fit stops admission). The first waiting request that cannot be
  allocated stops admission (no skipping ahead).
* ``Scheduler._preempt_request``: a preempted request frees all its blocks, forgets its
  computed tokens (recompute) and goes to the FRONT of WAITING.
* v1/core/kv_cache_manager.py ``allocate_slots``: with ``scheduler_reserve_full_isl`` (default
  on) a new or resumed request is admitted only if the blocks of its whole current sequence
  (``min(num_tokens, max_model_len)``, sliding-window groups capped at their per-request
  admission cap) fit in the free blocks beside the watermark; every allocation needs
  ``cdiv(num_computed + num_new (+ lookahead), block_size)`` blocks per group minus those held;
  cache-hit blocks that sit in the free queue count as taken. Full blocks are registered in the
  prefix cache as soon as they are scheduled (capped at ``num_tokens``).
* v1/core/block_pool.py: one pool of ``num_gpu_blocks`` shared by all KV-cache groups, block 0 is
  the null block (never used); freed blocks without a hash go to the head of the free queue
  (reused first), freed hashed blocks to its tail (LRU eviction, a request's tail blocks first).
* v1/core/single_type_kv_cache_manager.py: sliding-window groups free the blocks wholly before
  ``num_computed - sliding_window + 1`` (counted on processed, not in-flight, tokens).
* v1/core/sched/async_scheduler.py + v1/engine/core.py ``step_with_batch_queue``: with async
  scheduling (the default for generative models without non-EAGLE speculative decoding,
  config/vllm.py) two batches are in flight (``max_concurrent_batches`` = 2 at PP=1): step N+1 is
  scheduled before step N's output is processed, so a request's next decode is scheduled with a
  placeholder for its in-flight token, a request whose last token is in flight is not scheduled
  again, and finished requests free their blocks and seats one step later.
* config/scheduler.py defaults: chunked prefill on, ``long_prefill_token_threshold`` 0,
  ``max_num_partial_prefills`` 1, policy fcfs, ``scheduler_reserve_full_isl`` True,
  ``watermark`` 0.0, ``async_scheduling`` None (resolved as above).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerPolicy:
    """One vLLM version's scheduling rules, as data the emulator (kvplan/perf) applies.

    Attributes:
        version: the vLLM version these rules restate.
        long_prefill_token_threshold: default cap on one request's tokens per step (0 = none).
        long_prefill_cap_when_alone: whether the cap applies when only one request is queued or
            running (0.26.0: yes; later versions drop it then).
        enable_chunked_prefill: default for ``--enable-chunked-prefill``.
        scheduler_reserve_full_isl: admit a request only if its whole current sequence fits.
        watermark: default fraction of blocks kept free when admitting (0.0 = off).
        async_scheduling: the resolved default for a generative model without speculative
            decoding on the default executor.
        batches_in_flight_async: concurrent batches with async scheduling at PP=1.
        null_blocks: blocks of the pool never handed to requests (the null block).
        max_cache_hit_margin: tokens a prefix-cache hit must leave to compute (hit <=
            num_tokens - margin).
        unhashed_freed_first: freed blocks without a hash are reused before cached ones.
        preempt: which running request is preempted under FCFS ("last": the newest in RUNNING).
    """

    version: str
    long_prefill_token_threshold: int = 0
    long_prefill_cap_when_alone: bool = True
    enable_chunked_prefill: bool = True
    scheduler_reserve_full_isl: bool = True
    watermark: float = 0.0
    async_scheduling: bool = True
    batches_in_flight_async: int = 2
    null_blocks: int = 1
    max_cache_hit_margin: int = 1
    unhashed_freed_first: bool = True
    preempt: str = "last"

    def long_prefill_cap(self, threshold: int, num_requests: int) -> int:
        """The per-request token cap this step (0 = none) for ``threshold`` and
        ``num_requests`` requests queued or running (vLLM 0.26.0 scheduler.py schedule)."""
        if not self.long_prefill_cap_when_alone and num_requests <= 1:
            return 0
        return threshold

    def admission_limit(self, max_num_seqs: int, max_num_active_seqs: int | None = None) -> int:
        """How many requests may be RUNNING (vLLM 0.26.0: ``max_num_seqs``; the active-seqs
        limit does not exist in 0.26.0 and is ignored)."""
        return max_num_seqs

    def batches_in_flight(self, async_scheduling: bool, pipeline_parallel_size: int = 1) -> int:
        """Batches in flight (vLLM 0.26.0 config/vllm.py max_concurrent_batches): 2 with async
        scheduling at PP=1, else PP size (1 without PP)."""
        if async_scheduling and pipeline_parallel_size <= 1:
            return self.batches_in_flight_async
        return max(1, pipeline_parallel_size)

    def sliding_admission_cap_blocks(
        self, sliding_window: int, block_size: int, max_in_flight_tokens: int, max_model_len: int
    ) -> int:
        """Per-request block cap of a sliding-window group at admission (vLLM 0.26.0
        kv_cache_interface.py SlidingWindowSpec.max_admission_blocks_per_request):
        cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1."""
        tokens = min(sliding_window - 1 + max_in_flight_tokens, max_model_len)
        return -(-tokens // block_size) + 1


POLICY = SchedulerPolicy(version="0.26.0")


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/sched/scheduler.py', 'Scheduler.schedule'),
    ('v1/core/kv_cache_manager.py', 'KVCacheManager.allocate_slots'),
    ('v1/engine/core.py', 'EngineCore.step_with_batch_queue'),
    ('config/vllm.py', 'VllmConfig.max_concurrent_batches'),
    ('config/scheduler.py', 'SchedulerConfig.long_prefill_token_threshold'),
    ('config/scheduler.py', 'SchedulerConfig.enable_chunked_prefill'),
)
