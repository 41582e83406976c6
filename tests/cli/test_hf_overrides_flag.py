"""`kvplan estimate/plan --hf-overrides JSON`: the overrides are applied to the model's config as
vLLM 0.26.0 applies them (config/model.py, the same kvplan.model.overrides code `check` uses), and
the serve line carries them again so vLLM sizes the same config.

Meta-Llama-3-8B (bundled): max_position_embeddings 8192, no rope scaling, so its own length is
8192; with {"max_position_embeddings": 16384} vLLM's derived length is 16384, and
--max-model-len 16384 then starts without VLLM_ALLOW_LONG_MAX_MODEL_LEN.
"""

from __future__ import annotations

import json

import yaml

from tests.helpers import run_cli

M = "meta-llama/Meta-Llama-3-8B"
OVR = '{"max_position_embeddings": 16384}'
BASE = ("estimate", M, "--gpu", "H200", "--vllm-version", "0.26.0", "--max-model-len", "16384")


def test_estimate_applies_the_overrides_to_the_config(monkeypatch):
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    code, _, err = run_cli(*BASE)
    assert code == 2 and "larger than the model's limit (8192 tokens" in err
    code, out, _ = run_cli(*BASE, "--hf-overrides", OVR, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["model"]["derived_max_model_len"] == 16384
    assert doc["kv_cache"]["max_model_len"] == 16384
    # 16384 is now the model's own length, so the line omits --max-model-len and carries the overrides
    assert doc["serve_command"] == f"vllm serve {M} --hf-overrides '{OVR}'"
    assert {"flag": "--hf-overrides", "value": OVR, "origin": "user"} in doc["serve_flags"]


def test_yaml_carries_the_overrides_as_a_mapping():
    code, out, _ = run_cli(*BASE, "--hf-overrides", OVR, "--format", "yaml")
    assert code == 0
    # vLLM's --config turns a mapping value back into the JSON --hf-overrides takes
    assert yaml.safe_load(out) == {"model": M, "hf-overrides": {"max_position_embeddings": 16384}}


def test_plan_applies_them_and_every_serve_line_carries_them():
    code, out, _ = run_cli("plan", M, "--concurrency", "8", "--gpus", "H200", "--max-model-len", "16384",
                           "--vllm-version", "0.26.0", "--hf-overrides", OVR, "--format", "json")
    assert code == 0
    opts = json.loads(out)["options"]
    assert opts and all(o["serve_command"].endswith(f"--hf-overrides '{OVR}'") for o in opts)


def test_a_flat_key_a_multimodal_model_reads_from_text_config_is_warned():
    # Gemma 3 27B (bundled) keeps max_position_embeddings in text_config: the flat key lands on
    # the outer config, where the language model does not read it
    code, out, err = run_cli("estimate", "google/gemma-3-27b-it", "--vllm-version", "0.26.0",
                             "--hf-overrides", '{"max_position_embeddings": 262144}', "--format", "json")
    doc = json.loads(out)
    assert any("text_config.max_position_embeddings" in w for w in doc["warnings"])
