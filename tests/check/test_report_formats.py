"""`kvplan check` output formats (human, json, github, --junit-xml) and `kvplan schema`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.helpers import run_cli
from tests.check.common import DATA, R4



def rel(name: str) -> str:
    """How kvplan shows a fixture path (relative to the working directory)."""
    return os.path.relpath(DATA / name)

FAIL = str(DATA / "fail/llama70b-long-context.yaml")
PASS = str(DATA / "pass/chat-llama8b.yaml")
BAD = str(DATA / "bad/syntax-error.yaml")


def test_human_output_names_file_line_check_and_key():
    code, out, err = run_cli("check", FAIL)
    assert code == 1 and err == ""
    assert rel("fail/llama70b-long-context.yaml") in out
    line = next(x for x in out.splitlines() if "max-model-len-fits" in x)
    assert line.split()[0] == "3" and "error" in line and "max-model-len:" in line
    assert "-> exit 1" in out.splitlines()[-1]


def test_human_output_passing_file():
    code, out, _ = run_cli("check", PASS, "--gpu", "H100")
    assert code == 0
    assert "✓" in out and "-> exit 0" in out


def test_json_diagnostics_carry_id_severity_file_line_key():
    code, out, _ = run_cli("check", FAIL, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_code"] == 1
    d = next(x for x in doc["diagnostics"] if x["check_id"] == "unknown-flag")
    assert set(d) >= {"check_id", "severity", "file", "line", "key", "message", "hint", "text"}
    assert d["text"].startswith(f"{d['file']}:6: error [unknown-flag] max-modl-len: ")
    assert doc["summary"]["errors"] == 3 and doc["summary"]["warnings"] == 1


def test_github_annotations():
    code, out, _ = run_cli("check", FAIL, BAD, "--format", "github")
    assert code == 2
    lines = out.splitlines()
    fits = next(x for x in lines if "max-model-len-fits" in x)
    assert fits.startswith(f"::error file={rel('fail/llama70b-long-context.yaml')},line=3,title=kvplan max-model-len-fits::")
    assert any(x.startswith("::warning file=") and "kvplan-key-in-vllm-config" in x for x in lines)
    assert any(x.startswith(f"::error file={rel('bad/syntax-error.yaml')},line=3,title=kvplan parse-error::") for x in lines)
    assert lines[-1].endswith("-> exit 2")


def test_github_escaping():
    from kvplan.check.report import _gh_data, _gh_prop

    assert _gh_data("90% of\nmemory") == "90%25 of%0Amemory"
    assert _gh_prop("a:b,c") == "a%3Ab%2Cc"


def test_junit_xml_is_written_after_all_checks(tmp_path):
    out_file = tmp_path / "report.xml"
    code, _, _ = run_cli("check", FAIL, BAD, str(DATA / "pass/serve-qwen32b.sh"), "--junit-xml", str(out_file))
    assert code == 2
    root = ET.parse(out_file).getroot()
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {rel("fail/llama70b-long-context.yaml"), rel("bad/syntax-error.yaml"), rel("pass/serve-qwen32b.sh")}
    bad = suites[rel("bad/syntax-error.yaml")]
    assert bad.get("errors") == "1" and bad.find("testcase/error").get("type") == "parse-error"
    fail = suites[rel("fail/llama70b-long-context.yaml")]
    types = {f.get("type") for f in fail.findall("testcase/failure")}
    assert types == {"max-model-len-fits", "removed-flag", "unknown-flag"}
    ok = suites[rel("pass/serve-qwen32b.sh")]
    assert ok.get("failures") == "0" and ok.get("errors") == "0" and int(ok.get("tests")) >= 5
    assert [p.name for p in tmp_path.iterdir()] == ["report.xml"]  # no temporary file left


def test_junit_xml_strict_turns_warnings_into_failures(tmp_path):
    out_file = tmp_path / "r.xml"
    code, _, _ = run_cli("check", str(DATA / "pass/docker-compose.yml"), "--strict", "--junit-xml", str(out_file))
    assert code == 1
    failures = ET.parse(out_file).getroot().findall(".//failure")
    assert [f.get("type") for f in failures] == ["fp8-kv-unsupported-gpu"]


def test_nothing_written_when_the_run_itself_fails(tmp_path):
    out_file = tmp_path / "report.xml"
    out_file.write_text("previous")
    code, out, err = run_cli("check", PASS, "--format", "sarf", "--junit-xml", str(out_file))
    assert code == 2 and "--format" in err and "Traceback" not in err
    code, out, err = run_cli("check", PASS, "--gpu-profiles", str(tmp_path / "nope.yaml"), "--junit-xml", str(out_file))
    assert code == 2 and "Traceback" not in err
    assert out_file.read_text() == "previous"
    code, out, err = run_cli("check", PASS, "--gpu", "H100", "--junit-xml", str(tmp_path / "no-such-dir" / "r.xml"))
    assert code == 2 and "--junit-xml" in err


def test_schema_for_config_and_manifest():
    code, out, _ = run_cli("schema")
    assert code == 0
    schema = json.loads(out)
    props = schema["properties"]
    assert {"model", "max-model-len", "tensor-parallel-size", "no-enable-prefix-caching", "kvplan"} <= set(props)
    assert "swap-space" not in props  # not a vLLM 0.26.0 flag
    targets = schema["$defs"]["Targets"]["properties"]
    assert {"gpu", "gpu_count", "min_concurrency", "request_len", "max_gpu_memory_utilization"} <= set(targets)
    # null: vLLM reads it as the text "None" (an error for these) ...
    assert {"type": "null"} not in props["tensor-parallel-size"].get("anyOf", [])
    assert props["tensor-parallel-size"]["type"] == "integer"
    assert "anyOf" not in props["enforce-eager"] and props["enforce-eager"]["type"] == "boolean"
    # ... or as "unset" for flags typed `X | None` in vLLM
    assert {"type": "null"} in props["kv-cache-memory-bytes"]["anyOf"]
    code, out, _ = run_cli("schema", "manifest")
    manifest = json.loads(out)
    assert code == 0 and {"deployments", "node_selectors"} <= set(manifest["properties"])
    code, _, err = run_cli("schema", "helm")
    assert code == 2 and "config or manifest" in err


def test_version_does_not_import_the_checker():
    code = (
        "import sys; import kvplan.cli; "
        "bad = [m for m in ('kvplan.check', 'kvplan.capacity.estimate', 'pydantic', 'rich', 'yaml') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=True)
    assert out.stdout.strip() == "[]"


def test_junit_xml_survives_control_characters_from_the_input(tmp_path):
    f = tmp_path / "s.sh"
    f.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max\x01model-len 8192\n")
    out_file = tmp_path / "r.xml"
    code, _, _ = run_cli("check", str(f), "--gpu", "H100", "--junit-xml", str(out_file))
    assert code == 1
    failure = ET.parse(out_file).getroot().find(".//failure")
    assert failure.get("type") == "unknown-flag" and "\ufffd" in failure.get("message")


def test_ascii_ci_log_does_not_crash_on_non_ascii_input(tmp_path):
    f = tmp_path / "café.sh"
    f.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --café 1\n", encoding="utf-8")
    env = dict(os.environ, PYTHONIOENCODING="ascii", HF_HUB_OFFLINE="1")
    for fmt in ("human", "github"):
        run = subprocess.run(
            [sys.executable, "-m", "kvplan", "check", str(f), "--gpu", "H100", "--format", fmt],
            capture_output=True,
            text=True,
            env=env,
        )
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr and "unknown-flag" in run.stdout


# --- --junit-xml before the run, file mode, broken pipe (review items 23, 24, 25) ---------------


def test_junit_xml_path_is_validated_before_any_report(tmp_path):
    (tmp_path / "a-dir").mkdir()
    for bad in (str(tmp_path / "no-such-dir" / "r.xml"), "", str(tmp_path / "a-dir")):
        code, out, err = run_cli("check", FAIL, "--junit-xml", bad)
        assert code == 2, bad
        assert out == "", bad  # nothing printed: the error comes before the report
        lines = err.strip().splitlines()
        assert lines[0].startswith("error: --junit-xml") and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir"]  # nothing written


def test_junit_xml_mode_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        out_file = tmp_path / "r.xml"
        assert run_cli("check", PASS, "--gpu", "H100", "--junit-xml", str(out_file))[0] == 0
        assert out_file.stat().st_mode & 0o777 == 0o640  # 0o666 & ~0o027
        os.umask(0o022)
        other = tmp_path / "s.xml"
        assert run_cli("check", PASS, "--gpu", "H100", "--junit-xml", str(other))[0] == 0
        assert other.stat().st_mode & 0o777 == 0o644
        # an existing report keeps its mode, as when a program rewrites a file in place
        other.chmod(0o664)
        assert run_cli("check", PASS, "--gpu", "H100", "--junit-xml", str(other))[0] == 0
        assert other.stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


def _closed_stdout(*args: str):
    """Run `python -m kvplan ARGS` with its stdout a pipe whose reader is already gone."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "kvplan", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # like `| head -0`: every write to stdout fails with EPIPE
    err = p.stderr.read().decode()
    return p.wait(), err


