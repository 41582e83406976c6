"""Compose a Plan = f(ModelSpec, GPUProfile, EngineArgs) with vLLM 0.26.0's rules.

The planner resolves the effective engine arguments the way vLLM would (defaults that depend on
the GPU, dtype, quantization, block size), then for every pipeline stage computes the memory
budget, the KV-cache layout and the block count, and takes the minimum over stages as vLLM does
(v1/core/kv_cache_utils.py get_kv_cache_configs). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kvplan.engines.vllm import activation as act_mod
from kvplan.engines.vllm import defaults, memory, runner
from kvplan.engines.vllm.allocator import KVCacheGroup, KVCacheLayout, build_layout
from kvplan.engines.vllm.kv_spec import DTYPE_BYTES, KV_CACHE_DTYPES, kv_dtype_bytes, layer_cache_specs
from kvplan.engines.vllm.weights import pp_layer_ranges, weight_bytes_per_rank
from kvplan.errors import KvplanError
from kvplan.gpus import GPUProfile
from kvplan.specs.model_spec import LayerKind, ModelSpec, QuantSpec

# vLLM 0.26.0 config/cache.py CacheDType values kvplan does not size (yet).
VLLM_ONLY_KV_CACHE_DTYPES = (
    "fp8_inc",
    "fp8_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
)
# --dtype values vLLM 0.26.0 accepts (config/model.py _STR_DTYPE_TO_TORCH_DTYPE plus "auto").
VLLM_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# vLLM 0.26.0 model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS (a
# quantization_config.quant_method outside this list makes vLLM refuse the model).
VLLM_QUANTIZATION_METHODS = frozenset({
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
    "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
    "bitsandbytes", "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4",
    "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel",
    "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8",
})
# Minimum compute capability per weight quantization (vLLM 0.26.0 get_min_capability: fp8.py 75,
# mxfp4.py 80, auto_awq.py 75, auto_gptq.py 60, bitsandbytes.py 70).
QUANT_MIN_CAPABILITY = {"fp8": 75, "mxfp4": 80, "awq": 75, "gptq": 60, "bitsandbytes": 70, "modelopt": 89}

QUANTIZATIONS = ("fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "mxfp4", "bitsandbytes", "modelopt")


class EngineArgs(BaseModel):
    """The `vllm serve` flags kvplan models; None = vLLM's default for this model and GPU.

    Names are vLLM's. ``max_model_len=-1`` means ``--max-model-len auto`` (largest that fits).
    ``usage`` is "serve" (`vllm serve`, the default) or "llm" (the offline ``LLM`` class), which
    changes vLLM's batch defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024)
    max_model_len: int | None = None
    gpu_memory_utilization: float = Field(default=defaults.DEFAULT_GPU_MEMORY_UTILIZATION, gt=0, le=1)
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    dtype: str = "auto"
    quantization: str | None = None
    max_num_seqs: int | None = Field(default=None, ge=1, le=1 << 24)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=(1 << 31) - 1)
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = Field(default=None, gt=0, le=1 << 50)
    enable_prefix_caching: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False
    usage: str = "serve"
    vllm_version: str = defaults.DEFAULT_VLLM_VERSION

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv(cls, v: str) -> str:
        if v in VLLM_ONLY_KV_CACHE_DTYPES:
            raise ValueError(
                f"vLLM 0.26.0 accepts {v!r} but kvplan cannot size it yet; kvplan sizes "
                + ", ".join(KV_CACHE_DTYPES)
            )
        if v not in KV_CACHE_DTYPES:
            raise ValueError(f"must be one of {', '.join(KV_CACHE_DTYPES)}")
        return v

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v not in VLLM_DTYPES:
            raise ValueError(f"must be one of {', '.join(VLLM_DTYPES)} (vLLM's spelling)")
        return v

    @field_validator("block_size")
    @classmethod
    def _bs(cls, v: int | None) -> int | None:
        if v is not None and (v <= 0 or v % 16):
            raise ValueError("must be a positive multiple of 16 (FlashAttention kernel blocks)")
        return v

    @field_validator("max_model_len")
    @classmethod
    def _mml(cls, v: int | None) -> int | None:
        if v is not None and v != -1 and v <= 0:
            raise ValueError("must be a positive number of tokens, or 'auto'")
        if v is not None and v > 1 << 32:
            raise ValueError("must be at most 4,294,967,296 tokens")
        return v

    @field_validator("usage")
    @classmethod
    def _usage(cls, v: str) -> str:
        if v not in defaults.USAGE_CONTEXTS:
            raise ValueError("must be 'serve' or 'llm'")
        return v


