"""Quantization and checkpoint rules of vLLM 0.34.0: 0.26.0's (v0_26/quantization.py), with the
registry of methods vLLM accepts changed.

vLLM 0.34.0 model_executor/layers/quantization/__init__.py QUANTIZATION_METHODS against 0.33.0:
``fp_quant`` removed (with its ``qutlass`` kernels: a checkpoint with that method is refused);
added ``w4afp8`` (INT4 group-128 routed experts + FP8 block-128 elsewhere), the online
``lut_b_moe`` and ``mxfp4_hadamard32`` (MXFP4 with a Hadamard-32 input rotation). kvplan has no
weight rules for the three new methods: a checkpoint using one is sized as unquantized and the
model parse says so (model/quant.py, as for any method kvplan does not model). The allocation
code of fp8, modelopt, moe_wna16, experts_int8, compressed-tensors and the online fp8 / mxfp4 /
nvfp4 methods is unchanged (diffed).
"""

from __future__ import annotations

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import quantization as _q26
from kvplan.engines.vllm.v0_26.quantization import (  # noqa: F401  (unchanged)
    CHECKPOINT_GAP,
    QUANT_MIN_CAPABILITY,
    QUANTIZATIONS,
    VLLM_DTYPES,
    VLLM_ONLY_KV_CACHE_DTYPES,
    checkpoint_correction,
    fp8_activation_group,
)

VERSION = "0.34.0"
REMOVED_METHODS = frozenset({"fp_quant"})
ADDED_METHODS = frozenset({"w4afp8", "lut_b_moe", "mxfp4_hadamard32"})
VLLM_QUANTIZATION_METHODS = (_q26.VLLM_QUANTIZATION_METHODS - REMOVED_METHODS) | ADDED_METHODS

effective_quant = override(
    _q26.effective_quant,
    """The quantization vLLM 0.34.0 runs the weights with (0.26.0's rule,
    v0_26.quantization.effective_quant, against 0.34.0's registry of methods). Same arguments
    and errors.""",
    methods=VLLM_QUANTIZATION_METHODS,
    version=VERSION,
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('model_executor/layers/quantization/__init__.py', 'QuantizationMethods'),
    ('config/model.py', 'ModelConfig._verify_quantization'),
)
