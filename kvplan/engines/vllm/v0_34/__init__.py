"""vLLM 0.34.0's rules, built into one frozen VllmRules: ``RULES``.

Derived from the vLLM 0.34.0 source (the PyPI wheel) against 0.33.0's, and checked on the real
0.34.0 starts of real_starts.py (dense Llama-3-8B on one H100): an estimate's evidence names
every 0.34.0 rule it used that they did not check. Reused from 0.33.0 unchanged: kv_spec (its hybrid alignment starts from the
block size, now 64), scheduler, weights, family quirks, the flag catalogue and check's rules.
New or changed here: defaults (block size 64, gpu_memory_utilization 1.0 with the extensible KV
cache, the sizing-mode switch), memory (the extensible KV cache's measured budget beside 0.33.0's
estimate path), activation (the warm-up / sizing-step transient P and G), allocator (granule
rounding per layer segment), runner (no V1 runner; SM100 capture grids), quantization (fp_quant
removed; w4afp8, lut_b_moe, mxfp4_hadamard32 added), log_grammar, and the registry below.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.vllm import v0_33
from kvplan.engines.vllm.rules import FittedCoefficients
from kvplan.engines.vllm.v0_34 import activation, addons, allocator, defaults, memory, parallel, quantization, real_starts, runner

RULES = replace(
    v0_33.RULES,
    version="0.34.0",
    evidence=(
        f"derived from the vLLM 0.34.0 source and checked on {len(real_starts.STARTS)} real H100 starts "
        "(real_starts.py: dense bf16 Llama-3-8B; the estimate path, other GPUs and model kinds not yet checked)"
    ),
    defaults=defaults,
    quantization=quantization,
    allocator=allocator,
    memory=memory,
    activation=activation,
    runner=runner,
    parallel=parallel,
    addons=addons,
    coefficients=FittedCoefficients.of(memory),
    real_starts=real_starts,
    start_failures={},
    # vLLM 0.34.0 config/cache.py: gpu_memory_utilization defaults to None, resolved to 1.0 with the
    # extensible KV cache and 0.92 without (resolved_gpu_memory_utilization 34:L495): no fixed default,
    # so a value the user set is always written (an explicit 0.92 caps the extensible budget).
    serve_flags={**v0_33.RULES.serve_flags, "gpu_memory_utilization": ("--gpu-memory-utilization", None)},
    kv_cache_dtype_ignored=frozenset(),
    # vLLM 0.34.0 model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS: 0.33.0's MPT
    # removal stands, and Keye-VL was removed after 0.33.0 (kvplan has no Keye family: refusing it
    # names the release that served it instead of sizing it approximately).
    removed_architectures={
        "MPTForCausalLM": "0.28.0",
        "MptForCausalLM": "0.28.0",
        "KeyeForConditionalGeneration": "0.33.0",
        "KeyeVL1_5ForConditionalGeneration": "0.33.0",
    },
    # registry.py _TRANSFORMERS_SUPPORTED_MODELS (34:L782): Gemma and OLMoE (kvplan has families
    # for them, read from vLLM's own gemma.py / olmoe.py, deleted in 0.34.0) are now served by
    # vLLM's Transformers backend, whose weights layout and profile peak kvplan has not checked;
    # Kimi-Linear stays on vllm/models/kimi_k3 as in 0.33.0.
    unread_implementations={
        "GemmaForCausalLM": "vLLM 0.34.0 serves Gemma through its Transformers backend (TransformersForCausalLM), "
                            "not the gemma.py kvplan's rules were read from",
        "OlmoeForCausalLM": "vLLM 0.34.0 serves OLMoE through its Transformers backend (TransformersMoEForCausalLM), "
                            "not the olmoe.py kvplan's rules were read from",
        "KimiLinearForCausalLM": "vLLM 0.34.0 serves Kimi-Linear from vllm/models/kimi_k3, "
                                 "which kvplan's rules (read from 0.26.0's kimi_linear.py) were not checked against",
    },
)
