"""The `vllm serve` flags check reads into kvplan's EngineArgs, and those that change vLLM's
memory but that kvplan does not model.

INTEGRATOR: _ENGINE_FIELDS is one of the engine-argument tables issue 11 folds into one
(engines/vllm/args.py on branch r-engine); derive it from there when that lands.
"""

from __future__ import annotations

from kvplan.engines.vllm.serve_flags import parse_human_int, parse_max_model_len


# `vllm serve` flags -> (kvplan EngineArgs field, how vLLM reads the value).
# (utils/argparse_utils.py human_readable_int[_or_auto]; argparse int/float; BooleanOptionalAction)
_ENGINE_FIELDS = {
    "tensor-parallel-size": ("tensor_parallel_size", int),
    "pipeline-parallel-size": ("pipeline_parallel_size", int),
    "max-model-len": ("max_model_len", parse_max_model_len),
    "gpu-memory-utilization": ("gpu_memory_utilization", float),
    "kv-cache-dtype": ("kv_cache_dtype", str),
    "block-size": ("block_size", int),
    "dtype": ("dtype", str),
    "quantization": ("quantization", str),
    "max-num-seqs": ("max_num_seqs", int),
    "max-num-batched-tokens": ("max_num_batched_tokens", parse_human_int),
    "enforce-eager": ("enforce_eager", bool),
    "kv-cache-memory-bytes": ("kv_cache_memory_bytes", parse_human_int),
    "enable-prefix-caching": ("enable_prefix_caching", bool),
    "disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", bool),
}


_OTHER_INT_FLAGS = ("data-parallel-size", "data-parallel-size-local", "nnodes")


_READ_FLAGS = frozenset(_ENGINE_FIELDS) | frozenset(_OTHER_INT_FLAGS) | {"model", "revision"}


# Flags that change vLLM's memory or KV-cache sizing but that kvplan's planner does not model.
_NOT_MODELLED = {
    "cpu-offload-gb": "weights offloaded to CPU free GPU memory for the KV cache",
    "num-gpu-blocks-override": "vLLM allocates exactly this many blocks",
    "speculative-config": "a draft model and its KV cache take GPU memory",
    "spec-model": "a draft model and its KV cache take GPU memory",
    "enable-lora": "LoRA adapters take GPU memory",
    "kv-offloading-size": "KV blocks offloaded to CPU",
    "kv-transfer-config": "KV transfer connectors change the cache layout",
    "decode-context-parallel-size": "decode context parallel splits the KV cache",
    "prefill-context-parallel-size": "prefill context parallel splits the KV cache",
    "compilation-config": "CUDA-graph settings change the graph memory vLLM reserves",
    "cudagraph-capture-sizes": "CUDA-graph sizes change the graph memory vLLM reserves",
    "max-cudagraph-capture-size": "CUDA-graph sizes change the graph memory vLLM reserves",
    "kv-cache-dtype-skip-layers": "unquantized layers change the page size",
}
