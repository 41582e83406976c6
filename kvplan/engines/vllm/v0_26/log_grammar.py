"""vLLM 0.26.0's start-up log as a table of patterns: which line says what, in which unit.

kvplan.verify.log applies this grammar to every message of a log (prefixes and colours already
removed). It is also the grammar used for logs of older releases: their lines are read where
they still match (the V1 lines of earlier 0.x releases, and the V0 engine's lines below).

Line families understood (each regex names the vLLM source that prints it):

vLLM 0.26.x (V1 engine; earlier V1 releases print the same lines where they exist)
  * ``non-default args: {...}``             entrypoints/serve/utils/api_utils.py log_non_default_args
  * ``Initializing a V1 LLM engine (vX) with config: model='...', ...``   v1/engine/core.py
  * ``Chunked prefill is enabled with max_num_batched_tokens=N.``          config/scheduler.py
  * ``Model loading took X GiB [memory] and S seconds``  v1/worker/gpu/model_runner.py (V2 runner),
    v1/worker/gpu_model_runner.py (V1 runner)
  * ``Available KV cache memory: X GiB``    v1/worker/gpu_worker.py determine_available_memory
  * ``GPU KV cache size: N tokens`` / ``Maximum concurrency for N tokens per request: Xx``
    v1/core/kv_cache_utils.py get_kv_cache_configs
  * ``Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is (U, R GiB).
    Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory, and
    C GiB for CUDAGraph memory. Replace ... `--kv-cache-memory=B1` ... `--kv-cache-memory=B2` ...``
    v1/worker/gpu_worker.py compile_or_warm_up_model
  * ``CUDA graph pool memory: X GiB (actual), Y GiB (estimated)``  v1/worker/gpu_worker.py, and
    ``Estimated CUDA graph memory: X GiB total`` (V1 runner, v1/worker/gpu_model_runner.py)
  * ``Add N padding layers``                 v1/core/kv_cache_utils.py
  * refusals: ``To serve at least one request with the model's max seq len (L), (X GiB KV cache
    is needed, ...available KV cache memory (Y GiB). ...estimated maximum model length is M.``
    and ``No available memory for the cache blocks`` (kv_cache_utils._check_enough_kv_cache_memory)
  * ``Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: N``
    v1/metrics/loggers.py (INFO before 0.2x, DEBUG in 0.26: `vllm serve` logs it when visible)
  vLLM 0.26 does NOT log num_gpu_blocks at INFO level; it logs the KV tokens. ``num_gpu_blocks``
  stays None unless a line above, a ``RESULT`` line or a ``KVPLAN_EXACT`` line gives it.

Older engines (V0), where their lines allow
  * ``Loading model weights took X GB`` (v0.4-0.6 worker/model_runner.py; the figure is
    bytes / 2**30, so GiB despite the label) and ``Model loading took X GB and S seconds`` (v0.7-0.8)
  * ``Memory profiling results: total_gpu_memory=..GiB initial_memory_usage=.. peak_torch_memory=..
    memory_usage_post_profile=.. non_torch_memory=.. kv_cache_size=.. gpu_memory_utilization=..``
    (one line, ~v0.6.4; peak_torch_memory includes the weights)
  * ``Memory profiling takes S seconds`` / ``the current vLLM instance can use total_gpu_memory (T)
    x gpu_memory_utilization (U) = R`` / ``model weights take W; non_torch_memory takes N; PyTorch
    activation peak memory takes A; the rest of the memory reserved for KV Cache is K.`` (v0.6.6-0.8)
  * the tabular ``Memory profiling results:`` block of the v0.6.5 development builds
  * ``# GPU blocks: N, # CPU blocks: M`` / ``# cuda blocks: N, # CPU blocks: M`` (V0 executors) and
    ``# GPU blocks: N`` (early V1)
  * ``The model's max seq len (L) is larger than the maximum number of tokens that can be stored
    in KV cache (T)`` (V0 refusal)

A later vLLM version whose log changed (a reworded "Actual usage" line, two lines merged) gets
its own module beside this one (``engines/vllm/v0_33/log_grammar.py``: its own ``LINES``, the
unchanged entries imported from here) and one entry in kvplan.verify.log's ``GRAMMARS``.
"""

from __future__ import annotations

import re

from kvplan.engines.vllm.log_line import LogLine

