"""Speculative decoding reaches the headline metrics (kvplan/perf/speculative.py
speculative_summary): on hand-built runs every metric's rule is checked by arithmetic, and
`kvplan perf` with --speculative-config/--spec-acceptance reports the scaled TPOT, throughput and
SLO verdict (not the plain run's) in table and JSON, labelled with the stated acceptance."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

from kvplan.perf import EngineConfig, RequestRecord, SimulationResult
from kvplan.perf.speculative import SpeculativeEffect, speculative_summary


def _result(*records) -> SimulationResult:
    cfg = EngineConfig(num_gpu_blocks=11, block_size=16, max_model_len=64, max_num_batched_tokens=64, max_num_seqs=4)
    return SimulationResult(cfg, tuple(records), (), 10)


def _rec(i, arrival, times, prompt=10) -> RequestRecord:
    return RequestRecord(i, prompt, len(times), 0, arrival, arrival, times[0], times[-1], tuple(times), 0)


def _effect(tpot_factor: float, acceptance: float) -> SpeculativeEffect:
    return SpeculativeEffect("eagle3", 3, acceptance, 1, 100, 1.0, tpot_factor * acceptance, 0.0,
                             tpot_factor, 1 / tpot_factor)


def test_open_loop_rescales_each_request_after_its_first_token():
    # request 0 sent at 0, tokens at 1, 3, 5 (TTFT 1, decode span 4); request 1 sent at 2, tokens at 4, 8
    # (TTFT 2, span 4). TPOT factor 0.5, acceptance 2:
    #   E2E' = TTFT + span x 0.5: 1 + 2 = 3 and 2 + 2 = 4; TPOT' = 2/2 = 1 and 2/1 = 2
    #   ITL' = gap x 0.5 x 2 (one streamed chunk per step): gaps 2, 2, 4 -> 2, 2, 4
    #   duration' = last rescaled finish (2 + 4 = 6) - first send (0) = 6; 5 output tokens, 20 prompt
    s = speculative_summary(_result(_rec(0, 0.0, (1.0, 3.0, 5.0)), _rec(1, 2.0, (4.0, 8.0))), _effect(0.5, 2.0),
                            closed_loop=False)
    assert s.ttft.mean == pytest.approx(1.5)
    assert sorted([s.e2e.p50, s.e2e.mean]) == pytest.approx([3.5, 3.5])
    assert s.tpot.count == 2 and s.tpot.mean == pytest.approx(1.5)
    assert s.itl.count == 3 and s.itl.mean == pytest.approx(8 / 3)
    assert s.duration_s == pytest.approx(6.0)
    assert s.output_throughput == pytest.approx(5 / 6)
    assert s.total_token_throughput == pytest.approx(25 / 6)
    assert s.request_throughput == pytest.approx(2 / 6)
    assert "stated mean acceptance of 2 tokens/step, uncalibrated" in s.approximate[-1]


def test_closed_loop_duration_follows_mean_e2e():
    # plain E2Es 5 and 6 (mean 5.5), duration 8; factor 0.5: E2E' 1 + 2 = 3 and 2 + 2 = 4 (mean 3.5)
    # -> duration' = 8 x 3.5 / 5.5 (Little's law at the fixed concurrency)
    s = speculative_summary(_result(_rec(0, 0.0, (1.0, 3.0, 5.0)), _rec(1, 2.0, (4.0, 8.0))), _effect(0.5, 2.0),
                            closed_loop=True)
    assert s.duration_s == pytest.approx(8 * 3.5 / 5.5)
    assert s.request_throughput == pytest.approx(2 / (8 * 3.5 / 5.5))


M = "meta-llama/Llama-3.1-8B-Instruct"
SPEC = ["--speculative-config", json.dumps({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                           "num_speculative_tokens": 3}), "--spec-acceptance", "2.5"]
RUN = ["perf", M, "--max-model-len", "8192", "--input-len", "500", "--output-len", "50", "--concurrency", "8",
       "--num-requests", "32", "--no-saturation", "--vllm-version", "0.33.0"]


def test_perf_headline_numbers_and_slo_verdict_include_speculation():
    code, out, err = run_cli(*RUN, *SPEC, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    m, sp = doc["metrics"], doc["speculative"]
    # the headline is the speculative one: its median TPOT is the effect's, and the effect's
    # factor is (verify + draft) / (2.5 x plain step), hand-checked from its terms
    assert sp["tpot_factor"] == pytest.approx(sp["spec_step_ms"] / (2.5 * sp["plain_step_ms"]))
    assert m["tpot_s"]["p50"] == pytest.approx(sp["tpot_s"])
    assert m["output_throughput"] == pytest.approx(sp["output_throughput"])
    assert any("stated mean acceptance of 2.5 tokens/step, uncalibrated" in a for a in doc["approximate"])
    # an SLO between the speculative and the plain median TPOT: met (exit 0), goodput > 0;
    # a plain run (same flags, the draft's memory aside) misses it
    tpot_spec = m["tpot_s"]["p50"]
    tpot_plain = tpot_spec / sp["tpot_factor"]
    assert tpot_spec < tpot_plain  # the step model's EAGLE-3 draft at 2.5 accepted tokens pays off here
    limit_ms = (tpot_spec + tpot_plain) / 2 * 1e3
    code, out, err = run_cli(*RUN, *SPEC, "--slo", f"tpot_p50={limit_ms:.4f}ms", "--format", "json")
    doc = json.loads(out)
    assert doc["slo"]["met"] is True and doc["slo"]["goodput"] > 0
    assert doc["slo"]["checks"][0]["value_s"] == pytest.approx(tpot_spec)
    code, out, err = run_cli(*RUN, *SPEC, "--slo", f"tpot_p50={limit_ms:.4f}ms")
    assert "SLO met" in out and "stated mean acceptance of 2.5 tokens/step" in out
    assert f"{tpot_spec * 1e3:.1f}" in out.split("TPOT", 1)[1].splitlines()[0]  # the table's TPOT p50 row


def test_plain_runs_say_nothing_of_speculation():
    code, out, _ = run_cli(*RUN, "--format", "json")
    assert code == 0 and "speculative" not in json.loads(out)
    assert not any("acceptance" in a for a in json.loads(out)["approximate"])


def test_the_saturation_line_says_it_is_without_speculation():
    run = [a for a in RUN if a != "--no-saturation"]
    code, out, err = run_cli(*run, *SPEC)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("saturation:"))
    assert line.endswith("; without speculative decoding)")
    code, out, _ = run_cli(*run)
    line = next(x for x in out.splitlines() if x.strip().startswith("saturation:"))
    assert "speculative" not in line
