"""Phi-3-128k / Phi-3.5-mini / Phi-4-mini (longrope): ``original_max_position_embeddings`` is
only vLLM's default --max-model-len; an explicit length up to ``max_position_embeddings`` is
allowed (vLLM 0.26.0 config/model.py _get_and_verify_max_len: the longrope default branch runs
only when max_model_len is unset or -1; the limit check compares with the unscaled derived
length, longrope's factor not applied)."""

from __future__ import annotations

import json

from helpers import run_cli

from kvplan.model.parse import parse_config

# microsoft/Phi-3.5-mini-instruct config.json (huggingface.co, the published values of these
# keys); the 48 long/short rope factors are not copied (they change no memory): 1.0 each.
PHI35_MINI = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48},
}


def _estimate(tmp_path, *args):
    d = tmp_path / "phi35"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(PHI35_MINI))
    return run_cli("estimate", str(d), "--gpu", "H200", "--format", "json", "--vllm-version", "0.26.0", *args)


def test_default_is_the_original_length_limit_the_full_one():
    spec = parse_config(PHI35_MINI, "phi35")
    assert spec.derived_max_model_len == 4096  # vLLM's default for longrope
    assert spec.max_len_limit == 131072


def test_explicit_32768_is_allowed(tmp_path):
    code, out, err = _estimate(tmp_path, "--max-model-len", "32768")
    assert code == 0, err
    assert json.loads(out)["engine"]["max_model_len"] == 32768


def test_unset_uses_4096(tmp_path):
    code, out, err = _estimate(tmp_path)
    assert code == 0, err
    assert json.loads(out)["engine"]["max_model_len"] == 4096


def test_above_max_position_embeddings_is_refused(tmp_path):
    code, out, err = _estimate(tmp_path, "--max-model-len", "131073")
    assert code == 2 and out == ""
    assert "--max-model-len 131073: larger than the model's limit (131072 tokens" in err


def test_a_non_longrope_model_keeps_one_limit():
    cfg = {k: v for k, v in PHI35_MINI.items() if k not in ("rope_scaling", "original_max_position_embeddings")}
    spec = parse_config(cfg, "phi3")
    assert spec.derived_max_model_len == spec.max_len_limit == 131072
