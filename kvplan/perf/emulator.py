"""Step-by-step emulation of vLLM's V1 scheduler on kvplan's exact block pool.

Each loop iteration is one engine step: schedule (the version's rules, read from
``rules.scheduler.POLICY``, kvplan/engines/vllm/vX_Y/scheduler.py, which names the vLLM files),
time it with the caller's ``step_time(StepBatch) -> seconds``, then apply its outputs (one token
per request that finished its prompt; a request stops at exactly ``output_tokens``, as with
``ignore_eos``). With async scheduling two batches are in flight: step N+1 is scheduled when step
N-1's output has been processed, before step N's (vLLM v1/engine/core.py
step_with_batch_queue), so finished requests free their seats and blocks one step later and a
new arrival waits for the next scheduling instant.

Not modelled (refused or absent by construction): speculative decoding, pipeline parallelism,
KV connectors, encoder inputs, priority scheduling, LoRA, chunked-local groups. Recurrent-state
groups (Mamba, GDN, short conv: blocks.GroupSpec "state") hold a fixed number of pages per request
from admission to finish; prefix-cache hits are not emulated when a layout has one. Host-side
costs (tokenization, detokenization, HTTP) belong to the step-time model or the client.

Units: seconds (float), tokens and blocks (int).
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from functools import reduce
from math import gcd

from kvplan.engines.vllm import versions
from kvplan.errors import KvplanError
from kvplan.perf import progress
from kvplan.perf.batch import PrefillChunk, StepBatch, StepTime
from kvplan.perf.blocks import _GROUP_BITS, NULL_BLOCK, BlockPool, GroupSpec, content_key
from kvplan.perf.workload import ClosedLoop, OpenLoop, RequestSpec, TraceLoop


@dataclass(frozen=True)
class EngineConfig:
    """The engine the emulator runs: kvplan's pool and vLLM's scheduler flags.

    Attributes:
        num_gpu_blocks: blocks in the pool (kvplan's estimate; vLLM's "num_gpu_blocks").
        block_size: tokens per block (used for the default single full-attention group).
        max_model_len: longest sequence (prompt + output) a request may reach.
        max_num_batched_tokens: the token budget of one step.
        max_num_seqs: most requests RUNNING at once.
        groups: the KV-cache groups (GroupSpec; blocks.groups_from_layout converts kvplan's
            layout); empty = one full-attention group of ``block_size``.
        enable_prefix_caching: ``--enable-prefix-caching`` as resolved by the caller.
        enable_chunked_prefill / long_prefill_token_threshold / async_scheduling / watermark /
        scheduler_reserve_full_isl / max_num_active_seqs: vLLM's flags; None = the version's
            default (its SchedulerPolicy).
        vllm_version: whose scheduling rules apply.
        arrival_latency_s: seconds from a request's send to its entering WAITING (the HTTP and
            API-server path; the step-time coefficients' request_latency_ms); TTFT and E2E
            still count from the send.
        arrival_service_s: seconds the API server spends on each request before passing it on,
            one request at a time in send order (a burst of sends reaches the scheduler spread
            out by this much each); the coefficients' request_serial_ms.
    """

    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    groups: tuple[GroupSpec, ...] = ()
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool | None = None
    long_prefill_token_threshold: int | None = None
    async_scheduling: bool | None = None
    watermark: float | None = None
    scheduler_reserve_full_isl: bool | None = None
    max_num_active_seqs: int | None = None
    vllm_version: str = versions.DEFAULT_VERSION
    arrival_latency_s: float = 0.0
    arrival_service_s: float = 0.0


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request (times in seconds from the start of the run).

    Attributes:
        index: position in the workload's sending order.
        prompt_tokens / output_tokens: its lengths.
        cached_tokens: prefix-cache hit when first scheduled.
        arrival_s: sent. first_scheduled_s: first admitted to RUNNING.
        first_token_s: the step that sampled its first token ended. finish_s: the last one's did.
        token_times_s: end time of the step of every output token (len == output_tokens).
        num_preemptions: times it was preempted (recomputed).
    """

    index: int
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    arrival_s: float
    first_scheduled_s: float
    first_token_s: float
    finish_s: float
    token_times_s: tuple[float, ...]
    num_preemptions: int