VERSION = "0.26.0"
SERIES = "0.26"  # the releases whose log this grammar reads first (messages name it)

# v1/worker/gpu_worker.py compile_or_warm_up_model: the --kv-cache-memory suggestion leaves this
# buffer ("redundancy_buffer_memory = 150 * (1 << 20)"), in bytes.
SUGGESTION_BUFFER = 150 * (1 << 20)

_NUM = r"(-?\d+(?:\.\d+)?)"
_INT = r"(\d[\d,]*)"

# --- V1 engine (0.26) -----------------------------------------------------------------------------
RE_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
RE_INIT_CONFIG = re.compile(r"Initializing an? (?:V\d )?LLM engine(?: \(v([^)\s]+)\))? with config: (.*)$")
RE_SERVER_VERSION = re.compile(r"vLLM (?:API )?server version (\d+\.\d+[\w.+-]*)")
RE_BANNER_VERSION = re.compile(r"[█▀▄]\s+version (\d+\.\d+[\w.+-]*)\s*$")
RE_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
RE_ATTN_BACKEND = re.compile(r"Using (\S+) attention backend")
RE_MAX_MODEL_LEN = re.compile(r"Using max model len (\d+)")
RE_ARCH = re.compile(r"Resolved architecture: (\S+)")
RE_MODEL_LOADING = re.compile(
    r"(?:Model loading|Loading model weights) took " + _NUM + r" ?(GiB|GB|MiB|MB)(?: memory)?(?: and " + _NUM + r" seconds)?"
)
RE_AVAILABLE = re.compile(r"Available KV cache memory: " + _NUM + r" GiB")
RE_KV_TOKENS = re.compile(r"GPU KV cache size: " + _INT + r" tokens")
RE_CONCURRENCY = re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x")
RE_FREE_ON_START = re.compile(r"Free memory on device \(" + _NUM + r"/" + _NUM + r" GiB\) on startup")
RE_DESIRED = re.compile(r"Desired GPU memory utilization is \(" + _NUM + r", " + _NUM + r" GiB\)")
RE_ACTUAL_USAGE = re.compile(
    r"Actual usage is " + _NUM + r" GiB for weight, " + _NUM + r" GiB for peak activation, "
    + _NUM + r" GiB for non-torch memory, and " + _NUM + r" GiB for CUDAGraph memory"
)
RE_SUGGEST = re.compile(
    r"--kv-cache-memory=(-?\d+)`[^`]*?to fit into requested memory, or `--kv-cache-memory=(-?\d+)`"
)
RE_IN_USE = re.compile(r"Current kv cache memory in use is " + _NUM + r" GiB")
RE_CG_POOL = re.compile(r"CUDA graph pool memory: " + _NUM + r" GiB \(actual\), " + _NUM + r" GiB \(estimated\)")
RE_CG_ESTIMATED = re.compile(r"Estimated CUDA graph memory: " + _NUM + r" GiB total")
RE_GRAPH_CAPTURE = re.compile(r"Graph capturing finished in \d+ secs?, took " + _NUM + r" GiB")
RE_KV_OVERRIDE = re.compile(r"reserved " + _NUM + r" GiB memory for KV Cache as specified by kv_cache_memory_bytes")
RE_PADDING = re.compile(r"Add (\d+) padding layers")
RE_INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUM + r" s")
RE_STATS_BLOCKS = re.compile(r"after num_gpu_blocks is: (\d+)")
RE_FREE_TOO_LOW = re.compile(
    r"Free memory on device \S+ \(" + _NUM + r"/" + _NUM + r" GiB\) on startup is less than desired GPU memory "
    r"utilization \(" + _NUM + r", " + _NUM + r" GiB\)"
)
RE_REFUSE_V1 = re.compile(
    r"To serve at least one request with the models?'s? max seq len \((\d+)\), \(" + _NUM
    + r" GiB KV cache is needed, which is larger than the available KV cache memory \(" + _NUM + r" GiB\)\."
    r"(?: Based on the available memory, (?:the )?estimated maximum model length is (\d+)\.)?"
)
RE_NO_MEMORY = re.compile(r"No available memory for the cache blocks")
RE_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError")

