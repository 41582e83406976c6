"""Inputs that must be refused or noted: GPU compute capabilities, configs without
architectures (pooling), impossible or conflicting log result lines, config.json paths that are
FIFOs or devices, kv-cache dtypes plan cannot size, workload and kv-cache-memory errors.

Expected values are written by hand from the fixture lines, never computed by the code under
test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run_cli
from test_verify import config_dir, record

MODEL = "meta-llama/Meta-Llama-3-8B"  # bundled spec: resolves offline

# TinyLlama-1.1B's geometry (cases c_arch_missing / c_arch_empty), without 'architectures'.
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


def one_error_line(code: int, out: str, err: str) -> str:
    """The single `error: ...` line of an exit-2 run (a hint line may follow)."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = [s for s in err.splitlines() if s.strip()]
    assert lines and lines[0].startswith("error: "), err
    assert all(s.lstrip().startswith("hint:") for s in lines[1:]), err
    return lines[0]


# --- new 1: compute_capability is MAJOR.MINOR -------------------------------------------------------


@pytest.mark.parametrize("cc", ["abc", "12.x", "-1.0", "", "9", "9.0.1", " 9.0"])
@pytest.mark.parametrize("command", ["gpus", "estimate"])
def test_bad_compute_capability_is_refused_at_load(tmp_path, cc, command):
    f = tmp_path / "gp9.yaml"
    f.write_text(
        "gpus:\n  - {id: x, name: X, memory_bytes: 85899345920, compute_capability: " + json.dumps(cc) + "}\n"
    )
    args = ["gpus", "--gpu-profiles", str(f)] if command == "gpus" else [
        "estimate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu-profiles", str(f), "--gpu", "x"]
    line = one_error_line(*run_cli(*args))
    assert str(f) in line and "gpus[0].compute_capability (id 'x')" in line, line
    assert "MAJOR.MINOR" in line and repr(cc) in line, line


def test_bad_compute_capability_in_plan_is_exit_2(tmp_path):
    f = tmp_path / "gp9.yaml"
    f.write_text("gpus:\n  - {id: x, memory_bytes: 85899345920, compute_capability: abc}\n")
    line = one_error_line(*run_cli("plan", "deepseek-ai/DeepSeek-V2-Lite", "--gpus", "x", "--gpu-profiles", str(f),
                                   "--max-model-len", "4096", "--concurrency", "1"))
    assert "gpus[0].compute_capability" in line


@pytest.mark.parametrize("cc", ["9.0", "10.0", "12.1", 8.9])
def test_good_compute_capability_is_kept(tmp_path, cc):
    from kvplan.gpus import load_profiles

    f = tmp_path / "ok.yaml"
    f.write_text(f"gpus:\n  - {{id: x, memory_bytes: 85899345920, compute_capability: {json.dumps(cc)}}}\n")
    assert load_profiles([str(f)])["x"].compute_capability == str(cc)


# --- new 5: no architectures -> warn that vLLM would load a pooling model ----------------------------


@pytest.mark.parametrize("archs", ["missing", "empty"])
def test_config_without_architectures_warns_about_pooling(tmp_path, archs):
    d = tmp_path / f"c_arch_{archs}"
    d.mkdir()
    cfg = dict(TINY)
    if archs == "empty":
        cfg["architectures"] = []
    (d / "config.json").write_text(json.dumps(cfg))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H100", "--format", "json")
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


# --- new 6: verify --from-log refuses impossible values ----------------------------------------------


def _llama_lines() -> list[str]:
    return list(record("llama3-8b_eager")["log_excerpt"])


def _write_log(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "vllm.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def _verify(tmp_path, log, *extra):
    model = config_dir(tmp_path, "llama3-8b_eager")
    return run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm", *extra)


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "-inf"])
def test_result_line_with_impossible_block_count_is_bad_input(tmp_path, value):
    lines = _llama_lines()
    i = next(k for k, s in enumerate(lines) if s.startswith("RESULT "))
    lines[i] = lines[i].replace("num_gpu_blocks=57197", f"num_gpu_blocks={value}")
    log = _write_log(tmp_path, lines)
    line = one_error_line(*_verify(tmp_path, log, "--max-model-len", "8192", "--enforce-eager"))
    assert line.startswith(f"error: --from-log: {log}:{i + 1}: "), line
    assert "num_gpu_blocks" in line and value in line, line


def test_conflicting_result_lines_are_bad_input(tmp_path):
    lines = _llama_lines()
    i = next(k for k, s in enumerate(lines) if s.startswith("RESULT "))
    lines.append(lines[i].replace("num_gpu_blocks=57197", "num_gpu_blocks=40000"))
    log = _write_log(tmp_path, lines)
    line = one_error_line(*_verify(tmp_path, log, "--max-model-len", "8192", "--enforce-eager"))
    last = len(lines)
    assert line.startswith(f"error: --from-log: {log}:{last}: "), line
    assert f"line {i + 1}" in line and "57197" in line and "40000" in line, line


def test_repeated_identical_result_lines_are_fine(tmp_path):
    lines = _llama_lines()
    lines += [s for s in lines if s.startswith("RESULT ")]
    code, out, err = _verify(tmp_path, _write_log(tmp_path, lines), "--max-model-len", "8192", "--enforce-eager")
    assert code == 0, (out, err)


