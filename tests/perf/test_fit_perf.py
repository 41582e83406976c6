"""benchmarks/fit_perf.py recovers known coefficients from synthetic records made with them,
keeps held-out points out of the fit, writes provenance, and never fits synthetic records into
the bundled coefficients file. vLLM 0.26.0's sizes throughout."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fit_perf  # noqa: E402
import perf_points  # noqa: E402

from kvplan.perf.coefficients import PRIORS, Efficiency, parse_entries  # noqa: E402

V = "0.26.0"
TRUTH = Efficiency(bandwidth_fraction=0.85, matmul_fraction=0.7, step_overhead_ms=1.1, per_request_us=20.0)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    d = tmp_path_factory.mktemp("records")
    paths = []
    for i, model in enumerate(("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B")):
        p = d / f"synthetic-{i}.json"
        p.write_text(json.dumps(perf_points.synthetic_record(model, "NVIDIA H200", TRUTH, V)))
        paths.append(str(p))
    return paths


def test_fit_recovers_the_coefficients_the_records_were_made_with(records, tmp_path, capsys):
    out = tmp_path / "coef.yaml"
    assert fit_perf.main([*records, "--out", str(out)]) == 0
    fits = parse_entries(out.read_text(), str(out))
    e = fits[("h200", V)]
    assert e.calibrated
    for name in ("bandwidth_fraction", "matmul_fraction", "step_overhead_ms", "per_request_us"):
        assert getattr(e, name) == pytest.approx(getattr(TRUTH, name), rel=1e-3), name
    entry = yaml.safe_load(out.read_text())["fits"][0]
    assert entry["fitted_on"] == ["synthetic-0.json", "synthetic-1.json"]
    assert entry["held_out_points"] > 0 and entry["fitted_points"] > entry["held_out_points"]
    assert entry["residuals"]["held_out"]["tpot_median_abs_pct"] == pytest.approx(0.0, abs=0.01)
    assert "held-out" in capsys.readouterr().out


def test_noisy_records_fit_near_the_truth_and_report_held_out_error(records, tmp_path):
    noise = lambda k: 1.0 + (0.03 if k % 2 else -0.03)  # noqa: E731  +-3 % alternating
    rec = perf_points.synthetic_record("meta-llama/Llama-3.1-8B-Instruct", "NVIDIA H200", TRUTH, V, noise=noise)
    p = tmp_path / "noisy.json"
    p.write_text(json.dumps(rec))
    obs = perf_points.load_all([str(p), records[1]])
    fit_set, held = fit_perf.split(obs, 3, [])
    assert not set(map(id, fit_set)) & set(map(id, held))
    eff, _ = fit_perf.fit(fit_set)
    assert eff.bandwidth_fraction == pytest.approx(TRUTH.bandwidth_fraction, rel=0.1)
    assert eff.matmul_fraction == pytest.approx(TRUTH.matmul_fraction, rel=0.1)
    errs = [abs(e) for _, _, e in fit_perf.errors(held, eff)]
    assert max(errs) < 8.0  # 3 % noise, not a 30 % miss
    # the priors, by contrast, are off on the same held-out points
    assert max(abs(e) for _, _, e in fit_perf.errors(held, PRIORS)) > 5.0


def test_holdout_record_keeps_a_whole_run_out_of_the_fit(records):
    obs = perf_points.load_all(records)
    fit_set, held = fit_perf.split(obs, 0, ["synthetic-1"])
    assert {o.record for o in held} == {"synthetic-1.json"}
    assert {o.record for o in fit_set} == {"synthetic-0.json"}


def test_synthetic_records_are_never_written_into_the_bundled_file(records, capsys):
    before = fit_perf.DEFAULT_OUT.read_text()
    assert fit_perf.main(records) == 2
    assert "synthetic records are not measurements" in capsys.readouterr().err
    assert fit_perf.DEFAULT_OUT.read_text() == before


def test_observations_follow_the_closed_loop_rule(records):
    obs = {(o.point, o.kind): o for o in perf_points.load_all(records[:1])}
    # TTFT only at concurrency 1; an 8192-token prompt fits the 8192 budget in one step
    assert ("c8-128x512", "ttft") not in obs
    assert [s.prefills[0].num_new_tokens for s in obs[("c1-8192x64", "ttft")].steps] == [8192]
    # TPOT at c=8, 2048/256: 8 decodes at context 2048 + 128, and 7/256 of a step per restart
    t = obs[("c8-2048x256", "tpot")]
    decode, mixed = t.steps
    assert (decode.num_decodes, decode.max_decode_context) == (8, 2176)
    assert mixed.weight == pytest.approx(7 / 256) and decode.weight == pytest.approx(1 - 7 / 256)
    assert (mixed.num_decodes, mixed.prefills[0].num_new_tokens) == (7, 2048)
