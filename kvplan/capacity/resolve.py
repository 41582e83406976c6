"""The engine arguments as vLLM resolves them before it profiles: plan()'s first steps.

What parsing, the model source and the GPU profile already know is uncertain; a multimodal
model run text-only; the dtypes, quantization and KV-cache dtype; --max-model-len; the batch
sizes; the block size; the model runner. Each step appends its warnings and notes to the plan's
``remarks`` in the order vLLM's own checks run, and raises EstimateRefusal for what vLLM refuses
at that point. Pure: no I/O. Rule source: the version's rules modules passed in (``rules``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvplan.capacity.outcomes import EstimateRefusal, Note, NoteKind, RefusalKind
from kvplan.engines.vllm.args import EngineArgs
from kvplan.engines.vllm.rules import VllmRules
from kvplan.gpus import GPUProfile
from kvplan.model.spec import ModelSpec


def _block_size_note(block_size: int, kv_dtype: str, gpu: GPUProfile, default_block_size: int) -> str:
    """Why the default block size is not vLLM's usual 16 (see the version's
    defaults.default_block_size: vLLM picks the MLA attention backend's preferred block size)."""
    cc = gpu.compute_capability or "9.0"
    backend = "FLASHMLA" if cc.startswith("9.") and kv_dtype.startswith("fp8") else "FLASHINFER_MLA"
    return (
        f"block_size {block_size} (not the usual {default_block_size}): on compute capability {cc} "
        f"with --kv-cache-dtype {kv_dtype}, vLLM picks the {backend} attention backend for this MLA model and "
        f"uses its preferred block size; pass --block-size to choose another"
    )


@dataclass(frozen=True)
class Resolved:
    """The engine arguments as vLLM resolves them before it profiles (every default filled in).

    Attributes: ``dtype`` (the model dtype's name) and ``dtype_bytes``; ``quant`` (the effective
    quantization, None when unquantized); ``kv_dtype`` (--kv-cache-dtype after the checkpoint's
    fp8 KV scales and the model's own refusals) and ``kv_dtype_bytes``; ``max_model_len``
    (tokens; ``derived_max_model_len`` when --max-model-len is absent or auto, ``auto_fit`` says
    which); ``max_num_seqs``; ``max_num_batched_tokens`` (tokens per step); ``block_size``
    (tokens, before a hybrid model's alignment); ``v2`` (the V2 model runner);
    ``async_scheduling``; ``max_in_flight`` (tokens the scheduler may have in flight at once:
    concurrent batches x max_num_batched_tokens).
    """

    dtype: str
    dtype_bytes: int
    quant: object
    kv_dtype: str
    kv_dtype_bytes: int
    max_model_len: int
    derived_max_model_len: int
    auto_fit: bool
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    v2: bool
    async_scheduling: bool
    max_in_flight: int

def opening_remarks(spec: ModelSpec, gpu: GPUProfile) -> list[Note]:
    """What parsing, the model source and the GPU profile already know is uncertain (first in
    every output). A partial bundled snapshot (sources/bundled.py) is kvplan's own uncertainty,
    not the user's to fix: a note, not a warning (Note.about_kvplan)."""
    remarks = [
        Note(NoteKind.BUNDLED_SNAPSHOT if n in spec.snapshot_notes else NoteKind.MODEL_SOURCE, n)
        for n in spec.notes
    ]
    return remarks + [Note(NoteKind.GPU_PROFILE, w) for w in gpu.warnings]


def text_only_spec(spec: ModelSpec, args: EngineArgs, rules: VllmRules, remarks: list[Note]) -> ModelSpec:
    """``spec`` without its vision tower when --limit-mm-per-prompt sets every modality to 0
    (vLLM then loads and profiles no encoder: the version's weights.text_only), else ``spec``."""
    if not rules.weights.text_only(spec, args.limit_mm_per_prompt):
        return spec
    remarks.append(Note(
        NoteKind.MULTIMODAL,
        f"--limit-mm-per-prompt sets every modality of {spec.architecture} ({', '.join(spec.mm_modalities)}) to 0: "
        "vLLM runs it text-only, with no vision tower loaded or profiled",
    ))
    return spec.model_copy(update={"vision_params": 0, "is_multimodal": False})


