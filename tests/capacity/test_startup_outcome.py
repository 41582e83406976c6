"""What vLLM 0.26.0 does at start-up, as the planner's typed outcome (StartOutcome), and that
`estimate` and `check` both report it from that outcome.

CUDA graphs: vLLM allocates the KV cache (gpu_worker.py initialize_from_config) before it captures
the graphs (compile_or_warm_up_model -> capture_model); the V2 runner reserves nothing for them
(profile_cudagraph_memory returns 0), and nothing catches torch's OutOfMemoryError in capture, so a
graph pool larger than what the KV cache left raises CUDA out of memory and the engine does not start.
"""

from __future__ import annotations

import json
import math

from tests.helpers import run_cli

from kvplan.gpus import find_gpu, load_profiles
from kvplan.capacity.estimate import EngineArgs, StartOutcome, plan
from kvplan.sources import load_spec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # bundled: 32 layers, V2 runner (dense)

# Hand arithmetic for L40S (CUDA total 47,677,177,856 B, kvplan's L40S profile), utilization 0.98:
#   requested      = ceil(0.98 * 47,677,177,856)            = 46,723,634,299
#   free at start  = 47,677,177,856 - 552,402,944 (context) = 47,124,774,912
#   graph pool     = 750,000,000 + 32 * 9,400,000           =  1,050,800,000 (runner.py constants)
# Once the KV cache fills the request, what is free is free-at-start - requested (401,140,613) plus
# the profiling pass's activations that were freed (under 0.62 GB for 2,048 tokens of an 8B
# model): about 1.0 GB, less than the graphs' 1.05 GB.
TOTAL, CONTEXT, GRAPHS = 47_677_177_856, 552_402_944, 1_050_800_000


def _plan(util: float):
    spec, _ = load_spec(MODEL, None)
    return plan(spec, find_gpu("L40S", load_profiles()), EngineArgs(max_model_len=32768, gpu_memory_utilization=util, vllm_version="0.26.0"))


def test_hand_arithmetic_says_the_graphs_do_not_fit():
    requested = math.ceil(0.98 * TOTAL)
    assert requested == 46_723_634_299
    free_after_kv_without_activation = TOTAL - CONTEXT - requested
    assert free_after_kv_without_activation + 620_000_000 < GRAPHS


def test_planner_outcome_is_cuda_graph_capture_oom():
    p = _plan(0.98)
    assert p.outcome is StartOutcome.CUDA_GRAPH_CAPTURE_OOM
    assert not p.fits
    assert p.worst_stage.budget.cudagraph_bytes == GRAPHS
    assert p.worst_stage.budget.activation_peak_bytes < 620_000_000


def test_default_utilization_starts():
    p = _plan(0.92)
    assert p.outcome is StartOutcome.STARTS and p.fits


def test_estimate_exits_1_and_says_why():
    code, out, _ = run_cli("estimate", MODEL, "--gpu", "L40S", "--max-model-len", "32768", "--gpu-memory-utilization", "0.98",
                           "--vllm-version", "0.26.0")
    text = " ".join(out.split())
    assert code == 1
    assert "will not start: CUDA graphs need about 0.98 GiB" in text
    # the fix: the largest u with ceil(total*u) + graphs <= free at start, rounded down to 0.001
    u = math.floor(1000 * (TOTAL - CONTEXT - GRAPHS) / TOTAL) / 1000
    assert u == 0.966
    assert f"--gpu-memory-utilization {u}" in text
    code, out, _ = run_cli(
        "estimate", MODEL, "--gpu", "L40S", "--max-model-len", "32768", "--gpu-memory-utilization", "0.98", "--format", "json",
        "--vllm-version", "0.26.0",
    )
    doc = json.loads(out)
    assert code == 1 and doc["fits"] is False and doc["outcome"] == "cuda_graph_capture_oom"
    rec = doc["recommendations"]["--gpu-memory-utilization"]
    assert (rec["value"], rec["kind"]) == (u, "fix")
    assert doc["serve_flags"] == [{"flag": "--max-model-len", "value": "32768", "origin": "user"},
                                  {"flag": "--gpu-memory-utilization", "value": str(u), "origin": "recommended"}] or [
        (f["flag"], f["origin"]) for f in doc["serve_flags"]
    ] == [("--gpu-memory-utilization", "recommended"), ("--max-model-len", "user")]


def test_check_reports_the_same_outcome(tmp_path):
    f = tmp_path / "vllm.yaml"
    f.write_text(
        "# kvplan: gpu=L40S\n"
        f"model: {MODEL}\n"
        "max-model-len: 32768\n"
        "gpu-memory-utilization: 0.98\n"
    )
    code, out, _ = run_cli("check", str(f), "--format", "json", "--vllm-version", "0.26.0")
    assert code == 1, out
    findings = json.loads(out)["diagnostics"]
    hit = [d for d in findings if d["check_id"] == "cuda-graphs-fit"]
    assert hit and hit[0]["severity"] == "error", findings
    assert "0.966" in hit[0]["hint"]
    f.write_text("# kvplan: gpu=L40S\n" f"model: {MODEL}\n" "max-model-len: 32768\n")
    code, out, _ = run_cli("check", str(f), "--format", "json", "--vllm-version", "0.26.0")
    assert code == 0, out
