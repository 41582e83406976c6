"""VLLM_ALLOW_LONG_MAX_MODEL_LEN (vLLM 0.26.0 config/model.py _get_and_verify_max_len, envs.py):
set to "1"/"true", vLLM keeps a --max-model-len above the model's derived length and only logs a
warning; unset, it refuses. Meta-Llama-3-8B: max_position_embeddings 8192, no rope scaling."""

from __future__ import annotations

import json

import pytest
from tests.helpers import run_cli

M = "meta-llama/Meta-Llama-3-8B"


@pytest.mark.parametrize("value", ["1", "true", " TRUE "])
def test_estimate_honours_the_variable(monkeypatch, value):
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", value)
    code, out, err = run_cli("estimate", M, "--max-model-len", "16384", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["engine"]["max_model_len"] == 16384
    # one 16384-token request: 16384 / 64 = 256 blocks of 32 layers x 8 KV heads x 128 x 2 (K,V) x 2 B x 64
    # (vLLM 0.34.0's default block size, the default version's)
    assert doc["kv_cache"]["bytes_per_block"] == 32 * 8 * 128 * 2 * 2 * 64
    assert doc["kv_cache"]["max_concurrency"] == pytest.approx(doc["kv_cache"]["num_gpu_blocks"] / 256, abs=0.01)
    assert any("beyond the model's trained length (8192 tokens)" in w for w in doc["warnings"])
    assert "--max-model-len 16384" in doc["serve_command"]


def test_estimate_refuses_without_it(monkeypatch):
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    code, _, err = run_cli("estimate", M, "--max-model-len", "16384")
    assert code == 2 and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in err
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")
    assert run_cli("estimate", M, "--max-model-len", "16384")[0] == 2


def test_plan_honours_the_variable(monkeypatch):
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    code, out, err = run_cli("plan", M, "--max-model-len", "16384", "--concurrency", "4", "--gpus", "h200", "--format", "json")
    assert code == 0, err
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    assert run_cli("plan", M, "--max-model-len", "16384", "--concurrency", "4", "--gpus", "h200")[0] == 2


def test_verify_prediction_honours_the_variable(monkeypatch):
    from kvplan.verify.predict import GpuChoice, predict

    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    p, _ = predict(M, {"max_model_len": 16384}, GpuChoice("H200", None, (), "test"))
    assert p.fits and p.effective["max_model_len"] == 16384
