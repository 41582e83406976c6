"""vLLM 0.34.0's start-up log as a table of patterns: 0.33.0's (v0_33/log_grammar.py) plus the
lines of the extensible KV cache.

New lines (vLLM 0.34.0 source, exact format strings):

* ``Memory after warmup: F GiB free, C GiB committed to the KV cache, K GiB kept for transient
  activations (P GiB allocated at peak, G GiB of torch reservation growth); N KV cache blocks
  (B GiB) fit within the requested R GiB. Torch may reserve up to T GiB.``
  (v1/worker/extensible_kv_cache.py measure_kv_cache_blocks; one per rank, before the minimum
  over ranks, so the first one read is rank 0's). K = max(P, G). GiB figures are
  ``round(bytes / 2**30, 2)`` (utils/mem_utils.py format_gib).
* ``Extended KV cache to N blocks (X GiB).`` (extensible_kv_cache.py extend_kv_cache): the final
  num_gpu_blocks, after the minimum over the world group and the capacity; X includes the
  granule rounding.
* ``Remapping the KV cache from N to M blocks to fit the measured budget.`` (same function).
* ``Disabling the extensible KV cache: REASON. The KV cache will be sized from profiling
  estimates instead of measured memory.`` (v1/executor/abstract.py disable_extensible_kv_cache):
  the estimate path.
* ``gpu_memory_utilization=U caps this instance at R GiB, keeping W GiB of free device memory
  out of the KV cache. ...`` (measure_kv_cache_blocks, a warning).

Changed meaning, same text: under the extensible KV cache ``Available KV cache memory`` is the
reserved capacity (not the final size); ``GPU KV cache size: N tokens, Maximum concurrency ...``
is printed after warm-up and capture with the final blocks (v1/core/kv_cache_planning.py
finalize_extensible_kv_cache -> kv_cache_utils.update_kv_cache_capacity); ``Graph capturing
finished in S secs, took X GiB`` comes once (no throw-away estimate capture);
``Setting kv cache block size to N`` is printed when N differs from 64.
"""

from __future__ import annotations

import re

from kvplan.engines.vllm.log_line import LogLine
from kvplan.engines.vllm.v0_33 import log_grammar as _g33
from kvplan.engines.vllm.v0_33.log_grammar import (  # noqa: F401  (unchanged lines)
    RE_ACTUAL_USAGE,
    RE_BANNER_VERSION,
    RE_INIT_CONFIG,
    RE_KV_TOKENS_CONCURRENCY,
    RE_NON_DEFAULT,
    RE_SERVER_VERSION,
    SUGGESTION_BUFFER,
    _INT,
    _NUM,
)

VERSION = "0.34.0"
SERIES = "0.34"

RE_MEMORY_AFTER_WARMUP = re.compile(
    r"Memory after warmup: " + _NUM + r" GiB free, " + _NUM + r" GiB committed to the KV cache, " + _NUM
    + r" GiB kept for transient activations \(" + _NUM + r" GiB allocated at peak, " + _NUM
    + r" GiB of torch reservation growth\); (\d+) KV cache blocks \(" + _NUM + r" GiB\) fit within the requested "
    + _NUM + r" GiB\. Torch may reserve up to " + _NUM + r" GiB"
)
RE_EXTENDED = re.compile(r"Extended KV cache to (\d+) blocks \(" + _NUM + r" GiB\)")
RE_REMAPPING = re.compile(r"Remapping the KV cache from (\d+) to (\d+) blocks to fit the measured budget")
RE_EXTENSIBLE_DISABLED = re.compile(
    r"Disabling the extensible KV cache: (.*?)\. The KV cache will be sized from profiling estimates"
)
RE_UTILIZATION_CAPS = re.compile(
    r"gpu_memory_utilization=" + _NUM + r" caps this instance at " + _NUM + r" GiB, keeping " + _NUM
    + r" GiB of free device memory out of the KV cache"
)

VERSION_LINES = _g33.VERSION_LINES
START_LINES = _g33.START_LINES
START_LINES_DP = _g33.START_LINES_DP
SIZED_LINES = (RE_MEMORY_AFTER_WARMUP, RE_EXTENDED, *_g33.SIZED_LINES)

NEW_LINES: tuple[LogLine, ...] = (
    LogLine(
        RE_MEMORY_AFTER_WARMUP,
        (
            ("free_after_warmup_bytes", 1, "gib"),
            ("kv_committed_bytes", 2, "gib"),
            ("transient_kept_bytes", 3, "gib"),
            ("transient_peak_bytes", 4, "gib"),
            ("reserve_growth_bytes", 5, "gib"),
            ("rank_kv_blocks", 6, "int"),
            ("kv_cache_sizing", None, "extensible"),
        ),
        family="v1",
    ),
    # the final block count: read exactly, like a RESULT line
    LogLine(
        RE_EXTENDED,
        (("num_gpu_blocks", 1, "int"), ("num_gpu_blocks_source", None, "Extended KV cache line"),
         ("extended_kv_bytes", 2, "gib"), ("kv_cache_sizing", None, "extensible")),
        family="v1",
    ),
    LogLine(RE_REMAPPING),
    LogLine(RE_EXTENSIBLE_DISABLED, (("extensible_disabled_reason", 1, "text"), ("kv_cache_sizing", None, "estimate"))),
    LogLine(RE_UTILIZATION_CAPS, (("gpu_memory_utilization", 1, "float"),)),
)

# The new lines first: none of 0.33.0's patterns matches them.
LINES: tuple[LogLine, ...] = (*NEW_LINES, *_g33.LINES)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/extensible_kv_cache.py', 'measure_kv_cache_blocks'),
    ('v1/worker/extensible_kv_cache.py', 'extend_kv_cache'),
    ('v1/executor/abstract.py', 'Executor.disable_extensible_kv_cache'),
    ('v1/core/kv_cache_utils.py', 'update_kv_cache_capacity'),
)
