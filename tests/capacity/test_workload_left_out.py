"""A workload's summary counts only the requests vLLM takes: those with prompt + output tokens above
--max-model-len are refused by vLLM 0.26.0 (renderers/params.py, "maximum context length"), so
the lengths, counts and JSON say how many were left out and why.

The file: three requests of (1000, 200) tokens and one of (20000, 1000); Meta-Llama-3-8B's own
length is 8192 (max_position_embeddings, no rope scaling), so the last one (21000 > 8192) is left
out: counted 3, mean prompt 1000, mean output 200, 1 of 4 = 25 % left out.
"""

from __future__ import annotations

import json

from kvplan.capacity.workload import load_pairs_file, workload_summary
from tests.helpers import run_cli

MODEL = "meta-llama/Meta-Llama-3-8B"


def _file(tmp_path):
    p = tmp_path / "w.csv"
    p.write_text("prompt_tokens,output_tokens\n1000,200\n1000,200\n1000,200\n20000,1000\n")
    return p


def test_summary_counts_only_the_requests_that_fit(tmp_path):
    s = workload_summary(load_pairs_file(_file(tmp_path)), 8192)
    assert (s["mean_prompt_tokens"], s["mean_output_tokens"]) == (1000, 200)
    assert (s["p95_prompt_tokens"], s["p95_output_tokens"]) == (1000, 200)
    assert (s["requests_counted"], s["requests_left_out"], s["fraction_left_out"]) == (3, 1, 0.25)
    assert "--max-model-len 8192" in s["left_out_reason"]
    # nothing left out at 32768: every request counted, means over all four (5750 = (3000 + 20000) / 4)
    s = workload_summary(load_pairs_file(_file(tmp_path)), 32768)
    assert s["mean_prompt_tokens"] == 5750 and s["requests_left_out"] == 0 and s["left_out_reason"] is None


def test_estimate_table_and_json_say_how_many_were_left_out(tmp_path):
    args = ("estimate", MODEL, "--gpu", "H200", "--vllm-version", "0.26.0", "--workload", str(_file(tmp_path)))
    code, out, _ = run_cli(*args)
    text = " ".join(out.split())
    assert "prompt mean 1000 (p95 1000), output mean 200 (p95 200) tokens" in text
    assert "over the 3 requests counted (1 left out: longer than --max-model-len)" in text
    assert "1 of 4 requests (25.0%) exceed --max-model-len 8192" in text
    code, out, _ = run_cli(*args, "--format", "json")
    s = json.loads(out)["workload"]["summary"]
    assert (s["requests_counted"], s["requests_left_out"], s["mean_prompt_tokens"]) == (3, 1, 1000)


def test_plan_json_summary_leaves_them_out(tmp_path):
    code, out, _ = run_cli("plan", MODEL, "--concurrency", "8", "--gpus", "H200", "--vllm-version", "0.26.0",
                           "--workload", str(_file(tmp_path)), "--format", "json")
    w = json.loads(out)["workload"]
    assert (w["mean_prompt_tokens"], w["mean_output_tokens"]) == (1000, 200)
    assert (w["requests_counted"], w["requests_left_out"]) == (3, 1)
