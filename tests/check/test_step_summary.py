"""`kvplan check` appends a Markdown summary to $GITHUB_STEP_SUMMARY when it is set (GitHub
Actions), whatever --format prints; the report itself does not change; a summary path that
cannot be written, or is an input of the check, is one error line and exit 2 with nothing
printed or appended."""

from __future__ import annotations

from pathlib import Path

from kvplan.check.summary import cell
from tests.check.common import DATA
from tests.helpers import error_line, run_cli

FAIL = str(DATA / "fail" / "llama70b-long-context.yaml")
PASS = str(DATA / "pass" / "chat-llama8b.yaml")


def test_the_summary_is_appended_and_the_report_is_unchanged(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    plain = run_cli("check", FAIL, "--gpu", "H100", "--format", "github")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = run_cli("check", FAIL, "--gpu", "H100", "--format", "github")
    assert (code, out, err) == plain and code == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n## kvplan check failed (exit 1)\n")
    # the file has 3 errors (max-model-len-fits, removed-flag, unknown-flag) and 1 warning
    assert "1 file(s), 1 deployment(s): 3 error(s), 1 warning(s)" in text
    rows = [line for line in text.splitlines() if line.startswith("| error |") or line.startswith("| warning |")]
    assert [r.split(" | ")[1] for r in rows] == ["max-model-len-fits", "removed-flag", "unknown-flag",
                                                  "kvplan-key-in-vllm-config"]
    assert rows[0].split(" | ")[2].endswith("llama70b-long-context.yaml:3")  # line 3: max-model-len
    assert "| fail |" in text


def test_a_passing_run_says_passed_with_its_figures(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run_cli("check", PASS, "--gpu", "H100", "--format", "json")
    assert code == 0
    import json

    fig = json.loads(out)["files"][0]["deployments"][0]["figures"]
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## kvplan check passed (exit 0)")
    assert f"{fig['num_gpu_blocks']:,} blocks, {fig['gpu_kv_cache_tokens']:,} tokens" in text
    assert "| pass |" in text


def test_no_variable_no_file(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    run_cli("check", PASS, "--gpu", "H100")
    assert list(tmp_path.iterdir()) == []


def test_a_summary_path_that_is_an_input_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "deploy.yaml"
    target.write_text(Path(PASS).read_text(encoding="utf-8"), encoding="utf-8")
    before = target.read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    code, out, err = run_cli("check", str(target), "--gpu", "H100")
    line = error_line(code, out, err)
    assert line.startswith("error: $GITHUB_STEP_SUMMARY: ") and "is an input of this check" in line
    assert out == "" and target.read_bytes() == before
    doc = (Path(__file__).parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    assert "`check-step-summary-onto-input`" in doc and "is an input of this check; kvplan does not overwrite it" in doc


def test_a_directory_is_refused_before_anything_is_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))
    code, out, err = run_cli("check", PASS, "--gpu", "H100")
    assert error_line(code, out, err).startswith("error: $GITHUB_STEP_SUMMARY: ")
    assert out == ""


def test_cells_cannot_break_the_table_or_inject_html():
    text = cell("a | b <img src=x> `c` *d*\nnext\x1b[31m")
    assert "|" not in text.replace("\\|", "")
    assert "<" not in text.replace("\\<", "") and "\n" not in text and "\x1b" not in text
    # control characters (the newline too) are written as \xNN, as the other formats do
    assert text == "a \\| b \\<img src=x\\> \\`c\\` \\*d\\*\\\\x0anext\\\\x1b\\[31m"


def test_notes_are_listed_under_a_passing_verdict(tmp_path, monkeypatch):
    # a flag kvplan does not model must not hide under "passed": every note is a row
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run_cli("check", PASS, "--gpu", "H100", "--format", "json")
    import json

    notes = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "info"]
    assert code == 0 and notes
    rows = [line for line in summary.read_text(encoding="utf-8").splitlines() if line.startswith("| info |")]
    assert [r.split(" | ")[1] for r in rows] == [cell(d["check_id"]) for d in notes]


def test_findings_past_the_cap_are_counted_not_listed():
    from kvplan.check.diagnostics import Diagnostic
    from kvplan.check.report import FileResult, Report
    from kvplan.check.summary import MAX_FINDINGS, markdown_summary

    diags = [Diagnostic(check_id="unknown-flag", severity="error", file="a.yaml", line=i + 1, message=f"m{i}")
             for i in range(MAX_FINDINGS + 5)]
    text = markdown_summary(Report(files=[FileResult(file="a.yaml", kind="vllm-config", diagnostics=diags)],
                                   stats={}, vllm_version="x"), strict=False)
    assert sum(line.startswith("| error |") for line in text.splitlines()) == MAX_FINDINGS
    assert "5 more finding(s): see the job log." in text
    assert text.startswith("## kvplan check failed (exit 1)")
