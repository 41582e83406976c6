"""Workload-aware KV capacity: how many sequences vLLM 0.26.0 keeps running for real lengths.

vLLM sizes its log line "Maximum concurrency for N tokens per request" as if every request were
``max_model_len`` long. PagedAttention allocates blocks as tokens arrive, so with real lengths the
same pool holds many more sequences. This module counts the blocks a workload actually holds,
group by group, with vLLM's rules:

* Blocks held by one sequence with ``L`` tokens in KV (vLLM 0.26.0
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
  sequences (or beam width) per request, vLLM 0.26.0 runs ``n`` child requests that hit the same
  cache: the prompt's whole blocks are held once, every branch holds its own partial prompt block
  and its output blocks. vLLM 0.26.0 enables prefix caching by default except for hybrid
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

import csv
import io
import json
import math
import stat
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from statistics import NormalDist
from typing import Callable

from kvplan.errors import KvplanError

# Kinds whose per-sequence blocks stop growing with length (a window, a chunk, a state).
STATE_KINDS = ("sliding", "chunked", "mamba")
# Quantile points per length distribution built from MEAN,P95 (deterministic discretization).
DISTRIBUTION_POINTS = 32
_Z95 = NormalDist().inv_cdf(0.95)
# --workload files: checked against the size before a byte is read (and counted while reading,
# for pipes and devices that have no size), then row by row. 100,000 requests pin a length
# distribution's percentiles far more finely than the block arithmetic needs, and keep the
# sweep's per-layout block count (linear in distinct (prompt, output) pairs) to seconds;
# 16 MiB leaves ~160 bytes per row for the other columns of an exported request log.
MAX_WORKLOAD_BYTES = 16 * 2**20
MAX_WORKLOAD_ROWS = 100_000
# Token counts above this are beyond any model's context (the longest are ~10M tokens); they
# are refused rather than carried through float arithmetic.
MAX_TOKENS = 10**9
_TOKEN_EXAMPLES = "e.g. 2000, 2k = 2000, 2K = 2048"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------------------------
# Workload: (prompt_tokens, output_tokens) pairs with weights
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A request-length distribution as weighted (prompt_tokens, output_tokens) pairs.

    Attributes:
        pairs: ((prompt_tokens, output_tokens, weight), ...); tokens >= 1, weight > 0 (a count
            for files, 1 per quantile point for MEAN,P95 distributions).
        description: what the user gave (for reports).
        given_p95: (("prompt" | "output", P95 tokens), ...) for sides given as MEAN,P95: the
            fitted lognormal's exact 95th percentile, which ``percentile(side, 0.95)`` reports.
    """

    pairs: tuple[tuple[int, int, float], ...]
    description: str
    given_p95: tuple[tuple[str, int], ...] = ()

    @cached_property
    def total_weight(self) -> float:
        return sum(w for _, _, w in self.pairs)

    @cached_property
    def mean_prompt_tokens(self) -> float:
        return sum(p * w for p, _, w in self.pairs) / self.total_weight

    @cached_property
    def mean_output_tokens(self) -> float:
        return sum(o * w for _, o, w in self.pairs) / self.total_weight

    def percentile(self, which: str, q: float) -> int:
        """The ``q`` quantile (0..1) of prompt ("prompt") or output ("output") tokens.

        For a side given as MEAN,P95 the 0.95 quantile is the P95 given (the fitted lognormal's,
        exactly); see bin_percentile for why the bins' own quantile is higher."""
        if q == 0.95:
            given = dict(self.given_p95)
            if which in given:
                return given[which]
        return self.bin_percentile(which, q)

    def bin_percentile(self, which: str, q: float) -> int:
        """The ``q`` quantile of the weighted pairs themselves: the smallest value whose
        cumulative weight reaches q. For a MEAN,P95 side the pairs are 32 equal-probability bins
        each represented by its conditional mean, so the 0.95 quantile falls in the bin of
        quantiles 30/32..31/32 and reports that bin's mean, above the P95 (prompt=2000,4000:
        4081; the conditional mean of the lognormal between its 0.9375 and 0.96875 quantiles)."""
        idx = 0 if which == "prompt" else 1
        items = sorted((pair[idx], pair[2]) for pair in self.pairs)
        target = q * self.total_weight
        acc = 0.0
        for v, w in items:
            acc += w
            if acc >= target - 1e-9:
                return v
        return items[-1][0]


