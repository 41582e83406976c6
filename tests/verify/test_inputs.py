"""`kvplan verify` inputs: 0 KV blocks or tokens in --from-log, the --record directory checked
before anything runs, a closed standard output.

Expected values are worked out by hand from the fixture lines, never by calling the code under
test.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import error_line, run_cli
from test_verify import CAL, MEMINFO, config_dir, fake, from_log_llama3_8b, record  # noqa: F401 - fake is a fixture

ROOT = Path(__file__).resolve().parents[2]
LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"  # bundled


def one_error_line(err: str) -> str:
    """The single `error: ...` line of a bad-input exit (an optional hint line may follow)."""
    assert "Traceback" not in err, err
    lines = [s for s in err.splitlines() if s.strip()]
    assert lines and lines[0].startswith("error: "), err
    assert all(s.lstrip().startswith("hint:") for s in lines[1:]), err
    return lines[0]


# --- H1: a log with 0 KV blocks or 0 KV tokens --------------------------------------------------


def _excerpt(replace: dict[str, str | None]) -> list[str]:
    """The llama3-8b_eager record's log lines, each line starting with a key of ``replace``
    swapped for its value (None: dropped)."""
    out = []
    for line in record("llama3-8b_eager")["log_excerpt"]:
        hit = next((k for k in replace if line.startswith(k)), None)
        if hit is None:
            out.append(line)
        elif replace[hit] is not None:
            out.append(replace[hit])
    return out


def _write(tmp_path: Path, lines: list[str], name: str = "zero.log") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_result_line_with_zero_blocks_is_refused(tmp_path, fmt):
    lines = _excerpt({"RESULT ": "RESULT num_gpu_blocks=0 block_size=16 max_num_seqs=1024 "
                                 "max_num_batched_tokens=16384 startup_s=25.3"})
    log = _write(tmp_path, lines)
    lineno = next(i for i, s in enumerate(lines, 1) if s.startswith("RESULT "))
    code, out, err = from_log_llama3_8b(tmp_path, log, "--format", fmt)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --from-log: {log}:{lineno}: RESULT line: num_gpu_blocks=0 "), line
    assert "at least one" in line


def test_zero_kv_tokens_without_result_line_is_refused(tmp_path):
    lines = _excerpt({"RESULT ": None, "GPU KV cache size: ": "GPU KV cache size: 0 tokens"})
    log = _write(tmp_path, lines)
    lineno = next(i for i, s in enumerate(lines, 1) if s.startswith("GPU KV cache size"))
    code, out, err = from_log_llama3_8b(tmp_path, log)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --from-log: {log}:{lineno}: GPU KV cache size line: 0 tokens "), line


def _zero_block_record(tmp_path: Path, *, tokens: bool) -> Path:
    """A calibration-shaped record that says num_gpu_blocks 0 (no RESULT line in its excerpt)."""
    rec = record("llama3-8b_eager")
    drop = {"RESULT ": None}
    if not tokens:
        drop["GPU KV cache size: "] = None
    rec["log_excerpt"] = _excerpt(drop)
    rec["num_gpu_blocks"] = 0
    p = tmp_path / "zero.json"
    p.write_text(json.dumps(rec))
    return p


def test_zero_blocks_next_to_tokens_is_a_contradiction_and_the_tokens_decide(tmp_path):
    # 0 blocks next to 'GPU KV cache size: 915,152 tokens': 0 x 16 = 0 tokens, not 915,152
    p = _zero_block_record(tmp_path, tokens=True)
    code, out, err = from_log_llama3_8b(tmp_path, p, "--format", "json")
    assert "Traceback" not in err
    doc = json.loads(out)
    assert doc["measured"]["num_gpu_blocks"] == 0
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152
    assert doc["errors"]["num_gpu_blocks"]["pct"] is None  # no percentage of 0
    assert doc["compared_on"] == "gpu_kv_cache_tokens"
    assert doc["status"] != "mismatch" or doc["errors"]["gpu_kv_cache_tokens"]["pct"] is not None
    assert doc["log_consistent"] is False
    notes = [n for n in doc["notes"] if "contradicts itself" in n]
    assert len(notes) == 1, doc["notes"]
    assert "GPU KV cache size: 915,152 tokens" in notes[0] and "0 blocks" in notes[0]
    code2, out2, err2 = from_log_llama3_8b(tmp_path, p)
    assert "Traceback" not in err2 and code2 == code
    assert "n/a" in out2 and "contradicts itself" in " ".join(out2.split())


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_zero_blocks_alone_is_incomplete_not_a_mismatch(tmp_path, fmt):
    p = _zero_block_record(tmp_path, tokens=False)
    code, out, err = from_log_llama3_8b(tmp_path, p, "--format", fmt)
    assert "Traceback" not in err
    assert code == 1
    if fmt == "json":
        doc = json.loads(out)
        assert doc["status"] == "incomplete"
        assert doc["errors"]["num_gpu_blocks"]["pct"] is None
    else:
        assert "n/a" in out and "INCOMPLETE" in out and "MISMATCH" not in out


def test_compare_does_not_judge_on_a_division_by_zero():
    from kvplan.verify.compare import compare

    errors, status, on = compare({"num_gpu_blocks": 100}, {"num_gpu_blocks": 0}, {}, tolerance_pct=1.0)
    assert errors["num_gpu_blocks"] == {"abs": 100, "pct": None}
    assert status == "incomplete" and on == ""
    # 0 predicted, 0 measured: an exact match (0 %)
    errors, status, on = compare({"num_gpu_blocks": 0}, {"num_gpu_blocks": 0}, {}, tolerance_pct=1.0)
    assert (errors["num_gpu_blocks"]["pct"], status, on) == (0.0, "pass", "num_gpu_blocks")


@pytest.mark.parametrize("status", ["pass", "mismatch"])
def test_renderer_never_formats_a_none_percentage(status):
    from rich.console import Console

    from kvplan.cli.verify import print_comparison

    doc = {"model": "m", "usage": "llm", "status": status, "tolerance_pct": 1.0, "compared_on": "num_gpu_blocks",
           "predicted": {"num_gpu_blocks": 100}, "measured": {"num_gpu_blocks": 0},
           "errors": {"num_gpu_blocks": {"abs": 100, "pct": None}}, "measured_source": {}, "notes": []}
    buf = io.StringIO()
    print_comparison(doc, Console(file=buf, width=200, highlight=False))
    text = buf.getvalue()
    assert "n/a" in text
    assert f"{status.upper()}: num_gpu_blocks" in text


# --- H2: --record checked with the other options ---------------------------------------------------


@pytest.fixture
def no_vllm(monkeypatch):
    """The real environment check: no stand-in child, and vLLM is not installed here."""
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed: the environment check would pass")


def _verify_record(tmp_path: Path, target: str, *extra: str):
    model = config_dir(tmp_path, "llama3-8b_eager")
    return run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager",
                   "--record", target, *extra)


def test_record_existing_regular_file_is_bad_input(tmp_path, no_vllm):
    f = tmp_path / "rec.json"
    f.write_text("keep\n")
    code, out, err = _verify_record(tmp_path, str(f))
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --record: {f} ") and "not a directory" in line, line
    assert f.read_text() == "keep\n"


def test_record_dev_null_is_bad_input(tmp_path, no_vllm):
    code, out, err = _verify_record(tmp_path, "/dev/null")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith("error: --record: /dev/null ") and "not a directory" in line, line


def test_record_under_proc_is_bad_input(tmp_path, no_vllm):
    code, out, err = _verify_record(tmp_path, "/proc/kvplan-record-x")
    assert code == 2 and out == ""
    assert one_error_line(err).startswith("error: --record: /proc/kvplan-record-x")
    assert not os.path.exists("/proc/kvplan-record-x")


def test_record_empty_is_bad_input(tmp_path, no_vllm):
    code, out, err = _verify_record(tmp_path, "")
    assert code == 2 and out == ""
    assert one_error_line(err) == "error: --record: empty directory name"


def test_record_below_a_regular_file_is_bad_input(tmp_path, no_vllm):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    code, out, err = _verify_record(tmp_path, str(f / "sub"))
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --record: {f / 'sub'}") and f"cannot be created: {f} is a regular file, not a directory" in line, line


def test_record_directory_is_not_created_when_the_environment_is_missing(tmp_path, no_vllm):
    target = tmp_path / "newdir" / "sub"
    code, out, err = _verify_record(tmp_path, str(target))
    assert code == 3, err  # vLLM not installed
    assert not (tmp_path / "newdir").exists()


def test_record_with_batch_is_checked_before_the_environment(tmp_path, no_vllm):
    cases = tmp_path / "cases.yaml"
    cases.write_text("cases:\n  - name: ok\n    config: " + json.dumps(record("llama3-8b_eager")["config"]) + "\n")
    f = tmp_path / "rec.json"
    f.write_text("keep\n")
    code, out, err = run_cli("verify", "--batch", str(cases), "--record", str(f))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --record: {f} ")
    target = tmp_path / "newdir" / "sub"
    code, out, err = run_cli("verify", "--batch", str(cases), "--record", str(target))
    assert code == 3 and not (tmp_path / "newdir").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any directory")
def test_record_in_a_read_only_directory_is_bad_input(tmp_path, no_vllm):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, out, err = _verify_record(tmp_path, str(ro / "a" / "b"))
    finally:
        ro.chmod(0o755)
    assert code == 2 and out == ""
    assert "not writable" in one_error_line(err)


def test_record_new_nested_directory_is_created_for_a_start(fake, tmp_path):
    lines = [MEMINFO] + [s for s in record("llama3-8b_eager")["log_excerpt"] if s]
    fake("llama3-8b_eager", lines)
    target = tmp_path / "newdir" / "sub"
    code, out, err = _verify_record(tmp_path, str(target), "--name", "llama3-8b_eager", "--format", "json")
    assert code == 0, err
    assert (target / "llama3-8b_eager.json").is_file() and (target / "llama3-8b_eager.log").is_file()


# --- H5: standard output closed --------------------------------------------------------------------


def _closed_stdout(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-c", "from kvplan._entry import main; main()", *args],
        preexec_fn=lambda: os.close(1),  # the child starts with file descriptor 1 closed (`>&-`)
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=120,
    )


@pytest.mark.parametrize("args", [
    ("estimate", LLAMA3_8B, "--gpu", "H100", "--format", "json"),
    ("gpus",),
    ("check", "tests/data/check/pass/chat-llama8b.yaml", "--gpu", "H100"),
])
def test_closed_stdout_is_one_error_line(args):
    r = _closed_stdout(*args)
    assert r.stderr == "error: cannot write the output: standard output is closed\n"
    assert r.returncode == 2


def _llama_lines() -> list[str]:
    return list(record("llama3-8b_eager")["log_excerpt"])


def _write_log(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "vllm.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def _verify(tmp_path, log, *extra):
    model = config_dir(tmp_path, "llama3-8b_eager")
    return run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                   "--vllm-version", "0.33.0", *extra)  # 0.26.0 lines naming no version: 16-token blocks


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "-inf"])
def test_result_line_with_impossible_block_count_is_bad_input(tmp_path, value):
    lines = _llama_lines()
    i = next(k for k, s in enumerate(lines) if s.startswith("RESULT "))
    lines[i] = lines[i].replace("num_gpu_blocks=57197", f"num_gpu_blocks={value}")
    log = _write_log(tmp_path, lines)
    line = error_line(*_verify(tmp_path, log, "--max-model-len", "8192", "--enforce-eager"))
    assert line.startswith(f"error: --from-log: {log}:{i + 1}: "), line
    assert "num_gpu_blocks" in line and value in line, line


def test_conflicting_result_lines_are_bad_input(tmp_path):
    lines = _llama_lines()
    i = next(k for k, s in enumerate(lines) if s.startswith("RESULT "))
    lines.append(lines[i].replace("num_gpu_blocks=57197", "num_gpu_blocks=40000"))
    log = _write_log(tmp_path, lines)
    line = error_line(*_verify(tmp_path, log, "--max-model-len", "8192", "--enforce-eager"))
    last = len(lines)
    assert line.startswith(f"error: --from-log: {log}:{last}: "), line
    assert f"line {i + 1}" in line and "57197" in line and "40000" in line, line


def test_repeated_identical_result_lines_are_fine(tmp_path):
    lines = _llama_lines()
    lines += [s for s in lines if s.startswith("RESULT ")]
    code, out, err = _verify(tmp_path, _write_log(tmp_path, lines), "--max-model-len", "8192", "--enforce-eager")
    assert code == 0, (out, err)


@pytest.mark.parametrize("value, word", [("NaN", "nan"), ("-8192", "-8192"), ("Infinity", "inf")])
def test_case_line_with_invalid_engine_arg_names_file_and_line(tmp_path, value, word):
    case = '{"name":"x","model":"m","engine_args":{"enforce_eager":true,"max_model_len":%s},"usage":"llm"}' % value
    lines = ["KVPLAN_CASE " + case, *_llama_lines()]
    log = _write_log(tmp_path, lines)
    line = error_line(*_verify(tmp_path, log))
    assert line.startswith(f"error: --from-log: {log}:1: "), line
    assert "max_model_len" in line and word in line.lower(), line
    assert "--max-model-len" not in line  # a flag the user did not type
