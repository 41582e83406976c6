"""Tables printed to something that is not a terminal (CI logs, pipes) are never cut: rich
takes such a console as 80 columns and cut the plan table's cells to `12.…` ($/h), `1024…`
(requests), `h100-s…`. kvplan/render/fit.py prints them at the width they need."""

from __future__ import annotations

import io

import pytest
from helpers import run_cli
from rich.console import Console
from rich.table import Table

from kvplan.perf.batch import linear_step_time
from kvplan.render.fit import print_table


def _table() -> Table:
    t = Table(box=None)
    for i in range(12):
        t.add_column(f"column{i}")
    t.add_row(*[f"{12345.678 + i:.3f}" for i in range(12)])
    return t


def test_a_wide_table_is_printed_whole_off_a_terminal():
    buf = io.StringIO()
    con = Console(file=buf, width=80)  # a file: not a terminal
    print_table(con, _table())
    out = buf.getvalue()
    assert "…" not in out
    # 12 columns of 9 characters + 2 of padding each = 132 columns, every number whole
    assert all(f"{12345.678 + i:.3f}" in out for i in range(12))
    assert max(len(line.rstrip("\n")) for line in out.splitlines()) == 132
    assert con.width == 80  # restored: prose after it wraps as before


def test_a_narrow_table_is_left_alone():
    buf = io.StringIO()
    con = Console(file=buf, width=80)
    t = Table(box=None)
    t.add_column("a")
    t.add_row("1")
    print_table(con, t)
    assert buf.getvalue().splitlines()[1].strip() == "1"


@pytest.fixture
def fast_step(monkeypatch):
    import kvplan.perf.step_time as st

    def fake(spec, gpu, args=None, **kw):
        class M:
            labels = ()
            efficiency = __import__("kvplan.perf.coefficients", fromlist=["PRIORS"]).PRIORS
            seconds = staticmethod(linear_step_time(0.0025, 2.5e-6))
        return M()

    monkeypatch.setattr(st, "step_model", fake)


def test_plan_slo_table_in_a_pipe_has_no_cut_cell(fast_step):
    code, out, err = run_cli("plan", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--concurrency", "1024", "--workload",
                             "prompt=64 output=16", "--gpus", "H200,L40S", "--vllm-version", "0.26.0", "--slo",
                             "tpot_p50=1s")
    assert code == 0, err
    head = out.index(" GPUs ")
    table = out[out.rfind("\n", 0, head) + 1: out.index("ranking:")]
    assert "…" not in table, table
    # 1,024 requests held: 1024.0 in the req column of every option, +0% spare
    assert "1024.0" in table and "TP/PP/DP" in table and "$/1k req" in table