class _BadTokens(ValueError):
    """A token count that is not one (the message says why; callers name the flag/file)."""


def parse_tokens(raw, *, whole: bool) -> float:
    """A token count from a flag, a CSV cell or a JSON value.

    Accepts an int, a float, or text: a decimal number or vLLM's human-readable integer
    (``2k`` = 2,000, ``2K`` = 2,048, ``1.5k`` = 1,500; vLLM 0.26.0 utils/argparse_utils.py
    human_readable_int, as for --max-model-len). Booleans are not token counts.

    Args:
        whole: a request's count (must be a whole number), not a mean or percentile.
    Returns:
        the count (int when whole), in 1..MAX_TOKENS.
    Raises:
        _BadTokens (a ValueError): not a finite number in range, or not whole; the message
            says why and shows the value.
    """
    from kvplan.engines.vllm.serve_flags import parse_human_int

    if isinstance(raw, bool):
        raise _BadTokens(f"expected a number of tokens, not a boolean (got {json.dumps(raw)})")
    shown = repr(raw)
    if isinstance(raw, int):
        v: float = raw
    elif isinstance(raw, float):
        v = raw
    elif isinstance(raw, str):
        text = raw.strip()
        shown = repr(text if len(text) <= 40 else text[:37] + "...")
        try:
            v = parse_human_int(text)
        except ValueError as exc:
            try:
                v = float(text)
            except ValueError:
                if "suffix" in str(exc):  # "decimals are not allowed with binary suffix K ..."
                    raise _BadTokens(f"{exc}, got {shown}") from None
                raise _BadTokens(f"expected a number of tokens ({_TOKEN_EXAMPLES}), got {shown}") from None
            if math.isinf(v) and text.lstrip("+").isdigit():
                raise _BadTokens(f"must be at most {MAX_TOKENS:,} tokens, got {len(text)} digits") from None
    else:
        raise _BadTokens(f"expected a number of tokens, got {json.dumps(raw)[:40]}")
    if isinstance(v, float) and not math.isfinite(v):
        raise _BadTokens(f"must be finite, got {shown}")
    if v < 1:
        raise _BadTokens(f"must be >= 1 token, got {shown}")
    if v > MAX_TOKENS:
        raise _BadTokens(f"must be at most {MAX_TOKENS:,} tokens (beyond any model's context), got {shown if len(shown) <= 40 else shown[:37] + '...'}")
    if whole:
        if v != int(v):
            raise _BadTokens(f"must be a whole number of tokens, got {shown}")
        return int(v)
    return v


def _lognormal_points(mean: float, p95: float | None, what: str, n: int) -> list[int]:
    """``n`` equally likely token counts: the mean alone gives a fixed length; MEAN,P95 gives the
    lognormal with that mean and 95th percentile, cut into ``n`` equal-probability bins, each
    represented by its conditional mean (so the mean is kept exactly, up to rounding to tokens).

    Lognormal: mean = exp(mu + s^2 / 2), p95 = exp(mu + z95 * s)  =>
    s^2 / 2 - z95 * s + ln(p95 / mean) = 0, the smaller root. The bin between the standard-normal
    quantiles z_k = Phi^-1(k/n) and z_k+1 has conditional mean
    mean * n * (Phi(z_k+1 - s) - Phi(z_k - s)).

    Raises:
        KvplanError: P95 below the mean, or a P95/mean ratio no lognormal reaches (> e^(z95^2/2),
            about 3.87); names --workload.
    """
    if p95 is None or p95 == mean:
        return [max(1, round(mean))]
    if p95 < mean:
        raise KvplanError(f"--workload: {what} P95 ({p95:g}) is below its mean ({mean:g})")
    c = math.log(p95 / mean)
    disc = _Z95 * _Z95 - 2 * c
    if disc < 0:
        limit = math.exp(_Z95 * _Z95 / 2)
        raise KvplanError(
            f"--workload: {what} P95/mean = {p95 / mean:.2f} is beyond what a lognormal length "
            f"distribution reaches ({limit:.2f})",
            hint="give a CSV/JSONL of (prompt_tokens, output_tokens) pairs for heavy tails",
        )
    s = _Z95 - math.sqrt(disc)
    nd = NormalDist()

    def phi(z: float) -> float:
        return 0.0 if z == -math.inf else 1.0 if z == math.inf else nd.cdf(z)

    z = [-math.inf] + [nd.inv_cdf(k / n) for k in range(1, n)] + [math.inf]
    return [max(1, round(mean * n * (phi(z[k + 1] - s) - phi(z[k] - s)))) for k in range(n)]


