"""vLLM 0.33.0's rules, built into one frozen VllmRules: ``RULES``.

Derived from the vLLM 0.33.0 source and checked on the 9 real H200 starts in
tests/data/vllm-0.33.0-h200 (all with --enforce-eager). Reused from 0.26.0 unchanged:
quantization, weights, family quirks, the flag catalogue (no serve flag kvplan reads changed;
--device-memory-utilization is a new alias kvplan does not read) and check's rules (switches
on by default). New or changed here: defaults
(>= 160 GiB batch tier, prefix caching on for hybrids), kv_spec (hybrid block alignment, Mamba
``align`` pages), allocator (null block in the start-up check), memory (consumed-memory
accounting, cuBLAS before the snapshot), activation (V2 profile for every model, sampler warm-up,
persistent sampler state), runner (V2 for all, graph estimate subtracted), log_grammar.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.vllm import v0_26
from kvplan.engines.vllm.rules import FittedCoefficients
from kvplan.engines.vllm.v0_33 import activation, allocator, defaults, kv_spec, memory, runner

# The real starts the fitted coefficients were checked on (tests/data/vllm-0.33.0-h200).
CHECKED_STARTS = 9

# 0.26.0's rules with the changed modules and the refitted coefficients replaced.
RULES = replace(
    v0_26.RULES,
    version="0.33.0",
    evidence=(
        f"derived from the vLLM 0.33.0 source and checked on {CHECKED_STARTS} real H200 starts "
        "(tests/data/vllm-0.33.0-h200, all --enforce-eager: CUDA graphs, Mamba hybrids and the "
        ">= 160 GiB tier not yet checked)"
    ),
    defaults=defaults,
    kv_spec=kv_spec,
    allocator=allocator,
    memory=memory,
    activation=activation,
    runner=runner,
    coefficients=FittedCoefficients.of(memory),
    start_failures={},  # 0.26.0's Gemma-4 config-reader failure: 0.33.0 reads per-layer configs
)