# --- V0 -----------------------------------------------------------------------------------------
RE_PROFILE_KV = re.compile(r"Memory profiling results: (\w+=.*)$")
RE_PROFILE_TAKES = re.compile(r"Memory profiling takes " + _NUM + r" seconds")
RE_INSTANCE_CAN_USE = re.compile(
    r"the current vLLM instance can use total_gpu_memory \(" + _NUM + r"GiB\) x gpu_memory_utilization \("
    + _NUM + r"\) = " + _NUM + r"GiB"
)
RE_WEIGHTS_TAKE = re.compile(
    r"model weights take " + _NUM + r"GiB; non_torch_memory takes " + _NUM + r"GiB; PyTorch activation peak "
    r"memory takes " + _NUM + r"GiB; the rest of the memory reserved for KV Cache is " + _NUM + r"GiB"
)
RE_TABLE = {  # the v0.6.5 development-build table (vllm PR #10511)
    "total": re.compile(r"^total_gpu_memory\s+" + _NUM + r"GiB\s*$"),
    "util": re.compile(r"^gpu_memory_utilization\s+" + _NUM + r"\s*$"),
    "requested": re.compile(r"^the current vLLM instance can use\s+" + _NUM + r"GiB\s*$"),
    "weights": re.compile(r"^model weights take\s+" + _NUM + r"GiB\s*$"),
    "non_torch": re.compile(r"^non_torch_memory\s+" + _NUM + r"GiB\s*$"),
    "activation": re.compile(r"^PyTorch activation peak memory\s+" + _NUM + r"GiB\s*$"),
    "available": re.compile(r"^available_kv_cache_memory\s+" + _NUM + r"GiB\s*$"),
}
RE_BLOCKS = re.compile(r"(?:^|#\s*|\b)(?:GPU|gpu|cuda|CUDA) blocks: (\d+)(?:, # CPU blocks: (\d+))?")
RE_REFUSE_V0 = re.compile(
    r"The model's max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in KV "
    r"cache \((\d+)\)"
)


# Lines whose groups name the vLLM version (kvplan.verify.log picks a grammar from the first).
VERSION_LINES = (RE_SERVER_VERSION, RE_BANNER_VERSION, RE_INIT_CONFIG)

# Several starts in one log (kvplan.verify.log.split_starts). Lines a start prints once, before it
# sizes memory: the API server's version banner and its non-default args (entrypoints/serve), the
# engine core's "Initializing a V1 LLM engine" line (v1/engine/core.py; with data parallelism
# every EngineCore_DPn prints one, so only DP rank 0's counts: START_LINES_DP).
START_LINES = (RE_SERVER_VERSION, RE_BANNER_VERSION, RE_NON_DEFAULT, RE_INIT_CONFIG)
START_LINES_DP = (RE_INIT_CONFIG,)
# Lines that only come once a start has loaded weights or sized its KV cache (or refused to).
SIZED_LINES = (
    RE_MODEL_LOADING, RE_AVAILABLE, RE_KV_TOKENS, RE_CONCURRENCY, RE_FREE_ON_START, RE_NO_MEMORY, RE_REFUSE_V1,
    RE_REFUSE_V0, RE_BLOCKS, RE_PROFILE_KV, RE_STATS_BLOCKS, RE_FREE_TOO_LOW,
)

_V0_TABLE_FIELDS = {  # the v0.6.5 development-build table: key -> (log field, converter)
    "total": ("total_bytes", "gib"),
    "util": ("gpu_memory_utilization", "float"),
    "requested": ("requested_bytes", "gib"),
    "weights": ("weights_bytes", "gib"),
    "non_torch": ("non_torch_bytes", "gib"),
    "activation": ("activation_peak_bytes", "gib"),
    "available": ("kv_cache_bytes", "gib"),
}

