"""vLLM 0.33.0's start-up log as a table of patterns: 0.26.0's (v0_26/log_grammar.py) with the
lines that changed replaced.

Changed lines (vLLM 0.33.0 source; seen in tests/data/vllm-0.33.0-h200):
  * every line of the in-process engine carries ``(MainProcess pid=N) `` before the level; the
    prefix is removed by kvplan.verify.log.message_of like ``(EngineCore_DP0 pid=N)``.
  * ``GPU KV cache size: N tokens, Maximum concurrency for M tokens per request: Xx`` is one line
    (v1/core/kv_cache_utils.py update_kv_cache_capacity; ``GPU + host`` with HiSparse).
  * ``Actual usage is X GiB for consumed memory (weights + non-torch), Y GiB for peak activation,
    and C GiB for CUDAGraph memory.`` (v1/worker/gpu_worker.py compile_or_warm_up_model): X is
    total consumed memory, Y the transient peak plus the applied CUDA-graph estimate, C the
    captured graphs. Y and C are read; X is not stored (VllmLog has no consumed-memory field;
    KVPLAN_EXACT gives the weights apart).
  * ``Setting kv cache block size to N for B backend(s).`` (names joined with ``/``).
  * ``CUDA graph memory profiling is enabled ... --gpu-memory-utilization=U is equivalent to
    --gpu-memory-utilization=E`` (the V2 runner's estimate, not parsed: the pool line is).
"""

from __future__ import annotations

import re

from kvplan.engines.vllm.log_line import LogLine
from kvplan.engines.vllm.v0_26 import log_grammar as _g26
from kvplan.engines.vllm.v0_26.log_grammar import (  # noqa: F401  (unchanged lines)
    RE_BANNER_VERSION,
    RE_INIT_CONFIG,
    RE_NON_DEFAULT,
    RE_SERVER_VERSION,
    SUGGESTION_BUFFER,
    _INT,
    _NUM,
)

VERSION = "0.33.0"
SERIES = "0.33"

RE_KV_TOKENS_CONCURRENCY = re.compile(
    r"(?:GPU|GPU \+ host) KV cache size: " + _INT + r" tokens, Maximum concurrency for " + _INT
    + r" tokens per request: " + _NUM + r"x"
)
RE_ACTUAL_USAGE = re.compile(
    r"Actual usage is " + _NUM + r" GiB for consumed memory \(weights \+ non-torch\), " + _NUM
    + r" GiB for peak activation, and " + _NUM + r" GiB for CUDAGraph memory"
)

VERSION_LINES = _g26.VERSION_LINES
START_LINES = _g26.START_LINES
START_LINES_DP = _g26.START_LINES_DP
SIZED_LINES = (RE_KV_TOKENS_CONCURRENCY, *_g26.SIZED_LINES)


def _replace(lines: tuple[LogLine, ...]) -> tuple[LogLine, ...]:
    out: list[LogLine] = []
    for line in lines:
        if line.pattern is _g26.RE_KV_TOKENS:
            # the merged line first: its two halves are read by the kv_tokens reader and the
            # concurrency fields below (0.26.0's patterns match inside it with re.search)
            out.append(line)
        elif line.pattern is _g26.RE_ACTUAL_USAGE:
            out.append(
                LogLine(
                    RE_ACTUAL_USAGE,
                    (("activation_peak_bytes", 2, "gib"), ("cudagraph_bytes", 3, "gib")),
                    family="v1",
                )
            )
            continue
        else:
            out.append(line)
    return tuple(out)


LINES: tuple[LogLine, ...] = _replace(_g26.LINES)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/kv_cache_utils.py', 'update_kv_cache_capacity'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu_worker.py', 'Worker.compile_or_warm_up_model'),
    ('entrypoints/common/startup.py', 'log_non_default_args'),
)
