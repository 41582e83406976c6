"""`plan`: what the options are ranked by (cost per hour at --concurrency; with --slo, cost per
served request) and the MoE line comparing DP (+EP) with TP on the same GPUs, end to end."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli, unwrapped

from kvplan.capacity.search import RANKED_BY_HOURLY_COST, RANKED_BY_SERVED_REQUEST
from kvplan.perf.batch import linear_step_time

TINY = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
V = ["--vllm-version", "0.26.0"]


@pytest.fixture
def gpu_speed_step(monkeypatch):
    """H200 steps 4x faster than L40S: 2.5 ms + 2.5 us/token against 10 ms + 10 us/token."""
    import kvplan.perf.step_time as st

    def fake(spec, gpu, args=None, **kw):
        class M:
            labels = ()
            efficiency = __import__("kvplan.perf.coefficients", fromlist=["PRIORS"]).PRIORS
            seconds = staticmethod(linear_step_time(0.0025, 2.5e-6) if gpu.id == "h200" else linear_step_time(0.010, 1e-5))
        return M()

    monkeypatch.setattr(st, "step_model", fake)


BASE = ["plan", TINY, "--concurrency", "4", "--workload", "prompt=64 output=16", "--gpus", "H200,L40S",
        "--price", "H200=4", "--price", "L40S=3", "--tensor-parallel-size", "1", "--kv-cache-dtype", "auto",
        "--quantization", "none", "--format", "json", *V]


def test_slo_ranks_by_cost_per_served_request(gpu_speed_step):
    code, out, err = run_cli(*BASE)
    assert code == 0, err
    doc = json.loads(out)
    # without --slo: by the hour, L40S ($3) before H200 ($4)
    assert doc["ranking"] == RANKED_BY_HOURLY_COST and doc["options"][0]["gpu"] == "l40s"
    code, out, err = run_cli(*BASE, "--slo", "tpot_p50=1s")  # a target both meet
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ranking"] == RANKED_BY_SERVED_REQUEST
    gpus = [o["gpu"] for o in doc["options"]]
    assert set(gpus) == {"h200", "l40s"}
    # H200 serves about 4x the requests per hour for 4/3 the price: about 1/3 the cost per request
    assert gpus[0] == "h200"
    for o in doc["options"]:
        p = o["perf"]
        rph = p["metrics"]["request_throughput"] * o["data_parallel_size"] * 3600
        assert p["requests_per_hour"] == pytest.approx(rph, abs=0.1)
        assert p["cost_per_request_usd"] == pytest.approx(o["hourly_cost_usd"] / rph, rel=1e-5)
    costs = [o["perf"]["cost_per_request_usd"] for o in doc["options"]]
    assert costs == sorted(costs)
    h200 = doc["options"][0]["perf"]["cost_per_request_usd"]
    l40s = next(o for o in doc["options"] if o["gpu"] == "l40s")["perf"]["cost_per_request_usd"]
    assert 2.0 < l40s / h200 <= 3.0 + 1e-9  # 3/4 x 4 = 3 at exactly 4x throughput; the fixed request path narrows it


def test_table_says_what_the_ranking_is(gpu_speed_step):
    table = [a for a in BASE if a not in ("--format", "json")]
    code, out, err = run_cli(*table)
    assert code == 0, err
    assert "ranking: " + RANKED_BY_HOURLY_COST in unwrapped(out)
    code, out, err = run_cli(*table, "--slo", "tpot_p50=1s")
    assert code == 0, err
    text = unwrapped(out)
    assert "ranking: " + RANKED_BY_SERVED_REQUEST in text and "$/1k req" in text


def test_mla_moe_plan_says_dp_ep_serves_more_than_tp_on_the_same_gpus():
    code, out, err = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--max-model-len", "8192", "--concurrency", "64",
                             "--gpus", "H200", "-pp", "1", "--format", "json")
    assert code == 0, err
    notes = json.loads(out)["layout_notes"]
    # one -tp 8 engine: 12,771 blocks x 64 tokens / 8192 = 99.77 requests (the estimate of -tp 8, the
    # MLA latent cache whole on every rank); DP 8 + EP: 8 engines each with their own cache
    assert len(notes) == 1
    assert notes[0].startswith("DP + EP serves more on 8x h200 (--kv-cache-dtype auto = bfloat16): -dp 8 -ep ")
    assert "one -tp 8 engine 99.8 (MLA: under TP every rank holds the whole latent cache)" in notes[0]
    code, est, err = run_cli("estimate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--max-model-len", "8192",
                             "--format", "json")
    kv = json.loads(est)["kv_cache"]
    assert kv["num_gpu_blocks"] * 64 / 8192 == pytest.approx(99.77, abs=0.01)


def test_dp_ep_note_keeps_the_options_pp_and_gpu_count_and_matches_estimate():
    """The fresh-user case: the top option is -pp 2 -dp 3 -ep with fp8 KV, the best TP engine
    -tp 2 -pp 4 (8 GPUs). The note must size the DP layout on those 8 GPUs: -pp 2 -dp 4 (2 x 4 = 8),
    not -dp 8 with -pp 2 still set (16 GPUs labelled 8x)."""
    code, out, err = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--max-model-len", "8192", "--concurrency", "256",
                             "--gpus", "H100,H200", "--format", "json")
    assert code == 0, err
    notes = json.loads(out)["layout_notes"]
    assert len(notes) == 1
    head = "DP + EP serves more on 8x h200 (--kv-cache-dtype fp8): -pp 2 -dp 4 -ep "
    assert notes[0].startswith(head), notes[0]
    served = float(notes[0][len(head):].split()[0])
    code, est, err = run_cli("estimate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-pp", "2", "-dp", "4", "-ep",
                             "--max-model-len", "8192", "--kv-cache-dtype", "fp8", "--format", "json")
    assert code == 0, err
    doc = json.loads(est)
    assert doc["gpu"]["count"] == 8  # 1 (TP) x 2 (PP) x 4 (DP): the same GPUs as the TP engine
    # per engine: num_gpu_blocks x 64 tokens / 8192 tokens a request; 4 engines
    assert served == pytest.approx(doc["kv_cache"]["num_gpu_blocks"] * 64 / 8192 * 4, abs=0.06)


def test_dense_model_has_no_layout_note():
    code, out, err = run_cli("plan", TINY, "--concurrency", "4", "--gpus", "H200", "--format", "json", *V)
    assert code == 0, err
    assert json.loads(out)["layout_notes"] == []