@dataclass(frozen=True)
class StepRecord:
    """One engine step.

    Attributes:
        start_s / end_s: when the GPU ran it.
        num_tokens: tokens computed (<= max_num_batched_tokens). num_prefill_tokens: of them in
            prefill chunks. num_decodes: decode requests. num_seqs: requests in the step.
        num_running / num_waiting: queue lengths after scheduling.
        kv_blocks_used: blocks held by requests after scheduling (cached-but-free blocks count
            as free, as vLLM's kv-cache usage does).
        num_preempted: requests preempted while scheduling this step.
    """

    start_s: float
    end_s: float
    num_tokens: int
    num_prefill_tokens: int
    num_decodes: int
    num_seqs: int
    num_running: int
    num_waiting: int
    kv_blocks_used: int
    num_preempted: int


@dataclass(frozen=True)
class SimulationResult:
    """The emulator's answer.

    Attributes:
        config: the engine emulated. requests: per request, in sending order. steps: per step.
        kv_blocks_usable: blocks requests can hold (num_gpu_blocks - the null block).
        approximate: reasons the run is not an exact restatement of vLLM (empty = exact rules).
    """

    config: EngineConfig
    requests: tuple[RequestRecord, ...]
    steps: tuple[StepRecord, ...]
    kv_blocks_usable: int
    approximate: tuple[str, ...] = field(default=())


