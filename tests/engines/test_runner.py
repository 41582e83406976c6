"""Which runner vLLM picks for a checkpoint: a config without `architectures` is served as a
pooling model (vLLM's runner choice; rules in kvplan/engines/vllm/v0_26/runner.py), and kvplan warns.

Expected values are written by hand, never computed by the code under test.
"""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

# TinyLlama-1.1B's geometry (c_arch_missing / c_arch_empty), without 'architectures'.
TINY = {
    "model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 32000,
    "max_position_embeddings": 2048, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "tie_word_embeddings": False,
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("KVPLAN_GPU_PROFILES", raising=False)

@pytest.mark.parametrize("archs", ["missing", "empty"])
def test_config_without_architectures_warns_about_pooling(tmp_path, archs):
    d = tmp_path / f"c_arch_{archs}"
    d.mkdir()
    cfg = dict(TINY)
    if archs == "empty":
        cfg["architectures"] = []
    (d / "config.json").write_text(json.dumps(cfg))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H100", "--format", "json", "--vllm-version", "0.26.0")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    hits = [w for w in warnings if "pooling" in w]
    assert len(hits) == 1, warnings
    assert "architectures" in hits[0] and "LlamaForCausalLM" in hits[0] and "0.26.0" in hits[0]


def test_config_with_architectures_has_no_pooling_warning(tmp_path):
    d = tmp_path / "c_arch_ok"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**TINY, "architectures": ["LlamaForCausalLM"]}))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H100", "--format", "json")
    assert code == 0, err
    assert not [w for w in json.loads(out)["warnings"] if "pooling" in w]


def test_bundled_snapshot_without_architectures_gets_no_pooling_warning():
    # model_specs/ai21labs__Jamba-v0.1.json keeps geometry only; the published config names
    # JambaForCausalLM, so vLLM serves the repo as a generative model.
    code, out, err = run_cli("estimate", "ai21labs/Jamba-v0.1", "--gpu", "H200", "--format", "json")
    assert code in (0, 1), err
    assert not [w for w in json.loads(out)["warnings"] if "pooling" in w]
