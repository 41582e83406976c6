"""`kvplan perf` end to end (in-process): hand-arithmetic numbers with a constant step time
injected, the JSON document against its schema (`kvplan schema perf`), labels, --slo errors."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import error_line, run_cli, unwrapped

from kvplan.perf.batch import constant_step_time
from kvplan.render.perf_schema import PerfDocument, perf_json_schema

TINY = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
BASE = ["perf", TINY, "--gpu", "H200", "--vllm-version", "0.26.0"]


@pytest.fixture
def constant_10ms(monkeypatch):
    import kvplan.cli.perf as perf_cli

    monkeypatch.setattr(perf_cli, "step_timer", lambda plan: (None, constant_step_time(0.010)))


def test_constant_step_numbers_by_hand(constant_10ms):
    # 128 in / 16 out, closed loop c=1, 10 ms per step: TTFT 1 step, E2E 16 steps, TPOT 10 ms;
    # 4 requests back to back in 640 ms: 6.25 req/s, 100 output tok/s, 900 total tok/s.
    code, out, err = run_cli(*BASE, "--input-len", "128", "--output-len", "16", "--concurrency", "1",
                             "--num-requests", "4", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    m = doc["metrics"]
    assert m["ttft_s"]["p50"] == pytest.approx(0.010) and m["e2e_s"]["p99"] == pytest.approx(0.160)
    assert m["tpot_s"]["p50"] == pytest.approx(0.010)
    assert m["request_throughput"] == pytest.approx(6.25)
    assert m["output_throughput"] == pytest.approx(100.0) and m["total_token_throughput"] == pytest.approx(900.0)
    assert doc["workload"]["load"] == {"kind": "closed", "concurrency": 1}
    assert doc["engine"]["max_num_seqs"] == 1024 and doc["engine"]["max_num_batched_tokens"] == 8192


def test_json_validates_against_the_registered_schema():
    code, out, err = run_cli(*BASE, "--input-len", "256", "--output-len", "32", "--request-rate", "5",
                             "--num-requests", "40", "--slo", "ttft_p99=2s,tpot_p50=50ms", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    code, schema_out, _ = run_cli("schema", "perf")
    assert code == 0
    registered = json.loads(schema_out)
    assert registered.pop("$comment").startswith("perf document; vLLM ")  # which version, and why
    assert registered == perf_json_schema()
    jsonschema.validate(doc, json.loads(schema_out))
    PerfDocument.model_validate(doc)
    # H200 / vLLM 0.26.0 has fitted coefficients (kvplan/perf/coefficients.yaml, the bench records)
    assert doc["calibration"]["status"] == "fitted"
    assert doc["calibration"]["label"].startswith("fitted on 2 records (llama3.1-8b")
    assert doc["slo"]["targets"] == {"ttft_p99": 2.0, "tpot_p50": 0.05}
    rec = doc["recommendation"]
    if rec["keeps_given_flags"]:  # the flags as given won: no serve line is recommended
        assert rec["serve_command"] is None and rec["best"] is not None
    else:
        assert rec["serve_command"].startswith("vllm serve TinyLlama/TinyLlama-1.1B-Chat-v1.0")


def test_table_carries_the_labels_and_tp():
    code, out, err = run_cli(*BASE, "-tp", "2", "--input-len", "256", "--output-len", "32", "--concurrency", "4",
                             "--num-requests", "20")
    assert code == 0, err
    text = unwrapped(out)
    assert "fitted on 2 records" in text  # the H200 fit; its TP term is not
    assert "TP > 1: the all-reduce term is uncalibrated" in text
    for word in ("TTFT", "TPOT", "ITL", "E2E", "saturation:", "KV-cache use:", "output tok/s"):
        assert word in text


def test_plot_is_written(tmp_path, constant_10ms):
    pytest.importorskip("matplotlib")
    target = tmp_path / "perf.png"
    code, out, err = run_cli(*BASE, "--input-len", "64", "--output-len", "8", "--concurrency", "2",
                             "--num-requests", "20", "--plot", str(target))
    assert code == 0, err
    assert target.stat().st_size > 0


def test_unmeetable_slo_exits_1(constant_10ms):
    code, out, err = run_cli(*BASE, "--input-len", "128", "--output-len", "8", "--concurrency", "1",
                             "--num-requests", "4", "--slo", "ttft_p50=5ms")
    assert code == 1, err
    assert "no --max-num-seqs / --max-num-batched-tokens pair tried meets the SLO" in unwrapped(out)


@pytest.mark.parametrize("extra, line", [
    (["--slo", "ttft_p95=2s"], "error: --slo: unknown key 'ttft_p95'"),
    (["--slo", "ttft_p99=2"], "error: --slo: ttft_p99: expected a time with its unit (2s, 50ms, 800us), got '2'"),
    (["--concurrency", "2", "--request-rate", "3"], "error: --concurrency/--request-rate: give exactly one"),
    (["--shared-prefix", "half:100"], "error: --shared-prefix: expected FRACTION:TOKENS (e.g. 0.5:512), got 'half:100'"),
])
def test_bad_flags_one_line_exit_2(extra, line):
    args = [*BASE, "--input-len", "128", "--output-len", "8", "--num-requests", "4"]
    if "--concurrency" not in extra:
        args += ["--concurrency", "1"]
    code, out, err = run_cli(*args, *extra)
    assert error_line(code, out, err).startswith(line)
    assert out == ""
