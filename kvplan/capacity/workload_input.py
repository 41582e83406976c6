"""Workloads as kvplan reads them: request-length distributions (MEAN,P95 or a file of
(prompt_tokens, output_tokens) pairs) as weighted pairs, with the input limits. The capacity
arithmetic over them is kvplan.capacity.workload.

Units: tokens (int), bytes (int).
"""

from __future__ import annotations

import csv
import io
import json
import math
import stat
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from statistics import NormalDist

from kvplan.errors import KvplanError


# Quantile points per length distribution built from MEAN,P95 (deterministic discretization).
DISTRIBUTION_POINTS = 32
_Z95 = NormalDist().inv_cdf(0.95)
# --workload caps and the largest token count (why each: kvplan.io.limits).
from kvplan.io.limits import MAX_TOKENS, MAX_WORKLOAD_BYTES, MAX_WORKLOAD_ROWS  # noqa: E402
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
        weights_are_requests: True when each weight counts requests (a file), False when the
            weights are quantile points of a fitted distribution.
    """

    pairs: tuple[tuple[int, int, float], ...]
    description: str
    given_p95: tuple[tuple[str, int], ...] = ()
    weights_are_requests: bool = False

    def within(self, max_model_len: int) -> tuple["Workload | None", float]:
        """(the requests with prompt + output <= ``max_model_len`` tokens as a Workload, or None
        when none is; the weight left out). vLLM refuses a request whose prompt
        plus output tokens exceed max_model_len (renderers/params.py: "This model's maximum
        context length is ..."), so such requests take no KV cache. A given P95 is dropped once anything is left out (it
        described the whole distribution). Raises nothing."""
        kept = tuple(pr for pr in self.pairs if pr[0] + pr[1] <= max_model_len)
        left = sum(w for p, o, w in self.pairs if p + o > max_model_len)
        if not kept:
            return None, left
        if len(kept) == len(self.pairs):
            return self, 0.0
        return Workload(kept, self.description, (), self.weights_are_requests), left

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
    (``2k`` = 2,000, ``2K`` = 2,048, ``1.5k`` = 1,500; vLLM utils/argparse_utils.py
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
    from kvplan.io.files import InputError, open_regular

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
    return Workload(pairs=tuple((pp, o, float(w)) for (pp, o), w in sorted(counts.items())), description=str(path),
                    weights_are_requests=True)


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