class _Req:
    __slots__ = (
        "i", "uid", "prompt", "max_tokens", "pgroup", "shared", "arrival", "computed", "outputs",
        "placeholders", "in_flight", "state", "allocated", "blocks", "ncached", "first_sched",
        "times", "preemptions", "cached_tokens",
    )

    def __init__(self, i: int, spec: RequestSpec, arrival: float, ngroups: int):
        self.i = self.uid = i
        self.prompt = spec.prompt_tokens
        self.max_tokens = spec.output_tokens
        self.pgroup = spec.prefix_group
        self.shared = spec.shared_prefix_tokens
        self.arrival = arrival
        self.computed = self.outputs = self.placeholders = self.in_flight = 0
        self.state = 0  # 0 waiting, 1 running, 2 preempted (waiting), 3 finished
        self.allocated = False
        self.blocks = [[] for _ in range(ngroups)]
        self.ncached = [0] * ngroups
        self.first_sched = -1.0
        self.times: list[float] = []
        self.preemptions = 0
        self.cached_tokens = -1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Emulator:
    """One engine; ``run`` feeds it a workload. See the module docstring for the rules.

    Args:
        config: the engine.
        step_time: seconds one StepBatch takes (batch.constant_step_time for tests).
        fast: advance runs of identical decode-only steps in one go (same result as stepping
            them one by one, which ``fast=False`` does; tests compare the two).

    Raises:
        KvplanError: an unknown ``vllm_version``, a group kind not modelled, or flags vLLM would
            refuse (max_num_batched_tokens < max_num_seqs, a threshold above max_model_len).
    """

    def __init__(self, config: EngineConfig, step_time: StepTime, *, fast: bool = True):
        self.fast = fast
        rules = versions.select(config.vllm_version)
        if rules.scheduler is None:
            raise KvplanError(f"--vllm-version: kvplan has no scheduler rules for vLLM {config.vllm_version}")
        pol = rules.scheduler.POLICY
        self.policy = pol
        self.config = config
        self.step_time = step_time
        self.groups = config.groups or (GroupSpec("full", config.block_size),)
        c = config
        for name in ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "num_gpu_blocks"):
            if getattr(c, name) < 1:
                raise KvplanError(f"{name}: must be >= 1, got {getattr(c, name)}")
        if c.max_num_batched_tokens < c.max_num_seqs:
            raise KvplanError(
                f"--max-num-batched-tokens ({c.max_num_batched_tokens}) must be >= --max-num-seqs ({c.max_num_seqs}), as vLLM requires"
            )
        self.chunked = pol.enable_chunked_prefill if c.enable_chunked_prefill is None else c.enable_chunked_prefill
        self.threshold = pol.long_prefill_token_threshold if c.long_prefill_token_threshold is None else c.long_prefill_token_threshold
        if self.threshold > c.max_model_len:
            raise KvplanError("--long-prefill-token-threshold: cannot be greater than --max-model-len")
        self.async_ = pol.async_scheduling if c.async_scheduling is None else c.async_scheduling
        self.reserve_full = pol.scheduler_reserve_full_isl if c.scheduler_reserve_full_isl is None else c.scheduler_reserve_full_isl
        wm = pol.watermark if c.watermark is None else c.watermark
        if not 0.0 <= wm < 1.0:
            raise KvplanError(f"--watermark: must be within [0, 1), got {wm}")
        self.watermark_blocks = int(wm * c.num_gpu_blocks)
        self.limit = pol.admission_limit(c.max_num_seqs, c.max_num_active_seqs)
        self.in_flight_batches = pol.batches_in_flight(self.async_)
        max_in_flight = self.in_flight_batches * c.max_num_batched_tokens
        self.caps = [
            pol.sliding_admission_cap_blocks(g.sliding_window, g.block_size, max_in_flight, c.max_model_len)
            if g.kind == "sliding" else None
            for g in self.groups
        ]
        sizes = [g.block_size for g in self.groups]
        self.align = reduce(lambda a, b: a * b // gcd(a, b), sizes)
        # in-flight tokens only matter to sliding-window frees (counted on processed tokens)
        self.track_in_flight = any(g.kind == "sliding" for g in self.groups)
        self.pool = BlockPool(c.num_gpu_blocks, c.enable_prefix_caching)
        self.caching = c.enable_prefix_caching
        self.approximate: list[str] = []
        if self.caching and any(g.kind == "sliding" for g in self.groups):
            self.approximate.append(
                "prefix-cache hits with sliding-window groups: the window's blocks are required "
                "cached, without vLLM's hybrid hit search"
            )
        if any(g.kind == "state" for g in self.groups):
            # vLLM's mamba_cache_mode "align" (the newer versions' default) caches a recurrent state only at block-aligned
            # checkpoints and a hit must hold in every group; kvplan does not emulate that search
            self.caching = False
            self.approximate.append(
                "hybrid model: prefix-cache hits are not emulated (vLLM keeps a recurrent state only at "
                "block-aligned checkpoints); a recurrent-state group holds its pages per request "
                "from admission to finish (the version's most, kv_spec blocks_per_request)"
            )
        # the fast path's group: the one full-attention group when every other group is a
        # recurrent state (whose pages a decode never changes), else -1 (no fast path)
        kinds = [g.kind for g in self.groups]
        others = [k for k in kinds if k != "state"]
        self._quiet_group = kinds.index("full") if others == ["full"] else -1
        self.running: list[_Req] = []
        self.waiting: deque[_Req] = deque()
        self._preempted_now = 0

    # ------------------------------------------------------------------ blocks
    def _required(self, r: _Req, gi: int, tokens: int, hit: list[int] | None, total_computed: int, cap: bool) -> int:
        g = self.groups[gi]
        if g.kind == "state":  # a fixed number of pages from admission on, whatever the length
            return max(g.pages_per_request - len(r.blocks[gi]), 0)
        need = _cdiv(tokens, g.block_size)
        if cap and self.caps[gi] is not None:
            need = min(need, self.caps[gi])
        held = len(r.blocks[gi])
        if r.allocated:
            return need - held if need > held else 0
        skipped = 0
        if g.kind == "sliding":
            skipped = max(0, total_computed - g.sliding_window + 1) // g.block_size
        hit = hit or []
        new = max(need - max(skipped, len(hit) + held), 0)
        skip_hit = max(0, skipped - held)
        ref = self.pool.ref
        return new + sum(1 for b in hit[skip_hit:] if b != NULL_BLOCK and ref[b] == 0)

    def _remove_skipped(self, r: _Req, processed: int) -> None:
        for gi, g in enumerate(self.groups):
            if g.kind != "sliding":
                continue
            n = min(max(0, processed - g.sliding_window + 1) // g.block_size, len(r.blocks[gi]))
            blocks = r.blocks[gi]
            freed = []
            for j in range(n - 1, -1, -1):
                if blocks[j] == NULL_BLOCK:
                    break
                freed.append(blocks[j])
                blocks[j] = NULL_BLOCK
            if freed:
                self.pool.free(freed)

    def _allocate(self, r: _Req, num_new: int, hits: list[list[int]] | None, hit_tokens: int, admitting: bool) -> bool:
        """vLLM allocate_slots: True when the slots were allocated (and full blocks registered)."""
        pool, groups = self.pool, self.groups
        mml = self.config.max_model_len
        total_computed = min(r.computed + hit_tokens, mml)
        watermark = self.watermark_blocks if admitting and self.running else 0
        if admitting and self.reserve_full:
            full = min(r.prompt + r.outputs, mml)
            need = sum(self._required(r, gi, full, hits[gi] if hits else None, total_computed, True) for gi in range(len(groups)))
            if need + watermark > pool.num_free:
                return False
        slots = min(total_computed + num_new, mml)
        if r.allocated and (len(groups) > 1 or groups[0].kind == "sliding"):
            self._remove_skipped(r, max(0, total_computed - r.in_flight))
        if r.allocated and len(groups) == 1 and groups[0].kind == "full":
            need = _cdiv(slots, groups[0].block_size) - len(r.blocks[0])
            if need < 0:
                need = 0
        else:
            need = sum(self._required(r, gi, slots, hits[gi] if hits else None, total_computed, False) for gi in range(len(groups)))
        if need + watermark > pool.num_free:
            return False
        for gi, g in enumerate(groups):
            blocks = r.blocks[gi]
            if not r.allocated and hits and hits[gi]:
                # the hit row holds the null block where the window skips (sliding groups)
                hit = hits[gi]
                pool.touch(hit)
                blocks.extend(hit)
                r.ncached[gi] = len(blocks)
            more = (g.pages_per_request if g.kind == "state" else _cdiv(slots, g.block_size)) - len(blocks)
            if more > 0:
                blocks.extend(pool.take(more))
        r.allocated = True
        if self.caching:
            self._register(r, min(total_computed + num_new, r.prompt + r.outputs))
        return True

    def _register(self, r: _Req, tokens: int) -> None:
        pool = self.pool
        for gi, g in enumerate(self.groups):
            if g.kind == "state":  # recurrent state pages are not prefix-cached here (see __init__)
                continue
            full = tokens // g.block_size
            start = r.ncached[gi]
            if start >= full:
                continue
            blocks = r.blocks[gi]
            bs = g.block_size
            for j in range(start, min(full, len(blocks))):
                b = blocks[j]
                if b != NULL_BLOCK:
                    pool.register(b, (content_key(r.uid, r.pgroup, r.shared, j, bs) << _GROUP_BITS) | gi)
            r.ncached[gi] = full

    def _lookup(self, r: _Req) -> tuple[list[list[int]] | None, int]:
        """The prefix-cache hit of a waiting request: (blocks per group, tokens) (vLLM
        get_computed_blocks: whole blocks, at most num_tokens - 1 tokens, every group hit)."""
        max_len = r.prompt + r.outputs - self.policy.max_cache_hit_margin
        if max_len <= 0:
            return None, 0
        pool = self.pool
        best = None
        per_group: list[list[int]] = []
        for gi, g in enumerate(self.groups):
            if g.kind != "full":
                per_group.append([])
                continue
            hit = []
            bs = g.block_size
            for j in range(max_len // bs):
                b = pool.lookup((content_key(r.uid, r.pgroup, r.shared, j, bs) << _GROUP_BITS) | gi)
                if b is None:
                    break
                hit.append(b)
            per_group.append(hit)
            length = len(hit) * bs
            best = length if best is None else min(best, length)
        if best is None:  # only sliding groups
            best = (max_len // self.align) * self.align
        best -= best % self.align
        while best > 0:
            ok = True
            for gi, g in enumerate(self.groups):
                if g.kind != "sliding":
                    continue
                bs = g.block_size
                first = max(0, best - g.sliding_window + 1) // bs
                row = []
                for j in range(best // bs):
                    if j < first:
                        row.append(NULL_BLOCK)
                        continue
                    b = pool.lookup((content_key(r.uid, r.pgroup, r.shared, j, bs) << _GROUP_BITS) | gi)
                    if b is None:
                        ok = False
                        break
                    row.append(b)
                if not ok:
                    break
                per_group[gi] = row
            if ok:
                break
            best -= self.align
        if best <= 0:
            return None, 0
        for gi, g in enumerate(self.groups):
            if g.kind == "full":
                del per_group[gi][best // g.block_size:]
            else:
                del per_group[gi][best // g.block_size:]
        return per_group, best

    def _free(self, r: _Req) -> None:
        for blocks in r.blocks:
            self.pool.free(reversed(blocks))
        r.blocks = [[] for _ in self.groups]
        r.ncached = [0] * len(self.groups)
        r.allocated = False

    def _preempt(self, r: _Req) -> None:
        """vLLM _preempt_request: free every block, recompute from scratch, front of WAITING."""
        self._free(r)
        r.state = 2
        r.computed = 0
        r.preemptions += 1
        self.waiting.appendleft(r)
        self._preempted_now += 1

    # ------------------------------------------------------------------ one step
    def _schedule(self, now: float) -> tuple[list[tuple[_Req, int, bool]], StepBatch | None]:
        """vLLM Scheduler.schedule with _update_after_schedule (and AsyncScheduler's
        placeholder for the token in flight): the step's (request, num_new_tokens, samples a
        token) and its StepBatch (None when nothing was scheduled)."""
        budget = self.config.max_num_batched_tokens
        mml = self.config.max_model_len
        running, waiting = self.running, self.waiting
        thr = self.policy.long_prefill_cap(self.threshold, len(running) + len(waiting))
        out: list[tuple[_Req, int, bool]] = []
        prefills: list[PrefillChunk] = []
        nd = ctx = mx = 0
        self._preempted_now = 0
        single_full = len(self.groups) == 1 and self.groups[0].kind == "full"
        bs0 = self.groups[0].block_size
        caching = self.caching
        async_ = self.async_
        track = self.track_in_flight
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            comp = r.computed
            ph = r.placeholders
            if ph > 0 and comp + 2 - ph >= r.prompt + r.max_tokens:
                i += 1
                continue
            known = r.prompt + r.outputs
            n = known + ph - comp
            if 0 < thr < n:
                n = thr
            if n > budget:
                n = budget
            if n > mml - comp - 1:
                n = mml - comp - 1
            if n <= 0:
                i += 1
                continue
            if single_full and comp + n <= len(r.blocks[0]) * bs0:
                # the new tokens fit the blocks held: allocate_slots takes no block
                if caching:
                    tok = comp + n if comp + n < known else known
                    if tok // bs0 > r.ncached[0]:
                        self._register(r, tok)
            else:
                while True:
                    ok = self._allocate(r, n, None, 0, False)
                    if ok:
                        break
                    victim = running.pop()
                    self._preempt(victim)
                    if victim is r:
                        break
                if not ok:
                    break
            comp += n
            r.computed = comp
            if track:
                r.in_flight += n
            samples = comp >= known + ph
            if samples and async_:
                r.placeholders = ph + 1
            if n == 1 and comp > r.prompt:
                nd += 1
                ctx += comp
                if comp > mx:
                    mx = comp
            else:
                prefills.append(PrefillChunk(n, comp - n))
            out.append((r, n, samples))
            budget -= n
            i += 1
        if not self._preempted_now:
            while waiting and budget > 0:
                if len(running) >= self.limit:
                    break
                r = waiting[0]
                hits, hit = (None, 0)
                if caching:
                    hits, hit = self._lookup(r)
                known = r.prompt + r.outputs
                n = known - hit
                if 0 < thr < n:
                    n = thr
                if not self.chunked and n > budget:
                    break
                if n > budget:
                    n = budget
                if not self._allocate(r, n, hits, hit, True):
                    break
                waiting.popleft()
                running.append(r)
                if r.first_sched < 0:
                    r.first_sched = now
                    r.cached_tokens = hit
                r.state = 1
                r.computed = hit + n
                if track:
                    r.in_flight += n
                samples = hit + n >= known
                if samples and async_:
                    r.placeholders += 1
                prefills.append(PrefillChunk(n, hit))
                out.append((r, n, samples))
                budget -= n
        if not out:
            return out, None
        return out, StepBatch(tuple(prefills), nd, ctx, mx)

    def _apply(self, scheduled: list[tuple[_Req, int, bool]], end: float) -> list[_Req]:
        """vLLM update_from_output: tokens sampled, requests finished (freed); returns them."""
        done = []
        mml = self.config.max_model_len
        async_ = self.async_
        track = self.track_in_flight
        for r, n, samples in scheduled:
            if track:
                r.in_flight -= n
            if samples and r.state != 3:
                o = r.outputs + 1
                r.outputs = o
                if async_:
                    r.placeholders -= 1
                r.times.append(end)
                if o >= r.max_tokens or r.prompt + o >= mml:
                    done.append(r)
        if done:
            gone = set()
            for r in done:
                if r.state == 2:
                    self.waiting.remove(r)
                else:
                    gone.add(id(r))
                r.state = 3
                self._free(r)
            if gone:
                self.running = [r for r in self.running if id(r) not in gone]
        return done

    # ------------------------------------------------------------------ quiet runs
    def _quiet(self, t: float, gpu_free: float, queue: deque, next_arrival: float, steps: list) -> tuple[float, float] | None:
        """Advance k >= 2 steps at once when they are bound to be identical decode-only steps
        (every running request decodes one token, none finishes, nobody can be admitted, no
        arrival is seen, the blocks they take are free): exactly what k exact steps would do,
        with per-request work once per run. Returns the new (t, gpu_free) or None."""
        groups = self.groups
        fi = self._quiet_group
        if fi < 0:
            return None
        running = self.running
        d = len(running)
        if self.waiting and d < self.limit:
            return None
        async_ = self.async_
        if async_:
            if len(queue) != 1 or len(queue[0][0]) != d:
                return None
        elif queue:
            return None
        bs = groups[fi].block_size
        mml = self.config.max_model_len
        k = 1 << 60
        sum_c = max_c = 0
        cnt = [0] * bs
        for r in running:
            c = r.computed
            known = r.prompt + r.outputs
            if async_:
                if r.placeholders != 1 or c != known:
                    return None
            elif c != known - 1:
                return None
            if len(r.blocks[fi]) != -(-c // bs):
                return None
            left = r.max_tokens - r.outputs - 1
            if mml - known - 1 < left:
                left = mml - known - 1
            if left < k:
                k = left
            if k < 2:
                return None
            sum_c += c
            if c > max_c:
                max_c = c
            cnt[(-c) % bs] += 1
        pool = self.pool
        free = pool.num_free
        used = pool.num_usable - free
        wait = len(self.waiting)
        step_time = self.step_time
        ends: list[float] = []
        if async_:
            ends.append(queue[0][1])
        sched_t = t
        m = 0
        while m < k:
            if m and next_arrival <= sched_t:
                break
            new = cnt[m % bs]
            if new > free:
                break
            free -= new
            used += new
            start = sched_t if sched_t > gpu_free else gpu_free
            end = start + step_time(StepBatch((), d, sum_c + d * (m + 1), max_c + m + 1))
            gpu_free = end
            steps.append(StepRecord(start, end, d, 0, d, d, d, wait, used, 0))
            ends.append(end)
            sched_t = ends[m] if async_ else end
            m += 1
        if m < 2:
            if m:  # undo the one step taken: let the exact path run it
                steps.pop()
            return None
        caching = self.caching
        got = ends[:m]
        for r in running:
            c = r.computed + m
            more = -(-c // bs) - len(r.blocks[fi])
            if more > 0:
                r.blocks[fi].extend(pool.take(more))
            r.computed = c
            r.outputs += m
            r.times.extend(got)
            if caching:
                self._register(r, c - 1 if async_ else c)
        if async_:
            queue[0] = ([(r, 1, True) for r in running], ends[m])
            return ends[m - 1], gpu_free
        return ends[m - 1], gpu_free


    # ------------------------------------------------------------------ the run
    def run(self, workload: OpenLoop | ClosedLoop | TraceLoop) -> SimulationResult:
        """Emulate ``workload`` to the last request's last token.

        Raises:
            KvplanError: a request longer than max_model_len, or one whose blocks cannot fit the
                pool even alone (vLLM would refuse it).
        """
        c = self.config
        specs = list(workload.requests)
        for k, s in enumerate(specs):
            if s.prompt_tokens + s.output_tokens > c.max_model_len:
                raise KvplanError(
                    f"workload: request {k} needs {s.prompt_tokens}+{s.output_tokens} tokens, above --max-model-len {c.max_model_len}"
                )
        longest = max(s.prompt_tokens + s.output_tokens for s in specs)
        need = sum(
            min(_cdiv(longest, g.block_size), cap) if cap else _cdiv(longest, g.block_size)
            for g, cap in zip(self.groups, self.caps)
        )
        if need > self.pool.num_usable:
            raise KvplanError(
                f"workload: a {longest}-token request needs {need} KV blocks; the pool has {self.pool.num_usable}"
            )
        ng = len(self.groups)
        arrivals: list[tuple[float, int]] = []
        closed = isinstance(workload, ClosedLoop)
        lat, svc = c.arrival_latency_s, c.arrival_service_s
        if not (lat >= 0 and svc >= 0):
            raise KvplanError(f"arrival_latency_s / arrival_service_s: must be >= 0 s, got {lat}, {svc}")
        if closed:
            sent = min(workload.concurrency, len(specs))
            send_s = [0.0] * sent
        else:
            send_s = list(workload.arrival_times())
            sent = len(specs)
        front_free = 0.0  # the API server takes requests one at a time, ``svc`` each, in send order

        def enters(at: float) -> float:
            nonlocal front_free
            done = (at if at > front_free else front_free) + svc
            front_free = done
            return done + lat

        # (time the request enters WAITING, index); send_s keeps the client's send time
        order = sorted(range(len(send_s)), key=lambda k: send_s[k])
        arrivals = [(enters(send_s[k]), k) for k in order]
        heapq.heapify(arrivals)
        reqs: list[_Req | None] = [None] * len(specs)
        steps: list[StepRecord] = []
        queue: deque[tuple[list, float]] = deque()
        t = 0.0
        gpu_free = 0.0
        finished = 0
        depth = self.in_flight_batches
        usable = self.pool.num_usable
        tick = progress.tracker(_describe(workload), len(specs))  # None unless a terminal bar is on
        while finished < len(specs):
            while arrivals and arrivals[0][0] <= t:
                _, k = heapq.heappop(arrivals)
                r = _Req(k, specs[k], send_s[k], ng)
                reqs[k] = r
                self.waiting.append(r)
            if self.fast and self.running:
                moved = self._quiet(t, gpu_free, queue, arrivals[0][0] if arrivals else float("inf"), steps)
                if moved is not None:
                    t, gpu_free = moved
                    continue
            if self.running or self.waiting:
                scheduled, batch = self._schedule(t)
                end = start = max(t, gpu_free)
                if batch is not None:
                    end = start + self.step_time(batch)
                    gpu_free = end
                    steps.append(StepRecord(
                        start, end, batch.num_tokens, batch.num_prefill_tokens, batch.num_decodes,
                        batch.num_seqs, len(self.running), len(self.waiting),
                        usable - self.pool.num_free, self._preempted_now,
                    ))
                elif not queue and not self.running:
                    raise KvplanError("workload: a waiting request can never be scheduled (internal check)")
                queue.append((scheduled, end))
                if len(queue) < depth:
                    continue
            elif not queue:
                if not arrivals:
                    break
                t = arrivals[0][0]
                continue
            scheduled, end = queue.popleft()
            if end > t:
                t = end
            for r in self._apply(scheduled, end):
                finished += 1
                if closed and sent < len(specs):
                    heapq.heappush(arrivals, (enters(end), sent))
                    send_s.append(end)
                    sent += 1
            if tick is not None:
                tick(finished)
        records = tuple(
            RequestRecord(
                r.i, r.prompt, r.max_tokens, max(r.cached_tokens, 0), r.arrival, r.first_sched,
                r.times[0], r.times[-1], tuple(r.times), r.preemptions,
            )
            for r in reqs if r is not None
        )
        return SimulationResult(c, records, tuple(steps), usable, tuple(self.approximate))


def _describe(workload) -> str:
    """The progress bar's line for one run."""
    if isinstance(workload, ClosedLoop):
        return f"emulating a closed loop at concurrency {workload.concurrency}"
    if isinstance(workload, OpenLoop):
        return f"emulating an open loop at {workload.request_rate:.3g} req/s"
    return "emulating a trace"


def simulate(config: EngineConfig, step_time: StepTime, workload: OpenLoop | ClosedLoop | TraceLoop, *, fast: bool = True) -> SimulationResult:
    """Emulate vLLM serving ``workload`` on ``config`` with ``step_time`` (see Emulator)."""
    return Emulator(config, step_time, fast=fast).run(workload)
