"""benchmarks/perf_vs_peers.py prints kvplan, roofline and aiconfigurator side by side, and says
why a column is empty instead of failing (aiconfigurator is never installed in the test env)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import perf_points  # noqa: E402
import perf_vs_peers  # noqa: E402

from kvplan.perf.coefficients import Efficiency  # noqa: E402


def test_synthetic_table_without_aiconfigurator(tmp_path, capsys):
    assert perf_vs_peers.main(["--synthetic", "--aic-python", str(tmp_path / "no-python")]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" in out and "measure nothing" in out
    header = out.splitlines()[1].split()
    assert header[:4] == ["record", "point", "kind", "measured"] and {"kvplan", "roofline", "aic"} <= set(header)
    assert "aic: aiconfigurator not installed" in out
    assert "median |error|" in out
    assert "uncalibrated" in out


def test_roofline_column_is_the_peaks_without_overhead(tmp_path, capsys):
    # points made at 100 % of the peaks with no overhead: the roofline column is exact
    ideal = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0)
    rec = perf_points.synthetic_record("meta-llama/Llama-3.1-8B-Instruct", "NVIDIA H200", ideal, "0.26.0",
                                       grid=[(1, 2048, 256), (64, 128, 512)])
    p = tmp_path / "ideal.json"
    p.write_text(json.dumps(rec))
    assert perf_vs_peers.main([str(p), "--no-aic"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln for ln in lines if ln.startswith("ideal.json")]
    assert len(rows) == 3  # two TPOT, one TTFT (concurrency 1)
    for row in rows:
        roofline_cell = row.split("|")[2]
        assert "+0.0%" in roofline_cell or "-0.0%" in roofline_cell, row
    assert any("aiconfigurator skipped" in ln for ln in lines)


def test_no_input_is_refused(capsys):
    assert perf_vs_peers.main([]) == 2
    assert "give benchmark record files or --synthetic" in capsys.readouterr().err