# Tried in this order on every message; see kvplan.engines.vllm.log_line for the columns.
LINES: tuple[LogLine, ...] = (
    LogLine(RE_NON_DEFAULT, reader="non_default_args", excerpt=False),
    LogLine(RE_INIT_CONFIG, reader="engine_config", excerpt=False),
    LogLine(RE_SERVER_VERSION, reader="server_version"),
    LogLine(RE_BANNER_VERSION, reader="server_version"),
    LogLine(RE_CHUNKED, (("max_num_batched_tokens", 1, "int"),)),
    LogLine(RE_ATTN_BACKEND, (("attention_backend", 1, "text"),)),
    LogLine(RE_MAX_MODEL_LEN, (("max_model_len", 1, "int"),), excerpt=False),
    LogLine(RE_ARCH, (("architecture", 1, "text"),), excerpt=False),
    LogLine(RE_MODEL_LOADING, reader="model_loading"),
    LogLine(RE_AVAILABLE, (("kv_cache_bytes", 1, "gib"),), family="v1"),
    LogLine(RE_KV_TOKENS, reader="kv_tokens", family="v1"),
    LogLine(RE_CONCURRENCY, (("concurrency_max_model_len", 1, "tokens"), ("max_concurrency", 2, "float"))),
    LogLine(RE_FREE_ON_START, (("free_at_start_bytes", 1, "gib"), ("total_bytes", 2, "gib"))),
    LogLine(RE_DESIRED, (("gpu_memory_utilization", 1, "float"), ("requested_bytes", 2, "gib")), excerpt=False),
    LogLine(
        RE_ACTUAL_USAGE,
        (("weights_bytes", 1, "gib"), ("activation_peak_bytes", 2, "gib"), ("non_torch_bytes", 3, "gib"), ("cudagraph_bytes", 4, "gib")),
        family="v1",
    ),
    LogLine(RE_SUGGEST, (("suggested_fit_requested_bytes", 1, "int"), ("suggested_fill_gpu_bytes", 2, "int")), excerpt=False),
    LogLine(RE_IN_USE, (("kv_cache_in_use_bytes", 1, "gib"),), excerpt=False),
    LogLine(RE_CG_POOL, (("cudagraph_estimate_bytes", 2, "gib"),)),  # group 1: the captured bytes
    LogLine(RE_CG_ESTIMATED, (("cudagraph_estimate_bytes", 1, "gib"),)),
    LogLine(RE_GRAPH_CAPTURE),
    LogLine(RE_KV_OVERRIDE, (("kv_cache_memory_override_bytes", 1, "gib"),)),
    LogLine(RE_PADDING, (("padding_layers", 1, "int"),)),
    LogLine(RE_INIT_ENGINE, (("init_engine_s", 1, "float"),)),
    LogLine(RE_STATS_BLOCKS, (("num_gpu_blocks", 1, "int"), ("num_gpu_blocks_source", None, "stats logger line"))),
    LogLine(RE_FREE_TOO_LOW, refusal="free_memory"),
    LogLine(
        RE_REFUSE_V1,
        (("max_model_len", 1, "int"), ("needed_bytes", 2, "gib"), ("available_bytes", 3, "gib"), ("estimated_max_model_len", 4, "int")),
        refusal="max_model_len",
    ),
    LogLine(RE_NO_MEMORY, refusal="no_memory"),
    LogLine(RE_OOM, refusal="oom"),
    # V0 engine
    LogLine(RE_PROFILE_KV, reader="profile_kv", family="v0"),
    LogLine(RE_PROFILE_TAKES, family="v0"),
    LogLine(
        RE_INSTANCE_CAN_USE,
        (("total_bytes", 1, "gib"), ("gpu_memory_utilization", 2, "float"), ("requested_bytes", 3, "gib")),
        family="v0",
    ),
    LogLine(
        RE_WEIGHTS_TAKE,
        (("weights_bytes", 1, "gib"), ("non_torch_bytes", 2, "gib"), ("activation_peak_bytes", 3, "gib"), ("kv_cache_bytes", 4, "gib")),
        family="v0",
    ),
    *(
        LogLine(RE_TABLE[key], ((field, 1, conv),), family="v0", anchored=True)
        for key, (field, conv) in _V0_TABLE_FIELDS.items()
    ),
    LogLine(
        RE_BLOCKS,
        (("num_gpu_blocks", 1, "int"), ("num_gpu_blocks_source", None, "block-count line"), ("num_cpu_blocks", 2, "int")),
        unless="num_gpu_blocks",
    ),
    LogLine(RE_REFUSE_V0, (("max_model_len", 1, "int"), ("kv_capacity_tokens", 2, "int")), refusal="max_model_len"),
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('entrypoints/serve/utils/api_utils.py', 'log_non_default_args'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu_worker.py', 'Worker.compile_or_warm_up_model'),
    ('v1/core/kv_cache_utils.py', 'get_kv_cache_configs'),
)
