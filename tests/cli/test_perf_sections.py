"""`estimate --perf` (a performance section only when asked) and `plan --slo` (the cheapest
option meeting the SLO), end to end in-process."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import run_cli, unwrapped

from kvplan.perf.batch import linear_step_time
from kvplan.render.schema import EstimateDocument, estimate_json_schema

TINY = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
V = ["--vllm-version", "0.26.0"]


def test_estimate_json_unchanged_without_perf_and_valid_with_it():
    args = ["estimate", TINY, "--workload", "prompt=256 output=32", "--format", "json", *V]
    code, plain, err = run_cli(*args)
    assert code == 0, err
    assert "perf" not in json.loads(plain)
    code, out, err = run_cli(*args, "--perf")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, estimate_json_schema())
    EstimateDocument.model_validate(doc)
    perf = doc.pop("perf")
    assert doc == json.loads(plain)  # the rest of the document is the estimate's, untouched
    # the closed loop runs at the concurrency the workload capacity reports (floored)
    assert perf["workload"]["load"]["concurrency"] == int(doc["workload"]["paged"]["requests"])
    assert perf["calibration"]["label"].startswith("fitted on 2 records")  # H200 / 0.26.0 is fitted


def test_estimate_perf_table_says_how_it_is_calibrated():
    code, out, err = run_cli("estimate", TINY, "--workload", "prompt=256 output=32", "--perf", *V)
    assert code == 0, err
    assert "Serving at the concurrency that fits (fitted on 2 records" in unwrapped(out)


@pytest.fixture
def gpu_speed_step(monkeypatch):
    """A step time that is 4x faster on H200 than on L40S (a stand-in for the GPU's speed), so
    the SLO separates them by hand: 10 ms + 10 us/token on L40S, a quarter of it on H200."""
    import kvplan.perf.step_time as st

    def fake(spec, gpu, args=None, **kw):
        class M:
            labels = ()
            efficiency = __import__("kvplan.perf.coefficients", fromlist=["PRIORS"]).PRIORS
            seconds = staticmethod(linear_step_time(0.0025, 2.5e-6) if gpu.id == "h200" else linear_step_time(0.010, 1e-5))
        return M()

    monkeypatch.setattr(st, "step_model", fake)


def test_plan_slo_keeps_the_cheapest_option_that_meets_it(gpu_speed_step):
    # 64-token prompts, 16 out, c=4 per engine: every step carries at most a few hundred tokens,
    # so TPOT ~ one step: L40S >= 10 ms, H200 ~ 2.5-3.5 ms. tpot_p50 <= 5 ms keeps only H200s;
    # L40S is cheaper and holds the concurrency, so without --slo it would come first.
    base = ["plan", TINY, "--concurrency", "4", "--workload", "prompt=64 output=16", "--gpus", "H200,L40S",
            "--price", "H200=4", "--price", "L40S=1", "--tensor-parallel-size", "1", "--kv-cache-dtype", "auto",
            "--quantization", "none", "--format", "json", *V]
    code, out, err = run_cli(*base)
    assert code == 0, err
    assert json.loads(out)["options"][0]["gpu"] == "l40s"
    code, out, err = run_cli(*base, "--slo", "tpot_p50=5ms")
    assert code == 0, err
    doc = json.loads(out)
    assert {o["gpu"] for o in doc["options"]} == {"h200"}
    # ranked by cost per served request among those meeting it (more H200 replicas, the --slo
    # latency layouts, serve more per hour but not 2x more for 2x the GPUs): one H200 first
    per_request = [o["perf"]["cost_per_request_usd"] for o in doc["options"]]
    assert per_request == sorted(per_request) and doc["options"][0]["hourly_cost_usd"] == 4.0
    assert doc["options"][0]["perf"]["meets_slo"] is True
    assert doc["options"][0]["perf"]["metrics"]["tpot_s"]["p50"] < 0.005
    assert doc["slo"]["targets"] == {"tpot_p50": 0.005} and doc["slo"]["options_missing_slo"] >= 1


def test_plan_slo_nothing_meets_exits_1(gpu_speed_step):
    code, out, err = run_cli("plan", TINY, "--concurrency", "4", "--workload", "prompt=64 output=16", "--gpus", "H200,L40S",
                             "--tensor-parallel-size", "1", "--kv-cache-dtype", "auto", "--quantization", "none",
                             "--slo", "tpot_p50=1ms", *V)
    assert code == 1, err
    text = unwrapped(out)
    assert "none meets --slo tpot_p50=1ms" in text and "its prediction:" in text


def test_estimate_perf_runs_at_the_concurrency_that_never_preempts():
    # Llama-3-8B on H200 (0.26.0, 8192): 1024/256 requests hold 72.4 blocks on average over their
    # life but 80 at their last step; a closed loop of identical requests finishes in waves, all
    # at their last step at once, so the run uses the at-completion count (floor 719.1 = 719),
    # not the steady-state 794 that fills the pool and preempts.
    import json as _json

    code, out, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--vllm-version", "0.26.0",
                             "--max-model-len", "8192", "--workload", "prompt=1024 output=256", "--perf", "--format", "json")
    assert code == 0, err
    d = _json.loads(out)
    at_completion = d["workload"]["paged"]["kv_sequences_at_completion"]
    assert d["workload"]["paged"]["requests"] > at_completion
    assert d["perf"]["workload"]["load"]["concurrency"] == int(at_completion)
    assert d["perf"]["metrics"]["preemptions"] == 0


def test_fitted_predictions_of_fp8_gemms_say_nothing_fp8_was_fitted():
    import json as _json

    code, out, err = run_cli("perf", "meta-llama/Meta-Llama-3-70B", "--gpu", "H200", "-q", "fp8", "--vllm-version", "0.26.0",
                             "--input-len", "128", "--output-len", "64", "--concurrency", "4", "--num-requests", "8",
                             "--no-saturation", "--format", "json")
    assert code == 0, err
    d = _json.loads(out)
    assert d["calibration"]["status"] == "fitted"
    assert any(a.startswith("fp8 GEMMs: the coefficients were fitted on bf16 runs only") for a in d["approximate"])
