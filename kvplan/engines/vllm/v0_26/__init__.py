"""vLLM 0.26.0's rules (calibrated on the H200 starts in tests/data/vllm-0.26.0-h200 and
tests/data/calibration/vllm-0.26.0-h200), built into one frozen VllmRules: ``RULES``."""

from __future__ import annotations

from kvplan.engines.vllm.rules import FittedCoefficients, VllmRules
from kvplan.engines.vllm.v0_26 import (
    activation,
    addons,
    allocator,
    check_rules,
    defaults,
    family_quirks,
    flag_catalogue,
    kv_spec,
    memory,
    parallel,
    quantization,
    real_starts,
    runner,
    scheduler,
    weights,
)

RULES = VllmRules(
    version="0.26.0",
    evidence=f"calibrated on {len(real_starts.STARTS)} real vLLM 0.26.0 starts (H200, one on an H100 SXM; real_starts.py)",
    flag_table=flag_catalogue.TABLE,
    serve_flags=flag_catalogue.SERVE_FLAGS,
    defaults=defaults,
    quantization=quantization,
    kv_spec=kv_spec,
    allocator=allocator,
    memory=memory,
    activation=activation,
    weights=weights,
    runner=runner,
    family_quirks=family_quirks,
    coefficients=FittedCoefficients.of(memory),
    check_rules=check_rules,
    real_starts=real_starts,
    scheduler=scheduler,
    parallel=parallel,
    start_failures=family_quirks.START_FAILURES,
    kv_cache_dtype_ignored=family_quirks.KV_CACHE_DTYPE_IGNORED,
    addons=addons,
)