def _number(text: str, what: str) -> float:
    """A MEAN or P95 of --workload (see parse_tokens); raises KvplanError naming --workload."""
    try:
        return parse_tokens(text, whole=False)
    except _BadTokens as exc:
        raise KvplanError(f"--workload: {what}: {exc}") from None


def parse_distribution(text: str, points: int = DISTRIBUTION_POINTS, shared_prefix_tokens: int = 0) -> Workload:
    """Parse ``prompt=MEAN[,P95] output=MEAN[,P95]`` (tokens; spaces or ';' between the parts).

    Numbers are read as vLLM reads --max-model-len (``2k`` = 2,000, ``2K`` = 2,048; see
    parse_tokens); a MEAN or P95 may have decimals. Prompt and output lengths are taken as
    independent; each side is a fixed length (MEAN only) or ``points`` lognormal quantiles
    (MEAN,P95). Prompts include a shared prefix of ``shared_prefix_tokens``: the lognormal is
    fitted to the rest (MEAN - N, P95 - N) and N added back, so every prompt holds the prefix
    and MEAN/P95 stay as given. The Workload reports the P95 given (``given_p95``).

    Raises:
        KvplanError: a missing, repeated or malformed part, or a prompt mean not above the shared
            prefix (names --workload / --shared-prefix-tokens).
    """
    parts: dict[str, tuple[float, float | None]] = {}
    for chunk in text.replace(";", " ").split():
        if "=" not in chunk:
            raise KvplanError(f"--workload: cannot read {chunk!r}", hint="write prompt=MEAN[,P95] output=MEAN[,P95]")
        key, _, val = chunk.partition("=")
        key = key.strip().lower()
        if key not in ("prompt", "output"):
            raise KvplanError(f"--workload: unknown key {key!r}", hint="use prompt= and output=")
        if key in parts:
            raise KvplanError(f"--workload: {key}= given twice in {text.strip()!r}", hint="give prompt= and output= once each")
        nums = [v for v in val.split(",") if v.strip()]
        if not 1 <= len(nums) <= 2:
            raise KvplanError(f"--workload: {key}= takes MEAN or MEAN,P95, got {val!r}")
        mean = _number(nums[0], f"{key} mean")
        p95 = _number(nums[1], f"{key} P95") if len(nums) == 2 else None
        parts[key] = (mean, p95)
    missing = [k for k in ("prompt", "output") if k not in parts]
    if missing:
        raise KvplanError(f"--workload: missing {' and '.join(k + '=' for k in missing)}", hint="write prompt=MEAN[,P95] output=MEAN[,P95]")
    pm, p95 = parts["prompt"]
    if shared_prefix_tokens:
        if pm - shared_prefix_tokens < 1:
            raise KvplanError(
                f"--shared-prefix-tokens {shared_prefix_tokens}: not below the prompt mean ({pm:g} tokens, which includes it)"
            )
        rest = _lognormal_points(pm - shared_prefix_tokens, None if p95 is None else p95 - shared_prefix_tokens, "prompt (after the shared prefix)", points)
        prompts = [shared_prefix_tokens + x for x in rest]
    else:
        prompts = _lognormal_points(pm, p95, "prompt", points)
    outputs = _lognormal_points(*parts["output"], "output", points)
    counts = Counter((p, o) for p in prompts for o in outputs)
    given = tuple((k, int(math.floor(parts[k][1] + 0.5))) for k in ("prompt", "output") if parts[k][1] is not None)
    return Workload(pairs=tuple((p, o, float(w)) for (p, o), w in sorted(counts.items())), description=text.strip(), given_p95=given)


def _pair_from(values: dict, where: str) -> tuple[int, int]:
    out = []
    for key in ("prompt_tokens", "output_tokens"):
        raw = values.get(key)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise KvplanError(f"{where}: missing {key}")
        try:
            out.append(parse_tokens(raw, whole=True))
        except _BadTokens as exc:
            raise KvplanError(f"{where}: {key} {exc}") from None
    return out[0], out[1]


