"""`kvplan verify --from-log` predicts with the vLLM version the log names ("Initializing a V1
LLM engine (vX)", the child's environment line, a record's environment), the nearest supported
one with a warning when kvplan has no rules for it, and --vllm-version when it is given; the
comparison says which version predicted and why, and the evidence of that prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.vllm import versions
from tests.helpers import run_cli, unwrapped

DATA = Path(__file__).parents[1] / "data"
LOG33 = DATA / "vllm-0.33.0-h200" / "llama3-8b_eager.log"
REC26 = DATA / "calibration" / "vllm-0.26.0-h200" / "llama3-8b_eager.json"
N26 = len(versions.SUPPORTED["0.26.0"].real_starts.STARTS)
N33 = len(versions.SUPPORTED["0.33.0"].real_starts.STARTS)


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)


def _verify(*args: str) -> dict:
    code, out, err = run_cli("verify", *args, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_a_033_log_is_predicted_with_033():
    doc = _verify("--from-log", str(LOG33))
    assert doc["vllm_version"] == "0.33.0"
    assert doc["predicted_with"] == {"version": "0.33.0", "reason": "named by the log"}
    assert doc["evidence"]["label"] == f"calibrated on {N33} real vLLM 0.33.0 starts"  # an eager start


def test_a_026_record_is_predicted_with_026_even_though_034_is_the_default():
    assert versions.resolve(None).version == "0.34.0"
    doc = _verify("--from-log", str(REC26))
    assert doc["predicted_with"] == {"version": "0.26.0", "reason": "named by the log"}
    assert doc["evidence"]["label"] == f"calibrated on {N26} real vLLM 0.26.0 starts"
    assert doc["status"] == "pass"


def test_a_log_of_a_version_without_rules_uses_the_nearest_and_warns(tmp_path):
    log = tmp_path / "start.log"
    log.write_text(LOG33.read_text(encoding="utf-8").replace("0.33.0", "0.35.2"), encoding="utf-8")
    doc = _verify("--from-log", str(log))
    assert doc["vllm_version"] == "0.35.2"
    assert doc["predicted_with"] == {"version": "0.34.0", "reason": "named by the log", "requested": "0.35.2"}
    assert any(n.startswith("warning: vLLM 0.35.2 (named by the log): kvplan has no rules for it; using the nearest "
                            "supported version, 0.34.0") for n in doc["notes"]), doc["notes"]
    assert doc["evidence"]["checked"] is False
    assert doc["evidence"]["unchecked"][0] == "vLLM 0.35.2 itself (these are the rules of 0.34.0, the nearest supported)"
    code, out, _ = run_cli("verify", "--from-log", str(log))
    assert "predicted with: vLLM 0.34.0 (named by the log), for 0.35.2: derived from the source" in unwrapped(out)


def test_the_flag_overrides_the_log():
    doc = _verify("--from-log", str(LOG33), "--vllm-version", "0.26.0")
    assert doc["predicted_with"] == {"version": "0.26.0", "reason": "--vllm-version"}
    assert any(n.startswith("warning: the log is from vLLM 0.33.0; --vllm-version 0.26.0: kvplan predicts with "
                            "vLLM 0.26.0 rules, not the rules of the vLLM that wrote the log") for n in doc["notes"])


def test_a_flag_other_than_the_logs_version_prints_a_warning_line():
    code, out, err = run_cli("verify", "--from-log", str(LOG33), "--vllm-version", "0.26.0")
    assert "warning: the log is from vLLM 0.33.0; --vllm-version 0.26.0" in unwrapped(out)
    assert "note: the log is from" not in unwrapped(out)
    code, out, err = run_cli("verify", "--from-log", str(LOG33), "--vllm-version", "0.26.0", "--format", "json")
    assert "kvplan: warning: the log is from vLLM 0.33.0; --vllm-version 0.26.0" in err
    json.loads(out)  # stdout stays the document
    # the log's own version named by the flag: nothing to warn about
    code, out, err = run_cli("verify", "--from-log", str(LOG33), "--vllm-version", "0.33.0", "--format", "json")
    assert "warning" not in err and not any("warning" in n for n in json.loads(out)["notes"])


def test_a_log_naming_no_version_takes_the_default(tmp_path):
    old = DATA / "logs" / "older" / "v0.6.4_llama31-8b_rtx3090_29k.log"
    text = old.read_text(encoding="utf-8")
    if "vLLM version" in text or "(v0." in text:
        pytest.skip("this public log names its version")
    doc = _verify("meta-llama/Llama-3.1-8B-Instruct", "--from-log", str(old), "--gpu", "rtx-3090")
    assert doc["predicted_with"] == {"version": "0.34.0", "reason": "newest supported; no vllm installed"}