def resolve_engine_args(
    spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, env: Mapping[str, str] | None,
    rules: VllmRules, remarks: list[Note],
) -> Resolved:
    """Fill in every default the way vLLM does (dtypes, max-model-len, batch sizes, block size,
    model runner). Raises EstimateRefusal for what vLLM refuses at this point (in its order)."""
    dtype, dtype_bytes, quant, kv_dtype, kv_b = _resolve_dtypes(spec, gpu, args, rules, remarks)
    max_model_len, auto_fit = _resolve_max_model_len(spec, args, env, rules, remarks)
    max_num_seqs, mbt = _resolve_batch(gpu, args, rules, max_model_len)
    block_size = _resolve_block_size(spec, gpu, args, rules, kv_dtype, remarks)
    v2 = rules.runner.uses_v2_runner(spec)
    async_sched = True
    pp = args.pipeline_parallel_size
    max_concurrent_batches = (pp + 1) if (async_sched and v2) else (2 if (async_sched and pp == 1) else pp)
    return Resolved(
        dtype=dtype, dtype_bytes=dtype_bytes, quant=quant, kv_dtype=kv_dtype, kv_dtype_bytes=kv_b,
        max_model_len=max_model_len, derived_max_model_len=spec.derived_max_model_len, auto_fit=auto_fit,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=mbt, block_size=block_size,
        v2=v2, async_scheduling=async_sched, max_in_flight=max_concurrent_batches * mbt,
    )


def _resolve_dtypes(spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, rules: VllmRules, remarks: list[Note]):
    """(dtype, dtype_bytes, quant, kv_cache_dtype, kv bytes per element) as vLLM resolves them:
    --dtype auto from the checkpoint and the GPU, the effective quantization, an fp8 KV cache
    when the checkpoint carries KV scales, a model that ignores --kv-cache-dtype. Raises
    EstimateRefusal for bfloat16 on a GPU without it."""
    defaults, quantization = rules.defaults, rules.quantization
    dtype = defaults.resolve_dtype(args.dtype, spec.dtype, bf16_supported=gpu.bf16_supported)
    if dtype == "bfloat16" and not gpu.bf16_supported:
        raise EstimateRefusal(
            RefusalKind.DTYPE,
            f"--dtype bfloat16: {gpu.display_name} does not support bfloat16",
            hint="use --dtype float16",
            flag="--dtype",
        )
    dtype_bytes = rules.kv_spec.DTYPE_BYTES[dtype]
    said: list[str] = []
    quant = quantization.effective_quant(spec, args, gpu, said)
    remarks += [Note(NoteKind.GPTQ_UNQUANTIZED, w) for w in said]

    kv_dtype = args.kv_cache_dtype
    if kv_dtype == "auto" and quant is not None and quant.kv_cache_fp8:
        kv_dtype = "fp8"
    if kv_dtype != "auto" and spec.model_type in rules.kv_cache_dtype_ignored:
        remarks.append(Note(
            NoteKind.MODEL_SOURCE,
            f"--kv-cache-dtype {kv_dtype}: vLLM {rules.version}'s {spec.architecture} builds its attention "
            "without the cache config, so its KV cache keeps the model dtype (sized so)"
        ))
        kv_dtype = "auto"
    if gpu.is_estimate:
        remarks.append(Note(
            NoteKind.GPU_MEMORY_ESTIMATED,
            f"{gpu.display_name}: its CUDA-visible memory is an estimate, not a reading "
            "(see `kvplan gpus`); pass --gpu-memory with torch.cuda.mem_get_info()'s total for exact blocks"
        ))
    if kv_dtype.startswith("fp8") and not gpu.fp8_supported:
        remarks.append(Note(
            NoteKind.FP8_KV_UNSUPPORTED_GPU,
            f"--kv-cache-dtype {kv_dtype} on {gpu.display_name} (no fp8 tensor cores): vLLM stores fp8 but "
            "attention backends may refuse or run slowly"
        ))
    return dtype, dtype_bytes, quant, kv_dtype, rules.kv_spec.kv_dtype_bytes(kv_dtype, dtype)


