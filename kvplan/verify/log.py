"""Read a vLLM start-up log: the memory and KV-cache figures vLLM printed, and how it was started.

Pure text in, facts out: no I/O, no torch, no vLLM. ``parse_log(text)`` accepts a whole log
(any prefix: ``INFO 08-01 12:00:00 [gpu_worker.py:561]``, ``(EngineCore_DP0 pid=7)``, docker or
timestamp columns, ANSI colours) or bare messages as the calibration files keep them.

Which line says what is a table of patterns per vLLM version, its log grammar
(kvplan/engines/vllm/v0_26/log_grammar.py: the V1 lines, and the V0 engine's lines where older
logs still match); ``GRAMMARS`` lists them and ``grammar_for`` picks one from the log's own
"vLLM version" line. This module applies a grammar and reads kvplan's own protocol lines.

kvplan's own child (kvplan.verify.child) adds ``MEMINFO``, ``RESULT``, ``KVPLAN_*`` lines; the
calibration runs add ``CASE {...}`` lines.

Units: bytes (int) for memory, tokens, blocks. A figure printed in GiB with d decimals is stored
as round(x * 2**30) bytes and its half-step (0.5 * 10**-d GiB) goes to ``resolution_bytes``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from kvplan.verify.grammars import _ANSI, DEFAULT_GRAMMAR, GRAMMARS, grammar_for, message_of  # noqa: F401  (re-exported)

GiB = 1 << 30
MiB = 1 << 20

_LEVEL = re.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:")

# --- kvplan child / calibration driver ----------------------------------------------------------
RE_MEMINFO = re.compile(r"^MEMINFO free=(\d+) total=(\d+)(?: name=(.*))?$")
RE_RESULT = re.compile(r"^RESULT ((?:\w+=\S+\s*)+)$")
RE_KVPLAN = re.compile(r"^(KVPLAN_[A-Z]+) (.*)$")
RE_CASE = re.compile(r"^CASE (\{.*\})\s*$")

_EXCEPTION = re.compile(r"^(?:\w+\.)*\w*(?:Error|Exception|Interrupt)\b(?::|$)")


@dataclass
class Refusal:
    """Why vLLM refused to start, as it said it.

    Attributes:
        kind: "max_model_len" (one request does not fit), "no_memory" (nothing left for the KV
            cache), "free_memory" (the GPU is busy: less free memory than requested), "oom",
            or "error" (another exception).
        message: the verbatim message.
        max_model_len: tokens vLLM was asked to serve (when said).
        needed_bytes / available_bytes: KV bytes one request needs / vLLM had (V1 message).
        estimated_max_model_len: vLLM's own largest length that fits (V1 message).
        kv_capacity_tokens: tokens the KV cache holds (V0 message).
    """

    kind: str
    message: str
    max_model_len: int | None = None
    needed_bytes: int | None = None
    available_bytes: int | None = None
    estimated_max_model_len: int | None = None
    kv_capacity_tokens: int | None = None


# Refusals about memory: the kinds parse_log recognises, and any other error whose message talks
# about the KV cache, memory or the model length (vLLM v1/core/kv_cache_utils.py
# _check_enough_kv_cache_memory, v1/worker/gpu_worker.py, torch's OutOfMemoryError). Anything
# else (a missing preprocessor_config.json or tokenizer, an import error, an unsupported
# architecture) stopped vLLM before it sized memory and says nothing about kvplan's numbers.
MEMORY_REFUSAL_KINDS = frozenset({"max_model_len", "no_memory", "free_memory", "oom"})
_MEMORY_WORDS = re.compile(r"KV cache|memory|max_model_len|max seq len|max_seq_len|model length", re.IGNORECASE)


def is_memory_refusal(refusal: Refusal) -> bool:
    """True when ``refusal`` is about memory (see MEMORY_REFUSAL_KINDS), False for a setup error."""
    return refusal.kind in MEMORY_REFUSAL_KINDS or bool(_MEMORY_WORDS.search(refusal.message or ""))


@dataclass
class VllmLog:
    """Everything ``parse_log`` found. Memory in bytes; None = not in the log.

    Attributes:
        vllm_version: from the engine/server banner lines (None when not printed).
        families: which line families were seen ("v1", "v0", "kvplan-child", ...).
        model: the model as vLLM was given it (repo id or path).
        non_default_args: the "non-default args" dict (values that are not Python literals are
            kept as their text).
        engine_config: simple fields of the "with config:" line (model, dtype, max_seq_len, ...).
        case: the engine-arguments record of a kvplan child (``KVPLAN_CASE``) or calibration
            driver (``CASE``) line: {"name", "model", "engine_args", "usage"}.
        usage: "serve" or "llm" when the log shows which entry point started vLLM.
        total_bytes ... kv_cache_bytes: the memory budget terms (see vLLM's gpu_worker.py).
        peak_torch_bytes: V0 ~0.6.4 only: weights + activation peak.
        suggested_fit_requested_bytes / suggested_fill_gpu_bytes: the exact --kv-cache-memory
            values vLLM suggested.
        gpu_kv_cache_tokens, max_concurrency, concurrency_max_model_len: the KV-cache lines.
        kv_cache_sizing ... rank_kv_blocks: vLLM 0.34.0's sizing path and its ``Memory after warmup``
            figures (engines/vllm/v0_34/log_grammar.py says which line gives which).
        extended_kv_bytes: vLLM 0.34.0's ``Extended KV cache to N blocks (X GiB)``: the cache's
            final size (bytes, rounded to 0.01 GiB).
        num_gpu_blocks, num_cpu_blocks, block_size, max_num_seqs, max_num_batched_tokens: when a
            line gives them (the V1 engine logs only max_num_batched_tokens at INFO).
        meminfo: {"free", "total", "name"} of a kvplan child's MEMINFO line (exact bytes).
        exact: the KVPLAN_EXACT dict (exact bytes read from vLLM's worker).
        env / config / child_error: KVPLAN_ENV, KVPLAN_CONFIG, KVPLAN_ERROR payloads.
        refusal: why vLLM refused to start, if it did.
        evidence: field -> the verbatim message it was read from.
        excerpt: the relevant messages in log order (for records' log_excerpt).
        resolution_bytes: field -> half the printed step of a GiB figure.
        error_lines: the last error/traceback lines (for "vLLM failed to start" messages).
        rejected_lines: (line number, why) of protocol lines set aside because their JSON is
            nested more than MAX_JSON_DEPTH levels (kvplan.sources.local; a hostile or broken
            line that would otherwise end in a RecursionError). --from-log refuses such a file.
        invalid_lines: (line number, why) of lines kvplan's child cannot have written: a
            ``RESULT`` or ``KVPLAN_EXACT`` count that is negative or not a finite number, a
            ``RESULT`` num_gpu_blocks of 0, a "GPU KV cache size: 0 tokens" line in a log
            that shows no refusal, a second ``RESULT`` line that contradicts the first. --from-log refuses such a file.
        args_line: the line number of the ``KVPLAN_CASE``/``CASE`` line, else of the
            "non-default args" line, the engine arguments were read from (None: neither).
    """

    vllm_version: str | None = None
    families: set[str] = field(default_factory=set)
    model: str | None = None
    architecture: str | None = None
    non_default_args: dict | None = None
    engine_config: dict = field(default_factory=dict)
    case: dict | None = None
    usage: str | None = None
    usage_evidence: str | None = None
    total_bytes: int | None = None
    free_at_start_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    requested_bytes: int | None = None
    weights_bytes: int | None = None
    activation_peak_bytes: int | None = None
    peak_torch_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    cudagraph_estimate_bytes: int | None = None
    kv_cache_bytes: int | None = None
    kv_cache_in_use_bytes: int | None = None
    kv_cache_memory_override_bytes: int | None = None
    suggested_fit_requested_bytes: int | None = None
    suggested_fill_gpu_bytes: int | None = None
    gpu_kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_max_model_len: int | None = None
    max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    num_gpu_blocks_source: str | None = None
    num_cpu_blocks: int | None = None
    block_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_sizing: str | None = None
    extensible_disabled_reason: str | None = None
    free_after_warmup_bytes: int | None = None
    kv_committed_bytes: int | None = None
    transient_kept_bytes: int | None = None
    transient_peak_bytes: int | None = None
    reserve_growth_bytes: int | None = None
    rank_kv_blocks: int | None = None
    extended_kv_bytes: int | None = None
    padding_layers: int | None = None
    attention_backend: str | None = None
    startup_s: float | None = None
    init_engine_s: float | None = None
    weights_load_s: float | None = None
    meminfo: dict | None = None
    exact: dict | None = None
    env: dict | None = None
    config: dict | None = None
    child_error: dict | None = None
    result: dict | None = None
    refusal: Refusal | None = None
    evidence: dict[str, str] = field(default_factory=dict)
    excerpt: list[str] = field(default_factory=list)
    resolution_bytes: dict[str, int] = field(default_factory=dict)
    error_lines: list[str] = field(default_factory=list)
    rejected_lines: list[tuple[int, str]] = field(default_factory=list)
    invalid_lines: list[tuple[int, str]] = field(default_factory=list)
    args_line: int | None = None
    result_line: int | None = None

    @property
    def started(self) -> bool:
        """vLLM got as far as sizing the KV cache (it logged the KV tokens or a block count)."""
        return self.gpu_kv_cache_tokens is not None or self.num_gpu_blocks is not None


def _gib_bytes(text: str) -> tuple[int, int]:
    """(bytes, half-step bytes) of a GiB figure printed as ``text``."""
    # vLLM rounds to 2 decimals (utils/mem_utils.py format_gib) and Python drops trailing zeros
    # ("139.8"), so a figure is never coarser than 0.01 GiB; V0 printed some with 4 decimals.
    decimals = max(2, len(text.split(".", 1)[1]) if "." in text else 0)
    return int(round(float(text) * GiB)), int(round(0.5 * 10 ** (-decimals) * GiB))


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_python_dict(text: str) -> dict:
    """Parse the repr of a dict as vLLM logs it ("non-default args: {...}").

    Values that are Python literals become Python values; others (``LoRAModulePath(...)``,
    ``PosixPath('...')``) are kept as their text. Raises ValueError if ``text`` is not a dict repr.
    """
    try:
        value = ast.literal_eval(text)
        if isinstance(value, dict):
            return value
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError("not a dict")
    items: list[str] = []
    depth, quote, start, i = 0, "", 1, 1
    body_end = len(text) - 1
    while i < body_end:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    items.append(text[start:body_end])
    out: dict[str, Any] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, value = item.partition(":")
        if not sep:
            continue
        try:
            k = ast.literal_eval(key.strip())
        except (ValueError, SyntaxError):
            continue
        try:
            out[str(k)] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[str(k)] = value.strip()
    return out


_CONFIG_KEYS = (
    "model",
    "dtype",
    "max_seq_len",
    "load_format",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "quantization",
    "enforce_eager",
    "kv_cache_dtype",
    "enable_prefix_caching",
)


def _engine_config(text: str) -> dict:
    """Simple fields of the "Initializing ... engine with config: k=v, ..." line."""
    out: dict[str, Any] = {}
    for key in _CONFIG_KEYS:
        m = re.search(r"(?:^|[\s,])" + key + r"=('(?:[^'\\]|\\.)*'|[^,\s]+)", text)
        if not m:
            continue
        raw = m.group(1)
        if raw.startswith("'"):
            out[key] = raw[1:-1]
            continue
        if raw in ("None",):
            out[key] = None
        elif raw in ("True", "False"):
            out[key] = raw == "True"
        elif re.fullmatch(r"\d+", raw):
            out[key] = int(raw)
        else:
            out[key] = raw.removeprefix("torch.").removeprefix("LoadFormat.").lower() if key in (
                "dtype",
                "load_format",
            ) else raw
    return out


def _kv_pairs(text: str) -> dict:
    out: dict[str, Any] = {}
    for m in re.finditer(r"(\w+)=(\S+)", text):
        raw = m.group(2)
        if re.fullmatch(r"-?\d+", raw):
            out[m.group(1)] = int(raw)
        elif re.fullmatch(r"-?\d+\.\d+", raw):
            out[m.group(1)] = float(raw)
        elif raw in ("None", "True", "False"):
            out[m.group(1)] = None if raw == "None" else raw == "True"
        else:
            out[m.group(1)] = raw
    return out


class _Builder:
    def __init__(self) -> None:
        self.log = VllmLog()
        self.lineno = 0
        self.zero_tokens_line: int | None = None

    def json_payload(self, what: str, payload: str) -> Any:
        """``json.loads(payload)``, or None when it is not JSON or nested too deeply (the line is
        then recorded in ``rejected_lines``; parse_log itself never raises)."""
        from kvplan.sources.local import MAX_JSON_DEPTH, json_text_depth

        if json_text_depth(payload) > MAX_JSON_DEPTH:
            self.log.rejected_lines.append((self.lineno, f"{what} line: JSON nested more than {MAX_JSON_DEPTH} levels deep"))
            return None
        try:
            return json.loads(payload)
        except (json.JSONDecodeError, RecursionError):
            return None

    def set(self, name: str, value: Any, msg: str, *, resolution: int | None = None, first: bool = True) -> None:
        """Record ``name`` from message ``msg`` (the first occurrence wins: every TP rank repeats it)."""
        if value is None or (first and getattr(self.log, name) is not None):
            return
        setattr(self.log, name, value)
        self.log.evidence.setdefault(name, msg)
        if resolution is not None:
            self.log.resolution_bytes[name] = resolution

    def set_gib(self, name: str, text: str, msg: str) -> None:
        value, res = _gib_bytes(text)
        self.set(name, value, msg, resolution=res)

    def excerpt(self, msg: str) -> None:
        self.log.excerpt.append(msg)


# Counts of the RESULT line and KVPLAN_EXACT (kvplan.verify.child writes them from vLLM's config):
# whole numbers >= 0 by construction, so anything else means the line was edited or corrupted.
_COUNT_KEYS = ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "num_cpu_blocks")


def _check_counts(b: _Builder, what: str, values: dict) -> None:
    """Record in ``invalid_lines`` the first count of ``values`` that is negative or not finite."""
    for key in _COUNT_KEYS:
        v = values.get(key)
        if v is None or isinstance(v, bool):
            continue
        bad = False
        if isinstance(v, (int, float)):
            bad = not math.isfinite(v) or v < 0
        elif isinstance(v, str):
            try:
                f = float(v)
            except ValueError:
                continue  # not a number at all: ignored as before (never used as a count)
            bad = not math.isfinite(f) or f < 0
        if bad:
            b.log.invalid_lines.append((b.lineno, f"{what} line: {key}={v} is not a count (a whole number >= 0)"))
            return


def parse_log(text: str) -> VllmLog:
    """Parse a vLLM start-up log (any vLLM version; see the module docstring for the lines).

    Args:
        text: the log, whole or in part; prefixes and colours are tolerated.
    Returns:
        a VllmLog; figures not in the log stay None (never guessed).
    """
    b = _Builder()
    log = b.log
    grammar = grammar_for(text)
    recent_errors: list[str] = []
    in_traceback = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        b.lineno = lineno
        msg = message_of(raw)
        if not msg:
            continue
        level = _LEVEL.search(_ANSI.sub("", raw))
        is_error_level = bool(level) and level.group(1) in ("ERROR", "CRITICAL")
        if level and not is_error_level:
            in_traceback = False
        if msg.startswith("Traceback (most recent call last)"):
            in_traceback = True
        if in_traceback or is_error_level or _EXCEPTION.match(msg):
            recent_errors.append(msg)
            recent_errors = recent_errors[-40:]
        relevant = _parse_message(b, msg, grammar)
        if relevant:
            b.excerpt(msg)

    log.error_lines = recent_errors[-12:]
    _finish(log)
    if b.zero_tokens_line is not None and log.refusal is None:
        # "GPU KV cache size: 0 tokens" in a start that went on: vLLM prints the line from the
        # cache it sized, and refuses to start when that cache cannot hold one request, so a
        # log that shows no refusal cannot say 0 (an edited or corrupted line)
        log.invalid_lines.append((
            b.zero_tokens_line,
            "GPU KV cache size line: 0 tokens is impossible for a start that sized its KV cache "
            "(vLLM refuses to start without room for at least one request)",
        ))
        log.invalid_lines.sort(key=lambda item: item[0])
    return log


def _parse_message(b: _Builder, msg: str, grammar) -> bool:
    """Read one message: kvplan's own protocol lines first, then ``grammar``'s lines; True when
    the message belongs in the excerpt."""
    log = b.log
    # kvplan child / calibration driver lines (start of message)
    m = RE_KVPLAN.match(msg)
    if m:
        kind, payload = m.groups()
        log.families.add("kvplan-child")
        data = b.json_payload(kind, payload)
        if data is None:
            return False
        if kind == "KVPLAN_EXACT" and isinstance(data, dict):
            log.exact = data
            _check_counts(b, "KVPLAN_EXACT", data)
        elif kind == "KVPLAN_ENV" and isinstance(data, dict):
            log.env = data
        elif kind == "KVPLAN_CONFIG" and isinstance(data, dict):
            log.config = data
            return False  # large; not an excerpt line
        elif kind == "KVPLAN_CASE" and isinstance(data, dict):
            log.case = data
            log.args_line = b.lineno
        elif kind == "KVPLAN_ERROR" and isinstance(data, dict):
            log.child_error = data
        else:
            return False
        return True
    m = RE_CASE.match(msg)
    if m:
        data = b.json_payload("CASE", m.group(1))
        if isinstance(data, dict):
            log.case = {
                "name": data.get("name"),
                "model": data.get("model"),
                "engine_args": data.get("kw", data.get("engine_args", {})),
                "usage": data.get("usage", "llm"),
            }
            log.args_line = b.lineno
            return True
        return False
    m = RE_MEMINFO.match(msg)
    if m:
        log.meminfo = {"free": int(m.group(1)), "total": int(m.group(2)), "name": (m.group(3) or "").strip() or None}
        log.families.add("kvplan-child")
        return True
    m = RE_RESULT.match(msg)
    if m:
        result = _kv_pairs(m.group(1))
        n_invalid = len(b.log.invalid_lines)
        _check_counts(b, "RESULT", result)
        blocks = result.get("num_gpu_blocks")
        if len(b.log.invalid_lines) == n_invalid and not isinstance(blocks, bool) and blocks == 0:
            # kvplan.verify.child prints RESULT only after LLM(...) returned: vLLM had sized a KV
            # cache by then, and it refuses to start without room for one request
            b.log.invalid_lines.append((
                b.lineno,
                "RESULT line: num_gpu_blocks=0 is impossible for a start that sized its KV cache "
                "(vLLM refuses to start without at least one block)",
            ))
        if log.result is not None and result != log.result:
            changed = [k for k in dict.fromkeys([*log.result, *result]) if log.result.get(k) != result.get(k) and k != "startup_s"]
            if changed:
                k = changed[0]
                b.log.invalid_lines.append((
                    b.lineno,
                    f"RESULT line contradicts the RESULT line {log.result_line}: {k}={result.get(k)} here, "
                    f"{k}={log.result.get(k)} there; a start prints one RESULT line",
                ))
        log.result, log.result_line = result, b.lineno
        return True

    return _apply_grammar(b, msg, grammar)


_STOP = object()  # a reader's answer: this message is read; it is not an excerpt line


def _apply_grammar(b: _Builder, msg: str, grammar) -> bool:
    """Try every line of ``grammar.LINES`` on ``msg`` in order; True when one worth keeping in
    the excerpt matched."""
    log = b.log
    hit = False
    for line in grammar.LINES:
        m = line.pattern.match(msg) if line.anchored else line.pattern.search(msg)
        if not m or (line.unless is not None and line.unless in msg):
            continue
        if line.reader is not None:
            got = _READERS[line.reader](b, m, msg)
            if got is _STOP:
                return False
            if line.family:
                log.families.add(line.family)
            hit = hit or bool(got)
            continue
        if line.refusal is not None:
            if log.refusal is not None:
                continue
            values = {name: _convert(m.group(group), conv)[0] for name, group, conv in line.fields}
            log.refusal = Refusal(kind=line.refusal, message=msg, **values)
        else:
            for name, group, conv in line.fields:
                if group is None:
                    b.set(name, conv, msg)
                    continue
                value, resolution = _convert(m.group(group), conv)
                b.set(name, value, msg, resolution=resolution)
        if line.family:
            log.families.add(line.family)
        hit = hit or line.excerpt
    return hit


def _convert(text: str | None, conv: str) -> tuple[Any, int | None]:
    """(value, resolution bytes or None) of one group's text (converters: engines/vllm/log_line.py)."""
    if text is None:
        return None, None
    if conv == "gib":
        return _gib_bytes(text)
    if conv == "int":
        return int(text), None
    if conv == "tokens":
        return _int(text), None
    if conv == "float":
        return float(text), None
    return text, None


# Readers of lines whose meaning is more than their groups (named by a grammar's LogLine.reader):
# (builder, match, message) -> True (an excerpt line), False, or _STOP.


def _read_non_default_args(b: _Builder, m: re.Match, msg: str):
    log = b.log
    if log.non_default_args is not None:
        return False
    try:
        log.non_default_args = parse_python_dict(m.group(1))
    except ValueError:
        return False
    log.evidence["non_default_args"] = msg
    if log.args_line is None:
        log.args_line = b.lineno
    return True


def _read_engine_config(b: _Builder, m: re.Match, msg: str):
    log = b.log
    if m.group(1):
        b.set("vllm_version", m.group(1), msg)
    if not log.engine_config:
        log.engine_config = _engine_config(m.group(2))
        log.evidence["engine_config"] = msg[:400]
    if "V1 LLM engine" in msg:
        log.families.add("v1")
    elif "V0 LLM engine" in msg or "an LLM engine" in msg:
        log.families.add("v0")
    return _STOP  # long line; keep out of the excerpt


def _read_server_version(b: _Builder, m: re.Match, msg: str):
    log = b.log
    b.set("vllm_version", m.group(1), msg)
    if log.usage is None:
        log.usage, log.usage_evidence = "serve", msg
    return True


def _read_model_loading(b: _Builder, m: re.Match, msg: str):
    value, unit = m.group(1), m.group(2)
    if unit in ("GiB", "GB"):  # V0's "GB" is bytes / 2**30 (worker/model_runner.py)
        b.set_gib("weights_bytes", value, msg)
    else:
        b.set("weights_bytes", int(round(float(value) * MiB)), msg)
    if m.group(3):
        b.set("weights_load_s", float(m.group(3)), msg)
    return True


def _read_kv_tokens(b: _Builder, m: re.Match, msg: str):
    if _int(m.group(1)) == 0 and b.zero_tokens_line is None:
        b.zero_tokens_line = b.lineno  # judged in parse_log, once the log's refusal is known
    b.set("gpu_kv_cache_tokens", _int(m.group(1)), msg)
    return True


def _read_profile_kv(b: _Builder, m: re.Match, msg: str):
    kv = dict(re.findall(r"(\w+)=(\S+)", m.group(1)))
    for key, name in (
        ("total_gpu_memory", "total_bytes"),
        ("peak_torch_memory", "peak_torch_bytes"),
        ("non_torch_memory", "non_torch_bytes"),
        ("kv_cache_size", "kv_cache_bytes"),
    ):
        if key in kv and kv[key].endswith("GiB"):
            b.set_gib(name, kv[key][:-3], msg)
    if "gpu_memory_utilization" in kv:
        b.set("gpu_memory_utilization", float(kv["gpu_memory_utilization"]), msg)
    return True


_READERS = {
    "non_default_args": _read_non_default_args,
    "engine_config": _read_engine_config,
    "server_version": _read_server_version,
    "model_loading": _read_model_loading,
    "kv_tokens": _read_kv_tokens,
    "profile_kv": _read_profile_kv,
}


def _finish(log: VllmLog) -> None:
    """Fill what follows from the lines read: the RESULT line, the model, the entry point."""
    r = log.result or {}
    if isinstance(r.get("num_gpu_blocks"), int) and log.num_gpu_blocks is None:
        log.num_gpu_blocks = r["num_gpu_blocks"]
        log.num_gpu_blocks_source = "RESULT line"
    for key in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
        if isinstance(r.get(key), int) and getattr(log, key) is None:
            setattr(log, key, r[key])
    if isinstance(r.get("startup_s"), (int, float)):
        log.startup_s = float(r["startup_s"])
    ex = log.exact or {}
    if isinstance(ex.get("num_gpu_blocks"), int) and log.num_gpu_blocks is None:
        log.num_gpu_blocks = ex["num_gpu_blocks"]
        log.num_gpu_blocks_source = "KVPLAN_EXACT"
    for key in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
        if isinstance(ex.get(key), int) and getattr(log, key) is None:
            setattr(log, key, ex[key])
    if log.max_model_len is None and log.concurrency_max_model_len is not None:
        log.max_model_len = log.concurrency_max_model_len
    # V0 ~0.6.4: peak_torch_memory counted the weights; activation = peak - weights.
    if log.activation_peak_bytes is None and log.peak_torch_bytes is not None and log.weights_bytes is not None:
        log.activation_peak_bytes = log.peak_torch_bytes - log.weights_bytes
        log.resolution_bytes["activation_peak_bytes"] = log.resolution_bytes.get(
            "peak_torch_bytes", 0
        ) + log.resolution_bytes.get("weights_bytes", 0)
        log.evidence.setdefault("activation_peak_bytes", log.evidence.get("peak_torch_bytes", ""))
    if log.requested_bytes is None and log.total_bytes is not None and log.gpu_memory_utilization is not None:
        if "v0" in log.families and "v1" not in log.families:
            # V0 logged total and utilization only; its budget was their product.
            log.requested_bytes = int(log.total_bytes * log.gpu_memory_utilization)
            log.resolution_bytes["requested_bytes"] = int(
                log.resolution_bytes.get("total_bytes", 0) * log.gpu_memory_utilization
            )
    if log.kv_cache_sizing == "extensible":
        # vLLM 0.34.0's "Available KV cache memory" is then the reserved capacity, not the cache
        # (engines/vllm/v0_34/log_grammar.py): the cache is the Extended line's blocks and GiB
        log.kv_cache_bytes = log.extended_kv_bytes
        log.resolution_bytes.pop("kv_cache_bytes", None)
        if log.extended_kv_bytes is not None and "extended_kv_bytes" in log.resolution_bytes:
            log.resolution_bytes["kv_cache_bytes"] = log.resolution_bytes["extended_kv_bytes"]
    if log.meminfo and log.meminfo.get("total"):
        log.total_bytes = log.meminfo["total"]
        log.free_at_start_bytes = log.meminfo.get("free", log.free_at_start_bytes)
        log.resolution_bytes.pop("total_bytes", None)
        log.resolution_bytes.pop("free_at_start_bytes", None)
    # model and entry point
    nd = log.non_default_args or {}
    if log.case and log.case.get("model"):
        log.model = str(log.case["model"])
    elif isinstance(nd.get("model"), str):
        log.model = nd["model"]
    elif isinstance(nd.get("model_tag"), str):
        log.model = nd["model_tag"]
    elif isinstance(log.engine_config.get("model"), str):
        log.model = log.engine_config["model"]
    if log.case and log.case.get("usage") in ("llm", "serve"):
        log.usage, log.usage_evidence = log.case["usage"], "kvplan child case line"
    elif "model_tag" in nd:
        log.usage, log.usage_evidence = "serve", "non-default args name model_tag (the `vllm serve` positional)"
    elif log.usage is None and nd.get("disable_log_stats") is True:
        log.usage, log.usage_evidence = "llm", "non-default args set disable_log_stats (the LLM class does)"
    if log.refusal is None and log.child_error and log.child_error.get("kind") == "refused":
        log.refusal = Refusal(kind="error", message=str(log.child_error.get("message", "")))


def engine_arguments(log: VllmLog) -> dict:
    """The engine arguments the log shows, as ``LLM(...)``/``vllm serve`` keyword names.

    Priority: a kvplan/calibration case line (exact), then "non-default args", then the simple
    fields of the V0/V1 "with config:" line (resolved values: dtype, max_seq_len -> max_model_len,
    tensor/pipeline parallel size, quantization, enforce_eager, kv_cache_dtype). The
    gpu_memory_utilization the profiling lines print is added when the arguments do not name it
    (it is what vLLM used; older releases defaulted to 0.90, the version of engines/vllm/v0_26 to 0.92).
    """
    out: dict[str, Any] = {}
    cfg = log.engine_config
    if log.case and isinstance(log.case.get("engine_args"), dict):
        out = dict(log.case["engine_args"])
    elif log.non_default_args is not None:
        out = dict(log.non_default_args)
    elif cfg:
        if isinstance(cfg.get("max_seq_len"), int):
            out["max_model_len"] = cfg["max_seq_len"]
        for key in ("tensor_parallel_size", "pipeline_parallel_size"):
            if isinstance(cfg.get(key), int) and cfg[key] != 1:
                out[key] = cfg[key]
        if isinstance(cfg.get("dtype"), str):
            out["dtype"] = cfg["dtype"]
        if cfg.get("quantization") not in (None, "None"):
            out["quantization"] = cfg["quantization"]
        if cfg.get("enforce_eager") is True:
            out["enforce_eager"] = True
        if isinstance(cfg.get("kv_cache_dtype"), str) and cfg["kv_cache_dtype"] != "auto":
            out["kv_cache_dtype"] = cfg["kv_cache_dtype"]
    if log.gpu_memory_utilization is not None:
        out.setdefault("gpu_memory_utilization", log.gpu_memory_utilization)
    return out


# --- several starts in one log -------------------------------------------------------------------
_DP_RANK = re.compile(r"EngineCore_DP(\d+)")


def split_starts(text: str) -> list[tuple[int, int]]:
    """The vLLM starts one log holds, as (first line, last line) pairs, 1-based, in order.

    A new start begins at a start line (the grammar's START_LINES, KVPLAN_CASE, CASE) after the
    current start has loaded weights or sized (or refused) its KV cache (SIZED_LINES, RESULT): a
    server restarted into the same log file, or two runs appended to one file. Lines repeated by
    tensor-parallel ranks never begin a start. A log without start lines is one start.
    """
    grammar = grammar_for(text)
    sized_lines = (*grammar.SIZED_LINES, RE_RESULT)
    lines = text.splitlines()
    starts: list[tuple[int, int]] = []
    first, sized = 1, False
    for lineno, raw in enumerate(lines, 1):
        msg = message_of(raw)
        if not msg:
            continue
        marker = msg.startswith(("KVPLAN_CASE ", "CASE ")) or any(r.search(msg) for r in grammar.START_LINES)
        if marker and any(r.search(msg) for r in grammar.START_LINES_DP):
            dp = _DP_RANK.search(raw)
            marker = dp is None or dp.group(1) == "0"
        if marker and sized:
            starts.append((first, lineno - 1))
            first, sized = lineno, False
        elif not sized and any(r.search(msg) for r in sized_lines):
            sized = True
    starts.append((first, max(len(lines), first)))
    return starts


def start_text(text: str, span: tuple[int, int]) -> str:
    """The lines of one start (a split_starts span), earlier lines left as empty lines so that
    line numbers stay those of the whole file."""
    lines = text.splitlines()
    first, last = span
    return "\n" * (first - 1) + "\n".join(lines[first - 1 : last])
