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
    # Meta-Llama-3-8B: 8192 positions, so --max-model-len 8192 is vLLM's default; 0.92 is the default utilization
    code, out, _ = run_cli(
        "estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--gpu-memory-utilization", "0.92",
        "--max-num-seqs", "64", "--format", "serve",
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
