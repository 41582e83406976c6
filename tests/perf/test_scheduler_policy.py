"""Each vLLM version's scheduler policy is reachable through its rules object, and perf/ keeps
to its layer (it may import engines, model, capacity, io; never render, cli, check, verify)."""

from __future__ import annotations

import ast
from pathlib import Path

from kvplan.engines.vllm import versions

PERF = Path(__file__).resolve().parents[2] / "kvplan" / "perf"


def test_each_version_has_its_scheduler_policy():
    old = versions.select("0.26.0").scheduler.POLICY
    new = versions.select("0.33.0").scheduler.POLICY
    assert (old.version, new.version) == ("0.26.0", "0.33.0")
    # config/scheduler.py defaults, both versions
    for p in (old, new):
        assert p.enable_chunked_prefill and p.scheduler_reserve_full_isl and p.async_scheduling
        assert (p.long_prefill_token_threshold, p.watermark, p.preempt) == (0, 0.0, "last")
        assert p.batches_in_flight(True) == 2 and p.batches_in_flight(False) == 1
    # what changed in 0.33.0
    assert old.long_prefill_cap(16, 1) == 16 and new.long_prefill_cap(16, 1) == 0
    assert old.long_prefill_cap(16, 2) == new.long_prefill_cap(16, 2) == 16
    assert old.admission_limit(256, 64) == 256 and new.admission_limit(256, 64) == 64
    assert new.admission_limit(256, None) == 256


def test_sliding_admission_cap_matches_vllm_arithmetic():
    # SlidingWindowSpec.max_admission_blocks_per_request: window 4096, block 16, 2 x 8192
    # in flight, max_model_len 131072: cdiv(min(4095 + 16384, 131072), 16) + 1 = 1280 + 1
    p = versions.select("0.26.0").scheduler.POLICY
    assert p.sliding_admission_cap_blocks(4096, 16, 16384, 131072) == 1281


def test_perf_imports_only_lower_layers():
    banned = ("kvplan.render", "kvplan.cli", "kvplan.check", "kvplan.verify")
    bad = []
    for path in PERF.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad += [f"{path.name}: {n}" for n in names if n.startswith(banned)]
    assert not bad, bad
