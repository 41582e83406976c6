"""The engine arguments kvplan models, declared once.

ENGINE_ARGS is the one table of the `vllm serve` arguments kvplan sizes with: for each, its
name (vLLM's, underscored), Python type, range, `vllm serve` spelling(s), default rule and help.
EngineArgs (the frozen pydantic model an estimate takes) is built from it, so its validation is
the table's; CLI options, config-YAML keys, check's catalogue, verify's engine_args and the
renderers can be derived from the same table (``engine_arg(name)``, ``ENGINE_ARGS``).

Version-specific choices (which --kv-cache-dtype / --dtype values exist) are read from the
default version's rules (engines/vllm/versions.py); nothing here names a version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ConfigDict, Field, create_model, field_validator

from kvplan.engines.vllm import versions

_RULES = versions.default()
_QUANT = _RULES.quantization
_KV_CACHE_DTYPES = _RULES.kv_spec.KV_CACHE_DTYPES


def _check_kv_cache_dtype(v: str) -> str:
    if v in _QUANT.VLLM_ONLY_KV_CACHE_DTYPES:
        raise ValueError(
            # every supported version shares this list (the newer package reuses the older one's quantization rules)
            # and the field validator cannot see --vllm-version: the message names no one version
            f"vLLM ({', '.join(versions.SUPPORTED)}) accepts {v!r} but kvplan cannot size it yet; kvplan sizes "
            + ", ".join(_KV_CACHE_DTYPES)
        )
    if v not in _KV_CACHE_DTYPES:
        raise ValueError(f"must be one of {', '.join(_KV_CACHE_DTYPES)}")
    return v


def _check_dtype(v: str) -> str:
    if v not in _QUANT.VLLM_DTYPES:
        raise ValueError(f"must be one of {', '.join(_QUANT.VLLM_DTYPES)} (vLLM's spelling)")
    return v


def _check_block_size(v: int | None) -> int | None:
    if v is not None and (v <= 0 or v % 16):
        raise ValueError("must be a positive multiple of 16 (FlashAttention kernel blocks)")
    return v


def _check_max_model_len(v: int | None) -> int | None:
    if v is not None and v != -1 and v <= 0:
        raise ValueError("must be a positive number of tokens, or 'auto'")
    if v is not None and v > 1 << 32:
        raise ValueError("must be at most 4,294,967,296 tokens")
    return v


def _check_limit_mm_per_prompt(v: str | None) -> str | None:
    """``--limit-mm-per-prompt`` as vLLM reads it (config/multimodal.py MultiModalConfig
    limit_per_prompt): a JSON object of modality -> item count, or -> {"count": N, ...}; returned
    as compact JSON with sorted keys of modality -> count (the count is all kvplan sizes with)."""
    if v is None:
        return None
    import json

    try:
        data = json.loads(v)
    except (TypeError, ValueError):
        raise ValueError("must be a JSON object of modality -> count, e.g. '{\"image\": 0, \"video\": 0}'") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object of modality -> count, e.g. '{\"image\": 0, \"video\": 0}'")
    out: dict[str, int] = {}
    for modality, limit in data.items():
        count = limit.get("count", 999) if isinstance(limit, dict) else limit
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"the limit of {modality!r} must be a count >= 0, got {limit!r}")
        out[str(modality)] = count
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _check_eplb_config(v: str | None) -> str | None:
    """``--eplb-config`` as vLLM reads it (config/parallel.py EPLBConfig, a JSON object): returned
    as compact JSON with sorted keys; ``num_redundant_experts`` (the only key kvplan sizes with)
    must be an int >= 0 (EPLBConfig: Field(ge=0))."""
    if v is None:
        return None
    import json

    try:
        data = json.loads(v)
    except (TypeError, ValueError):
        raise ValueError("must be a JSON object, e.g. '{\"num_redundant_experts\": 32}'") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object, e.g. '{\"num_redundant_experts\": 32}'")
    r = data.get("num_redundant_experts", 0)
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"num_redundant_experts must be an integer >= 0, got {r!r}")
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


# vLLM config/parallel.py DistributedExecutorBackend (both supported versions)
DISTRIBUTED_EXECUTOR_BACKENDS = ("ray", "mp", "uni", "external_launcher")


def _check_backend(v: str | None) -> str | None:
    if v is not None and v not in DISTRIBUTED_EXECUTOR_BACKENDS:
        raise ValueError("must be one of " + ", ".join(DISTRIBUTED_EXECUTOR_BACKENDS))
    return v


def _check_json(v: str | None) -> str | None:
    from kvplan.engines.vllm.features import check_json_object

    return check_json_object(v)


def _check_usage(v: str) -> str:
    if v not in _RULES.defaults.USAGE_CONTEXTS:
        raise ValueError("must be 'serve' or 'llm'")
    return v


@dataclass(frozen=True)
class EngineArg:
    """One engine argument.

    Attributes:
        name: vLLM's (and EngineArgs') field name, e.g. "max_num_seqs".
        type: the Python type of the value (None allowed where ``type`` says so).
        default: the value EngineArgs holds when not given (None = vLLM's default for this model
            and GPU, resolved by the estimate).
        default_rule: how the estimate resolves it when not given (prose, for docs and help).
        flags: `vllm serve` spellings, long first ("--max-num-seqs", ...).
        help: one line for users.
        gt / ge / le: numeric range (pydantic constraints; None = unbounded).
        check: extra validation (raises ValueError with the message users see), or None.
        metavar: the placeholder for the value in kvplan's --help ("N", "TOKENS"; None for a
            bare flag).
    """

    name: str
    type: Any
    default: Any
    default_rule: str
    flags: tuple[str, ...]
    help: str
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    check: Callable[[Any], Any] | None = None
    metavar: str | None = None

    def field_info(self):
        """The pydantic Field for this argument (default and range)."""
        bounds = {k: v for k, v in (("gt", self.gt), ("ge", self.ge), ("le", self.le)) if v is not None}
        return Field(default=self.default, **bounds)


ENGINE_ARGS: tuple[EngineArg, ...] = (
    EngineArg("tensor_parallel_size", int, 1, "1", ("--tensor-parallel-size", "-tp"),
              "GPUs per pipeline stage (tensor parallel).", ge=1, le=1024, metavar="N"),
    EngineArg("pipeline_parallel_size", int, 1, "1", ("--pipeline-parallel-size", "-pp"),
              "Pipeline stages.", ge=1, le=1024, metavar="N"),
    EngineArg("max_model_len", int | None, None, "the model's limit (max_position_embeddings, rope scaling); "
              "-1 = auto (largest that fits)", ("--max-model-len",), "Tokens per request.", check=_check_max_model_len, metavar="TOKENS"),
    EngineArg("gpu_memory_utilization", float, _RULES.defaults.DEFAULT_GPU_MEMORY_UTILIZATION,
              "the version's fixed default", ("--gpu-memory-utilization",),
              "Fraction of CUDA-visible memory vLLM may use.", gt=0, le=1, metavar="FRACTION"),
    EngineArg("kv_cache_dtype", str, "auto", "auto = the model's activation dtype (fp8 for checkpoints with fp8 KV scales)",
              ("--kv-cache-dtype",), "KV-cache element type.", check=_check_kv_cache_dtype, metavar="DTYPE"),
    EngineArg("block_size", int | None, None, "the attention backend's preferred block (16; MLA backends differ)",
              ("--block-size",), "Tokens per KV-cache block.", check=_check_block_size, metavar="TOKENS"),
    EngineArg("dtype", str, "auto", "auto = the checkpoint dtype (float32 runs as bfloat16)", ("--dtype",),
              "Weight/activation dtype.", check=_check_dtype, metavar="DTYPE"),
    EngineArg("quantization", str | None, None, "the checkpoint's quantization_config", ("--quantization", "-q"),
              "Weight quantization method.", metavar="METHOD"),
    EngineArg("max_num_seqs", int | None, None, "the version's batch defaults (by GPU memory and usage)",
              ("--max-num-seqs",), "Most sequences per step.", ge=1, le=1 << 24, metavar="N"),
    EngineArg("max_num_batched_tokens", int | None, None,
              "the version's batch defaults, clamped to max_num_seqs x max_model_len",
              ("--max-num-batched-tokens",), "Most tokens per step.", ge=1, le=(1 << 31) - 1, metavar="TOKENS"),
    EngineArg("enforce_eager", bool, False, "False (CUDA graphs on)", ("--enforce-eager",), "Disable CUDA graphs."),
    EngineArg("kv_cache_memory_bytes", int | None, None, "unset (the utilization budget decides)",
              ("--kv-cache-memory-bytes",), "KV-cache bytes per GPU, bypassing the utilization budget.",
              gt=0, le=1 << 50, metavar="BYTES"),
    EngineArg("enable_prefix_caching", bool | None, None, "on; for hybrid models as the chosen version decides (docs/versions.md row 9)",
              ("--enable-prefix-caching", "--no-enable-prefix-caching"), "Prefix caching."),
    EngineArg("enable_chunked_prefill", bool | None, None, "on (every generative model kvplan sizes supports it)",
              ("--enable-chunked-prefill", "--no-enable-chunked-prefill"),
              "Chunked prefill; off raises a defaulted --max-num-batched-tokens to --max-model-len."),
    EngineArg("disable_hybrid_kv_cache_manager", bool, False, "False", ("--disable-hybrid-kv-cache-manager",),
              "Treat sliding/chunked layers as full attention."),
    EngineArg("limit_mm_per_prompt", str | None, None, "unset (every modality 999)", ("--limit-mm-per-prompt",),
              "Most items per prompt by modality (JSON); all 0 = text-only: no vision tower is built.",
              check=_check_limit_mm_per_prompt, metavar="JSON"),
    # -- multi-GPU layout (vLLM config/parallel.py ParallelConfig; engine/arg_utils.py spellings).
    # None / False = vLLM's default (1 / off); the world of ranks (capacity/ranks.py) reads them.
    EngineArg("data_parallel_size", int | None, None, "1", ("--data-parallel-size", "-dp"),
              "Data-parallel engines (MoE models: one expert group across them).", ge=1, le=1024, metavar="N"),
    EngineArg("data_parallel_size_local", int | None, None, "--data-parallel-size on one node; "
              "with --nnodes, the node's share", ("--data-parallel-size-local", "-dpl"),
              "Data-parallel engines on this node.", ge=0, le=1024, metavar="N"),
    EngineArg("enable_expert_parallel", bool, False, "False", ("--enable-expert-parallel", "-ep"),
              "Whole experts per GPU over TP x PCP x DP (instead of a slice of every expert)."),
    EngineArg("enable_eplb", bool, False, "False", ("--enable-eplb",), "Expert-parallel load balancing."),
    EngineArg("eplb_config", str | None, None, "unset (no redundant experts)", ("--eplb-config",),
              "EPLB settings (JSON); num_redundant_experts adds expert replicas.", check=_check_eplb_config,
              metavar="JSON"),
    EngineArg("decode_context_parallel_size", int | None, None, "1", ("--decode-context-parallel-size", "-dcp"),
              "Shard each request's KV tokens over this many TP ranks.", ge=1, le=1024, metavar="N"),
    EngineArg("prefill_context_parallel_size", int | None, None, "1", ("--prefill-context-parallel-size", "-pcp"),
              "Prefill context-parallel ranks (more GPUs, same KV capacity).", ge=1, le=1024, metavar="N"),
    EngineArg("nnodes", int | None, None, "1", ("--nnodes", "-n"), "Nodes the deployment spans.", ge=1, le=4096,
              metavar="N"),
    EngineArg("node_rank", int | None, None, "0", ("--node-rank", "-r"), "This node's index.", ge=0, le=4095,
              metavar="N"),
    EngineArg("headless", bool, False, "False", ("--headless",), "A worker node: no API server."),
    EngineArg("data_parallel_address", str | None, None, "unset (this host)", ("--data-parallel-address", "-dpa"),
              "The data-parallel leader's address (multi-node; sizes nothing).", metavar="HOST"),
    EngineArg("master_addr", str | None, None, "unset (this host)", ("--master-addr",),
              "The distributed master's address (multi-node without DP; sizes nothing).", metavar="HOST"),
    EngineArg("distributed_executor_backend", str | None, None, "mp (ray inside a Ray placement group)",
              ("--distributed-executor-backend",), "Worker backend: mp, ray, uni or external_launcher.",
              check=_check_backend, metavar="BACKEND"),
    # add-ons (engines/vllm/features.py reads them; each version's addons.py sizes them)
    EngineArg("speculative_config", str | None, None, "unset (no speculative decoding)", ("--speculative-config", "-sc"),
              "Speculative decoding (JSON: method, model, num_speculative_tokens ...).", check=_check_json, metavar="JSON"),
    EngineArg("spec_method", str | None, None, "unset", ("--spec-method",), "Shorthand for --speculative-config's method.",
              metavar="METHOD"),
    EngineArg("spec_model", str | None, None, "unset", ("--spec-model",), "Shorthand for --speculative-config's model.",
              metavar="MODEL"),
    EngineArg("spec_tokens", int | None, None, "unset", ("--spec-tokens",),
              "Shorthand for --speculative-config's num_speculative_tokens.", ge=1, le=1024, metavar="K"),
    EngineArg("enable_lora", bool, False, "False", ("--enable-lora",), "LoRA adapters (GPU slots for --max-loras)."),
    EngineArg("max_loras", int | None, None, "1", ("--max-loras",), "LoRA adapters in one batch (GPU slots).",
              ge=1, le=1 << 16, metavar="N"),
    EngineArg("max_lora_rank", int | None, None, "16", ("--max-lora-rank",), "Largest LoRA rank.", ge=1, le=512, metavar="RANK"),
    EngineArg("max_cpu_loras", int | None, None, "--max-loras", ("--max-cpu-loras",), "LoRA adapters cached in CPU memory.",
              ge=1, le=1 << 20, metavar="N"),
    EngineArg("fully_sharded_loras", bool, False, "False", ("--fully-sharded-loras",), "Shard LoRA slots over TP."),
    EngineArg("lora_dtype", str, "auto", "auto (the model dtype)", ("--lora-dtype",), "LoRA slot dtype.", metavar="DTYPE"),
    EngineArg("cpu_offload_gb", float, 0.0, "0", ("--cpu-offload-gb",), "GiB of weights per GPU kept in CPU memory.",
              ge=0, le=1 << 20, metavar="GIB"),
    EngineArg("cpu_offload_params", str | None, None, "unset (every parameter eligible)", ("--cpu-offload-params",),
              "Parameter-name segments --cpu-offload-gb may offload.", metavar="NAMES"),
    EngineArg("offload_group_size", int, 0, "0 (off)", ("--offload-group-size",), "Prefetch offload: layers per group.",
              ge=0, le=1 << 16, metavar="N"),
    EngineArg("offload_num_in_group", int | None, None, "1", ("--offload-num-in-group",),
              "Prefetch offload: layers offloaded per group.", ge=1, le=1 << 16, metavar="N"),
    EngineArg("offload_prefetch_step", int | None, None, "1", ("--offload-prefetch-step",),
              "Prefetch offload: layers prefetched ahead (GPU buffers).", ge=0, le=1 << 16, metavar="N"),
    EngineArg("offload_params", str | None, None, "unset", ("--offload-params",),
              "Prefetch offload: parameter-name segments to offload.", metavar="NAMES"),
    EngineArg("kv_offloading_size", float | None, None, "unset (off)", ("--kv-offloading-size",),
              "GiB of CPU memory for offloaded KV blocks (all workers).", gt=0, le=1 << 24, metavar="GIB"),
    EngineArg("kv_offloading_backend", str, "native", "native", ("--kv-offloading-backend",),
              "native or lmcache.", metavar="BACKEND"),
    EngineArg("kv_transfer_config", str | None, None, "unset", ("--kv-transfer-config",),
              "KV connector (JSON).", check=_check_json, metavar="JSON"),
    EngineArg("load_format", str | None, None, "auto (read the checkpoint)", ("--load-format",),
              "How vLLM loads weights; dummy = random weights, no checkpoint read (a draft then shares the "
              "target's embedding and lm_head).", metavar="FORMAT"),
    EngineArg("usage", str, "serve", "serve", (), "serve = `vllm serve`, llm = the offline LLM class "
              "(changes the batch defaults).", check=_check_usage),
    EngineArg("vllm_version", str, versions.DEFAULT_VERSION, "kvplan's default version", ("--vllm-version",),
              "Which vLLM version's rules to use (engines/vllm/versions.py).", metavar="VERSION"),
)

_BY_NAME = {a.name: a for a in ENGINE_ARGS}


def engine_arg(name: str) -> EngineArg:
    """The table row of argument ``name`` (KeyError when kvplan does not model it)."""
    return _BY_NAME[name]


def _validator(arg: EngineArg):
    check = arg.check

    def _v(cls, v):
        return check(v)

    _v.__name__ = f"_check_{arg.name}"
    return field_validator(arg.name)(classmethod(_v))


EngineArgs = create_model(
    "EngineArgs",
    __config__=ConfigDict(frozen=True, extra="forbid"),
    __doc__="""The `vllm serve` flags kvplan models; None = vLLM's default for this model and GPU.

    Names are vLLM's. ``max_model_len=-1`` means ``--max-model-len auto`` (largest that fits).
    ``usage`` is "serve" (`vllm serve`, the default) or "llm" (the offline ``LLM`` class), which
    changes vLLM's batch defaults. Built from ENGINE_ARGS (kvplan.engines.vllm.args).
    """,
    __module__=__name__,
    __validators__={f"_check_{a.name}": _validator(a) for a in ENGINE_ARGS if a.check is not None},
    **{a.name: (a.type, a.field_info()) for a in ENGINE_ARGS},
)
