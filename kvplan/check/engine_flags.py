"""The `vllm serve` flags check reads into kvplan's EngineArgs, and those that change vLLM's
memory but that kvplan does not model.

The flags, their EngineArgs fields and value types come from the one table of engine arguments
(kvplan/engines/vllm/args.py ENGINE_ARGS); only how vLLM's argument parser reads the values
that are not plain int/float/str/bool is said here.
"""

from __future__ import annotations

import types

from kvplan.engines.vllm.args import ENGINE_ARGS
from kvplan.engines.vllm.serve_flags import parse_human_int, parse_max_model_len

# Values vLLM's parser reads with its own type functions (utils/argparse_utils.py
# human_readable_int / human_readable_int_or_auto); the rest are argparse int/float/str and
# BooleanOptionalAction switches, read by the table's type.
_VLLM_READERS = {
    "max_model_len": parse_max_model_len,
    "max_num_batched_tokens": parse_human_int,
    "kv_cache_memory_bytes": parse_human_int,
}
# Table rows that are kvplan's own options, not `vllm serve` flags of a deployment.
_NOT_SERVE_FLAGS = frozenset({"usage", "vllm_version"})
# Table rows a deployment sets that size nothing (a leader's address, often a variable the
# platform fills in, e.g. $(LWS_LEADER_ADDRESS)): check leaves them as it always did.
_NOT_SERVE_FLAGS |= {"data_parallel_address", "master_addr"}


def _reader(arg):
    if arg.name in _VLLM_READERS:
        return _VLLM_READERS[arg.name]
    t = arg.type
    if isinstance(t, types.UnionType):  # int | None -> int
        (t,) = (a for a in t.__args__ if a is not type(None))
    return t


# `vllm serve` flag (long spelling, no dashes) -> (kvplan EngineArgs field, how vLLM reads the value).
_ENGINE_FIELDS = {
    a.flags[0][2:]: (a.name, _reader(a)) for a in ENGINE_ARGS if a.flags and a.name not in _NOT_SERVE_FLAGS
}


# Read as ints for the GPU-count rules (check/rules/hardware.py); they are EngineArgs fields too
# (the world of ranks, capacity/ranks.py), so inputs.engine_args also hands them to the planner.
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
    "compilation-config": "CUDA-graph settings change the graph memory vLLM reserves",
    "cudagraph-capture-sizes": "CUDA-graph sizes change the graph memory vLLM reserves",
    "max-cudagraph-capture-size": "CUDA-graph sizes change the graph memory vLLM reserves",
    "kv-cache-dtype-skip-layers": "unquantized layers change the page size",
    "enable-expert-parallel": "expert parallel shards the experts over the data-parallel ranks instead of tensor parallel",
}