def _resolve_max_model_len(
    spec: ModelSpec, args: EngineArgs, env: Mapping[str, str] | None, rules: VllmRules, remarks: list[Note]
) -> tuple[int, bool]:
    """(max_model_len tokens, auto_fit): the model's derived length when --max-model-len is
    absent or -1 (auto, shortened later to fit), else the user's, refused past the model's limit
    unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set (vLLM config/model.py _get_and_verify_max_len:
    with the variable set it logs a warning and keeps the user's length)."""
    derived = spec.derived_max_model_len
    limit = spec.max_len_limit  # above the default for longrope models
    auto_fit = args.max_model_len == -1
    if args.max_model_len is None or auto_fit:
        return derived, auto_fit
    max_model_len = args.max_model_len
    if max_model_len > limit and rules.defaults.allow_long_max_model_len(env):
        remarks.append(Note(
            NoteKind.LONG_MAX_MODEL_LEN,
            f"--max-model-len {max_model_len}: beyond the model's trained length ({limit} tokens); "
            "vLLM accepts it because VLLM_ALLOW_LONG_MAX_MODEL_LEN is set, but positions past "
            f"{limit} may give NaNs (RoPE) or out-of-bounds errors (absolute positions)",
        ))
    elif max_model_len > limit:
        raise EstimateRefusal(
            RefusalKind.MAX_MODEL_LEN,
            f"--max-model-len {max_model_len}: larger than the model's limit ({limit} tokens, "
            "from max_position_embeddings and rope scaling); vLLM refuses it",
            hint=f"use --max-model-len {limit} or less (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in vLLM)",
            flag="--max-model-len",
        )
    return max_model_len, auto_fit


def _resolve_batch(gpu: GPUProfile, args: EngineArgs, rules: VllmRules, max_model_len: int) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) with the version's GPU- and usage-dependent
    defaults. Raises EstimateRefusal when the token budget is below --max-num-seqs."""
    defaults = rules.defaults
    mbt_default, seqs_default = defaults.batch_defaults(gpu.nvml_total_bytes, gpu.vllm_device_name, args.usage)
    max_num_seqs = args.max_num_seqs or seqs_default
    # --no-enable-chunked-prefill raises a defaulted token budget to max_model_len, and vLLM refuses a
    # given one below it (vLLM engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args,
    # config/scheduler.py verify_max_model_len: the same in every version kvplan has rules for)
    chunked = args.enable_chunked_prefill is not False
    mbt = defaults.resolve_max_num_batched_tokens(
        user_value=args.max_num_batched_tokens,
        default=mbt_default,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        chunked_prefill=chunked,
    )
    if not chunked and max_model_len > 0 and mbt < max_model_len:
        raise EstimateRefusal(
            RefusalKind.MAX_NUM_BATCHED_TOKENS,
            f"--max-num-batched-tokens {mbt}: smaller than --max-model-len {max_model_len} with "
            "--no-enable-chunked-prefill; vLLM refuses it",
            hint=f"use --max-num-batched-tokens {max_model_len} or more, or drop --no-enable-chunked-prefill",
            flag="--max-num-batched-tokens",
        )
    if mbt < max_num_seqs:
        raise EstimateRefusal(
            RefusalKind.MAX_NUM_BATCHED_TOKENS,
            f"--max-num-batched-tokens {mbt}: smaller than --max-num-seqs {max_num_seqs}; vLLM refuses it",
            flag="--max-num-batched-tokens",
        )
    return max_num_seqs, mbt


def _resolve_block_size(
    spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, rules: VllmRules, kv_dtype: str, remarks: list[Note]
) -> int:
    """--block-size, or the version's default (an MLA model takes its attention backend's)."""
    defaults = rules.defaults
    block_size = args.block_size or defaults.default_block_size(
        uses_mla=spec.uses_mla, kv_cache_dtype=kv_dtype, compute_capability=gpu.compute_capability,
        sparse_mla_indexer=any(spec.indexer_layers),
    )
    if args.block_size is None and block_size != defaults.DEFAULT_BLOCK_SIZE:
        remarks.append(Note(
            NoteKind.BLOCK_SIZE_BACKEND, _block_size_note(block_size, kv_dtype, gpu, defaults.DEFAULT_BLOCK_SIZE)
        ))
    return block_size
