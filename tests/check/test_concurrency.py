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
    # 37,072 / 8,192 = 4.5254 -> "4.52" (truncated to 2 decimals) in the header and in the note
    code, out, _ = run_cli("check", str(R3 / "a10g-seqs2.yaml"), "--vllm-version", "0.26.0")
    out = unwrapped(out)  # the human report wraps at the console width
    assert "37,072 tokens, 4.52 x 8192-token requests" in out
    info = out[out.index("max-num-seqs 2 caps"):]
    assert "below the 4.52 requests" in info
    assert code == 0


def test_utilization_1_reports_free_memory_at_the_utilization_line():
    code, doc = _json(str(R3 / "util-1.yaml"))
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
