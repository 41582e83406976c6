"""A ModelOpt FP8 checkpoint in `plan` and `estimate`.

vLLM 0.26.0 reads the checkpoint's method from hf_quant_config.json as "modelopt"; a different
--quantization is refused (config/model.py _verify_quantization: "Quantization method specified in
the model config (modelopt) does not match ..."). Its kv_cache_quant_algo FP8 makes
`--kv-cache-dtype auto` store fp8, so `--kv-cache-dtype fp8` is the same engine.
"""

from __future__ import annotations

import json

from helpers import run_cli

MODEL = "nvidia/Llama-3.1-70B-Instruct-FP8"  # bundled; hf_quant_config: FP8 weights, FP8 KV


def test_quantization_fp8_on_a_modelopt_checkpoint_is_refused_as_vllm_does():
    code, out, err = run_cli("estimate", MODEL, "--gpu", "H100", "-tp", "2", "--quantization", "fp8")
    assert code == 2 and out == ""
    assert "the checkpoint is quantized with modelopt" in err and "--quantization fp8" in err


def test_quantization_modelopt_is_the_checkpoint_as_it_is():
    base = run_cli("estimate", MODEL, "--gpu", "H100", "-tp", "2", "--format", "json")
    same = run_cli("estimate", MODEL, "--gpu", "H100", "-tp", "2", "--quantization", "modelopt", "--format", "json")
    assert base[0] == same[0] == 0, (base[2], same[2])
    assert json.loads(base[1])["kv_cache"]["num_gpu_blocks"] == json.loads(same[1])["kv_cache"]["num_gpu_blocks"]


def test_plan_lists_one_row_per_engine_for_a_modelopt_checkpoint():
    # 1 GPU profile x kv {auto, fp8} x quant {none, fp8}: only (auto, none) is a distinct engine;
    # the other three are the same vLLM start and must not appear as extra rows.
    code, out, err = run_cli(
        "plan", MODEL, "--max-model-len", "8192", "--concurrency", "10", "--gpus", "h100", "--format", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    shapes = [(o["tensor_parallel_size"], o["pipeline_parallel_size"]) for o in doc["options"]]
    assert len(shapes) == len(set(shapes)), doc["options"]


def test_modelopt_fp8_needs_compute_capability_8_9():
    """vLLM 0.26.0 quantization/modelopt.py ModelOptFp8Config.get_min_capability() = 89: an A100
    (8.0) refuses the checkpoint, an H100 (9.0) takes it (fp8's own Marlin fallback, 7.5, does
    not apply to ModelOpt)."""
    code, out, err = run_cli("estimate", MODEL, "--gpu", "A100-80GB", "-tp", "8", "--max-model-len", "4096")
    assert code == 2 and out == ""
    assert "modelopt needs compute capability 8.9" in err and "8.0" in err
    code, _, err = run_cli("estimate", MODEL, "--gpu", "H100", "-tp", "2", "--max-model-len", "4096")
    assert code == 0, err


def test_plan_does_not_propose_a100_for_a_modelopt_checkpoint():
    code, out, err = run_cli(
        "plan", MODEL, "--max-model-len", "8192", "--concurrency", "10", "--gpus", "a100-80gb,h100", "--format", "json"
    )
    assert code == 0, err
    gpus = {o["gpu"]["id"] if isinstance(o["gpu"], dict) else o["gpu"] for o in json.loads(out)["options"]}
    assert gpus and not any(g.startswith("a100") for g in gpus), gpus
