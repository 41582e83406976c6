"""The terminal view: wrapping at 80 columns (a pipe) and help placeholders."""

from __future__ import annotations

import re

import pytest
from helpers import run_cli

LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"


def _block(out: str, first: str, last: str) -> list[str]:
    lines = out.splitlines()
    i = next(n for n, s in enumerate(lines) if s.startswith(first))
    j = next(n for n, s in enumerate(lines) if n > i and s.startswith(last))
    return lines[i + 1 : j]


def test_recommendations_wrap_under_their_text_at_80_columns(monkeypatch):
    # run_cli writes to a pipe-like buffer: rich lays it out at COLUMNS (80 here)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli("estimate", LLAMA3_8B, "--gpu", "L4", "--max-model-len", "8192")
    assert code == 0, err
    block = _block(out, "recommended flags", "vllm serve line:")
    assert len(block) > 2  # some reason did wrap
    for line in block:
        assert line.startswith("  "), line  # a flag line or an indented continuation, never column 0
        assert len(line) <= 80 and line == line.rstrip()
    continued = [s for s in block if not s.lstrip().startswith("--")]
    assert continued and all(s.startswith(" " * 10) for s in continued)


def test_plan_notes_wrap_with_a_hanging_indent_at_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli("plan", LLAMA3_8B, "--concurrency", "64")
    assert code == 0, err
    lines = out.splitlines()
    i = next(n for n, s in enumerate(lines) if s.startswith("price unknown: "))
    assert lines[i + 1].startswith(" " * len("price unknown: "))


@pytest.mark.parametrize("command", ["estimate", "plan", "verify", "check", "gpus"])
def test_help_has_no_typer_type_placeholders(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    code, out, err = run_cli(command, "--help")
    assert code == 0
    assert not re.search(r"<(int|str|float|list\[\w+\])>", out), out


def test_gpus_help_promise_of_a_price_column_holds(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli("gpus", "--help")
    assert "price" in out
    code, out, err = run_cli("gpus")
    assert "$/h" in out.splitlines()[0]  # no blank first line (box edge)


def test_cuda_graph_row_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    # a GPU too small for the weights: the "(none left)" GiB cells make the table widest
    code, out, err = run_cli("estimate", LLAMA3_8B, "--gpu", "H200", "--max-model-len", "8192", "--gpu-memory", "1GiB")
    assert code == 1, err
    rows = [line for line in out.splitlines() if "CUDA graphs" in line]
    assert rows
    for line in rows:
        assert line.rstrip().endswith(tuple("0123456789")), line  # the GiB cell on the same line
        assert line.count("(") == line.count(")"), line  # the label is not cut onto a second line
    assert all(len(line) <= 80 for line in out.splitlines() if "CUDA graphs" in line)


def test_gpus_ids_whole_at_80_columns(monkeypatch):
    from kvplan.gpus import load_profiles

    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli("gpus")
    assert code == 0, err
    ids = [line.split()[0] for line in out.splitlines() if line[:2].strip() and line.strip()[0].isalnum()]
    assert all(len(line) <= 80 for line in out.splitlines()), out
    for pid in load_profiles(None):
        assert pid in ids, (pid, out)
    assert "…" not in "".join(ids)


def test_gpus_price_column_shows_a_user_profile_price(monkeypatch, tmp_path):
    # the $/h column is always there (bundled list prices, `?` where none; issue 14 item 13)
    monkeypatch.setenv("COLUMNS", "200")
    prof = tmp_path / "p.yaml"
    prof.write_text("gpus:\n  - id: mygpu\n    memory_bytes: 80GiB\n    price_per_hour_usd: 2.5\n")
    code, out, err = run_cli("gpus", "--gpu-profiles", str(prof))
    assert code == 0, err
    assert "$/h" in out and "2.50" in out


@pytest.mark.parametrize("cmd", ["gpus", "estimate"])
def test_help_metavars_are_readable(cmd, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(cmd, "--help")
    assert code == 0
    options = [line for line in out.splitlines() if line.lstrip().startswith("-")]
    assert not [line for line in options if "<" in line], out  # typer's <str>, <list[str]> on options
    assert "--gpu-profiles FILE" in out and "--format FORMAT" in out
