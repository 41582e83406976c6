"""The `vllm serve` line kvplan prints: every flag the user set that differs from vLLM 0.26.0's
default, plus kvplan's fixes, each marked (JSON serve_flags, table lines)."""

from __future__ import annotations

import json

from tests.helpers import run_cli

NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # bundled; ~148 GiB of bf16 weights: needs two H200s


def test_serve_keeps_the_users_flags_and_adds_the_recommended_tp():
    code, out, err = run_cli("estimate", NEXT, "--max-model-len", "32768", "--gpu", "H200", "--format", "serve")
    assert code == 1  # as given it does not start
    assert out.strip() == f"vllm serve {NEXT} --tensor-parallel-size 2 --max-model-len 32768"
    assert "--tensor-parallel-size 2" in err


def test_json_and_table_say_which_flag_is_whose():
    code, out, _ = run_cli("estimate", NEXT, "--max-model-len", "32768", "--gpu", "H200", "--format", "json")
    doc = json.loads(out)
    assert doc["serve_flags"] == [
        {"flag": "--tensor-parallel-size", "value": "2", "origin": "recommended"},
        {"flag": "--max-model-len", "value": "32768", "origin": "user"},
    ]
    code, out, _ = run_cli("estimate", NEXT, "--max-model-len", "32768", "--gpu", "H200")
    text = " ".join(out.split())
    assert "your flags: --max-model-len 32768" in text
    assert "kvplan's fixes: --tensor-parallel-size 2" in text


def test_flags_equal_to_vllms_default_are_left_out():
    # Meta-Llama-3-8B: 8192 positions, so --max-model-len 8192 is vLLM's default; 0.92 is vLLM 0.33.0's
    # fixed default utilization (0.34.0 has none: tests/render/test_serve_line_per_version.py)
    code, out, _ = run_cli(
        "estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--gpu-memory-utilization", "0.92",
        "--max-num-seqs", "64", "--format", "serve", "--vllm-version", "0.33.0",
    )
    assert code == 0
    assert out.strip() == "vllm serve meta-llama/Meta-Llama-3-8B --max-num-seqs 64"


def test_yaml_carries_the_same_flags():
    code, out, _ = run_cli("estimate", NEXT, "--max-model-len", "32768", "--gpu", "H200", "--format", "yaml")
    import yaml

    assert yaml.safe_load(out) == {"model": NEXT, "tensor-parallel-size": 2, "max-model-len": 32768}


def test_yaml_output_spells_a_negative_flag_so_vllm_keeps_it():
    """vLLM 0.26.0's load_config_file (utils/argparse_utils.py) adds a flag
    only for `true` and drops `false`, so `enable-prefix-caching: false` would leave prefix caching
    on. The YAML must say `no-enable-prefix-caching: true` (-> --no-enable-prefix-caching)."""
    import yaml

    code, out, err = run_cli(
        "estimate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192",
        "--no-enable-prefix-caching", "--format", "yaml",
    )
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc.get("no-enable-prefix-caching") is True
    assert "enable-prefix-caching" not in doc


def test_serve_line_sets_the_long_max_model_len_variable_the_plan_relies_on(monkeypatch):
    # Meta-Llama-3-8B: max_position_embeddings 8192 and no rope scaling, so 16384 starts only with
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vLLM 0.26.0 config/model.py _get_and_verify_max_len)
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    args = ("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "16384", "--gpu", "H200",
            "--vllm-version", "0.26.0")
    expected = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve meta-llama/Meta-Llama-3-8B --max-model-len 16384"
    code, out, _ = run_cli(*args, "--format", "serve")
    assert code == 0 and out.strip() == expected
    code, out, _ = run_cli(*args, "--format", "json")
    doc = json.loads(out)
    assert doc["serve_command"] == expected
    assert doc["serve_env"] == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    code, out, _ = run_cli(*args)
    assert expected in out
    code, out, _ = run_cli(*args, "--format", "yaml")
    assert out.startswith("# start vLLM with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in its environment\n")
    code, out, _ = run_cli("plan", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "16384", "--concurrency", "8",
                           "--gpus", "H200", "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0
    assert all(o["serve_command"].startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ") for o in json.loads(out)["options"])


def test_serve_line_has_no_environment_when_the_length_is_the_models_own(monkeypatch):
    # the variable set but not needed (8192 is the model's own length): the line stays bare
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    code, out, _ = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "4096", "--gpu", "H200",
                           "--vllm-version", "0.26.0", "--format", "json")
    doc = json.loads(out)
    assert doc["serve_command"] == "vllm serve meta-llama/Meta-Llama-3-8B --max-model-len 4096"
    assert "serve_env" not in doc
