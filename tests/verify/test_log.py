"""The vLLM log parser on real log lines.

Fixtures (tests/data/logs/):
* vllm-0.26.0-h200/*.json: the calibration records of ../shared/calibration (real vLLM 0.26.0
  starts on one H200). Their ``log_excerpt`` lines are parsed and checked against the record's
  structured fields, which the calibration author transcribed from the same starts.
* older/*.log: lines people pasted in public issues, verbatim; each file's first line is its
  source URL. The expected numbers below are copied by hand from those lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.verify.log import engine_arguments, message_of, parse_log, parse_python_dict

DATA = Path(__file__).parents[1] / "data" / "logs"
CALIBRATION = sorted((DATA / "vllm-0.26.0-h200").glob("*.json"))
GiB = 1 << 30
MiB = 1 << 20


def older(name: str):
    return parse_log((DATA / "older" / name).read_text(encoding="utf-8"))


def gib2(n_bytes: int) -> float:
    return round(n_bytes / GiB, 2)


def test_calibration_fixtures_present():
    assert len(CALIBRATION) == 14


# --- vLLM 0.26.0 -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CALIBRATION, ids=lambda p: p.stem)
def test_026_excerpt_matches_the_record(path):
    rec = json.loads(path.read_text())
    log = parse_log("\n".join(rec["log_excerpt"]))
    assert log.gpu_kv_cache_tokens == rec["gpu_kv_cache_tokens"]
    assert log.max_concurrency == rec["max_concurrency"]
    assert log.concurrency_max_model_len == rec["max_model_len"]
    assert gib2(log.kv_cache_bytes) == rec["available_kv_cache_gib"]
    assert gib2(log.weights_bytes) == rec["measured_gib"]["weights"]
    assert gib2(log.activation_peak_bytes) == rec["measured_gib"]["peak_activation"]
    assert gib2(log.non_torch_bytes) == rec["measured_gib"]["non_torch"]
    assert gib2(log.cudagraph_bytes) == rec["measured_gib"]["cudagraph"]
    assert log.suggested_fit_requested_bytes == rec["suggested_kv_cache_memory_bytes"]["fit_requested"]
    assert log.suggested_fill_gpu_bytes == rec["suggested_kv_cache_memory_bytes"]["fill_gpu"]
    assert log.gpu_memory_utilization == rec["gpu_memory_utilization"]
    assert gib2(log.requested_bytes) == rec["requested_gib"]
    # the RESULT line of the calibration driver carries what vLLM 0.26 does not log
    assert log.num_gpu_blocks == rec["num_gpu_blocks"]
    assert log.num_gpu_blocks_source == "RESULT line"
    assert log.block_size == rec["block_size"]
    assert log.max_num_seqs == rec["max_num_seqs"]
    assert log.max_num_batched_tokens == rec["max_num_batched_tokens"]
    assert log.attention_backend == rec["attention_backend"]
    assert log.refusal is None
    assert log.started


def test_026_without_the_result_line_has_no_block_count():
    rec = json.loads((DATA / "vllm-0.26.0-h200" / "llama3-8b_eager.json").read_text())
    lines = [s for s in rec["log_excerpt"] if not s.startswith("RESULT ")]
    log = parse_log("\n".join(lines))
    assert log.num_gpu_blocks is None  # vLLM 0.26 logs tokens, not blocks
    assert log.block_size is None
    assert log.gpu_kv_cache_tokens == 915_152
    assert log.max_num_batched_tokens == 16_384  # "Chunked prefill is enabled with ..."


def test_026_total_memory_resolution_is_a_hundredth_gib():
    # "139.8 GiB": vLLM rounds to 0.01 GiB and Python drops the trailing zero.
    log = parse_log("Free memory on device (139.29/139.8 GiB) on startup. Desired GPU memory utilization is (0.92, 128.62 GiB).")
    assert log.total_bytes == round(139.8 * GiB)
    assert log.resolution_bytes["total_bytes"] == round(0.005 * GiB)
    assert log.free_at_start_bytes == round(139.29 * GiB)


def test_026_non_default_args_line_and_case_line():
    rec = json.loads((DATA / "vllm-0.26.0-h200" / "llama3-8b_eager_mbt16k.json").read_text())
    log = parse_log("\n".join(rec["log_excerpt"]))
    assert log.non_default_args["max_num_seqs"] == 256
    assert log.non_default_args["load_format"] == "dummy"
    assert log.model == "calib/models/llama3-8b"
    assert log.usage == "llm"  # the calibration driver's CASE line used the LLM class
    args = engine_arguments(log)
    assert args["max_num_batched_tokens"] == 16384 and args["max_num_seqs"] == 256 and args["enforce_eager"] is True


def test_026_llm_class_is_recognised_from_disable_log_stats():
    line = (
        "non-default args: {'skip_tokenizer_init': True, 'load_format': 'dummy', 'max_model_len': 8192, "
        "'disable_log_stats': True, 'enforce_eager': True, 'model': 'calib/models/llama3-8b'}"
    )
    log = parse_log(line)
    assert log.usage == "llm"
    assert engine_arguments(log)["max_model_len"] == 8192


# --- V1 logs of earlier releases -----------------------------------------------------------------


def test_v1_enginecore_prefixed_lines():
    log = older("v1-0.10_enginecore-prefix.log")  # LMCache#1739
    assert log.kv_cache_bytes == round(6.51 * GiB)
    assert log.gpu_kv_cache_tokens == 42_656
    assert log.max_concurrency == 1.30
    assert log.concurrency_max_model_len == 32_768
    assert log.num_gpu_blocks is None


def test_v1_stats_logger_gives_num_gpu_blocks():
    log = older("v1-0.10_stats-num-gpu-blocks.log")  # vllm PR #20707
    assert log.num_gpu_blocks == 57_656
    assert log.num_gpu_blocks_source == "stats logger line"
    assert log.gpu_kv_cache_tokens == 922_496
    assert log.max_concurrency == 23.06
    assert log.concurrency_max_model_len == 40_000
    assert log.init_engine_s == 1.06


def test_v1_early_gpu_blocks_line():
    log = older("v1-early_gpu-blocks.log")  # vllm PR #13596
    assert log.num_gpu_blocks == 127_626
    assert log.num_cpu_blocks is None
    assert log.max_concurrency == 997.08
    assert log.concurrency_max_model_len == 2048


def test_v1_refusal_with_traceback():
    log = older("v1-refusal_pp.log")  # vllm#32105
    r = log.refusal
    assert r.kind == "max_model_len"
    assert r.max_model_len == 202_752
    assert r.needed_bytes == round(71.16 * GiB)
    assert r.available_bytes == round(28.57 * GiB)
    assert r.estimated_max_model_len == 81_392
    assert log.error_lines[-1].startswith("ValueError: To serve at least one request")
    assert not log.started


def test_v1_actual_usage_line_with_path_prefix():
    log = older("v1-0.2x_actual-usage_debug.log")  # vllm PR #29830
    assert log.free_at_start_bytes == round(43.91 * GiB)
    assert log.total_bytes == round(44.4 * GiB)
    assert log.gpu_memory_utilization == 0.9
    assert log.requested_bytes == round(39.96 * GiB)
    assert log.weights_bytes == round(13.72 * GiB)
    assert log.activation_peak_bytes == round(1.83 * GiB)
    assert log.non_torch_bytes == round(0.04 * GiB)
    assert log.cudagraph_bytes == 0
    assert log.suggested_fit_requested_bytes == 26_017_729_126
    assert log.suggested_fill_gpu_bytes == 30_260_962_304
    assert log.kv_cache_in_use_bytes == round(24.38 * GiB)
    # By hand: 26,017,729,126 + 150 MiB (157,286,400) = 26,175,015,526 B = 24.3775 GiB,
    # which vLLM prints as 24.38: the suggestion + 150 MiB is the KV budget when no graphs count.
    assert round((26_017_729_126 + 150 * MiB) / GiB, 2) == 24.38


def test_v1_serve_non_default_args_with_nested_values():
    log = older("v1-0.24_serve_non-default-args.log")  # club-3090#612
    assert log.usage == "serve"
    args = engine_arguments(log)
    assert args["max_model_len"] == 131_072
    assert args["kv_cache_dtype"] == "fp8"
    assert args["quantization"] == "modelopt"
    assert args["max_num_seqs"] == 1
    assert args["limit_mm_per_prompt"] == {"image": 2, "audio": 0}
    assert log.model == "~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4"
    assert log.gpu_kv_cache_tokens == 567_978


def test_v1_non_literal_argument_kept_as_text():
    log = older("v1-0.13_serve_lora-args.log")
    args = log.non_default_args
    assert args["max_model_len"] == 8192
    assert args["lora_modules"].startswith("[LoRAModulePath(name=")
    assert args["served_model_name"] == ["ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-advice", "llm"]
    assert log.vllm_version == "0.13.0"
    assert log.engine_config["dtype"] == "bfloat16"
    assert log.engine_config["max_seq_len"] == 8192
    assert log.model == "unsloth/Qwen2.5-32B-Instruct"


# --- V0 formats ---------------------------------------------------------------------------------


def test_v0_one_line_memory_profiling_results_and_refusal():
    log = older("v0.6.4_llama31-8b_rtx3090_29k.log")  # vllm#10517
    assert log.weights_bytes == round(14.9888 * GiB)  # "GB" in V0 meant bytes / 2**30
    assert log.resolution_bytes["weights_bytes"] == round(0.00005 * GiB)
    assert log.total_bytes == round(23.58 * GiB)
    assert log.gpu_memory_utilization == 0.90
    assert log.non_torch_bytes == round(0.35 * GiB)
    assert log.kv_cache_bytes == round(2.89 * GiB)
    assert log.peak_torch_bytes == round(17.98 * GiB)
    # peak_torch_memory included the weights: 17.98 - 14.9888 = 2.9912 GiB of activation
    assert abs(log.activation_peak_bytes - 2.9912 * GiB) < 2
    assert log.num_gpu_blocks == 1478 and log.num_cpu_blocks == 2048
    assert log.max_concurrency == 0.82 and log.concurrency_max_model_len == 29_000
    assert log.refusal.kind == "max_model_len"
    assert log.refusal.max_model_len == 29_000
    assert log.refusal.kv_capacity_tokens == 23_648
    assert "v0" in log.families


def test_v0_blocks_line_pasted_without_hash():
    log = older("v0.6.4_llama31-8b_rtx3090_20k.log")  # vllm#10517
    assert log.num_gpu_blocks == 1952
    assert log.kv_cache_bytes == round(3.81 * GiB)
    assert log.refusal is None


def test_v0_multi_line_profiling_and_cuda_blocks():
    log = older("v0.8_v0-engine_qwen_8gb.log")  # vllm#12529
    assert log.weights_bytes == round(3.3414 * GiB)  # first: "Model loading took 3.3414 GB"
    assert log.total_bytes == round(7.75 * GiB)
    assert log.gpu_memory_utilization == 0.90
    assert log.requested_bytes == round(6.97 * GiB)
    assert log.non_torch_bytes == round(0.04 * GiB)
    assert log.activation_peak_bytes == round(1.39 * GiB)
    assert log.kv_cache_bytes == round(2.20 * GiB)
    assert log.num_gpu_blocks == 5148 and log.num_cpu_blocks == 9362
    assert log.max_concurrency == 41.18 and log.concurrency_max_model_len == 2000


def test_v0_cuda_blocks_and_graph_capture():
    log = older("v0.8_v0-engine_h100_cuda-blocks.log")  # mellea PR #416
    assert log.num_gpu_blocks == 36_184
    assert log.requested_bytes == round(63.35 * GiB)
    assert log.kv_cache_bytes == round(61.84 * GiB)
    assert log.gpu_memory_utilization == 0.80
    assert engine_arguments(log) == {"gpu_memory_utilization": 0.80}


def test_v0_tensor_parallel_workers_repeat_lines():
    log = older("v0.8_v0-engine_tp-workers.log")  # vllm PR #14447
    assert log.weights_bytes == round(21.21 * GiB)
    assert log.kv_cache_bytes == round(1.57 * GiB)
    assert log.requested_bytes == round(23.35 * GiB)
    assert log.gpu_memory_utilization == 0.99


def test_v0_development_table_format():
    log = older("v0.6.5dev_table_llama3-8b_80gb.log")  # vllm PR #10511
    assert log.total_bytes == round(79.22 * GiB)
    assert log.gpu_memory_utilization == 0.90
    assert log.requested_bytes == round(71.29 * GiB)
    assert log.weights_bytes == round(14.96 * GiB)
    assert log.non_torch_bytes == round(1.79 * GiB)
    assert log.activation_peak_bytes == round(1.26 * GiB)
    assert log.kv_cache_bytes == round(53.29 * GiB)


def test_v0_engine_config_line():
    log = older("v0.4_llm-engine-config.log")  # vllm#2418
    assert log.num_gpu_blocks == 229 and log.num_cpu_blocks == 512
    assert log.model == "/home/***/***/models/alpaca-2"
    assert engine_arguments(log) == {"max_model_len": 4096, "dtype": "float16"}


# --- kvplan's child lines and helpers -----------------------------------------------------------


def test_child_protocol_lines():
    text = "\n".join(
        [
            "KVPLAN_STAGE loading weights",
            'KVPLAN_CASE {"name": "x", "model": "/m", "engine_args": {"max_model_len": 4096}, "usage": "serve"}',
            'KVPLAN_CONFIG {"model_type": "llama"}',
            "MEMINFO free=149557477376 total=150109880320 name=NVIDIA H200",
            'KVPLAN_ENV {"vllm": "0.26.0", "cuda_device": "NVIDIA H200"}',
            "RESULT num_gpu_blocks=57197 block_size=16 max_num_seqs=1024 max_num_batched_tokens=16384 startup_s=25.3",
            'KVPLAN_EXACT {"weights": 16063177687, "available_kv_cache_memory_bytes": 119951721575}',
        ]
    )
    log = parse_log(text)
    assert log.total_bytes == 150_109_880_320 and "total_bytes" not in log.resolution_bytes
    assert log.free_at_start_bytes == 149_557_477_376
    assert log.num_gpu_blocks == 57_197 and log.block_size == 16
    assert log.startup_s == 25.3
    assert log.usage == "serve"
    assert log.model == "/m"
    assert log.config == {"model_type": "llama"}
    assert log.exact["available_kv_cache_memory_bytes"] == 119_951_721_575
    assert engine_arguments(log) == {"max_model_len": 4096}


def test_message_of_strips_colour_and_prefix():
    raw = "\x1b[32m(EngineCore_DP0 pid=7)\x1b[0m INFO 08-01 12:00:00 [gpu_worker.py:561] Available KV cache memory: 8.11 GiB"
    assert message_of(raw) == "Available KV cache memory: 8.11 GiB"
    assert message_of("2026-04-19 12:18:36.356 | (APIServer pid=1) INFO 04-19 10:18:36 [utils.py:233] x") == "x"
    assert message_of("Capturing: 10%|█ | 1/10\rCapturing: 100%|██| 10/10") == "Capturing: 100%|██| 10/10"


def test_parse_python_dict():
    assert parse_python_dict("{'a': 1, 'b': [1, 2], 'c': {'d': 'x,y'}}") == {"a": 1, "b": [1, 2], "c": {"d": "x,y"}}
    got = parse_python_dict("{'p': PosixPath('/a, b'), 'n': 3, 's': 'it''s'}")
    assert got["p"] == "PosixPath('/a, b')" and got["n"] == 3
    with pytest.raises(ValueError):
        parse_python_dict("[1, 2]")


def test_lines_without_vllm_content():
    log = parse_log("hello\nworld\n")
    assert not log.families and not log.excerpt and log.refusal is None
    assert not log.started


# --- real logs of kvplan's own child (vLLM 0.26.0 on the lent H200, 2026-11-29) ----------------

DEVICE = DATA.parent / "vllm-0.26.0-h200"  # recorded starts (refused ones stay in logs/device-h200-2026-11-29)


def test_device_child_log_reproduces_the_calibration_start():
    # An independent start of the calibration case llama3-8b_eager, through kvplan.verify.child.
    log = parse_log((DEVICE / "llama3-8b_eager.log").read_text())
    cal = json.loads((DATA / "vllm-0.26.0-h200" / "llama3-8b_eager.json").read_text())
    assert log.vllm_version == "0.26.0"
    assert log.num_gpu_blocks == cal["num_gpu_blocks"] == 57_197
    assert log.gpu_kv_cache_tokens == cal["gpu_kv_cache_tokens"] == 915_152
    ex = log.exact
    assert ex["available_kv_cache_memory_bytes"] == 119_951_721_575
    # By hand: 32 layers x 65,536-byte pages = 2,097,152 bytes per block;
    # 57,197 x 2,097,152 = 119,950,802,944 <= 119,951,721,575 < 57,198 x 2,097,152 = 119,952,900,096.
    assert 57_197 * 2_097_152 <= ex["available_kv_cache_memory_bytes"] < 57_198 * 2_097_152
    assert ex["kv_cache_layout"]["tensor_bytes_total"] == 57_197 * 2_097_152
    # the eager-mode identity: --kv-cache-memory suggestion + 150 MiB = available KV bytes
    assert log.suggested_fit_requested_bytes + 150 * MiB == ex["available_kv_cache_memory_bytes"]
    assert ex["model_runner"] == "vllm.v1.worker.gpu.model_runner.GPUModelRunner"
    assert log.usage == "llm" and log.config["num_hidden_layers"] == 32


def test_device_child_log_v1_runner_graph_lines():
    log = parse_log((DEVICE / "qwen3-30b-a3b_graphs.log").read_text())
    assert log.cudagraph_bytes == round(0.8 * GiB)  # "... and 0.8 GiB for CUDAGraph memory"
    assert log.cudagraph_estimate_bytes == round(0.64 * GiB)  # "Estimated CUDA graph memory: 0.64 GiB total"
    assert log.exact["cudagraph_bytes"] == 855_638_016
    assert log.exact["cudagraph_memory_estimate"] == 689_963_008
    assert log.exact["model_runner"] == "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
    assert round(log.exact["cudagraph_memory_estimate"] / GiB, 2) == 0.64


def test_device_child_log_refusal():
    log = parse_log((DATA / "device-h200-2026-11-29" / "llama3-8b_eager_u012.log").read_text())
    assert log.refusal.kind == "no_memory"
    assert log.child_error["type"] == "ValueError"
    assert log.exact["partial"] is True
    # requested = ceil(150,109,880,320 x 0.12) = 18,013,185,639 (by hand: 18,013,185,638.4 -> up)
    assert log.exact["requested_memory"] == 18_013_185_639
    assert log.exact["available_kv_cache_memory_bytes"] == -136_182_681
    assert not log.started