def test_broken_pipe_is_not_reported_as_a_failed_check(tmp_path):
    out_file = tmp_path / "r.xml"
    code, err = _closed_stdout("check", PASS, "--gpu", "H100", "--junit-xml", str(out_file))
    assert code != 1 and "Traceback" not in err, (code, err)
    assert ET.parse(out_file).getroot().get("failures") == "0"  # written before the report
    code, err = _closed_stdout("schema")
    assert code != 1 and "Traceback" not in err, (code, err)


def test_run_check_keeps_the_check_verdict_when_stdout_goes_away(tmp_path, monkeypatch):
    """Without SIGPIPE (Windows, or a caller that ignores it) print raises BrokenPipeError:
    run_check then returns the checks' own exit code, never 1 for a passing run."""
    import builtins

    from kvplan.cli.check import run_check

    real_print = builtins.print

    def broken(*a, **k):
        if k.get("file") is None:
            raise BrokenPipeError(32, "Broken pipe")
        return real_print(*a, **k)

    monkeypatch.setattr(builtins, "print", broken)
    monkeypatch.setattr(os, "dup2", lambda *a: None)  # keep pytest's own stdout
    out_file = tmp_path / "r.xml"
    code = run_check(files=[PASS], gpu="H100", gpu_profiles=None, vllm_version="0.26.0", fmt="json", junit_xml=str(out_file), strict=False)
    assert code == 0 and out_file.exists()
    code = run_check(files=[FAIL], gpu=None, gpu_profiles=None, vllm_version="0.26.0", fmt="github", junit_xml=None, strict=False)
    assert code == 1


def test_junit_file_level_findings_are_their_own_testcases(tmp_path):
    out_file = tmp_path / "r.xml"
    code, _, _ = run_cli("check", str(DATA / "fail/trailing-separator.yaml"), "--junit-xml", str(out_file))
    assert code == 1
    suite = ET.parse(out_file).getroot().find("testsuite")
    ids = [c.get("name").rsplit(" :: ", 1)[1] for c in suite.findall("testcase")]
    assert ids.count("multiple-documents") == 1 and "parse-error" not in ids  # no empty parse-error case
    assert suite.get("failures") == "1" and suite.get("errors") == "0"


def test_escape_sequences_are_escaped_in_human_and_github_output():
    for fmt in ("human", "github"):
        code, out, _ = run_cli("check", str(R4 / "escape.yaml"), "--gpu", "H100", "--format", fmt)
        assert "\x1b" not in out, fmt
        # the human report folds a long token at the console width: compare without whitespace
        assert "\\x1b[31mRED" in "".join(out.split()), fmt
        assert code == 2  # the model id is not valid: model-unresolved
