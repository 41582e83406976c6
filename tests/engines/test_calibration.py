"""kvplan vs real vLLM 0.26.0 starts on one H200 (tests/data/calibration): the acceptance test.

Expected numbers are vLLM's own logged figures; nothing here is recomputed with kvplan's code.
"""

from __future__ import annotations

import json

import pytest

from calibration_cases import estimate_argv, load_cases
from helpers import run_cli

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_num_gpu_blocks_within_one_percent(case, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(case["config"]))
    code, out, err = run_cli(*estimate_argv(case, tmp_path))
    assert code == 0, err
    doc = json.loads(out)
    got = doc["kv_cache"]["num_gpu_blocks"]
    want = case["num_gpu_blocks"]
    assert abs(got - want) / want <= 0.01, f"{case['name']}: kvplan {got} vs vLLM {want}"
    assert doc["kv_cache"]["block_size"] == case["block_size"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_kv_tokens_and_concurrency_within_one_percent(case, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(case["config"]))
    code, out, err = run_cli(*estimate_argv(case, tmp_path))
    doc = json.loads(out)
    kv = doc["kv_cache"]
    assert abs(kv["gpu_kv_cache_tokens"] - case["gpu_kv_cache_tokens"]) / case["gpu_kv_cache_tokens"] <= 0.01
    assert abs(kv["max_concurrency"] - case["max_concurrency"]) / case["max_concurrency"] <= 0.01


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_weights_match_model_loading_line(case, tmp_path):
    """'Model loading took X GiB' is rounded to 0.01 GiB; kvplan must land within 0.2 GiB."""
    (tmp_path / "config.json").write_text(json.dumps(case["config"]))
    code, out, err = run_cli(*estimate_argv(case, tmp_path))
    doc = json.loads(out)
    got = doc["memory"]["weights_bytes"] / 2**30
    assert abs(got - case["measured_gib"]["weights"]) <= 0.2, f"{got:.3f} vs {case['measured_gib']['weights']}"


def test_requested_memory_is_ceil_of_total_times_utilization(tmp_path):
    """vLLM: requested = ceil(150109880320 * 0.92) = 138101089895 (fill_gpu - fit_requested
    in llama3-8b_eager equals free - requested: 149557477376 - 138101089895 = 11456387481)."""
    case = next(c for c in CASES if c["name"] == "llama3-8b_eager")
    s = case["suggested_kv_cache_memory_bytes"]
    assert s["fill_gpu"] - s["fit_requested"] == 149557477376 - 138101089895
    (tmp_path / "config.json").write_text(json.dumps(case["config"]))
    code, out, err = run_cli(*estimate_argv(case, tmp_path))
    assert json.loads(out)["memory"]["requested_bytes"] == 138101089895
