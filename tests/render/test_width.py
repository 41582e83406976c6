"""Issue 14 item 15: at 80 columns (a terminal, or a pipe: rich's default) no line is wider than
the console, numbers are never cut, and wrapped prose continues under its text (hanging indent),
never at column 0 and without trailing spaces."""

from __future__ import annotations

import io
import json
import re

import pytest

from tests.check.common import R3
from tests.helpers import run_cli

ESTIMATE = ["estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--max-model-len", "8192"]


@pytest.fixture(autouse=True)
def _columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _fits(out: str, width: int = 80) -> list[str]:
    lines = out.splitlines()
    assert all(len(s) <= width for s in lines), [s for s in lines if len(s) > width]
    assert not [s for s in lines if s != s.rstrip()], "trailing spaces"
    return lines


def test_gpus_at_80_columns_never_cuts_a_number():
    from kvplan.gpus import load_profiles

    code, out, err = run_cli("gpus")
    assert code == 0, err
    lines = _fits(out)
    assert lines[0].split()[:2] == ["id", "name"]  # no blank box edge first
    for p in load_profiles(None).values():
        row = next(s for s in lines if s.split() and s.split()[0] == p.id)
        assert f"{p.memory_bytes:,}" in row and f"{p.memory_bytes / 2**30:.2f}" in row, row


def test_gpus_wide_name_column_is_capped_and_narrow_falls_back_to_lines(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli("gpus")
    header = out.splitlines()[0]
    assert header.index("GiB") - header.index("name") <= 40  # not the 55-character GB300 name
    monkeypatch.setenv("COLUMNS", "50")
    code, out, _ = run_cli("gpus")
    _fits(out, 50)
    assert "15,638,134,784" in out  # T4's CUDA bytes, whole


def test_estimate_workload_section_wraps_under_its_text():
    code, out, err = run_cli(*ESTIMATE, "--workload", "prompt=1000 output=200", "--shared-prefix-tokens", "100")
    assert code == 0, err
    lines = _fits(out)
    start = next(i for i, s in enumerate(lines) if s.startswith("workload per engine"))
    for prev, s in zip(lines[start:], lines[start + 1:]):
        if s and not s[0].isspace():  # a new item starts at column 0: never a continuation
            assert re.match(r"(limits|binding|sharing|warning|  |blocks|concurrent|KV memory)", s) or s.strip() in (
                "PagedAttention  static max-length",), (prev, s)
    assert not any(s.startswith(("tokens", "byte per", "weights split", "more of the GPU")) for s in lines)


def test_estimate_header_wraps_with_a_hanging_indent():
    code, out, _ = run_cli(*ESTIMATE, "--vllm-version", "0.26.0")
    lines = _fits(out)
    assert lines[0].startswith("meta-llama/Meta-Llama-3-8B on 1x NVIDIA H200")
    assert lines[1].startswith("  ") and "0.26.0" in lines[1]


def test_verify_header_does_not_break_mid_name():
    from rich.console import Console

    from kvplan.cli.verify import print_comparison

    doc = {"model": "meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic", "vllm_version": "0.26.0", "usage": "serve",
           "gpu": "NVIDIA H200", "status": "pass", "tolerance_pct": 1.0, "compared_on": "num_gpu_blocks",
           "predicted": {"num_gpu_blocks": 100}, "measured": {"num_gpu_blocks": 100},
           "errors": {"num_gpu_blocks": {"abs": 0, "pct": 0.0}}, "measured_source": {}, "notes": []}
    buf = io.StringIO()
    print_comparison(doc, Console(file=buf, width=80, highlight=False))
    lines = buf.getvalue().splitlines()
    _fits("\n".join(lines[:2]))
    assert lines[1].startswith("  ")
    assert "GPU: NVIDIA H200" in " ".join(s.strip() for s in lines[:2])


def test_check_findings_wrap_under_the_finding_text():
    code, out, _ = run_cli("check", str(R3 / "a10g-seqs2.yaml"))
    lines = _fits(out)
    i = next(i for i, s in enumerate(lines) if " info " in s and "max-num-seqs:" in s)
    col = lines[i].index("max-num-seqs:")  # the finding text (key, message) after the check id
    assert lines[i + 1].startswith(" " * col) and not lines[i + 1][col].isspace()


def test_check_github_format_stays_one_line_per_finding():
    code, out, _ = run_cli("check", str(R3 / "a10g-seqs2.yaml"), "--format", "github")
    (line,) = [s for s in out.splitlines() if s.startswith("::notice") and "max-num-seqs" in s]
    assert len(line) > 80 and line.endswith("the KV cache holds")


def test_gpu_memory_without_gpu_names_the_size_and_the_profile():
    code, out, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu-memory", "23.69GiB", "--max-model-len", "8192")
    assert code == 0, err
    lines = _fits(out)
    head = " ".join(s.strip() for s in lines[:2])
    assert "NVIDIA H200 SXM 141GB" not in head
    assert "23.69 GiB GPU (h200 profile's other properties: fp8, bf16, compute capability 9.0)" in head
    assert "note: --gpu-memory replaced only the memory of the h200 profile" in out
    code, out, _ = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu-memory", "23.69GiB", "--format", "json")
    gpu = json.loads(out)["gpu"]
    assert gpu["display_name"] == "NVIDIA H200 SXM 141GB"  # kept, not renamed
    assert gpu["label"].startswith("23.69 GiB GPU (h200 profile's")
    code, out, _ = run_cli(*ESTIMATE, "--format", "json")
    assert json.loads(out)["gpu"]["label"] == "NVIDIA H200 SXM 141GB"


def test_readme_example_is_the_real_output_at_80_columns(monkeypatch):
    from pathlib import Path

    from kvplan.engines.vllm import versions

    # the README shows a fresh `pip install -e '.[test]'`: no vllm installed, so the newest supported
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    cmd = "    $ kvplan estimate meta-llama/Meta-Llama-3-8B --gpu H200 --max-model-len 8192\n"
    block = readme[readme.index(cmd) + len(cmd):].split("\n\n")[0]
    shown = [s[4:] for s in block.splitlines()]
    code, out, _ = run_cli(*ESTIMATE)
    assert shown == out.rstrip("\n").splitlines()


def test_bundled_ids_are_documented_and_plan_n_metavar_matches_estimate(monkeypatch):
    from pathlib import Path

    assert "bundled_ids" in (Path(__file__).parents[2] / "README.md").read_text()
    monkeypatch.setenv("COLUMNS", "200")
    _, plan_help, _ = run_cli("plan", "--help")
    _, est_help, _ = run_cli("estimate", "--help")
    assert "--n, --beam-width N" in " ".join(est_help.split())
    assert "--n, --beam-width N" in " ".join(plan_help.split())


@pytest.mark.parametrize("width", [80, 60])
def test_estimate_title_keeps_the_vllm_version_together(monkeypatch, width):
    # at 80 columns the title used to end in "vLLM" and continue with "  0.26.0"
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, _ = run_cli(*ESTIMATE, "--vllm-version", "0.26.0")
    assert code == 0
    head = []
    for s in _fits(out, width):
        if head and not s.startswith("  "):
            break
        head.append(s)
    assert len(head) >= 2  # the title wraps at this width
    assert "vLLM 0.26.0" in "\n".join(head)  # a plain space, never a break, between the two
    assert "\u00a0" not in out and "\ue000" not in out
