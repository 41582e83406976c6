"""vLLM 0.26.0's rules (calibrated on the H200 starts in tests/data/vllm-0.26.0-h200 and
tests/data/calibration/vllm-0.26.0-h200), built into one frozen VllmRules: ``RULES``."""

from __future__ import annotations

from kvplan.engines.vllm.rules import FittedCoefficients, VllmRules
from kvplan.engines.vllm.v0_26 import (
    activation,
    allocator,
    check_rules,
    defaults,
    family_quirks,
    flag_catalogue,
    kv_spec,
    memory,
    quantization,
    runner,
    weights,
)

RULES = VllmRules(
    version="0.26.0",
    evidence="calibrated on the real vLLM 0.26.0 starts in tests/data (H200)",
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
    start_failures=family_quirks.START_FAILURES,
)