def _bounded_lines(f, path):
    """Lines of an open text file, refusing more than MAX_WORKLOAD_BYTES characters in all (for
    pipes and devices, whose size stat cannot tell) without ever holding more than that."""
    total = 0
    while True:
        line = f.readline(MAX_WORKLOAD_BYTES - total + 1)
        if not line:
            return
        total += len(line)
        if total > MAX_WORKLOAD_BYTES:
            raise KvplanError(
                f"--workload: {path}: more than {MAX_WORKLOAD_BYTES // 2**20} MiB; kvplan reads at most that",
                hint=f"keep only the prompt_tokens and output_tokens columns, or a random sample of at most {MAX_WORKLOAD_ROWS:,} rows",
            )
        yield line


def _too_many_rows(path) -> KvplanError:
    return KvplanError(
        f"--workload: {path}: more than {MAX_WORKLOAD_ROWS:,} rows; kvplan reads at most {MAX_WORKLOAD_ROWS:,} requests",
        hint=f"give a random sample of at most {MAX_WORKLOAD_ROWS:,} rows, or prompt=MEAN,P95 output=MEAN,P95",
    )


def load_pairs_file(path: str | Path) -> Workload:
    """Read (prompt_tokens, output_tokens) pairs from a CSV (header row naming both columns) or
    a JSONL file (one object per line with both keys; ``.jsonl``, ``.ndjson`` or ``.json``).

    UTF-8, with or without a byte-order mark. Token counts are whole numbers >= 1 (JSON numbers,
    or text as parse_tokens reads it: ``2k`` = 2,000); booleans are refused. Bounded: a file
    larger than MAX_WORKLOAD_BYTES is refused from its size before it is read, and reading stops
    at MAX_WORKLOAD_ROWS + 1 rows.

    Raises:
        KvplanError: unreadable, too large, too many rows, not UTF-8, not CSV/JSON, a missing
            column/key, a value that is not a whole number of tokens; one line naming the file
            (and line).
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise KvplanError(f"--workload: file not found: {path}") from None
    except OSError as exc:
        raise KvplanError(f"--workload: cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise KvplanError(f"--workload: {path} is a directory; give a CSV or JSONL file")
    if st.st_size > MAX_WORKLOAD_BYTES:
        raise KvplanError(
            f"--workload: {path} is {st.st_size / 2**20:.1f} MiB; kvplan reads at most {MAX_WORKLOAD_BYTES // 2**20} MiB "
            f"({MAX_WORKLOAD_ROWS:,} rows)",
            hint=f"keep only the prompt_tokens and output_tokens columns, or a random sample of at most {MAX_WORKLOAD_ROWS:,} rows",
        )
    from kvplan.safe_io import InputError, open_regular

    try:
        raw = open_regular(p)  # a FIFO or device is refused here instead of hanging or never ending
    except InputError as exc:
        raise KvplanError(f"--workload: {path}: {exc.message}") from None
    counts: Counter = Counter()
    rows = 0
    reader = None
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
            lines = _bounded_lines(f, path)
            if p.suffix.lower() in (".jsonl", ".ndjson", ".json"):
                for line_no, line in enumerate(lines, start=1):
                    if not line.strip():
                        continue
                    where = f"--workload: {path}:{line_no}"
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise KvplanError(f"{where}: not valid JSON ({exc.msg})") from None
                    except RecursionError:
                        raise KvplanError(f"{where}: not valid JSON (nested too deeply)") from None
                    except ValueError:  # an integer literal longer than Python converts
                        raise KvplanError(f"{where}: not valid JSON (a number with too many digits)") from None
                    if not isinstance(row, dict):
                        raise KvplanError(f"{where}: expected an object with prompt_tokens and output_tokens")
                    rows += 1
                    if rows > MAX_WORKLOAD_ROWS:
                        raise _too_many_rows(path)
                    counts[_pair_from(row, where)] += 1
            else:
                reader = csv.reader(lines)
                header = next(reader, None)
                fields = [c.strip() for c in (header or [])]
                if "prompt_tokens" not in fields or "output_tokens" not in fields:
                    shown = fields if len(repr(fields)) <= 120 else repr(fields)[:117] + "..."
                    raise KvplanError(f"--workload: {path}:1: the CSV header must name prompt_tokens and output_tokens (got {shown})")
                ip, iout = fields.index("prompt_tokens"), fields.index("output_tokens")
                for cells in reader:
                    line_no = reader.line_num
                    if not any(c.strip() for c in cells):
                        continue
                    rows += 1
                    if rows > MAX_WORKLOAD_ROWS:
                        raise _too_many_rows(path)
                    values = {"prompt_tokens": cells[ip] if ip < len(cells) else None,
                              "output_tokens": cells[iout] if iout < len(cells) else None}
                    counts[_pair_from(values, f"--workload: {path}:{line_no}")] += 1
    except UnicodeDecodeError as exc:
        raise KvplanError(f"--workload: {path}: not UTF-8 text ({exc.reason} at byte {exc.start} of a chunk)") from None
    except csv.Error as exc:
        raise KvplanError(f"--workload: {path}:{reader.line_num if reader is not None else 1}: not valid CSV ({exc})") from None
    except OSError as exc:
        raise KvplanError(f"--workload: cannot read {path}: {exc.strerror or exc}") from None
    if not counts:
        raise KvplanError(f"--workload: {path} holds no (prompt_tokens, output_tokens) rows")
    return Workload(pairs=tuple((pp, o, float(w)) for (pp, o), w in sorted(counts.items())), description=str(path))


def parse_workload(text: str, shared_prefix_tokens: int = 0) -> Workload:
    """``--workload``: a CSV/JSONL file path, or ``prompt=MEAN[,P95] output=MEAN[,P95]``
    (prompts include ``shared_prefix_tokens``; see parse_distribution).

    Raises:
        KvplanError: see parse_distribution / load_pairs_file.
    """
    if text is None or not text.strip():
        raise KvplanError("--workload: empty value", hint="write prompt=MEAN[,P95] output=MEAN[,P95] or a file path")
    if "=" in text and not Path(text).exists():
        return parse_distribution(text, shared_prefix_tokens=shared_prefix_tokens)
    return load_pairs_file(text)


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

    def skipped_blocks(self, tokens: int) -> int:
        """Blocks freed before the window/chunk when ``tokens`` have KV (``tokens - 1`` computed).

        vLLM 0.26.0 single_type_kv_cache_manager.py get_num_skipped_tokens // block_size."""
        computed = tokens - 1
        if self.kind == "sliding" and self.sliding_window:
            return max(0, computed - self.sliding_window + 1) // self.block_size
        if self.kind == "chunked" and self.chunk_size:
            return (computed // self.chunk_size) * self.chunk_size // self.block_size
        return 0

    def next_change(self, tokens: int) -> int:
        """The smallest token count > ``tokens`` where the held blocks may change."""
        bs = self.block_size
        nxt = ((tokens - 1) // bs + 1) * bs + 1  # a new block starts
        if self.kind == "sliding" and self.sliding_window:
            w = self.sliding_window
            nxt = min(nxt, w + bs if tokens < w else w + ((tokens - w) // bs + 1) * bs)
        elif self.kind == "chunked" and self.chunk_size:
            c = self.chunk_size
            nxt = min(nxt, ((tokens - 1) // c + 1) * c + 1)
        return nxt


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
    if not caching or rule.kind == "mamba":
        return 0, 0
    bs = rule.block_size
    s_n = min(prefix_tokens, prompt - 1) // bs if prefix_tokens > 0 else 0
    s_p = (prompt - 1) // bs if n > 1 else s_n
    return s_n, max(s_p, s_n)


def _held(rule: GroupRule, tokens: int, s_n: int, s_p: int) -> tuple[int, int, int, int]:
    """(global-shared, request-shared, private blocks, private tokens) at ``tokens`` tokens."""
    if rule.kind == "mamba":
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
    if rule.kind == "mamba":
        return 0, 0, steps, steps * rule.block_size, steps
    bs = rule.block_size
    total_sum = _sum_cdiv(hi, bs) - _sum_cdiv(lo - 1, bs)
    l_sum = (lo + hi) * steps // 2
    if rule.kind == "sliding" and rule.sliding_window:
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
    if rule.kind != "chunked" or not rule.chunk_size:
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
            if rule.kind in STATE_KINDS:
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


def rules_of(layout) -> tuple[GroupRule, ...]:
    """GroupRules of an allocator.KVCacheLayout (the mixed one-group layout counts as one group
    of its kind: vLLM 0.26.0 gives it one block table)."""
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
            ``capacity`` means vLLM 0.26.0's default for the model (on unless hybrid).
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
        """Resolved sharing for a plan (vLLM 0.26.0 default: prefix caching on unless hybrid)."""
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
            replan: EngineArgs updates -> Plan (default: kvplan.planner.plan on the same model and
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
