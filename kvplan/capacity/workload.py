"""Workload-aware KV capacity: how many sequences vLLM keeps running for real lengths.

vLLM sizes its log line "Maximum concurrency for N tokens per request" as if every request were
``max_model_len`` long. PagedAttention allocates blocks as tokens arrive, so with real lengths the
same pool holds many more sequences. This module counts the blocks a workload actually holds,
group by group, with vLLM's rules:

* Blocks held by one sequence with ``L`` tokens in KV (vLLM
  v1/core/single_type_kv_cache_manager.py):
    - full attention / MLA: ``cdiv(L, block_size)`` (the last block may be partly filled);
    - sliding window ``W``: ``cdiv(L, block_size) - max(0, L - W) // block_size`` - blocks wholly
      before the window are freed (SlidingWindowManager.get_num_skipped_tokens with
      ``num_computed_tokens = L - 1``; at most ``cdiv(W, block_size) + 1``);
    - chunked local attention ``C``: blocks before the current chunk are freed
      (ChunkedLocalAttentionManager.get_num_skipped_tokens);
    - Mamba / linear attention: one state block per sequence (MambaManager, mamba_cache_mode
      "none", the default).
  Every KV-cache group takes its blocks from the one shared pool of ``num_gpu_blocks``
  (v1/core/kv_cache_coordinator.py), so a sequence's blocks are summed over groups.
* Token count over a request's life: producing output token ``k`` (k = 1..O) needs the KV of
  ``P + k - 1`` tokens; the request stops when output token ``O`` is sampled, so it never holds
  ``P + O`` (v1/core/sched/scheduler.py: no extra step once ``max_tokens`` is reached).
* Prefix caching (v1/core/kv_cache_utils.py get_request_block_hasher "We only hash full blocks";
  v1/core/kv_cache_manager.py get_computed_blocks: a hit covers at most ``P - 1`` tokens): a
  prefix shared by requests is shared in whole blocks only, ``floor(min(N, P - 1) / block_size)``
  of them; its partly filled last block is private to every request. With ``n`` parallel
  sequences (or beam width) per request, vLLM runs ``n`` child requests that hit the same
  cache: the prompt's whole blocks are held once, every branch holds its own partial prompt block
  and its output blocks. vLLM enables prefix caching by default except for hybrid
  (Mamba/linear-attention) models (engine/arg_utils.py
  _set_default_chunked_prefill_and_prefix_caching_args).

Two views of the running population are reported:

* steady state (the expected number): with continuous batching a running sequence is at a random
  step of its decode, a request with ``O`` output tokens being in the batch for ``O`` steps
  (Little's law). Blocks per running sequence are the step-weighted mean over every step of every
  request;
* at completion: every running sequence at its last step (``P + O - 1`` tokens) - the count that
  never needs preemption.

Units: tokens, blocks (int counts; means are floats), bytes (int).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from kvplan.capacity.workload_input import (  # noqa: F401 (re-exported: importers of kvplan.capacity.workload)
    _TOKEN_EXAMPLES,
    DISTRIBUTION_POINTS,
    MAX_TOKENS,
    MAX_WORKLOAD_BYTES,
    MAX_WORKLOAD_ROWS,
    Workload,
    _BadTokens,
    _bounded_lines,
    _lognormal_points,
    _number,
    _pair_from,
    _too_many_rows,
    load_pairs_file,
    parse_distribution,
    parse_tokens,
    parse_workload,
)
from kvplan.engines.vllm import versions
from kvplan.errors import KvplanError

# The layer-cache classes (full, sliding, chunked, MLA, Mamba) own the per-kind block rules.
_KV = versions.default().kv_spec
CACHE_KINDS, SlidingWindowSpec, ChunkedLocalAttentionSpec = _KV.CACHE_KINDS, _KV.SlidingWindowSpec, _KV.ChunkedLocalAttentionSpec
# Kinds whose per-sequence blocks stop growing with length (a window, a chunk, a state): the
# layer-cache classes say so (bounded_per_sequence); the names are kept for importers.
STATE_KINDS = tuple(k for k, c in CACHE_KINDS.items() if c.bounded_per_sequence)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)

# --------------------------------------------------------------------------------------------
# Per-group block accounting
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupRule:
    """The block rule of one KV-cache group (a hashable view of allocator.KVCacheGroup).

    Attributes:
        kind: "full" | "mla" | "sliding" | "chunked" | "mamba" (a "mixed" one-group layout is
            counted as full attention).
        block_size: tokens per block.
        sliding_window / chunk_size: tokens (for "sliding" / "chunked").
    """

    kind: str
    block_size: int
    sliding_window: int | None = None
    chunk_size: int | None = None

    @property
    def cache(self):
        """The layer-cache class of this kind (the version's kv_spec.CACHE_KINDS)."""
        return CACHE_KINDS[self.kind]

    def skipped_blocks(self, tokens: int) -> int:
        """Blocks freed before the window/chunk when ``tokens`` have KV (``tokens - 1`` computed).

        vLLM single_type_kv_cache_manager.py get_num_skipped_tokens // block_size (the class's rule)."""
        return self.cache.skipped_blocks(tokens, self.block_size, self.sliding_window, self.chunk_size)

    def next_change(self, tokens: int) -> int:
        """The smallest token count > ``tokens`` where the held blocks may change."""
        return self.cache.next_change(tokens, self.block_size, self.sliding_window, self.chunk_size)


@dataclass(frozen=True)
class SequenceBlocks:
    """Mean blocks one running sequence holds, summed over KV-cache groups (block ids).

    Attributes:
        global_shared: blocks of the shared prefix, held once in the whole pool.
        per_sequence: blocks each sequence adds (private blocks + its 1/n share of its request's
            prompt blocks).
        real_per_sequence: of those, block-equivalents filled with tokens (private tokens /
            block_size + whole shared blocks); the rest is the partly filled tail.
        state_per_sequence: the part of per_sequence in sliding-window/chunked/Mamba groups.
    """

    global_shared: float
    per_sequence: float
    real_per_sequence: float
    state_per_sequence: float


def _shared_ends(rule: GroupRule, prompt: int, prefix_tokens: int, n: int, caching: bool) -> tuple[int, int]:
    """(end of globally shared prefix blocks, end of the request's shared prompt blocks)."""
    if not caching or rule.cache.one_state_block:
        return 0, 0
    bs = rule.block_size
    s_n = min(prefix_tokens, prompt - 1) // bs if prefix_tokens > 0 else 0
    s_p = (prompt - 1) // bs if n > 1 else s_n
    return s_n, max(s_p, s_n)


def _held(rule: GroupRule, tokens: int, s_n: int, s_p: int) -> tuple[int, int, int, int]:
    """(global-shared, request-shared, private blocks, private tokens) at ``tokens`` tokens."""
    if rule.cache.one_state_block:
        return 0, 0, 1, rule.block_size
    bs = rule.block_size
    total = _cdiv(tokens, bs)
    skip = rule.skipped_blocks(tokens)
    a = max(0, min(s_n, total) - skip)
    b = max(0, min(s_p, total) - max(s_n, skip))
    c = total - skip - a - b  # = total - max(skip, s_p): the sequence's own blocks
    private_tokens = tokens - max(skip, s_p) * bs
    return a, b, c, private_tokens


def _sum_cdiv(m: int, bs: int) -> int:
    """sum_{L=1..m} cdiv(L, bs) (0 for m <= 0)."""
    if m <= 0:
        return 0
    q, r = divmod(m, bs)
    return bs * q * (q + 1) // 2 + r * (q + 1)


def _sum_floor(m: int, bs: int) -> int:
    """sum_{k=1..m} floor(k / bs) (0 for m <= 0)."""
    if m <= 0:
        return 0
    q, r = divmod(m, bs)
    return bs * q * (q - 1) // 2 + q * (r + 1)


def _sum_range(rule: GroupRule, lo: int, hi: int, s_n: int, s_p: int) -> tuple[int, int, int, int, int]:
    """Sums over token counts L = lo..hi of _held(L): (max a, sum b, sum c, sum private tokens,
    steps). Full attention and sliding windows in closed form; chunked local attention by
    constant segments.

    With skip(L) the freed blocks and M(s) = sum max(skip(L), s): sum c = sum cdiv(L, bs) - M(s_p),
    sum b = M(s_p) - M(s_n), sum private tokens = sum L - bs * M(s_p), max a = s_n - skip(lo)."""
    steps = hi - lo + 1
    if rule.cache.one_state_block:
        return 0, 0, steps, steps * rule.block_size, steps
    bs = rule.block_size
    total_sum = _sum_cdiv(hi, bs) - _sum_cdiv(lo - 1, bs)
    l_sum = (lo + hi) * steps // 2
    if issubclass(rule.cache, SlidingWindowSpec) and rule.sliding_window:
        w = rule.sliding_window

        def skip_sum(a: int, b: int) -> int:  # sum_{L=a..b} floor(max(0, L - w) / bs)
            return _sum_floor(b - w, bs) - _sum_floor(a - 1 - w, bs) if b >= a else 0

        def m_sum(s_: int) -> int:  # sum_{L=lo..hi} max(skip(L), s_); skip(L) >= s_ iff L >= w + s_*bs
            below_end = min(hi, w + s_ * bs - 1)
            extra = (below_end - lo + 1) * s_ - skip_sum(lo, below_end) if below_end >= lo else 0
            return skip_sum(lo, hi) + extra

        m_p, m_n = m_sum(s_p), m_sum(s_n)
        a_max = max(0, s_n - rule.skipped_blocks(lo))
        return a_max, m_p - m_n, total_sum - m_p, l_sum - bs * m_p, steps
    if not issubclass(rule.cache, ChunkedLocalAttentionSpec) or not rule.chunk_size:
        return s_n, (s_p - s_n) * steps, total_sum - steps * s_p, l_sum - steps * s_p * bs, steps
    a_max = b_sum = c_sum = tok_sum = 0
    L = lo
    while L <= hi:
        nxt = min(rule.next_change(L), hi + 1)
        seg = nxt - L
        a, b, c, _ = _held(rule, L, s_n, s_p)
        a_max = max(a_max, a)
        b_sum += b * seg
        c_sum += c * seg
        start = max(rule.skipped_blocks(L), s_p) * bs  # first token of the private blocks
        tok_sum += (L + nxt - 1) * seg // 2 - start * seg
        L = nxt
    return a_max, b_sum, c_sum, tok_sum, steps


@dataclass(frozen=True)
class Sharing:
    """How requests share blocks.

    Attributes:
        enable_prefix_caching: vLLM's --enable-prefix-caching (resolved: True/False).
        shared_prefix_tokens: tokens at the start of every prompt that are identical (a system
            prompt); included in each request's prompt_tokens.
        n: sequences per request (parallel sampling ``n`` or beam width); 1 = none.
    """

    enable_prefix_caching: bool = True
    shared_prefix_tokens: int = 0
    n: int = 1


def sequence_blocks(
    rules: tuple[GroupRule, ...],
    workload: Workload,
    sharing: Sharing,
    max_model_len: int,
    *,
    at_completion: bool = False,
) -> SequenceBlocks:
    """Mean blocks per running sequence for ``workload`` under ``rules`` (one per KV-cache group).

    Steady state (default): step-weighted mean over every step of every request (a request with
    output O is running for O steps, holding the KV of P, P+1, ..., P+O-1 tokens). At completion:
    the request mean at P + O - 1 tokens. Requests with P + O > max_model_len are left out (vLLM
    rejects them); see ``excluded_weight``.

    Raises:
        KvplanError: every request is longer than max_model_len, or a prompt is shorter than the
            shared prefix (names --workload / --shared-prefix-tokens).
    """
    n = sharing.n
    counted = Counter(rules)  # identical groups (e.g. a sliding type split over several groups)
    uniq = list(counted)
    glob = [0] * len(uniq)  # per group: the most shared-prefix blocks any running sequence holds
    per = real = state = 0.0
    denom = 0.0
    any_kept = False
    for prompt, output, w in workload.pairs:
        if prompt + output > max_model_len:
            continue
        if sharing.shared_prefix_tokens > prompt:
            raise KvplanError(
                f"--shared-prefix-tokens {sharing.shared_prefix_tokens}: longer than a {prompt}-token prompt of the workload",
                hint="prompt_tokens include the shared prefix; lower --shared-prefix-tokens",
            )
        any_kept = True
        lo = prompt if not at_completion else prompt + output - 1
        hi = prompt + output - 1
        for j, rule in enumerate(uniq):
            k = counted[rule]
            s_n, s_p = _shared_ends(rule, prompt, sharing.shared_prefix_tokens, n, sharing.enable_prefix_caching)
            a_max, b_sum, c_sum, tok_sum, _ = _sum_range(rule, lo, hi, s_n, s_p)
            glob[j] = max(glob[j], a_max)
            seq_blocks = k * (b_sum / n + c_sum)
            per += w * seq_blocks
            real += w * k * (b_sum / n + tok_sum / rule.block_size)
            if rule.cache.bounded_per_sequence:
                state += w * seq_blocks
        denom += w * (hi - lo + 1)
    if not any_kept:
        raise KvplanError(
            f"--workload: every request has prompt + output tokens > --max-model-len {max_model_len}",
            hint="raise --max-model-len or check the workload's lengths",
        )
    return SequenceBlocks(global_shared=float(sum(g * counted[r] for g, r in zip(glob, uniq))), per_sequence=per / denom, real_per_sequence=real / denom, state_per_sequence=state / denom)


def excluded_weight(workload: Workload, max_model_len: int) -> float:
    """Fraction (0..1) of requests with prompt + output > max_model_len (vLLM rejects them)."""
    bad = sum(w for p, o, w in workload.pairs if p + o > max_model_len)
    return bad / workload.total_weight


def workload_summary(workload: Workload, max_model_len: int) -> dict:
    """What the workload report states about the requests it counts: the lengths of those with
    prompt + output <= ``max_model_len`` tokens (the others vLLM refuses; Workload.within) and how
    many were left out, and why.

    Returns:
        {"description", "mean_prompt_tokens", "mean_output_tokens", "p95_prompt_tokens",
        "p95_output_tokens" (tokens, over the counted requests), "requests_counted",
        "requests_left_out" (request counts for a file; None for a MEAN,P95 distribution),
        "fraction_left_out" (0..1), "left_out_reason" (None when nothing is left out)}.
    Raises:
        KvplanError: every request is longer than max_model_len (names --workload).
    """
    kept, left = workload.within(max_model_len)
    if kept is None:
        raise KvplanError(
            f"--workload: every request has prompt + output tokens > --max-model-len {max_model_len}",
            hint="raise --max-model-len or check the workload's lengths",
        )
    counts = workload.weights_are_requests
    return {
        "description": workload.description,
        "mean_prompt_tokens": round(kept.mean_prompt_tokens, 2),
        "mean_output_tokens": round(kept.mean_output_tokens, 2),
        "p95_prompt_tokens": kept.percentile("prompt", 0.95),
        "p95_output_tokens": kept.percentile("output", 0.95),
        "requests_counted": round(kept.total_weight) if counts else None,
        "requests_left_out": round(left) if counts else None,
        "fraction_left_out": round(left / workload.total_weight, 4),
        "left_out_reason": (
            f"prompt + output tokens > --max-model-len {max_model_len}: vLLM refuses these requests" if left else None
        ),
    }


def rules_of(layout) -> tuple[GroupRule, ...]:
    """GroupRules of an allocator.KVCacheLayout (the mixed one-group layout counts as one group
    of its kind: vLLM gives it one block table)."""
    return tuple(
        GroupRule(kind=g.kind, block_size=g.block_size, sliding_window=g.sliding_window, chunk_size=g.chunk_size)
        for g in layout.groups
    )


def tokens_per_sequence_life(workload: Workload, sharing: Sharing, block_size: int, max_model_len: int) -> tuple[float, float]:
    """(mean tokens computed per sequence over its life, mean steps it runs), requests longer than
    max_model_len left out. Prompt tokens hit in the prefix cache (whole blocks) are not computed;
    a request's prompt is computed once for its ``n`` sequences when prefix caching is on."""
    tok = steps = 0.0
    for prompt, output, w in workload.pairs:
        if prompt + output > max_model_len:
            continue
        if sharing.enable_prefix_caching:
            s_n = min(sharing.shared_prefix_tokens, prompt - 1) // block_size if sharing.shared_prefix_tokens else 0
            s_p = (prompt - 1) // block_size
            first = prompt - s_n * block_size
            others = (sharing.n - 1) * (prompt - s_p * block_size)
        else:
            first, others = prompt, (sharing.n - 1) * prompt
        tok += w * ((first + others) / sharing.n + output - 1)
        steps += w * output
    return tok, steps


# --------------------------------------------------------------------------------------------
# Capacity of a plan for a workload
# --------------------------------------------------------------------------------------------

LIMIT_NAMES = {
    "kv_cache": "KV-cache blocks",
    "kv_state": "sliding-window/Mamba state blocks",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
}


@dataclass(frozen=True)
class FlagChange:
    """A flag change that raises the binding limit, with the capacity it gives (re-planned).

    Attributes:
        flag / value: the `vllm serve` flag and its new value.
        sequences: running sequences after the change (steady state).
        gain: sequences gained.
        binding_after: the limit that binds after the change.
        note: one line of why.
    """

    flag: str
    value: object
    sequences: float
    gain: float
    binding_after: str
    note: str


@dataclass(frozen=True)
class WorkloadCapacity:
    """What one vLLM engine (a Plan) sustains for a workload.

    Attributes:
        num_gpu_blocks: the pool (blocks).
        blocks: steady-state SequenceBlocks; blocks_at_completion: the same at the last step.
        kv_sequences: sequences the pool holds in steady state (num_gpu_blocks - shared) / per seq.
        kv_sequences_at_completion: the same with every sequence at its last step.
        mbt_sequences: sequences the per-step token budget sustains
            (max_num_batched_tokens x mean steps / mean tokens computed per sequence life).
        max_num_seqs: the scheduler's cap.
        sequences: min of the three (steady state); requests = sequences / n.
        binding: "kv_cache" | "kv_state" | "max_num_seqs" | "max_num_batched_tokens".
        static_blocks_per_sequence: blocks a max_model_len sequence reserves (vLLM's own
            "Maximum concurrency" assumption); static_sequences = floor(num_gpu_blocks / that).
        paged_utilization / static_utilization: fraction (0..1) of the KV memory each scheme
            claims that holds tokens.
        excluded_fraction: requests longer than max_model_len, left out.
        changes: flag changes that raise the binding limit (filled by capacity_with_fixes).
    """

    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    sharing: Sharing
    blocks: SequenceBlocks
    blocks_at_completion: SequenceBlocks
    kv_sequences: float
    kv_sequences_at_completion: float
    mbt_sequences: float
    max_num_seqs: int
    max_num_batched_tokens: int
    sequences: float
    binding: str
    static_blocks_per_sequence: int
    static_sequences: int
    paged_utilization: float
    static_utilization: float
    excluded_fraction: float
    changes: tuple[FlagChange, ...] = field(default=())

    @property
    def requests(self) -> float:
        """Concurrent requests (sequences / n)."""
        return self.sequences / self.sharing.n

    @property
    def static_requests(self) -> float:
        return self.static_sequences / self.sharing.n

    def to_dict(self) -> dict:
        """JSON-ready (counts rounded to 2 decimals; bytes and blocks stay ints)."""
        r2 = lambda x: round(float(x), 2)  # noqa: E731
        return {
            "num_gpu_blocks": self.num_gpu_blocks,
            "block_size": self.block_size,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.sharing.enable_prefix_caching,
            "shared_prefix_tokens": self.sharing.shared_prefix_tokens,
            "n": self.sharing.n,
            "paged": {
                "sequences": r2(self.sequences),
                "requests": r2(self.requests),
                "kv_sequences_steady_state": r2(self.kv_sequences),
                "kv_sequences_at_completion": r2(self.kv_sequences_at_completion),
                "blocks_per_sequence_steady_state": round(self.blocks.per_sequence, 3),
                "blocks_per_sequence_at_completion": round(self.blocks_at_completion.per_sequence, 3),
                "shared_prefix_blocks": r2(self.blocks.global_shared),
                "state_blocks_per_sequence": round(self.blocks.state_per_sequence, 3),
                "utilization": round(self.paged_utilization, 4),
            },
            "static": {
                "blocks_per_sequence": self.static_blocks_per_sequence,
                "sequences": self.static_sequences,
                "requests": r2(self.static_requests),
                "utilization": round(self.static_utilization, 4),
            },
            "limits": {
                "kv_cache": r2(self.kv_sequences),
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": r2(self.mbt_sequences),
            },
            "binding_limit": self.binding,
            "excluded_fraction": round(self.excluded_fraction, 4),
            "flag_changes": [
                {
                    "flag": c.flag,
                    "value": c.value,
                    "sequences": r2(c.sequences),
                    "gain": r2(c.gain),
                    "binding_after": c.binding_after,
                    "note": c.note,
                }
                for c in self.changes
            ],
        }


class WorkloadModel:
    """A workload plus its sharing options, with the per-layout block counts memoized (the
    reverse planner asks for the same KV-cache grouping many times).

    Args:
        workload: the request lengths.
        sharing: prefix caching / shared prefix / n. ``enable_prefix_caching=None`` in
            ``capacity`` means vLLM's default for the model (on unless hybrid).
    """

    def __init__(self, workload: Workload, *, shared_prefix_tokens: int = 0, n: int = 1, enable_prefix_caching: bool | None = None):
        if n < 1:
            raise KvplanError(f"--n: must be >= 1, got {n}")
        if shared_prefix_tokens < 0:
            raise KvplanError(f"--shared-prefix-tokens: must be >= 0, got {shared_prefix_tokens}")
        self.workload = workload
        self.shared_prefix_tokens = shared_prefix_tokens
        self.n = n
        self.enable_prefix_caching = enable_prefix_caching
        self._cache: dict = {}

    def sharing_for(self, plan) -> Sharing:
        """Resolved sharing for a plan (vLLM's default: prefix caching on unless hybrid)."""
        caching = self.enable_prefix_caching
        if caching is None:
            caching = plan.args.enable_prefix_caching
        if caching is None:
            caching = not plan.spec.is_hybrid
        return Sharing(enable_prefix_caching=bool(caching), shared_prefix_tokens=self.shared_prefix_tokens, n=self.n)

    def _blocks(self, rules, sharing, mml, at_completion):
        key = (rules, sharing, mml, at_completion)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = sequence_blocks(rules, self.workload, sharing, mml, at_completion=at_completion)
        return hit

    def _excluded(self, mml: int) -> float:
        key = ("excluded", mml)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = excluded_weight(self.workload, mml)
        return hit

    def capacity(self, plan) -> WorkloadCapacity:
        """Capacity of one engine (``plan``) for this workload (see WorkloadCapacity).

        Raises:
            KvplanError: as sequence_blocks.
        """
        layout = plan.layout
        rules = rules_of(layout)
        mml = max(int(plan.effective["max_model_len"]), 1)
        sharing = self.sharing_for(plan)
        steady = self._blocks(rules, sharing, mml, False)
        final = self._blocks(rules, sharing, mml, True)
        nb = plan.num_gpu_blocks if plan.fits else 0
        kv = max(nb - steady.global_shared, 0) / steady.per_sequence if steady.per_sequence else 0.0
        kv_final = max(nb - final.global_shared, 0) / final.per_sequence if final.per_sequence else 0.0
        key = ("life", sharing, plan.block_size, mml)
        life = self._cache.get(key)
        if life is None:
            life = self._cache[key] = tokens_per_sequence_life(self.workload, sharing, plan.block_size, mml)
        tok, steps = life
        mbt = int(plan.effective["max_num_batched_tokens"])
        seqs_cap = int(plan.effective["max_num_seqs"])
        mbt_seqs = mbt * steps / tok if tok else float("inf")
        limits = {"kv_cache": kv, "max_num_seqs": float(seqs_cap), "max_num_batched_tokens": mbt_seqs}
        binding = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
        if binding == "kv_cache" and steady.per_sequence and steady.state_per_sequence / steady.per_sequence > 0.5:
            binding = "kv_state"
        sequences = min(limits.values())
        static_per = layout.blocks_per_request(mml, plan.max_in_flight_tokens) if layout.groups else 1
        static_seqs = nb // static_per if static_per else 0
        # Utilization: tokens / claimed memory. Paged: the held blocks (shared prefix once).
        n_run = max(min(sequences, kv), 0.0)
        held = steady.global_shared + n_run * steady.per_sequence
        filled = steady.global_shared + n_run * steady.real_per_sequence
        paged_util = filled / held if held else 0.0
        nosharing = self._blocks(rules, Sharing(False, 0, 1), mml, False)
        static_util = nosharing.real_per_sequence / static_per if static_per else 0.0
        return WorkloadCapacity(
            num_gpu_blocks=nb,
            block_size=plan.block_size,
            max_model_len=mml,
            sharing=sharing,
            blocks=steady,
            blocks_at_completion=final,
            kv_sequences=kv,
            kv_sequences_at_completion=kv_final,
            mbt_sequences=mbt_seqs,
            max_num_seqs=seqs_cap,
            max_num_batched_tokens=mbt,
            sequences=sequences,
            binding=binding,
            static_blocks_per_sequence=static_per,
            static_sequences=static_seqs,
            paged_utilization=paged_util,
            static_utilization=min(static_util, 1.0),
            excluded_fraction=self._excluded(mml),
        )

    def capacity_with_fixes(self, plan, replan: Callable[[dict], object] | None = None) -> WorkloadCapacity:
        """capacity() plus the flag changes that raise the binding limit, each re-planned.

        Args:
            replan: EngineArgs updates -> Plan (default: kvplan.capacity.estimate.plan on the same model and
                GPU with ``plan.args.model_copy(update=...)``); a change vLLM would refuse
                (KvplanError) is left out.
        """
        from dataclasses import replace

        cap = self.capacity(plan)
        if replan is None:
            from kvplan.capacity.estimate import plan as plan_fn

            def replan(update: dict):
                return plan_fn(plan.spec, plan.gpu, plan.args.model_copy(update=update))

        changes: list[FlagChange] = []

        def trial(flag: str, value, update: dict, note: str) -> None:
            try:
                p2 = replan(update)
            except KvplanError:
                return
            if not p2.fits:
                return
            c2 = self.capacity(p2) if "enable_prefix_caching" not in update else WorkloadModel(
                self.workload, shared_prefix_tokens=self.shared_prefix_tokens, n=self.n, enable_prefix_caching=update["enable_prefix_caching"]
            ).capacity(p2)
            gain = c2.sequences - cap.sequences
            if gain > 1e-9:
                changes.append(FlagChange(flag, value, c2.sequences, gain, c2.binding, note))

        eff = plan.effective
        if cap.binding in ("kv_cache", "kv_state"):
            if not str(eff["kv_cache_dtype"]).startswith("fp8") and plan.gpu.fp8_supported:
                trial("--kv-cache-dtype", "fp8", {"kv_cache_dtype": "fp8"}, "one byte per KV element instead of two")
            if eff["gpu_memory_utilization"] < 0.95 and plan.args.kv_cache_memory_bytes is None:
                trial("--gpu-memory-utilization", 0.95, {"gpu_memory_utilization": 0.95}, "more of the GPU for the KV cache")
            tp2 = eff["tensor_parallel_size"] * 2
            trial("--tensor-parallel-size", tp2, {"tensor_parallel_size": tp2}, f"weights split over {tp2} GPUs (per engine)")
            if not cap.sharing.enable_prefix_caching and (self.shared_prefix_tokens or self.n > 1):
                trial("--enable-prefix-caching", True, {"enable_prefix_caching": True}, "shared prompt blocks held once")
        elif cap.binding == "max_num_seqs":
            target = int(min(cap.kv_sequences, cap.mbt_sequences))
            if target > cap.max_num_seqs:
                trial("--max-num-seqs", target, {"max_num_seqs": target}, "the KV cache holds more sequences than the scheduler admits")
        elif cap.binding == "max_num_batched_tokens":
            want = min(cap.kv_sequences, float(cap.max_num_seqs))
            tok, steps = tokens_per_sequence_life(self.workload, cap.sharing, plan.block_size, cap.max_model_len)
            need = int(math.ceil(want * tok / steps / 256.0)) * 256 if steps else 0
            if need <= cap.max_num_batched_tokens:
                need = cap.max_num_batched_tokens * 2
            trial("--max-num-batched-tokens", need, {"max_num_batched_tokens": need}, "a larger per-step token budget (prefill + decode)")
        changes.sort(key=lambda c: -c.gain)
        return replace(cap, changes=tuple(changes))
