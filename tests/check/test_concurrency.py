"""`kvplan check` capacity findings: min_concurrency (data-parallel replicas included), the concurrency figures, utilization, tensor-parallel hints."""

from __future__ import annotations

from pathlib import Path
from tests.helpers import run_cli, unwrapped
from tests.check.common import MODEL, R3, R4, _diags, _json, _write


def _dp_config(tmp_path: Path, dp: int, target: float) -> Path:
    # max-num-seqs 8 caps one replica at 8 requests (the KV cache of Llama-3.1-8B on H100 at
    # 1024 tokens holds hundreds), so per replica = 8, and dp replicas = 8 x dp by hand.
    return _write(
        tmp_path / f"dp{dp}.yaml",
        f"model: {MODEL}\nmax-model-len: 1024\nmax-num-seqs: 8\ndata-parallel-size: {dp}\n"
        f"kvplan: {{gpu: H100, min_concurrency: {target}}}\n",
    )


def test_min_concurrency_hint_does_not_suggest_fp8_when_already_fp8():
    code, doc = _json(str(R3 / "fp8-min-concurrency.yaml"))
    (d,) = _diags(doc, "min-concurrency")
    assert d["line"] == 4 and d["severity"] == "error"
    assert "fp8" not in (d["hint"] or "")
    assert code == 1


def test_header_and_info_line_use_the_same_concurrency():
    # A10G, Llama-3.1-8B, max-model-len 8192: 2,317 blocks x 16 = 37,072 tokens;
    # 37,072 / 8,192 = 4.5254 -> "4.53" (rounded as vLLM's %.2f) in the header and in the note
    code, out, _ = run_cli("check", str(R3 / "a10g-seqs2.yaml"), "--vllm-version", "0.26.0")
    out = unwrapped(out)  # the human report wraps at the console width
    assert "37,072 tokens, 4.53 x 8192-token requests" in out
    info = out[out.index("max-num-seqs 2 caps"):]
    assert "below the 4.53 requests" in info
    assert code == 0
    code, doc = _json(str(R3 / "a10g-seqs2.yaml"), "--vllm-version", "0.26.0")
    assert doc["files"][0]["deployments"][0]["figures"]["max_concurrency"] == 4.53


def test_check_rounds_the_concurrency_as_vllm_logs_it():
    # vLLM 0.33.0 on an H200 (tests/data/vllm-0.33.0-h200/llama3-8b_eager_fp8kv.log) logged
    # "GPU KV cache size: 1,824,400 tokens, Maximum concurrency for 8,192 tokens per request:
    # 222.71x": 1,824,400 / 8,192 = 222.7051, rounded (a cut would print 222.70)
    from kvplan.check.messages import _concurrency_text

    assert _concurrency_text(1_824_400 / 8_192) == "222.71"
    assert _concurrency_text(792_896 / 8_192) == "96.79"  # 96.789
    # short of a target, 2 decimals that would round up to it get more digits
    assert _concurrency_text(3.999, below=4) == "3.999"
    assert _concurrency_text(3.5, below=4) == "3.50"


def test_check_and_estimate_print_the_same_concurrency():
    code, doc = _json(str(R3 / "a10g-seqs2.yaml"), "--vllm-version", "0.26.0")
    fig = doc["files"][0]["deployments"][0]["figures"]
    code, out, _ = run_cli("estimate", MODEL, "--gpu", "A10G", "--max-model-len", "8192", "--max-num-seqs", "2",
                           "--vllm-version", "0.26.0", "--format", "json")
    import json

    est = json.loads(out)
    assert fig["gpu_kv_cache_tokens"] == 37_072
    assert est["kv_cache"]["max_concurrency"] == fig["max_concurrency"] == 4.53  # 37,072 / 8,192 = 4.5254


def test_utilization_1_reports_free_memory_at_the_utilization_line():
    # vLLM 0.33.0 refuses a budget above the free memory (0.34.0's extensible KV cache does not)
    code, doc = _json(str(R3 / "util-1.yaml"), "--vllm-version", "0.33.0")
    assert _diags(doc, "max-model-len-fits") == []
    (d,) = _diags(doc, "gpu-memory-utilization-range")
    assert d["line"] == 2 and d["key"] == "gpu-memory-utilization" and d["severity"] == "error"
    assert "is free when vLLM starts" in d["message"] and "\n" not in d["message"]
    assert code == 1


def test_tp_hint_lists_only_sizes_check_accepts():
    # Qwen2.5-7B: 28 heads, 4 KV heads. Divisors of 28: 1, 2, 4, 7, 14, 28; 7 and 14 are > 4 KV
    # heads and not multiples of 4, so they are refused; 28 = 7 x 4 is accepted.
    code, doc = _json(str(R4 / "tp3-qwen.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "tp-divisibility")
    assert e["line"] == 2 and e["hint"] == "valid sizes: 1, 2, 4, 28"
    assert code == 1


def test_min_concurrency_counts_every_data_parallel_replica(tmp_path):
    # 8 per replica x 2 replicas = 16 >= 16: passes (one replica alone, 8, would not)
    code, doc = _json(str(_dp_config(tmp_path, 2, 16)))
    assert code == 0, doc["diagnostics"]
    assert not _diags(doc, "min-concurrency")
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["concurrency_at_request_len"] == 16.0
    assert fig["concurrency_per_replica_at_request_len"] == 8.0
    assert fig["data_parallel_size"] == 2


def test_min_concurrency_below_the_dp_total_names_both_figures(tmp_path):
    # 8 x 2 = 16 < 17
    code, doc = _json(str(_dp_config(tmp_path, 2, 17)))
    assert code == 1
    (d,) = _diags(doc, "min-concurrency")
    assert "8.00 requests of 1024 tokens fit at once per replica, x2 replicas = 16.00" in d["message"], d["message"]
    assert "below the target 17" in d["message"]


def test_min_concurrency_without_data_parallelism_is_unchanged(tmp_path):
    code, doc = _json(str(_dp_config(tmp_path, 1, 9)))  # 8 < 9
    assert code == 1
    (d,) = _diags(doc, "min-concurrency")
    assert d["message"].startswith("8.00 requests of 1024 tokens fit at once (max-num-seqs limits it;"), d["message"]
    assert "replica" not in d["message"]


def test_plan_dp_option_passes_check_with_the_plans_target(tmp_path):
    # A data-parallel option of plan must pass check with plan's target: plan's option "2x h100-sxm 1/1/2 ... 2016.9 req" for --concurrency 2000;
    # estimate gives 1008.45 per replica (fp8 KV + fp8 weights, max-model-len 1024), and
    # 1008.45 x 2 = 2016.90 >= 2000 by hand.
    sh = _write(
        tmp_path / "dp.sh",
        "# kvplan: gpu=H100 min_concurrency=2000\n"
        f"vllm serve {MODEL} --max-model-len 1024 --kv-cache-dtype fp8 --quantization fp8 --data-parallel-size 2\n",
    )
    code, doc = _json(str(sh), "--vllm-version", "0.26.0")
    assert code == 0, doc["diagnostics"]
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["concurrency_per_replica_at_request_len"] == 1008.45
    assert 2016.9 <= fig["concurrency_at_request_len"] < 2016.92