class StartOutcome(str, Enum):
    """What vLLM 0.26.0 does at start-up with this model, GPU and flags (the typed outcome other
    code branches on; ``Plan.failure`` is its sentence for people).

    In vLLM's order (v1/worker/gpu_worker.py init_device, determine_available_memory,
    v1/core/kv_cache_utils.py check_enough_kv_cache_memory, then initialize_from_config and
    compile_or_warm_up_model):

    * ``starts``: vLLM starts and serves.
    * ``utilization_refused``: the requested share is more than is free at start-up.
    * ``kv_cache_memory_oom``: --kv-cache-memory-bytes does not fit beside the rest (OOM while
      allocating the KV cache).
    * ``no_kv_cache_memory``: weights + activation + non-torch leave nothing for the KV cache.
    * ``max_model_len_too_long``: one max_model_len request does not fit the KV cache.
    * ``cuda_graph_capture_oom``: the KV cache is allocated, then capturing CUDA graphs needs more
      memory than is left on the GPU: torch raises CUDA out of memory in capture_model and the
      engine core fails to start (nothing in 0.26.0 catches it).
    """

    STARTS = "starts"
    UTILIZATION_REFUSED = "utilization_refused"
    KV_CACHE_MEMORY_OOM = "kv_cache_memory_oom"
    NO_KV_CACHE_MEMORY = "no_kv_cache_memory"
    MAX_MODEL_LEN_TOO_LONG = "max_model_len_too_long"
    NO_KV_TOKENS = "no_kv_tokens"
    CUDA_GRAPH_CAPTURE_OOM = "cuda_graph_capture_oom"


def cuda_graph_headroom_bytes(budget: memory.MemoryBudget, kv_allocated_bytes: int) -> int:
    """Free GPU memory when vLLM 0.26.0 starts capturing CUDA graphs, bytes per GPU.

    Order (v1/worker/gpu_worker.py): the profiling pass's activations are freed, the KV cache is
    allocated (initialize_from_config: ``kv_allocated_bytes``, whole blocks), and capture_model
    empties torch's cache before capturing. What is left is the free memory at start minus
    weights, non-torch memory and the KV tensors. Negative when even that is over-committed."""
    return budget.free_at_start_bytes - budget.weights_bytes - budget.non_torch_bytes - kv_allocated_bytes