@pytest.mark.parametrize("value, word", [("NaN", "nan"), ("-8192", "-8192"), ("Infinity", "inf")])
def test_case_line_with_invalid_engine_arg_names_file_and_line(tmp_path, value, word):
    case = '{"name":"x","model":"m","engine_args":{"enforce_eager":true,"max_model_len":%s},"usage":"llm"}' % value
    lines = ["KVPLAN_CASE " + case, *_llama_lines()]
    log = _write_log(tmp_path, lines)
    line = one_error_line(*_verify(tmp_path, log))
    assert line.startswith(f"error: --from-log: {log}:1: "), line
    assert "max_model_len" in line and word in line.lower(), line
    assert "--max-model-len" not in line  # a flag the user did not type


# --- new 8: a config.json path that is a FIFO or a device is read locally -----------------------------


def test_config_json_path_that_is_a_fifo(tmp_path):
    d = tmp_path / "ff"
    d.mkdir()
    os.mkfifo(d / "config.json")
    line = one_error_line(*run_cli("estimate", str(d / "config.json"), "--gpu", "H100"))
    assert "is a FIFO" in line and "Hugging Face" not in line, line


def test_relative_config_json_path_that_is_a_fifo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("ff")
    os.mkfifo("ff/config.json")
    line = one_error_line(*run_cli("estimate", "ff/config.json", "--gpu", "H100"))
    assert line.startswith("error: ff/config.json") and "is a FIFO" in line, line


def test_config_json_symlink_to_dev_zero(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("zl")
    os.symlink("/dev/zero", "zl/config.json")
    line = one_error_line(*run_cli("estimate", "zl/config.json", "--gpu", "H100"))
    assert "is a character device" in line and "Hugging Face" not in line, line


def test_missing_config_json_path_is_not_looked_up_on_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_error_line(*run_cli("estimate", "nothere/config.json", "--gpu", "H100"))
    assert "nothere/config.json" in line and "Hugging Face" not in line, line


# --- new 9: plan --kv-cache-dtype fp8_inc says what estimate says ------------------------------------


def test_plan_fp8_inc_says_cannot_size_yet():
    line = one_error_line(*run_cli("plan", MODEL, "--kv-cache-dtype", "fp8_inc", "--max-model-len", "8192",
                                   "--concurrency", "10"))
    assert line.startswith("error: --kv-cache-dtype: vLLM 0.26.0 accepts 'fp8_inc' but kvplan cannot size it yet"), line


def test_plan_unknown_kv_dtype_still_unknown():
    line = one_error_line(*run_cli("plan", MODEL, "--kv-cache-dtype", "fp9", "--max-model-len", "8192",
                                   "--concurrency", "10"))
    assert "unknown value 'fp9'" in line


# --- new 11: every --workload error starts with --workload: ------------------------------------------

WL = Path(__file__).parent / "data" / "workload"


@pytest.mark.parametrize("name, suffix", [("bad_line.jsonl", ":2: not valid JSON"), ("bad_value.csv", ":3: output_tokens")])
def test_workload_row_errors_name_the_flag(name, suffix):
    path = str(WL / name)
    line = one_error_line(*run_cli("plan", MODEL, "--workload", path, "--max-model-len", "8192", "--concurrency", "1"))
    assert line.startswith(f"error: --workload: {path}{suffix}"), line


@pytest.mark.parametrize("text, name, suffix", [
    ("prompt_tokens,output_tokens\n100,-5\n", "w1.csv", ":2: output_tokens"),
    ('{"prompt_tokens": 100}\n', "w4.jsonl", ":1: missing output_tokens"),
    ("[1]\n", "w5.jsonl", ":1: expected an object"),
])
def test_workload_file_errors_name_the_flag(tmp_path, text, name, suffix):
    p = tmp_path / name
    p.write_text(text)
    line = one_error_line(*run_cli("plan", MODEL, "--workload", str(p), "--max-model-len", "8192", "--concurrency", "1"))
    assert line.startswith(f"error: --workload: {p}{suffix}"), line


def test_workload_spec_duplicate_key_is_bad_input():
    line = one_error_line(*run_cli("plan", MODEL, "--workload", "prompt=100 output=20 prompt=5",
                                   "--max-model-len", "8192", "--concurrency", "1"))
    assert line.startswith("error: --workload: ") and "prompt" in line and "twice" in line, line


# --- new 13: wording -----------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--kv-cache-memory", "--kv-cache-memory-bytes"])
@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_kv_cache_memory_error_names_the_flag_typed(flag, value):
    line = one_error_line(*run_cli("estimate", MODEL, flag, value))
    assert line.startswith(f"error: {flag}: "), line


def test_kv_cache_memory_error_with_equals_form():
    line = one_error_line(*run_cli("estimate", MODEL, "--kv-cache-memory=-1"))
    assert line.startswith("error: --kv-cache-memory: "), line


def test_verify_md_exit_1_covers_predicted_refusals():
    text = (Path(__file__).parent.parent / "docs" / "verify.md").read_text()
    row = next(s for s in text.splitlines() if s.startswith("| 1 |"))
    assert "kvplan predicted it would start" not in row
    assert "whether or not kvplan predicted" in row
