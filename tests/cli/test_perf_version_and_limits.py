"""`kvplan perf` as a new user meets it: the vLLM version is chosen as `estimate` chooses it and
named with its evidence; hybrid models are answered and labelled uncalibrated (no hybrid record);
KV-less layers are refused as a kvplan limitation; closed loops too short for steady state and
saturation searches on short runs are labelled; a mistyped (unquoted) --workload gets a hint."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from helpers import run_cli, unwrapped

from kvplan.engines.vllm import versions
from kvplan.errors import KvplanError
from kvplan.model.spec import LayerKind

M = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
FAST = ["--input-len", "128", "--output-len", "8", "--concurrency", "2", "--num-requests", "8", "--no-saturation"]
V = ["--vllm-version", "0.26.0"]
from kvplan.perf.serving import HYBRID_LABEL  # noqa: E402


def _json(*args):
    code, out, err = run_cli("perf", M, *FAST, "--format", "json", *args)
    assert code == 0, (code, out, err)
    return json.loads(out), err


# --- 1. the version: flag > installed vllm > newest supported ------------------------------------

def test_flag_names_the_version_reason_and_evidence_in_json():
    doc, _ = _json(*V)
    assert doc["vllm_version"] == "0.26.0"
    assert doc["vllm"] == {"version": "0.26.0", "reason": "--vllm-version"}
    assert doc["evidence"]["label"]
    from kvplan.render.perf_schema import PerfDocument

    PerfDocument.model_validate(doc)


def test_no_flag_and_no_vllm_installed_is_the_newest_supported(monkeypatch):
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)
    doc, _ = _json()
    newest = max(versions.SUPPORTED, key=lambda v: tuple(map(int, v.split("."))))
    assert doc["vllm"] == {"version": newest, "reason": "newest supported; no vllm installed"}


def test_installed_vllm_chooses_the_version(monkeypatch):
    monkeypatch.setattr(versions, "installed_vllm", lambda: "0.26.0")
    doc, _ = _json()
    assert doc["vllm"] == {"version": "0.26.0", "reason": "installed vllm 0.26.0"}


def test_installed_vllm_without_rules_warns_and_is_labelled(monkeypatch):
    # 0.30.1: 3 minor versions from 0.33.0, 4 from 0.26.0 -> the nearest is 0.33.0
    monkeypatch.setattr(versions, "installed_vllm", lambda: "0.30.1")
    doc, err = _json()
    assert doc["vllm"] == {"version": "0.33.0", "reason": "installed vllm 0.30.1", "requested": "0.30.1"}
    assert "warning: vLLM 0.30.1 (installed vllm 0.30.1): kvplan has no rules for it" in err
    assert any("0.30.1" in u for u in doc["evidence"]["unchecked"])
    code, out, _ = run_cli("perf", M, *FAST)
    assert code == 0
    text = unwrapped(out)
    assert "evidence: vLLM 0.33.0, the nearest supported to 0.30.1 (installed vllm 0.30.1" in text
    assert "warning: vLLM 0.30.1 (installed vllm 0.30.1): kvplan has no rules for it" in text


def test_table_names_the_version_and_why():
    code, out, _ = run_cli("perf", M, *FAST, *V)
    assert code == 0
    assert "evidence: vLLM 0.26.0 (--vllm-version): " in unwrapped(out)


def test_help_says_how_the_default_version_is_chosen():
    code, out, _ = run_cli("perf", "--help")
    assert code == 0
    text = unwrapped(out)
    section = text[text.index("--vllm-version"):][:600]
    assert "[default: 0." not in section
    assert "installed vllm package" in section


# --- 2. hybrid models: answered, labelled uncalibrated (no hybrid record) -------------------------

def test_a_mamba_hybrid_answers_labelled_uncalibrated():
    code, out, err = run_cli("perf", "ai21labs/Jamba-v0.1", *FAST, *V, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["calibration"]["status"] == "uncalibrated"
    assert doc["calibration"]["label"].startswith(HYBRID_LABEL + "; other terms: fitted on 2 records")
    assert any(a.startswith("hybrid model: its Mamba layers' state traffic and scan are costed") for a in doc["approximate"])
    from kvplan.render.perf_schema import PerfDocument

    PerfDocument.model_validate(doc)
    code, out, err = run_cli("perf", "ai21labs/Jamba-v0.1", *FAST, *V)
    assert code == 0 and "uncalibrated for hybrid layers (no hybrid record)" in unwrapped(out)


def test_a_gdn_hybrid_answers_on_the_versions_hybrid_block_size():
    # Qwen3-Next-80B-A3B on one H200: vLLM 0.33.0 aligns the hybrid block size to 576 tokens
    # (platforms/interface.py _align_hybrid_block_size with FlashInfer GDN's 64-token checkpoint
    # alignment; shared/reference/vllm-0.26-to-0.33.md section 3.9); 0.26.0 to 544.
    for version, block in (("0.33.0", 576), ("0.26.0", 544)):
        code, out, err = run_cli("perf", "Qwen/Qwen3-Next-80B-A3B-Instruct", "-q", "fp8", *FAST, "--vllm-version", version,
                                 "--max-model-len", "32768", "--format", "json")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["engine"]["block_size"] == block
        assert doc["calibration"]["status"] == "uncalibrated"
        assert any("Gated DeltaNet (linear-attention) layers' state traffic and scan" in a for a in doc["approximate"])


def test_kv_less_layers_are_named():
    from kvplan.perf.serving import check_modelled

    plan = SimpleNamespace(spec=SimpleNamespace(name="x/y", layer_kinds=[LayerKind.FULL, LayerKind.NONE]), layout=None)
    with pytest.raises(KvplanError) as e:
        check_modelled(plan)
    assert e.value.message == ("kvplan perf does not model KV-less ('none') layers yet (x/y): "
                               "serving performance is not predicted for this model")
    assert e.value.exit_code == 2
    check_modelled(SimpleNamespace(spec=SimpleNamespace(name="a", layer_kinds=[LayerKind.FULL, LayerKind.MAMBA]), layout=None))


def test_estimate_perf_on_a_hybrid_model_has_its_perf_section_labelled():
    args = ["estimate", "ai21labs/Jamba-v0.1", "--workload", "prompt=100 output=10", "--perf", *V]
    code, out, err = run_cli(*args, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["perf"]["calibration"]["status"] == "uncalibrated"
    assert doc["perf"]["calibration"]["label"].startswith(HYBRID_LABEL)
    from kvplan.render.schema import EstimateDocument

    EstimateDocument.model_validate(doc)


def test_plan_slo_evaluates_a_hybrid_model():
    code, out, err = run_cli("plan", "ai21labs/Jamba-v0.1", "--workload", "prompt=100 output=10", "--slo", "ttft_p99=2s", *V)
    text = unwrapped(out + err)
    assert "none could be evaluated against --slo" not in text, text
    assert "uncalibrated for hybrid layers" in text, text


# --- 3. short runs ------------------------------------------------------------------------------

def test_closed_loop_shorter_than_three_times_its_concurrency_is_labelled():
    doc, _ = _json(*V)  # 8 requests at concurrency 2: 4x, not labelled
    assert not any(a.startswith("closed loop:") for a in doc["approximate"])
    code, out, _ = run_cli("perf", M, "--input-len", "128", "--output-len", "8", "--concurrency", "4",
                           "--num-requests", "11", "--no-saturation", "--format", "json", *V)
    assert code == 0
    short = [a for a in json.loads(out)["approximate"] if a.startswith("closed loop:")]
    assert short == ["closed loop: 11 requests at concurrency 4 (fewer than 3x the concurrency): the run is "
                     "mostly ramp-up and drain, not steady state; raise --num-requests"]


def test_estimate_perf_sends_at_least_four_times_the_concurrency():
    from kvplan.cli.perf import estimate_requests

    assert estimate_requests(713) == 4 * 713
    assert estimate_requests(10) == 1000


def test_saturation_json_names_the_closed_loop_concurrency():
    code, out, err = run_cli("perf", M, "--input-len", "128", "--output-len", "8", "--concurrency", "32",
                             "--num-requests", "100", "--format", "json", *V)
    assert code == 0, err
    sat = json.loads(out)["saturation"]
    # each open loop sends the requests asked, raised to 4x the closed loop's in flight at the rate
    # (serving.open_loop_requests: the run must be long against its latency to reach steady state)
    assert sat["requests"] == max(100, 4 * math.ceil(0.9 * sat["concurrency"])) and sat["lower_bound"] is False and sat["concurrency"] >= 8
    assert [p["stable"] for p in sat["points"]] == [True, True, True, True]
    assert [round(p["request_rate"] / sat["rate"], 6) for p in sat["points"]] == [0.25, 0.5, 0.75, 0.9]


def test_an_open_loop_above_the_saturation_rate_says_it_is_overloaded():
    code, out, err = run_cli("perf", M, "--input-len", "128", "--output-len", "8", "--request-rate", "100000",
                             "--num-requests", "64", "--format", "json", *V)
    assert code == 0, err
    d = json.loads(out)
    assert d["saturation"]["rate"] < 100000
    assert any(a.startswith("overloaded: --request-rate 100000 req/s is above the saturation rate") for a in d["approximate"])


# --- 5. unquoted --workload ---------------------------------------------------------------------

def test_unquoted_workload_gets_a_quoting_hint():
    code, out, err = run_cli("perf", M, "--workload", "prompt=100,50", "output=10", "--concurrency", "1")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: Got unexpected extra argument(s) (output=10)"
    assert "hint: --workload takes one argument: quote it" in err


def test_other_extra_arguments_get_no_workload_hint():
    code, _, err = run_cli("perf", M, "extra", "--input-len", "1", "--output-len", "1", "--concurrency", "1")
    assert code == 2
    assert "--workload" not in err