def allow_long_max_model_len(env: Mapping[str, str] | None) -> bool:
    """vLLM 0.26.0 envs.py: VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" or "true" (any case,
    surrounding blanks ignored)."""
    if not env:
        return False
    return env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage (the figures are per GPU of that stage)."""

    pipeline_rank: int
    layers: range
    budget: memory.MemoryBudget
    weights_breakdown: dict[str, int]
    activation: act_mod.ActivationEstimate
    layout: KVCacheLayout
    num_blocks: int
    bytes_for_max_len: int


@dataclass(frozen=True)
class Plan:
    """What vLLM would do with this model, GPU and flags.

    Attributes:
        effective: the resolved engine arguments (every default filled in).
        stages: one StagePlan per pipeline stage.
        num_gpu_blocks: min over stages (vLLM's num_gpu_blocks).
        block_size: tokens per block of the first group (hybrid models may raise it).
        page_size_bytes: bytes of one page of one layer (uniform across groups).
        bytes_per_token: KV bytes one token costs across all layers on one GPU (full-attention
            equivalent: every layer that stores per-token KV).
        gpu_kv_cache_tokens / max_concurrency: as vLLM logs them at max_model_len.
        fits: vLLM would start (``outcome is StartOutcome.STARTS``).
        failure: why it would not start (None when it fits), a sentence for people.
        outcome: the typed start-up outcome (StartOutcome); branch on this, never on failure's text.
        warnings: what the user can act on (shown in the table).
        notes: kvplan's own uncertainty the user cannot act on (an unverified constant, a partial
            bundled snapshot): `estimate --verbose` and the JSON ``notes`` show them.
        largest_max_model_len: the largest --max-model-len that fits (vLLM's own estimate).
        binding_limit: what caps concurrency: "kv_cache" or "max_num_seqs".
    """

    spec: ModelSpec
    gpu: GPUProfile
    args: EngineArgs
    effective: dict
    stages: list[StagePlan]
    num_gpu_blocks: int
    block_size: int
    page_size_bytes: int
    bytes_per_token: int
    gpu_kv_cache_tokens: int
    max_concurrency: float
    max_in_flight_tokens: int
    fits: bool
    failure: str | None
    largest_max_model_len: int | None
    binding_limit: str
    warnings: list[str] = field(default_factory=list)
    runner: str = "v2"
    outcome: StartOutcome = StartOutcome.STARTS
    notes: list[str] = field(default_factory=list)
    allow_long_max_model_len: bool = False

    @property
    def env(self) -> dict[str, str]:
        """The planner environment that gives this plan again (for re-planning with other flags)."""
        return {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if self.allow_long_max_model_len else {}

    @property
    def worst_stage(self) -> StagePlan:
        return min(self.stages, key=lambda s: s.num_blocks)

    @property
    def layout(self) -> KVCacheLayout:
        return self.stages[0].layout


def _fp8_activation_group(quant: QuantSpec | None) -> int:
    """The group size W8A8 linears quantize activations in (vLLM 0.26.0 Fp8LinearMethod: the
    weight block's column width for block-wise checkpoints, else per token = -1; 8-bit
    compressed-tensors schemes, W8A8 fp8 or int8, per token), or 0 when the linears do not
    quantize activations."""
    if quant is None:
        return 0
    if quant.method == "fp8":
        return quant.block_size[1] if quant.block_size else -1
    if quant.method == "compressed-tensors" and quant.bits == 8:
        return -1
    return 0


def _effective_quant(spec: ModelSpec, args: EngineArgs, gpu: GPUProfile, warnings: list[str]) -> QuantSpec | None:
    q = spec.quantization
    if q is not None and q.source == "checkpoint" and q.method not in VLLM_QUANTIZATION_METHODS:
        base = q.method.removeprefix("modelopt_")
        if not (q.method.startswith("modelopt_") and "modelopt_" + base in VLLM_QUANTIZATION_METHODS):
            raise KvplanError(
                f"{spec.name}: quantization_config.quant_method {q.method!r} is not a vLLM 0.26.0 quantization "
                "method; vLLM refuses the model",
                hint="known methods include " + ", ".join(sorted(VLLM_QUANTIZATION_METHODS)[:8]) + ", ...",
            )
    if args.quantization:
        want = args.quantization.lower()
        if want not in QUANTIZATIONS:
            raise KvplanError(
                f"--quantization: unsupported value {args.quantization!r}", hint="use one of: " + ", ".join(QUANTIZATIONS)
            )
        base = want.replace("_marlin", "")
        if q is not None:
            if q.vllm_name and q.source == "checkpoint" and want != q.vllm_name:
                # vLLM 0.26.0 config/model.py _verify_quantization: the checkpoint's method
                # ("modelopt", from hf_quant_config.json) must equal --quantization.
                raise KvplanError(
                    f"--quantization {want}: the checkpoint is quantized with {q.vllm_name} (hf_quant_config.json); "
                    "vLLM refuses a different method",
                    hint=f"drop --quantization or use {q.vllm_name}",
                )
            if q.vllm_name and want == q.vllm_name:
                return q
            if q.method != base:
                raise KvplanError(
                    f"--quantization {want}: the checkpoint is quantized with {q.method}; "
                    "vLLM refuses a different method",
                    hint=f"drop --quantization or use {q.method}",
                )
            return q
        if base != "fp8":
            raise KvplanError(
                f"--quantization {want}: needs a checkpoint quantized with {base}; this config has no quantization_config",
                hint="only fp8 can be applied at load time to a bf16/fp16 checkpoint",
            )
        q = QuantSpec(method="fp8", bits=8, source="runtime")
    # Keyed by vLLM's own method name: ModelOpt FP8 (hf_quant_config.json) is "modelopt", whose
    # ModelOptFp8Config.get_min_capability is 89 (quantization/modelopt.py), not fp8's 75.
    qname = (q.vllm_name or q.method) if q is not None else None
    if q is not None and gpu.compute_capability and qname in QUANT_MIN_CAPABILITY:
        major, _, minor = gpu.compute_capability.partition(".")
        cap = int(major) * 10 + int(minor or 0)
        need = QUANT_MIN_CAPABILITY[qname]
        if cap < need:
            where = "--quantization" if q.source == "runtime" else f"{spec.name}'s quantization config"
            raise KvplanError(
                f"{where}: {qname} needs compute capability {need // 10}.{need % 10}; "
                f"{gpu.display_name} has {gpu.compute_capability}, so vLLM refuses it"
            )
    if q is not None and q.method == "gptq" and not spec.checkpoint_tensors_visible and q.source == "checkpoint":
        # vLLM 0.26.0 auto_gptq.py maybe_update_config: the quantized layers are read from the
        # safetensors headers next to config.json; with none (a config-only directory and
        # load_format=dummy) no layer counts as quantized and every linear loads in fp16/bf16
        # (record llama2-7b-gptq_eager: 13,477,945,344 B = the unquantized size).
        warnings.append(
            "GPTQ: no safetensors next to config.json, so vLLM 0.26.0 cannot tell which layers are "
            "quantized and loads every layer unquantized (auto_gptq.maybe_update_config); "
            "with the real checkpoint the weights load 4-bit and more KV blocks fit"
        )
        return None
    return q


# Above this relative gap between the architecture formula and the checkpoint's own tensor
# bytes, the checkpoint wins (the formula does not know some module of this model).
CHECKPOINT_GAP = 0.01
_CKPT_DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I32": 4, "U8": 1, "I8": 1}


def _checkpoint_correction(
    spec: ModelSpec, tp: int, dtype_bytes: int, quant: QuantSpec | None, warnings: list[str]
) -> int:
    """Extra weight bytes per GPU when the checkpoint's tensors (safetensors headers) disagree
    with the architecture formula by more than 1%: the gap, converted to the run dtype for
    unquantized checkpoints, split over TP. 0 when no checkpoint facts are known."""
    params = dict(spec.checkpoint_params) if spec.checkpoint_params else None
    total = spec.checkpoint_bytes
    if not params and not total:
        return 0
    ckpt_dtype_bytes = DTYPE_BYTES.get(spec.dtype, 2)
    formula = weight_bytes_per_rank(spec, tensor_parallel_size=1, dtype_bytes=ckpt_dtype_bytes, quant=spec.quantization)
    formula_bytes = formula.total - formula.parts.get("rotary_cache", 0) - formula.parts.get("mla_absorbed", 0)
    if params and quant is None:
        ckpt = sum(n * _CKPT_DTYPE_BYTES.get(dt, 2) for dt, n in params.items())
    elif total:
        ckpt = int(total)
    else:
        ckpt = sum(n * _CKPT_DTYPE_BYTES.get(dt, 2) for dt, n in params.items())
    gap = ckpt - formula_bytes
    if formula_bytes <= 0 or abs(gap) / formula_bytes <= CHECKPOINT_GAP:
        return 0
    warnings.append(
        f"weights: the checkpoint holds {ckpt / 2**30:.2f} GiB of tensors but kvplan's formula for "
        f"{spec.architecture} gives {formula_bytes / 2**30:.2f} GiB; using the checkpoint's figure"
    )
    scale = dtype_bytes / ckpt_dtype_bytes if quant is None else 1.0
    return int(gap * scale / tp)


@lru_cache(maxsize=8192)
def _weights_cached(
    spec: ModelSpec, tp: int, rank: int, pp: int, dtype_bytes: int, quant, fp8_kv: bool, correction: int, machete: bool
):
    """Weight tally of one stage as (part, bytes) pairs; cached (ModelSpec is hashable)."""
    w = weight_bytes_per_rank(
        spec,
        tensor_parallel_size=tp,
        pipeline_rank=rank,
        pipeline_parallel_size=pp,
        dtype_bytes=dtype_bytes,
        quant=quant,
        fp8_kv_cache=fp8_kv,
        machete=machete,
    )
    layers = pp_layer_ranges(spec.num_hidden_layers, pp)[rank]
    if correction:
        w.add("checkpoint_correction", correction * len(layers) // spec.num_hidden_layers)
    return tuple(w.parts.items())


_activation_cached = lru_cache(maxsize=8192)(act_mod.activation_peak)


@lru_cache(maxsize=2048)
def _layout_cached(spec: ModelSpec, tp: int, block_size: int, kv_b: int, dtype_bytes: int, disable_hybrid: bool):
    """(layer specs, effective block size, global KV-cache layout) of one rank; cached."""
    layer_specs, eff_block = layer_cache_specs(
        spec,
        tensor_parallel_size=tp,
        block_size=block_size,
        kv_dtype_bytes_=kv_b,
        model_dtype_bytes=dtype_bytes,
    )
    return tuple(layer_specs), eff_block, build_layout(layer_specs, disable_hybrid_kv_cache_manager=disable_hybrid)


def _tp_refusal(spec: ModelSpec, tp: int) -> str | None:
    """Why vLLM refuses ``--tensor-parallel-size tp`` for this model (one line naming the flag),
    or None when it accepts it. The one predicate behind both the refusal and its hint's list of
    valid sizes (vLLM 0.26.0 model_executor/layers/linear.py + attention head sharding)."""
    heads = spec.attention.num_attention_heads
    if heads % tp:
        return f"--tensor-parallel-size {tp}: must divide the model's num_attention_heads ({heads})"
    kv = spec.attention.num_key_value_heads
    if not spec.uses_mla and tp > kv and tp % kv:
        return f"--tensor-parallel-size {tp}: larger than num_key_value_heads ({kv}) and not a multiple of it"
    if not spec.uses_mla and tp <= kv and kv % tp:
        return f"--tensor-parallel-size {tp}: must divide num_key_value_heads ({kv})"
    if spec.moe is not None and spec.moe.moe_intermediate_size % tp:
        return f"--tensor-parallel-size {tp}: must divide the expert intermediate size ({spec.moe.moe_intermediate_size})"
    return None


def valid_tensor_parallel_sizes(spec: ModelSpec, most: int = 64) -> list[int]:
    """The sizes 1..min(most, num_attention_heads) that _tp_refusal accepts (for hints)."""
    heads = spec.attention.num_attention_heads
    return [d for d in range(1, min(heads, most) + 1) if _tp_refusal(spec, d) is None]


def _block_size_note(block_size: int, kv_dtype: str, gpu: GPUProfile) -> str:
    """Why the default block size is not vLLM's usual 16 (see defaults.default_block_size:
    vLLM 0.26.0 picks the MLA attention backend's preferred block size)."""
    cc = gpu.compute_capability or "9.0"
    backend = "FLASHMLA" if cc.startswith("9.") and kv_dtype.startswith("fp8") else "FLASHINFER_MLA"
    return (
        f"block_size {block_size} (not the usual {defaults.DEFAULT_BLOCK_SIZE}): on compute capability {cc} "
        f"with --kv-cache-dtype {kv_dtype}, vLLM picks the {backend} attention backend for this MLA model and "
        f"uses its preferred block size; pass --block-size to choose another"
    )


def _validate_parallel(spec: ModelSpec, tp: int, pp: int) -> None:
    why = _tp_refusal(spec, tp)
    if why is not None:
        valid = valid_tensor_parallel_sizes(spec)
        raise KvplanError(why, hint=("valid sizes: " + ", ".join(map(str, valid))) if valid else None)
    if pp > spec.num_hidden_layers:
        raise KvplanError(
            f"--pipeline-parallel-size {pp}: more stages than the model's {spec.num_hidden_layers} layers"
        )


def _project(layout: KVCacheLayout, layers: range) -> KVCacheLayout:
    """The global grouping restricted to one pipeline stage's layers (vLLM
    _project_kv_cache_groups_to_worker + get_kv_cache_config_from_groups)."""
    keep = set(layers)
    if layout.mixed_single_group:
        return layout  # handled by recomputing on the stage's layers
    groups = []
    for g in layout.groups:
        members = tuple(i for i in g.layer_indices if i in keep)
        groups.append(
            KVCacheGroup(
                kind=g.kind,
                num_layers=len(members),
                padding_layers=0,
                block_size=g.block_size,
                page_size_bytes=g.page_size_bytes,
                sliding_window=g.sliding_window,
                chunk_size=g.chunk_size,
                layer_indices=members,
            )
        )
    size = max((g.num_layers for g in groups), default=0)
    groups = [
        KVCacheGroup(**{**g.__dict__, "padding_layers": size - g.num_layers}) for g in groups if g.num_layers or size
    ]
    page = layout.groups[0].page_size_bytes if layout.groups else 1
    return KVCacheLayout(groups=tuple(groups), group_size=size, bytes_per_block=max(1, page * size))


def plan(spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, env: Mapping[str, str] | None = None) -> Plan:
    """Predict vLLM's KV-cache allocation for ``spec`` on ``gpu`` with ``args``.

    ``env``: the environment vLLM would start with (only VLLM_ALLOW_LONG_MAX_MODEL_LEN is read;
    None = unset). The planner never reads os.environ itself.

    Returns:
        a Plan (per-GPU figures; block counts are what every GPU allocates).
    Raises:
        KvplanError: an argument vLLM would reject before profiling (exit 2).
    Rule source: vLLM 0.26.0 (see kvplan.engines.vllm.*).
    """
    defaults.check_version(args.vllm_version)
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    _validate_parallel(spec, tp, pp)
    # What parsing, the model source and the GPU profile already know is uncertain comes first.
    # A partial bundled snapshot (sources/bundled.py) is kvplan's own uncertainty, not the user's
    # to fix: a note, not a warning.
    warnings: list[str] = [n for n in spec.notes if not n.startswith("bundled spec ")] + list(gpu.warnings)
    notes: list[str] = [n for n in spec.notes if n.startswith("bundled spec ")]

    dtype = defaults.resolve_dtype(args.dtype, spec.dtype, bf16_supported=gpu.bf16_supported)
    if dtype == "bfloat16" and not gpu.bf16_supported:
        raise KvplanError(f"--dtype bfloat16: {gpu.display_name} does not support bfloat16", hint="use --dtype float16")
    dtype_bytes = DTYPE_BYTES[dtype]
    quant = _effective_quant(spec, args, gpu, warnings)

    kv_dtype = args.kv_cache_dtype
    if kv_dtype == "auto" and quant is not None and quant.kv_cache_fp8:
        kv_dtype = "fp8"
    if gpu.is_estimate:
        warnings.append(
            f"{gpu.display_name}: its CUDA-visible memory is an estimate, not a reading "
            "(see `kvplan gpus`); pass --gpu-memory with torch.cuda.mem_get_info()'s total for exact blocks"
        )
    if kv_dtype.startswith("fp8") and not gpu.fp8_supported:
        warnings.append(
            f"--kv-cache-dtype {kv_dtype} on {gpu.display_name} (no fp8 tensor cores): vLLM stores fp8 but "
            "attention backends may refuse or run slowly"
        )
    kv_b = kv_dtype_bytes(kv_dtype, dtype)

    # max_model_len
    derived = spec.derived_max_model_len
    auto_fit = args.max_model_len == -1
    if args.max_model_len is None or auto_fit:
        max_model_len = derived
    else:
        max_model_len = args.max_model_len
        if max_model_len > derived and allow_long_max_model_len(env):
            # vLLM 0.26.0 config/model.py _get_and_verify_max_len: with the variable set it logs a
            # warning and keeps the user's length.
            warnings.append(
                f"--max-model-len {max_model_len}: beyond the model's trained length ({derived} tokens); "
                "vLLM accepts it because VLLM_ALLOW_LONG_MAX_MODEL_LEN is set, but positions past "
                f"{derived} may give NaNs (RoPE) or out-of-bounds errors (absolute positions)"
            )
        elif max_model_len > derived:
            raise KvplanError(
                f"--max-model-len {max_model_len}: larger than the model's limit ({derived} tokens, "
                "from max_position_embeddings and rope scaling); vLLM refuses it",
                hint=f"use --max-model-len {derived} or less (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in vLLM)",
            )

    # batch defaults
    mbt_default, seqs_default = defaults.batch_defaults(gpu.nvml_total_bytes, gpu.vllm_device_name, args.usage)
    max_num_seqs = args.max_num_seqs or seqs_default
    mbt = defaults.resolve_max_num_batched_tokens(
        user_value=args.max_num_batched_tokens,
        default=mbt_default,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
    )
    if mbt < max_num_seqs:
        raise KvplanError(
            f"--max-num-batched-tokens {mbt}: smaller than --max-num-seqs {max_num_seqs}; vLLM refuses it"
        )

    block_size = args.block_size or defaults.default_block_size(
        uses_mla=spec.uses_mla, kv_cache_dtype=kv_dtype, compute_capability=gpu.compute_capability
    )
    if args.block_size is None and block_size != defaults.DEFAULT_BLOCK_SIZE:
        warnings.append(_block_size_note(block_size, kv_dtype, gpu))
    v2 = runner.uses_v2_runner(spec)
    async_sched = True
    max_concurrent_batches = (pp + 1) if (async_sched and v2) else (2 if (async_sched and pp == 1) else pp)
    max_in_flight = max_concurrent_batches * mbt

    layer_specs, eff_block, global_layout = _layout_cached(
        spec, tp, block_size, kv_b, dtype_bytes, args.disable_hybrid_kv_cache_manager
    )
    layer_specs = list(layer_specs)
    if eff_block != block_size:
        warnings.append(
            f"block_size raised from {block_size} to {eff_block} tokens so one attention page holds a "
            "recurrent state (vLLM aligns hybrid models this way)"
        )
    # Map per-layer specs back to layer indices (layers without KV keep no entry).
    kv_layer_idx = [i for i, k in enumerate(spec.layer_kinds) if k != LayerKind.NONE]

    correction = _checkpoint_correction(spec, tp, dtype_bytes, quant, warnings)
    machete = (gpu.compute_capability or "").startswith("9.")

    stages: list[StagePlan] = []
    for rank, layers in enumerate(pp_layer_ranges(spec.num_hidden_layers, pp)):
        first, last = rank == 0, rank == pp - 1
        w_parts = dict(
            _weights_cached(
                spec, tp, rank, pp, dtype_bytes, quant, kv_dtype.startswith("fp8"), correction, machete
            )
        )
        a = _activation_cached(
            spec,
            tensor_parallel_size=tp,
            act_dtype_bytes=dtype_bytes,
            max_num_batched_tokens=mbt,
            max_num_seqs=max_num_seqs,
            enforce_eager=args.enforce_eager,
            is_last_pp_rank=last,
            layers=layers,
            sm_count=gpu.sm_count,
            moe_workspace_persists=quant is None or quant.method != "mxfp4",
            fp8_act_quant=_fp8_activation_group(quant),
        )
        cg, cg_applied = runner.cudagraph_bytes(spec, enforce_eager=args.enforce_eager, num_layers=len(layers))
        b = memory.budget(
            total_bytes=gpu.memory_bytes,
            gpu_memory_utilization=args.gpu_memory_utilization,
            weights=sum(w_parts.values()),
            activation_peak=a.peak_bytes,
            non_torch=memory.non_torch_bytes(tp * pp, v1_cudagraphs=not v2 and not args.enforce_eager),
            cudagraph=cg,
            cudagraph_applied=cg_applied,
            kv_cache_memory=args.kv_cache_memory_bytes,
        )
        if pp == 1:
            stage_layout = global_layout
        elif global_layout.mixed_single_group:
            stage_layout = build_layout([layer_specs[kv_layer_idx.index(i)] for i in layers if i in kv_layer_idx])
        else:
            stage_layout = _project(global_layout, layers)
        nb = stage_layout.num_blocks(max(b.kv_cache_bytes, 0))
        stages.append(
            StagePlan(
                pipeline_rank=rank,
                layers=layers,
                budget=b,
                weights_breakdown=w_parts,
                activation=a,
                layout=stage_layout,
                num_blocks=nb,
                bytes_for_max_len=stage_layout.bytes_for_max_len(max_model_len, max_in_flight),
            )
        )

    # auto-fit max_model_len (vLLM _auto_fit_max_model_len): smallest over stages.
    if auto_fit:
        fit = min(
            s.layout.largest_max_model_len(max(s.budget.kv_cache_bytes, 0), derived, max_in_flight) for s in stages
        )
        if fit <= 0:
            max_model_len = 0
        else:
            max_model_len = min(fit, derived)
            if max_model_len < derived:
                warnings.append(f"--max-model-len auto: reduced from {derived} to {max_model_len} tokens to fit")
        stages = [
            StagePlan(**{**s.__dict__, "bytes_for_max_len": s.layout.bytes_for_max_len(max(max_model_len, 1), max_in_flight)})
            for s in stages
        ]

    num_blocks = min(s.num_blocks for s in stages)
    first_layout = stages[0].layout
    page = first_layout.groups[0].page_size_bytes if first_layout.groups else 0
    group0_block = first_layout.groups[0].block_size if first_layout.groups else block_size

    # failure modes, in vLLM's order
    failure = None
    outcome = StartOutcome.STARTS
    largest = None
    for s in stages:
        where = f" on pipeline stage {s.pipeline_rank}" if pp > 1 else ""
        b = s.budget
        if b.requested_bytes > b.free_at_start_bytes and not b.kv_cache_memory_override:
            failure = (
                f"--gpu-memory-utilization {args.gpu_memory_utilization}: requests {b.requested_bytes / 2**30:.2f} GiB but "
                f"only about {b.free_at_start_bytes / 2**30:.2f} GiB is free when vLLM starts (the CUDA context holds "
                f"{memory.CUDA_CONTEXT_BYTES / 2**20:.0f} MiB); vLLM refuses to start"
            )
            outcome = StartOutcome.UTILIZATION_REFUSED
            largest = 0
            break
        if b.kv_cache_memory_override:
            # --kv-cache-memory-bytes skips the utilization budget; the KV tensors are then
            # allocated on top of weights, activation and non-torch memory (gpu_worker.py).
            need = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.kv_cache_bytes
            if need > b.free_at_start_bytes:
                failure = (
                    f"--kv-cache-memory-bytes {b.kv_cache_bytes:,}: with weights {b.weights_bytes / 2**30:.2f} GiB, "
                    f"activation {b.activation_peak_bytes / 2**30:.2f} GiB and non-torch {b.non_torch_bytes / 2**30:.2f} GiB "
                    f"it needs {need / 2**30:.2f} GiB{where} but about {b.free_at_start_bytes / 2**30:.2f} GiB is free "
                    f"when vLLM starts; "
                    "vLLM would run out of memory allocating the KV cache"
                )
                outcome = StartOutcome.KV_CACHE_MEMORY_OOM
                largest = 0
                break
        if b.kv_cache_bytes <= 0:
            failure = (
                f"no memory left for the KV cache{where}: weights "
                f"{b.weights_bytes / 2**30:.2f} GiB + activation {b.activation_peak_bytes / 2**30:.2f} GiB "
                f"+ non-torch {b.non_torch_bytes / 2**30:.2f} GiB exceed the requested "
                f"{b.requested_bytes / 2**30:.2f} GiB (vLLM: 'No available memory for the cache blocks')"
            )
            outcome = StartOutcome.NO_KV_CACHE_MEMORY
            largest = 0
            break
    if failure is None and max_model_len > 0:
        for s in stages:
            if s.bytes_for_max_len > s.budget.kv_cache_bytes:
                lim = s.layout.largest_max_model_len(s.budget.kv_cache_bytes, max_model_len, max_in_flight)
                largest = lim if largest is None else min(largest, lim)
                outcome = StartOutcome.MAX_MODEL_LEN_TOO_LONG
                failure = (
                    f"one {max_model_len}-token request needs {s.bytes_for_max_len / 2**30:.2f} GiB of KV cache but only "
                    f"{s.budget.kv_cache_bytes / 2**30:.2f} GiB is available"
                    + (f"; the largest max-model-len that fits is {lim}" if lim > 0 else "")
                )
    if failure is None and max_model_len <= 0:
        failure = "not even one token of KV cache fits"
        outcome = StartOutcome.NO_KV_TOKENS
        largest = 0
    if failure is None:
        # CUDA graphs are captured after the KV cache is allocated (gpu_worker.py
        # compile_or_warm_up_model -> capture_model); on the V2 runner nothing reserved room
        # for them, so a graph pool larger than what is left raises CUDA out of memory there.
        for s in stages:
            b = s.budget
            if not b.cudagraph_bytes:
                continue
            left = cuda_graph_headroom_bytes(b, s.num_blocks * s.layout.bytes_per_block)
            if b.cudagraph_bytes > left:
                where = f" on pipeline stage {s.pipeline_rank}" if pp > 1 else ""
                failure = (
                    f"CUDA graphs need about {b.cudagraph_bytes / 2**30:.2f} GiB{where} but only "
                    f"{max(left, 0) / 2**30:.2f} GiB is left once the KV cache is allocated "
                    f"(--gpu-memory-utilization {args.gpu_memory_utilization} requests "
                    f"{b.requested_bytes / 2**30:.2f} GiB of {b.total_bytes / 2**30:.2f} GiB); vLLM allocates the "
                    "KV cache first and then runs out of memory capturing the graphs, so it does not start"
                )
                outcome = StartOutcome.CUDA_GRAPH_CAPTURE_OOM
                largest = 0  # a shorter --max-model-len leaves the KV cache just as large
                break
    if failure is None:
        # With VLLM_ALLOW_LONG_MAX_MODEL_LEN a length past the model's own is allowed.
        cap = max(derived, max_model_len)
        largest = min(
            s.layout.largest_max_model_len(s.budget.kv_cache_bytes, cap, max_in_flight) for s in stages
        )
        for s in stages:
            b = s.budget
            if b.cudagraph_bytes and not b.cudagraph_applied_bytes and b.requested_bytes + b.cudagraph_bytes > b.free_at_start_bytes:
                warnings.append(
                    f"CUDA graphs (~{b.cudagraph_bytes / 2**30:.2f} GiB) fit beside the KV cache only in the memory "
                    "the profiling pass's activations used: a full --max-num-batched-tokens prefill needs that memory "
                    "again and may run out of CUDA memory while serving"
                )
                break

    mml_for_conc = max(max_model_len, 1)
    conc = first_layout.max_concurrency(num_blocks, mml_for_conc, max_in_flight) if first_layout.groups else 0.0
    tokens = first_layout.kv_cache_tokens(num_blocks, mml_for_conc, max_in_flight) if first_layout.groups else 0
    binding = "kv_cache" if conc < max_num_seqs else "max_num_seqs"

    # KV bytes one token costs on one GPU of the stage with the fewest blocks (its layers only).
    worst_layers = min(stages, key=lambda st: st.num_blocks).layers
    per_token = sum(
        layer_specs[kv_layer_idx.index(i)].per_token_bytes
        for i in worst_layers
        if i in kv_layer_idx and layer_specs[kv_layer_idx.index(i)].kind in ("full", "sliding", "chunked", "mla")
    )
    if tp * pp > 1:
        notes.append(
            f"tensor/pipeline parallel ({tp}x{pp}): the NCCL/all-reduce part of non-torch memory "
            f"({memory.NON_TORCH_MULTI_GPU_EXTRA / 2**30:.2f} GiB per GPU) is an unverified estimate"
        )
    if not args.enforce_eager and not v2:
        notes.append(
            "CUDA graphs on the V1 model runner (MoE/hybrid): vLLM subtracts its graph-memory estimate; "
            "kvplan's estimate for it is unverified"
        )
    if spec.is_multimodal:
        warnings.append(
            f"{spec.architecture} is multimodal: vLLM also profiles its vision encoder on the largest image "
            "batch, which kvplan does not model; the activation peak may be higher and the KV cache smaller"
        )
    if tp > spec.attention.num_key_value_heads and not spec.uses_mla:
        warnings.append(
            f"tensor-parallel-size {tp} > num_key_value_heads {spec.attention.num_key_value_heads}: "
            "each GPU holds a replicated copy of its KV head"
        )

    effective = {
        "model": spec.name,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_cache_dtype": kv_dtype,
        "block_size": group0_block,
        "dtype": dtype,
        "quantization": quant.method if quant else None,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": mbt,
        "enforce_eager": args.enforce_eager,
        "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
        "vllm_version": args.vllm_version,
        "usage": args.usage,
        "enable_prefix_caching": (
            args.enable_prefix_caching if args.enable_prefix_caching is not None else not spec.is_hybrid
        ),
        "model_runner": "v2" if v2 else "v1",
        "async_scheduling": async_sched,
    }
    return Plan(
        spec=spec,
        gpu=gpu,
        args=args,
        effective=effective,
        stages=stages,
        num_gpu_blocks=num_blocks,
        block_size=group0_block,
        page_size_bytes=page,
        bytes_per_token=per_token,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        max_in_flight_tokens=max_in_flight,
        fits=failure is None,
        failure=failure,
        largest_max_model_len=largest,
        binding_limit=binding,
        warnings=warnings,
        runner="v2" if v2 else "v1",
        outcome=outcome,
        notes=notes,
        allow_long_max_model_len=allow_long_max_model_len(env),
    )
