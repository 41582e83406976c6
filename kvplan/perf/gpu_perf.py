"""A GPU profile's performance numbers as the step-time model reads them (units: bytes/s, FLOP/s).

The numbers are vendor peaks from the GPU profile's ``perf`` block (kvplan/data/gpus.yaml, each
with its datasheet): DRAM bandwidth, dense tensor throughput per dtype, GPU-to-GPU link
bandwidth. Nothing is inferred for a number the profile lacks: the lookup refuses, naming it.
"""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.gpus import GPUProfile
from kvplan.model.spec import QuantSpec

# Weight-only quantization: the GEMM dequantizes to the activation dtype and runs there.
WEIGHT_ONLY_METHODS = frozenset({"awq", "gptq", "awq_marlin", "gptq_marlin", "bitsandbytes", "marlin", "machete"})
FP8_METHODS = frozenset({"fp8", "fbgemm_fp8", "modelopt", "modelopt_fp8", "ptpc_fp8"})
FP4_METHODS = frozenset({"mxfp4", "modelopt_fp4", "nvfp4"})


def _missing(gpu: GPUProfile, what: str) -> KvplanError:
    return KvplanError(
        f"--gpu {gpu.id}: the GPU profile has no {what}, which the step-time model needs",
        hint="add it under perf: in a --gpu-profiles file (see kvplan/data/gpus.yaml), e.g. "
        f"- {{id: {gpu.id}, perf: {{memory_bandwidth_bytes_per_s: ..., dense_tflops: {{bf16: ...}}}}}}",
    )


def memory_bandwidth(gpu: GPUProfile) -> float:
    """Peak DRAM bandwidth of one GPU, bytes/s (the profile's perf.memory_bandwidth_bytes_per_s).

    Raises:
        KvplanError: the profile has none (names --gpu and the key).
    """
    if gpu.perf is None or gpu.perf.memory_bandwidth_bytes_per_s is None:
        raise _missing(gpu, "perf.memory_bandwidth_bytes_per_s")
    return float(gpu.perf.memory_bandwidth_bytes_per_s)


def link_bandwidth(gpu: GPUProfile) -> float:
    """GPU-to-GPU bandwidth per direction, bytes/s (perf.link_bandwidth_bytes_per_s).

    Raises:
        KvplanError: the profile has none.
    """
    if gpu.perf is None or gpu.perf.link_bandwidth_bytes_per_s is None:
        raise _missing(gpu, "perf.link_bandwidth_bytes_per_s")
    return float(gpu.perf.link_bandwidth_bytes_per_s)


def matmul_dtype(dtype: str, quant: QuantSpec | None, gpu: GPUProfile) -> tuple[str, str | None]:
    """The tensor-core dtype the linear layers run in, and a note when it is an assumption.

    Rule: unquantized -> the activation dtype (bf16/fp16); weight-only methods (AWQ, GPTQ,
    bitsandbytes) dequantize into the activation dtype; fp8 methods run fp8 GEMMs where the GPU has
    fp8 tensor cores (else vLLM's weight-only fp8 Marlin path: activation dtype); fp4 methods run
    fp4 where the profile has an fp4 rate, else the activation dtype (weight-only dequant).
    compressed-tensors 8-bit: fp8 when symmetric without zero points on an fp8 GPU, otherwise int8.
    Another method: the activation dtype, with a note that this is assumed.

    Returns:
        (one of "bf16", "fp16", "fp8", "int8", "fp4"; a note or None).
    """
    act = "fp16" if dtype == "float16" else "bf16"
    if quant is None or quant.method == "none":
        return act, None
    m = quant.method
    tf = gpu.perf.dense_tflops if gpu.perf is not None else None
    if m in WEIGHT_ONLY_METHODS:
        return act, None
    if m in FP8_METHODS:
        return ("fp8", None) if gpu.fp8_supported else (act, None)
    if m in FP4_METHODS:
        return ("fp4", None) if tf is not None and tf.fp4 is not None else (act, None)
    if m == "compressed-tensors":
        if quant.bits == 8:
            if not quant.zero_point and gpu.fp8_supported:
                return "fp8", None
            return "int8", None
        return act, None
    return act, f"quantization {m!r}: its GEMMs are assumed to run in {act} (approximate)"


def matmul_flops(gpu: GPUProfile, kind: str) -> float:
    """Peak dense tensor throughput of one GPU in ``kind`` ("bf16", "fp16", "fp8", "int8", "fp4"),
    FLOP/s (TFLOPS x 1e12). fp16 and bf16 stand in for each other (the same tensor cores).

    Raises:
        KvplanError: the profile has no rate for it (names --gpu and perf.dense_tflops.KIND).
    """
    tf = gpu.perf.dense_tflops if gpu.perf is not None else None
    value = getattr(tf, kind, None) if tf is not None else None
    if value is None and kind in ("bf16", "fp16") and tf is not None:
        value = tf.fp16 if kind == "bf16" else tf.bf16
    if value is None:
        raise _missing(gpu, f"perf.dense_tflops.{kind}")
    return float(value) * 1e12
