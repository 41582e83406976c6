"""vLLM 0.33.0's rules, built into one frozen VllmRules: ``RULES``.

Derived from the vLLM 0.33.0 source and checked on the real H200 starts (real_starts.py) in
tests/data/vllm-0.33.0-h200 (all with --enforce-eager). Reused from 0.26.0 unchanged:
quantization, weights, family quirks, the flag catalogue (no serve flag kvplan reads changed;
--device-memory-utilization is a new alias kvplan does not read). New or changed here:
check's rules (check_rules.py: the shared-memory rings' free-space check), defaults
(>= 160 GiB batch tier, prefix caching on for hybrids), kv_spec (hybrid block alignment, Mamba
``align`` pages), allocator (null block in the start-up check), memory (consumed-memory
accounting, cuBLAS before the snapshot), activation (V2 profile for every model, sampler warm-up,
persistent sampler state), runner (V2 for all, graph estimate subtracted), log_grammar.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.vllm import v0_26
from kvplan.engines.vllm.rules import FittedCoefficients
from kvplan.engines.vllm.v0_33 import (
    activation,
    addons,
    allocator,
    check_rules,
    defaults,
    kv_spec,
    memory,
    parallel,
    real_starts,
    runner,
    scheduler,
)

# The real starts the fitted coefficients were checked on (real_starts.py: tests/data/vllm-0.33.0-h200).
CHECKED_STARTS = len(real_starts.STARTS)

# 0.26.0's rules with the changed modules and the refitted coefficients replaced.
RULES = replace(
    v0_26.RULES,
    version="0.33.0",
    evidence=(
        f"derived from the vLLM 0.33.0 source and checked on {CHECKED_STARTS} real H200 starts "
        "(real_starts.py, all --enforce-eager: CUDA graphs and the "
        ">= 160 GiB tier not yet checked)"
    ),
    defaults=defaults,
    kv_spec=kv_spec,
    allocator=allocator,
    memory=memory,
    activation=activation,
    runner=runner,
    scheduler=scheduler,
    parallel=parallel,
    addons=addons,
    check_rules=check_rules,
    coefficients=FittedCoefficients.of(memory),
    real_starts=real_starts,
    start_failures={},  # 0.26.0's Gemma-4 config-reader failure: 0.33.0 reads per-layer configs
    # 0.33.0's mimo_v2.py passes the cache config to its attention layers: --kv-cache-dtype applies
    kv_cache_dtype_ignored=frozenset(),
    # vLLM 0.33.0 model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS: MPT was removed
    # (mpt.py is gone; the registry raises "supported in vLLM until v0.28.0")
    removed_architectures={"MPTForCausalLM": "0.28.0", "MptForCausalLM": "0.28.0"},
    # registry.py maps KimiLinearForCausalLM to vllm/models/kimi_k3 (a new implementation shared
    # with Kimi-K3), not 0.26.0's model_executor/models/kimi_linear.py that kvplan's family follows
    unread_implementations={
        "KimiLinearForCausalLM": "vLLM 0.33.0 serves Kimi-Linear from a new implementation (vllm/models/kimi_k3) "
                                 "that kvplan's rules (read from 0.26.0's kimi_linear.py) were not checked against",
    },
)
