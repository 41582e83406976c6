"""Quantization and checkpoint rules of vLLM 0.26.0 (which methods and dtypes it accepts, what
compute capability a method needs, which quantization applies, when the checkpoint's own tensor
bytes override the weight formula).

Sources: vLLM 0.26.0 config/cache.py (CacheDType), config/model.py (_STR_DTYPE_TO_TORCH_DTYPE,
_verify_quantization), model_executor/layers/quantization/__init__.py (QUANTIZATION_METHODS),
quantization/{fp8,mxfp4,auto_awq,auto_gptq,bitsandbytes,modelopt}.py (get_min_capability,
maybe_update_config). Units: bytes (int), compute capability as major*10+minor.
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26.kv_spec import DTYPE_BYTES
from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.errors import KvplanError
from kvplan.model.spec import ModelSpec, QuantSpec

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

def fp8_activation_group(quant: QuantSpec | None) -> int:
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


def effective_quant(
    spec: ModelSpec, args, gpu, warnings: list[str], *,
    methods: frozenset = VLLM_QUANTIZATION_METHODS, version: str = "0.26.0",
) -> QuantSpec | None:
    """The quantization vLLM runs the weights with: the checkpoint's, or --quantization fp8 applied at
    load time (``args``: EngineArgs; ``gpu``: GPUProfile). Appends to ``warnings`` the note when a
    config-only GPTQ checkpoint loads unquantized (then returns None). ``methods`` / ``version``:
    the quantization methods the vLLM version accepts and its name (a later version binds its own).

    Raises:
        KvplanError: a method vLLM refuses (unknown, mismatched, or below the GPU's compute
            capability), naming the flag or the model's quantization config.
    """
    q = spec.quantization
    if q is not None and q.source == "checkpoint" and q.method not in methods:
        base = q.method.removeprefix("modelopt_")
        if not (q.method.startswith("modelopt_") and "modelopt_" + base in methods):
            raise KvplanError(
                f"{spec.name}: quantization_config.quant_method {q.method!r} is not a vLLM {version} quantization "
                "method; vLLM refuses the model",
                hint="known methods include " + ", ".join(sorted(methods)[:8]) + ", ...",
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


def checkpoint_correction(
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


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('config/cache.py', 'CacheDType'),
    ('config/model.py', '_STR_DTYPE_TO_TORCH_DTYPE'),
    ('config/model.py', 'ModelConfig._verify_quantization'),
    ('model_executor/layers/quantization/__init__.py', 'QuantizationMethods'),
    ('model_executor/layers/quantization/fp8.py', 'Fp8Config.get_min_capability'),
    ('model_executor/layers/quantization/mxfp4.py', 'Mxfp4Config.get_min_capability'),
    ('model_executor/layers/quantization/auto_awq.py', 'AutoAWQConfig.get_min_capability'),
    ('model_executor/layers/quantization/auto_gptq.py', 'AutoGPTQConfig.get_min_capability'),
    ('model_executor/layers/quantization/auto_gptq.py', 'AutoGPTQConfig.maybe_update_config'),
    ('model_executor/layers/quantization/bitsandbytes.py', 'BitsAndBytesConfig.get_min_capability'),
)
