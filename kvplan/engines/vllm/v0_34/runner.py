"""vLLM 0.34.0's model runner and CUDA-graph memory.

The V1 model runner is gone (v1/worker/gpu_model_runner.py deleted; gpu_worker.py
_make_model_runner builds the V2 runner, VLLM_USE_V2_MODEL_RUNNER=0 raises): every model runs V2,
as kvplan already assumed for 0.33.0.

CUDA graphs (v1/worker/gpu/model_runner.py capture_model, profile_cudagraph_memory):

* extensible KV cache: no estimate (profile_cudagraph_memory returns 0); the pool is captured
  once, before the cache is extended, and what it holds is missing from the free memory the
  cache is sized from (memory.py). kvplan subtracts the captured pool: ``cudagraph_bytes``'s
  first value.
* estimate path: 0.33.0's estimate, subtracted from the budget; 0.34.0 empties torch's cache
  before reading the free memory after capture, which makes both the estimate and the logged
  pool somewhat smaller by an amount not settled by the source.

FITTED on ONE real 0.34.0 start: the captured pool is 0.26.0's measured pool (51 capture sizes up
to 512; v0_26/runner.py CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER x layers) less
CAPTURE_CACHE_RELEASE_BYTES, the warm-up activations 0.34.0's extra ``empty_cache`` returns
before measuring: Llama-3-8B (32 layers) on an H100, tests/data/vllm-0.34.0-h100/
llama3-8b_serve_graphs, KVPLAN_EXACT cudagraph_bytes 725,614,592 B ("took 0.68 GiB")
against 0.26.0's 1,050,800,000 B. No other model or layer count is checked (real_starts.py
labels graphs of other families). The estimate path's estimate is taken to shrink by the same
amount (the source says both do; not measured).

Capture sizes (config/vllm.py _split_cudagraph_capture_sizes, compilation.py
prefill_cudagraph_capture_grid / decode_cudagraph_capture_grid): off data-centre Blackwell the
defaults reproduce 0.33.0's shared list (51 sizes up to 512 on H100/H200). On SM100 (compute
capability 10.x) the prefill (token-keyed) grid reaches min(8192, max_num_batched_tokens) and the
decode (request-keyed FULL) grid reaches max_num_seqs, with decode graphs capped at 8192 tokens:
many more and wider graphs, whose memory kvplan has not measured (real_starts.py labels them).
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26.runner import CUDAGRAPH_BASE_BYTES, CUDAGRAPH_BYTES_PER_LAYER
from kvplan.engines.vllm.v0_33.runner import (  # noqa: F401  (unchanged)
    DEFAULT_CAPTURE_SIZES,
    FULL_GRAPH_PROFILING_SAMPLES,
    MIN_PER_GRAPH_BYTES,
    uses_v2_runner,
)
from kvplan.model.spec import ModelSpec
from kvplan.engines.vllm.v0_33.runner import cuda_graph_max_tokens as _cuda_graph_max_tokens_033

# FITTED on llama3-8b_serve_graphs (one start): 1,050,800,000 - 725,614,592 B.
CAPTURE_CACHE_RELEASE_BYTES = 325_185_408
# compilation.py / config/vllm.py: the SM100 prefill grid's and decode token cap's default top.
SM100_MAX_CAPTURE_TOKENS = 8192


def cudagraph_bytes(spec: ModelSpec, *, enforce_eager: bool, num_layers: int) -> tuple[int, int]:
    """(the captured graph pool, the estimate-path estimate), bytes per GPU: 0.26.0's pool less
    CAPTURE_CACHE_RELEASE_BYTES, and that plus the FULL-graph extrapolation's minimum (49 x 1
    MiB, 0.33.0's rule). (0, 0) under --enforce-eager. Fitted on one start (module docstring)."""
    if enforce_eager:
        return 0, 0
    captured = CUDAGRAPH_BASE_BYTES + CUDAGRAPH_BYTES_PER_LAYER * num_layers - CAPTURE_CACHE_RELEASE_BYTES
    return captured, captured + (DEFAULT_CAPTURE_SIZES - FULL_GRAPH_PROFILING_SAMPLES) * MIN_PER_GRAPH_BYTES


def cuda_graph_max_tokens(args, compute_capability: str | None = None) -> int:
    """The most scheduled tokens one step may hold and still replay a captured CUDA graph (0
    under --enforce-eager). Off SM100: 0.33.0's rule (ceiling 512). On SM100 (10.x): the larger
    of the prefill grid's top, min(8192, max_num_batched_tokens), and the decode grid's,
    min(max_num_seqs, 8192) one-token requests. An unset --max-num-seqs /
    --max-num-batched-tokens is taken as not binding (its default is at least 8192 tokens on
    every data-centre Blackwell tier, vLLM get_batch_defaults). Rule source: vLLM 0.34.0
    config/vllm.py _split_cudagraph_capture_sizes (wide_defaults)."""
    if not (compute_capability or "").startswith("10."):
        return _cuda_graph_max_tokens_033(args, compute_capability)
    if getattr(args, "enforce_eager", False):
        return 0
    mbt = getattr(args, "max_num_batched_tokens", None) or SM100_MAX_CAPTURE_TOKENS
    seqs = getattr(args, "max_num_seqs", None) or SM100_MAX_CAPTURE_TOKENS
    return max(min(SM100_MAX_CAPTURE_TOKENS, int(mbt)), min(int(seqs), SM100_MAX_CAPTURE_TOKENS))


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/vllm.py', 'VllmConfig._set_cudagraph_sizes'),
    ('config/vllm.py', 'VllmConfig._split_cudagraph_capture_sizes'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.capture_model'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_cudagraph_memory'),
)
