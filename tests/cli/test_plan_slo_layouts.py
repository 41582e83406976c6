"""`plan --slo`: more GPUs buy latency, so the data-parallel layouts beyond the fewest GPUs that
hold --concurrency are candidates too (a MoE model's -dp / -dp -ep, a dense model's replicas).
Before, an engine that held the concurrency alone was never tried as DP engines, and `plan --slo`
said no option met an SLO that `kvplan perf` on a DP layout met."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

from kvplan.capacity.search_layouts import latency_dp_sizes
from kvplan.perf.batch import linear_step_time

QWEN = ["Qwen/Qwen3-30B-A3B", "--gpus", "H100", "--concurrency", "128", "--max-model-len", "32768",
        "--workload", "prompt=4000 output=500", "-tp", "1", "-pp", "1", "--kv-cache-dtype", "auto",
        "--quantization", "none"]
SLO = "ttft_p99=3s,tpot_p50=50ms"


def test_latency_dp_sizes_are_the_powers_of_two_above_the_smallest():
    assert latency_dp_sizes(1, 8) == [2, 4, 8]
    assert latency_dp_sizes(3, 8) == [4, 8]
    assert latency_dp_sizes(4, 8) == [8]
    assert latency_dp_sizes(2, 7) == [4]
    assert latency_dp_sizes(1, 1) == []


def test_moe_slo_plan_finds_the_dp_layout_perf_says_meets_it():
    """The fresh-user case: one bf16 engine holds 128 requests of 4000/500 on 2x H100 (-dp 2)
    but its TTFT p99 misses 3 s; -dp 4 meets it. `plan --slo` must propose -dp 4 (it said none
    met the SLO), with the figures `kvplan perf` gives for the same flags and requests."""
    code, out, err = run_cli("plan", *QWEN, "--slo", SLO, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    best = doc["options"][0]
    assert best["num_gpus"] == 4 and best["data_parallel_size"] == 4
    assert "--data-parallel-size 4" in best["serve_command"]
    ttft = best["perf"]["metrics"]["ttft_s"]["p99"]
    assert ttft <= 3.0 and best["perf"]["meets_slo"]
    # the other command on the same inputs: plan ran 200 requests per engine (tune.PLAN_REQUESTS;
    # 3 x 32 in flight is fewer), 4 engines -> perf's --num-prompts 800 at --concurrency 128
    ep = ["--enable-expert-parallel"] if "--enable-expert-parallel" in best["serve_command"] else []
    code, pout, err = run_cli("perf", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "4", *ep, "--max-model-len", "32768",
                              "--concurrency", "128", "--input-len", "4000", "--output-len", "500", "--num-prompts",
                              "800", "--no-saturation", "--slo", SLO, "--format", "json")
    assert code == 0, err
    pdoc = json.loads(pout)
    assert pdoc["slo"]["met"] is True
    assert ttft == pytest.approx(pdoc["metrics"]["ttft_s"]["p99"], rel=1e-9)


def test_plan_without_slo_keeps_the_fewest_gpus():
    """Without --slo nothing changes: the cheapest layout holding the concurrency (2 GPUs)."""
    code, out, err = run_cli("plan", *QWEN, "--format", "json")
    assert code == 0, err
    assert {o["num_gpus"] for o in json.loads(out)["options"]} == {2}


@pytest.fixture
def slow_step(monkeypatch):
    """Every step takes 10 ms + 1 ms per token it computes (any GPU)."""
    import kvplan.perf.step_time as st

    def fake(spec, gpu, args=None, **kw):
        class M:
            labels = ()
            efficiency = __import__("kvplan.perf.coefficients", fromlist=["PRIORS"]).PRIORS
            seconds = staticmethod(linear_step_time(0.010, 0.001))
        return M()

    monkeypatch.setattr(st, "step_model", fake)


def test_dense_slo_plan_adds_replicas_for_latency(slow_step):
    """TinyLlama holds 8 requests on one H200. Prompt 1 token, output 64: after the first step every
    step is the batch's decode tokens (a finished request's replacement prefills its 1 token in the
    same step), so one engine steps 10 + 8 x 1 = 18 ms (TPOT p50 18 ms), two replicas at 4 each
    10 + 4 = 14 ms. With tpot_p50=16ms only the 2-replica option meets it; before, only the
    1-GPU option was tried and the plan failed."""
    base = ["plan", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--concurrency", "8", "--workload", "prompt=1 output=64",
            "--gpus", "H200", "--price", "H200=4", "-tp", "1", "-pp", "1", "--kv-cache-dtype", "auto",
            "--quantization", "none", "--vllm-version", "0.26.0", "--format", "json"]
    code, out, err = run_cli(*base, "--slo", "tpot_p50=16ms")
    assert code == 0, err
    best = json.loads(out)["options"][0]
    assert best["num_gpus"] == 2 and best["data_parallel_size"] == 2
    assert best["perf"]["metrics"]["tpot_s"]["p50"] == pytest.approx(0.014, abs=5e-4)
    code, out, err = run_cli(*base, "--slo", "tpot_p50=20ms")  # one engine meets it: cheapest per request
    assert code == 0, err
    best = json.loads(out)["options"][0]
    assert best["num_gpus"] == 1
    assert best["perf"]["metrics"]["tpot_s"]["p50"] == pytest.approx(0.018, abs=5e-4)
