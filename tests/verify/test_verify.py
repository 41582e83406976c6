"""`kvplan verify`: the child protocol, failure handling, records and batches, without a GPU.

A stand-in child (tests/data/logs/fake_vllm_child.py, chosen with $KVPLAN_VERIFY_CHILD) replays
real vLLM 0.26.0 log lines from the calibration records, so the expected measured numbers are
vLLM's own; the predictions come from kvplan's planner and are only checked against them within
the tolerance the command applies.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import run_cli
from kvplan.verify import predict, records, run

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data" / "logs"
CAL = DATA / "vllm-0.26.0-h200"
FAKE_CHILD = DATA / "fake_vllm_child.py"
OLDER = DATA / "older"

# The H200 of the calibration runs (torch.cuda.mem_get_info, ../shared/calibration/README.md).
MEMINFO = "MEMINFO free=149557477376 total=150109880320 name=NVIDIA H200"


def record(name: str) -> dict:
    return json.loads((CAL / f"{name}.json").read_text())


def config_dir(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "models" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(record(name)["config"]))
    return d


def from_log_llama3_8b(tmp_path: Path, log: Path, *extra: str):
    """`kvplan verify --from-log LOG` for the calibration llama3-8b_eager setup (its config, H200,
    LLM-class defaults, 8192 tokens, eager), plus ``extra`` flags; run_cli's (code, out, err)."""
    model = config_dir(tmp_path, "llama3-8b_eager")
    # the 0.26.0 excerpt names no version: predict with 0.33.0, which these tests were written against
    return run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                   "--max-model-len", "8192", "--enforce-eager", "--vllm-version", "0.33.0", *extra)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Set up the stand-in child; returns a function that scripts one case's output."""
    lines_dir = tmp_path / "lines"
    lines_dir.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # verify's temporary logs and configs
    monkeypatch.setenv("KVPLAN_VERIFY_CHILD", str(FAKE_CHILD))
    monkeypatch.setenv("FAKE_LINES_DIR", str(lines_dir))
    monkeypatch.setenv("FAKE_REQUEST_OUT", str(tmp_path / "requests.jsonl"))
    # The replayed lines are vLLM 0.26.0's (16-token blocks); these tests check verify's mechanics
    # and were written against vLLM 0.33.0's rules, which come within the tolerance of them (0.34.0's
    # 64-token blocks do not): predict with 0.33.0 unless a test names a version.
    from kvplan.engines.vllm import versions

    monkeypatch.setattr(versions, "installed_vllm", lambda: "0.33.0")

    def script(name: str, lines: list[str], exit_code: int = 0, sleep: float | None = None) -> None:
        (lines_dir / f"{name}.lines").write_text("\n".join(lines) + "\n")
        (lines_dir / f"{name}.exit").write_text(str(exit_code))
        if sleep is not None:
            (lines_dir / f"{name}.sleep").write_text(str(sleep))

    script.requests = lambda: [json.loads(s) for s in (tmp_path / "requests.jsonl").read_text().splitlines()]
    return script


def started_lines(name: str, *, result: bool = True) -> list[str]:
    lines = [MEMINFO] + [s for s in record(name)["log_excerpt"] if s and (result or not s.startswith("RESULT "))]
    return lines


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- a start that matches -----------------------------------------------------------------------


def test_run_passes_and_sends_the_engine_arguments(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("llama", started_lines("llama3-8b_eager"))
    code, out, err = run_cli(
        "verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama", "--format", "json",
        "--vllm-version", "0.26.0",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["status"] == "pass"
    assert doc["compared_on"] == "num_gpu_blocks"
    assert doc["measured"]["num_gpu_blocks"] == 57_197  # RESULT line of the real start
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152
    assert doc["measured"]["total_bytes"] == 150_109_880_320
    # eager: the available KV bytes are exact (suggestion 119,794,435,175 + 150 MiB, by hand)
    assert doc["measured"]["kv_cache_bytes"] == 119_794_435_175 + 157_286_400
    assert abs(doc["errors"]["num_gpu_blocks"]["pct"]) <= 1.0
    assert "gpu_kv_cache_tokens" in doc["predicted"] and "gpu_kv_cache_tokens" in doc["measured"]
    (req,) = fake.requests()
    assert req["model"] == str(model)
    assert req["engine_args"] == {"max_model_len": 8192, "enforce_eager": True}
    assert req["usage"] == "llm" and req["dummy_weights"] is True and req["expect_vllm"] == "0.26.0"
    assert "vLLM:" in err  # stage lines on stderr when not a terminal


def test_run_table_output(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("llama", started_lines("llama3-8b_eager"))
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama")
    assert code == 0
    for label in ("total (CUDA) GiB", "requested GiB", "weights GiB", "peak activation GiB", "non-torch GiB",
                  "CUDA graphs GiB", "available KV GiB", "num_gpu_blocks", "block_size", "KV cache tokens", "max concurrency"):
        assert label in out
    assert "57,197" in out and "915,152" in out
    assert "PASS" in out


def test_serve_usage_reaches_the_child(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("x", started_lines("llama3-8b_eager"))
    run_cli("verify", str(model), "--dummy-weights", "--usage", "serve", "--max-num-batched-tokens", "16384", "--name", "x")
    (req,) = fake.requests()
    assert req["usage"] == "serve"
    assert req["engine_args"] == {"max_num_batched_tokens": 16384}


def test_bundled_model_is_written_as_a_config_dir(fake, tmp_path):
    fake("qwen", started_lines("llama3-8b_eager"))
    _, out, _ = run_cli("verify", "Qwen/Qwen3-8B", "--dummy-weights", "--max-model-len", "8192", "--name", "qwen", "--format", "json")
    (req,) = fake.requests()
    assert Path(req["model"]).name == "Qwen__Qwen3-8B"
    assert not Path(req["model"]).exists()  # the temporary config directory is removed afterwards
    log = Path(json.loads(out)["log"]).read_text()  # the child saw it: its KVPLAN_CONFIG line
    config_line = next(s for s in log.splitlines() if s.startswith("KVPLAN_CONFIG "))
    assert json.loads(config_line.split(" ", 1)[1])["model_type"] == "qwen3"


# --- mismatch, refusal, environment --------------------------------------------------------------


def test_block_count_off_by_more_than_tolerance_exits_1(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    lines = [s.replace("num_gpu_blocks=57197", "num_gpu_blocks=50000") for s in started_lines("llama3-8b_eager")]
    fake("llama", lines)
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "mismatch"
    assert doc["errors"]["num_gpu_blocks"]["pct"] > 10  # 57,195-ish predicted vs 50,000
    # a wider tolerance accepts it
    fake("llama", lines)
    code, _, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama", "--tolerance", "20")
    assert code == 0


def test_vllm_refusal_prints_error_lines_and_log_path(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    refusal = [s for s in (OLDER / "v1-refusal_pp.log").read_text().splitlines() if not s.startswith("#")]
    lines = [MEMINFO] + refusal + ['KVPLAN_ERROR {"kind": "refused", "type": "ValueError", "message": "To serve at least one request"}']
    fake("llama", lines, exit_code=1)
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama")
    assert code == 1
    assert "REFUSED" in out
    assert "kvplan predicted it would start" in out  # kvplan's plan fits; vLLM said no
    assert "ValueError: To serve at least one request" in out
    assert "log: " in out and ".log" in out


def test_environment_missing_in_child_exits_3(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("llama", ['KVPLAN_ERROR {"kind": "environment", "type": "NoGPU", "message": "no CUDA GPU is visible to torch"}'], exit_code=3)
    code, out, err = run_cli("verify", str(model), "--dummy-weights", "--name", "llama")
    assert code == 3
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [errors[0]] and errors[0].startswith("error: no CUDA GPU is visible to torch")
    assert "Traceback" not in err and out == ""


def test_wrong_vllm_version_in_child_exits_3(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake(
        "llama",
        [MEMINFO, 'KVPLAN_ERROR {"kind": "environment", "type": "VersionMismatch", "message": "vLLM 0.25.1 is installed; kvplan verify checks against vLLM 0.26.0"}'],
        exit_code=3,
    )
    code, _, err = run_cli("verify", str(model), "--dummy-weights", "--name", "llama")
    assert code == 3 and "vLLM 0.25.1 is installed" in err


def test_no_vllm_installed_exits_3(tmp_path, monkeypatch):
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    model = config_dir(tmp_path, "llama3-8b_eager")
    code, out, err = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192")
    assert code == 3
    assert "is not installed" in err and "Traceback" not in err
    assert err.count("\n") <= 2  # one error line plus a hint


def test_child_crash_without_protocol_lines(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("llama", [MEMINFO, "Traceback (most recent call last):", '  File "x.py", line 1', "RuntimeError: CUDA error: an illegal memory access"], exit_code=1)
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--name", "llama")
    assert code == 1
    assert "RuntimeError: CUDA error" in out


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["verify"], "MODEL: missing"),
        (["verify", "x", "--format", "yaml"], "--format"),
        (["verify", "x", "--usage", "batch"], "--usage"),
        (["verify", "x", "--tolerance", "-1"], "--tolerance"),
        (["verify", "x", "--timeout", "0"], "--timeout"),
        (["verify", "--from-log", "a", "--batch", "b"], "--from-log and --batch"),
        (["verify", "--from-log", "/nonexistent/vllm.log"], "--from-log: file not found"),
        (["verify", "--batch", "/nonexistent/cases.yaml"], "--batch: file not found"),
        (["verify", "x", "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["verify", "x", "--max-model-len", "lots"], "--max-model-len"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, needle, fake):
    code, out, err = run_cli(*argv)
    assert code == 2, (out, err)
    assert needle in err
    assert "Traceback" not in err
    assert err.startswith("error:")


def test_bad_model_fails_before_starting_vllm(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    code, _, err = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "100000")
    assert code == 2 and "--max-model-len 100000" in err
    assert not (tmp_path / "requests.jsonl").exists()  # no child was started


# --- the child process goes away ------------------------------------------------------------------


def _wait_for(path: Path, seconds: float = 30) -> str:
    end = time.time() + seconds
    while time.time() < end:
        if path.exists():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear")


def _verify_subprocess(tmp_path: Path, model: Path, extra: list[str], env_extra: dict) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-m", "kvplan", "verify", str(model), "--dummy-weights", "--name", "slow", *extra],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_the_child_and_its_children(fake, tmp_path, sig):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("slow", [MEMINFO, "KVPLAN_STAGE loading weights"], sleep=600)
    pidfile = tmp_path / "pids"
    proc = _verify_subprocess(tmp_path, model, [], {"FAKE_PIDFILE": str(pidfile)})
    try:
        child, grandchild = (int(x) for x in _wait_for(pidfile).split())
        assert alive(child) and alive(grandchild)
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    end = time.time() + 10
    while time.time() < end and (alive(child) or alive(grandchild)):
        time.sleep(0.1)
    assert not alive(child) and not alive(grandchild)


def test_timeout_stops_the_child_and_exits_3(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    fake("slow", [MEMINFO], sleep=600)
    pidfile = tmp_path / "pids"
    proc = _verify_subprocess(tmp_path, model, ["--timeout", "2"], {"FAKE_PIDFILE": str(pidfile)})
    out, err = proc.communicate(timeout=90)
    child, grandchild = (int(x) for x in pidfile.read_text().split())
    assert proc.returncode == 3
    assert "did not finish starting within 2 s" in err and "log:" in err
    end = time.time() + 10
    while time.time() < end and (alive(child) or alive(grandchild)):
        time.sleep(0.1)
    assert not alive(child) and not alive(grandchild)


def test_run_child_kills_a_child_that_ignores_sigterm(tmp_path, monkeypatch):
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('PID', os.getpid(), flush=True)\n"
        "time.sleep(600)\n"
    )
    monkeypatch.setenv("KVPLAN_VERIFY_CHILD", str(script))
    t0 = time.time()
    child = run.run_child({"name": "s", "model": "m"}, log_path=tmp_path / "s.log", timeout_s=1.5, grace_s=1.0)
    assert child.timed_out and child.returncode is None
    assert time.time() - t0 < 30
    pid = int((tmp_path / "s.log").read_text().split()[1])
    assert not alive(pid)


# --- records ------------------------------------------------------------------------------------


def test_record_has_the_calibration_shape(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    exact = {
        "weights": 16_063_177_687,
        "available_kv_cache_memory_bytes": 119_794_435_175 + 157_286_400,
        "num_gpu_blocks": 57_197,
        "block_size": 16,
        "kv_cache_layout": {"num_blocks": 57197, "groups": [{"spec": "FullAttentionSpec", "num_layers": 32}], "padding_layers": 0},
        "model_runner": "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
    }
    env = {"vllm": "0.26.0", "torch": "2.11.0+cu130", "cuda_device": "NVIDIA H200", "cuda_total_bytes": 150109880320, "cuda_free_bytes": 149557477376, "env": {}}
    lines = started_lines("llama3-8b_eager") + ["KVPLAN_ENV " + json.dumps(env), "KVPLAN_EXACT " + json.dumps(exact)]
    fake("llama3-8b_eager", lines)
    out_dir = tmp_path / "records"
    code, out, err = run_cli(
        "verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama3-8b_eager", "--record", str(out_dir)
    )
    assert code == 0, err
    rec = json.loads((out_dir / "llama3-8b_eager.json").read_text())
    calibration_keys = set(record("llama3-8b_eager"))
    assert calibration_keys - set(rec) == set()
    assert {"exact_bytes", "kvplan_prediction"} <= set(rec)
    assert rec["exact_bytes"]["available_kv_cache_memory_bytes"] == 119_951_721_575
    assert rec["kvplan_prediction"]["kv_cache"]["num_gpu_blocks"] > 0
    assert rec["config"] == record("llama3-8b_eager")["config"]
    assert rec["engine_args"] == {"max_model_len": 8192, "enforce_eager": True}
    assert rec["gpu"] == {"name": "NVIDIA H200", "cuda_total_bytes": 150109880320, "cuda_free_bytes_at_start": 149557477376}
    assert rec["num_gpu_blocks"] == 57_197 and rec["gpu_kv_cache_tokens"] == 915_152
    assert rec["measured_gib"] == record("llama3-8b_eager")["measured_gib"]
    assert rec["environment"]["vllm"] == "0.26.0"
    assert rec["padding_layers"] == 0
    assert any(s.startswith("RESULT num_gpu_blocks=57197") for s in rec["log_excerpt"])
    raw_log = (out_dir / "llama3-8b_eager.log").read_text()
    assert raw_log.startswith("KVPLAN_CASE ") and MEMINFO in raw_log
    # the record replays through --from-log to the same measured figures
    code, out, _ = run_cli("verify", "--from-log", str(out_dir / "llama3-8b_eager.json"), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["measured"]["num_gpu_blocks"] == 57_197
    assert doc["measured_source"]["kv_cache_bytes"] == "exact: worker"
    # and so does the raw log (it carries KVPLAN_CASE/KVPLAN_CONFIG/MEMINFO)
    code, out, _ = run_cli("verify", "--from-log", str(out_dir / "llama3-8b_eager.log"), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["measured"]["gpu_kv_cache_tokens"] == 915_152


# --- batches ------------------------------------------------------------------------------------


def test_batch_runs_every_case_and_continues_after_a_failure(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "defaults:\n  usage: llm\n  engine_args: {enforce_eager: true}\n"
        "cases:\n"
        f"  - name: refused\n    model: {model}\n    engine_args: {{max_model_len: 8192}}\n"
        "  - name: ok\n    config: " + json.dumps(record("llama3-8b_eager")["config"]) + "\n    engine_args: {max_model_len: 8192}\n"
    )
    refusal = [s for s in (OLDER / "v1-refusal_pp.log").read_text().splitlines() if not s.startswith("#")]
    fake("refused", [MEMINFO] + refusal, exit_code=1)
    fake("ok", started_lines("llama3-8b_eager"))
    out_dir = tmp_path / "rec"
    code, out, err = run_cli("verify", "--batch", str(cases), "--record", str(out_dir))
    assert code == 1
    reqs = fake.requests()
    assert [r["name"] for r in reqs] == ["refused", "ok"]
    assert reqs[0]["engine_args"] == {"enforce_eager": True, "max_model_len": 8192}
    assert "refused" in out and "pass" in out
    summary = json.loads((out_dir / "batch-summary.json").read_text())
    assert [(s["name"], s["status"]) for s in summary] == [("refused", "refused"), ("ok", "pass")]
    for name in ("refused", "ok"):
        assert (out_dir / f"{name}.json").exists() and (out_dir / f"{name}.log").exists()
    assert json.loads((out_dir / "refused.json").read_text())["outcome"].startswith("refused")


def test_batch_json_output(fake, tmp_path):
    cases = tmp_path / "cases.yaml"
    cases.write_text("- name: ok\n  config: " + json.dumps(record("llama3-8b_eager")["config"]) + "\n  engine_args: {max_model_len: 8192, enforce_eager: true}\n")
    fake("ok", started_lines("llama3-8b_eager"))
    code, out, _ = run_cli("verify", "--batch", str(cases), "--format", "json")
    assert code == 0
    (doc,) = json.loads(out)
    assert doc["status"] == "pass" and doc["measured"]["gpu_kv_cache_tokens"] == 915_152


def test_batch_stops_when_the_environment_is_missing(fake, tmp_path):
    cases = tmp_path / "cases.yaml"
    cfg = json.dumps(record("llama3-8b_eager")["config"])
    cases.write_text(f"cases:\n  - name: a\n    config: {cfg}\n  - name: b\n    config: {cfg}\n")
    fake("a", ['KVPLAN_ERROR {"kind": "environment", "type": "NoGPU", "message": "no CUDA GPU is visible to torch"}'], exit_code=3)
    fake("b", started_lines("llama3-8b_eager"))
    code, out, _ = run_cli("verify", "--batch", str(cases))
    assert code == 3
    assert [r["name"] for r in fake.requests()] == ["a"]


def test_batch_deadline_skips_remaining_cases(fake, tmp_path):
    cases = tmp_path / "cases.yaml"
    cfg = json.dumps(record("llama3-8b_eager")["config"])
    cases.write_text(f"cases:\n  - name: a\n    config: {cfg}\n  - name: b\n    config: {cfg}\n")
    code, out, _ = run_cli("verify", "--batch", str(cases), "--deadline", "1")
    assert code == 1
    assert "skipped" in out
    assert not (tmp_path / "requests.jsonl").exists()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("cases: []\n", "cases"),
        ("cases:\n  - name: a\n    modle: x\n", "cases.0.modle"),
        ("cases:\n  - name: a\n", "give exactly one of 'model' or 'config'"),
        ("cases:\n  - name: a b\n    model: x\n", "cases.0.name"),
        ("cases:\n  - {name: a, model: x}\n  - {name: a, model: y}\n", "appears twice"),
        ("cases:\n  - {name: a, model: x, engine_args: {max_model_len: lots}}\n", "engine_args.max_model_len"),
        ("cases: [\n", "not valid YAML"),
        ("defaults: {usage: offline}\ncases:\n  - {name: a, model: x}\n", "defaults.usage"),
    ],
)
def test_bad_batch_file_exits_2(text, needle, fake, tmp_path):
    cases = tmp_path / "cases.yaml"
    cases.write_text(text)
    code, _, err = run_cli("verify", "--batch", str(cases))
    assert code == 2, err
    assert needle in err and "Traceback" not in err


# --- --from-log ---------------------------------------------------------------------------------


def write_log(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "vllm.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_from_log_026_text_with_model_and_gpu(tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    log = write_log(tmp_path, record("llama3-8b_eager")["log_excerpt"])
    code, out, _ = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                           "--max-model-len", "8192", "--enforce-eager", "--format", "json", "--vllm-version", "0.33.0")
    assert code == 0
    doc = json.loads(out)
    assert doc["mode"] == "from_log"
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152
    assert doc["predicted"]["gpu_kv_cache_tokens"] > 0
    assert doc["measured"]["num_gpu_blocks"] == 57_197


def test_from_log_026_says_num_gpu_blocks_is_not_logged(tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    log = write_log(tmp_path, [s for s in record("llama3-8b_eager")["log_excerpt"] if not s.startswith("RESULT")])
    code, out, _ = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                           "--max-model-len", "8192", "--enforce-eager", "--format", "json")
    doc = json.loads(out)
    assert doc["measured"]["num_gpu_blocks"] is None
    assert "gives the KV cache size in tokens, not num_gpu_blocks" in doc["missing"]["num_gpu_blocks"]
    assert doc["predicted"]["num_gpu_blocks"] > 0
    assert doc["compared_on"] == "gpu_kv_cache_tokens"
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152
    assert code == 0
    code, out, _ = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                           "--max-model-len", "8192", "--enforce-eager")
    assert "not num_gpu_blocks" in out


def test_from_log_reads_engine_args_from_non_default_args(tmp_path):
    # llama3-8b_eager_mbt8k_seqs256: non-default args max_num_batched_tokens=8192, max_num_seqs=256
    model = config_dir(tmp_path, "llama3-8b_eager_mbt8k_seqs256")
    rec = record("llama3-8b_eager_mbt8k_seqs256")
    log = write_log(tmp_path, [s for s in rec["log_excerpt"] if not s.startswith("CASE ")])
    code, out, _ = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--format", "json",
                           "--vllm-version", "0.33.0")  # the excerpt names no version; 16-token blocks
    doc = json.loads(out)
    assert doc["usage"] == "llm"  # disable_log_stats in the non-default args
    assert doc["engine_args"]["max_num_seqs"] == 256
    assert doc["predicted"]["max_num_batched_tokens"] == 8192 == doc["measured"]["max_num_batched_tokens"]
    assert doc["predicted"]["max_num_seqs"] == 256 == doc["measured"]["max_num_seqs"]
    assert code == 0


def test_from_log_unresolvable_model_asks_for_model(tmp_path):
    rec = record("llama3-8b_eager_mbt16k")
    log = write_log(tmp_path, rec["log_excerpt"])
    code, _, err = run_cli("verify", "--from-log", str(log), "--gpu", "H200")
    assert code == 2
    assert "calib/models/llama3-8b" in err and "MODEL" in err


def test_from_log_without_gpu_memory_needs_gpu(tmp_path):
    code, _, err = run_cli("verify", "Qwen/Qwen3-8B", "--from-log", str(OLDER / "v1-0.10_enginecore-prefix.log"))
    assert code == 2 and "--gpu" in err


def test_from_log_gpu_from_the_log_total(tmp_path):
    # the 0.26 excerpt says 139.8 GiB; the bundled H200 profile matches it within the rounding
    model = config_dir(tmp_path, "llama3-8b_eager")
    log = write_log(tmp_path, record("llama3-8b_eager")["log_excerpt"])
    code, out, _ = run_cli("verify", str(model), "--from-log", str(log), "--usage", "llm", "--enforce-eager",
                           "--max-model-len", "8192", "--format", "json", "--vllm-version", "0.33.0")
    doc = json.loads(out)
    assert doc["predicted"]["total_bytes"] == 150_109_880_320
    assert code == 0


def test_from_log_v0_refusal(tmp_path):
    code, out, _ = run_cli("verify", "meta-llama/Llama-3.1-8B-Instruct", "--from-log", str(OLDER / "v0.6.4_llama31-8b_rtx3090_29k.log"),
                           "--gpu", "rtx-3090", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["predicted"]["max_model_len"] == 29_000  # from "Maximum concurrency for 29000 tokens"
    assert doc["status"] == "refused"
    assert doc["refusal"]["kv_capacity_tokens"] == 23_648
    assert doc["measured"]["num_gpu_blocks"] == 1478
    assert doc["measured"]["kv_cache_bytes"] == round(2.89 * (1 << 30))


def test_from_log_not_a_vllm_log(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("nothing to see\n")
    code, _, err = run_cli("verify", "x", "--from-log", str(p), "--gpu", "H200")
    assert code == 2 and "no vLLM start-up lines" in err


def test_from_log_old_version_note(tmp_path):
    code, out, _ = run_cli("verify", "Qwen/Qwen3-8B", "--from-log", str(OLDER / "v1-0.13_serve_lora-args.log"), "--gpu", "H100", "--format", "json")
    doc = json.loads(out)
    assert doc["vllm_version"] == "0.13.0"
    assert any("vLLM 0.13.0" in n for n in doc["notes"])
    # enable_lora / max_lora_rank are modelled now (capacity/addons.py): the evidence names the
    # LoRA rule as unchecked instead of a note calling the arguments unmodelled
    assert not any("enable_lora" in n for n in doc["notes"])
    assert any("LoRA" in u for u in doc["evidence"]["unchecked"])
    assert doc["status"] == "incomplete" and code == 1


# --- pieces ---------------------------------------------------------------------------------------


def test_engine_kwargs_to_options():
    opts, unmodelled = predict.engine_kwargs_to_options(
        {"max_model_len": "auto", "dtype": "torch.bfloat16", "kv_cache_dtype": "auto", "enforce_eager": True,
         "served_model_name": ["x"], "cpu_offload_gb": 4, "num_gpu_blocks_override": 100, "model": "m"}
    )
    # cpu_offload_gb is modelled (capacity/addons.py); num_gpu_blocks_override is not
    assert opts == {"max_model_len": -1, "dtype": "bfloat16", "enforce_eager": True, "cpu_offload_gb": 4.0}
    assert unmodelled == ["num_gpu_blocks_override"]


def test_options_to_engine_kwargs():
    assert predict.options_to_engine_kwargs(
        {"tensor_parallel_size": 1, "max_model_len": 32768, "kv_cache_dtype": "fp8", "dtype": "auto", "enforce_eager": False}
    ) == {"max_model_len": 32768, "kv_cache_dtype": "fp8"}


def test_default_name():
    assert records.default_name("Qwen/Qwen3-8B", {"max_model_len": 32768, "enforce_eager": True}, "llm") == "qwen3-8b_mml32768_eager"
    assert records.default_name("/m/llama/", {}, "serve") == "llama_serve"


def test_verify_imports_no_torch_vllm_or_transformers(tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    log = write_log(tmp_path, record("llama3-8b_eager")["log_excerpt"])
    code = (
        "import sys\n"
        "from helpers import run_cli\n"
        f"rc, out, err = run_cli('verify', {str(model)!r}, '--from-log', {str(log)!r}, '--gpu', 'H200', '--vllm-version', '0.33.0')\n"
        "assert rc == 0, err\n"
        "import kvplan.verify, kvplan.cli.verify, kvplan.verify.log, kvplan.verify.child\n"
        "bad = [m for m in ('torch', 'vllm', 'transformers') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""


def test_batch_skip_existing_resumes(fake, tmp_path):
    cfg = json.dumps(record("llama3-8b_eager")["config"])
    cases = tmp_path / "cases.yaml"
    cases.write_text(f"cases:\n  - name: a\n    config: {cfg}\n    engine_args: {{max_model_len: 8192, enforce_eager: true}}\n"
                     f"  - name: b\n    config: {cfg}\n    engine_args: {{max_model_len: 8192, enforce_eager: true}}\n")
    fake("a", started_lines("llama3-8b_eager"))
    fake("b", started_lines("llama3-8b_eager"))
    out_dir = tmp_path / "rec"
    code, _, _ = run_cli("verify", "--batch", str(cases), "--record", str(out_dir))
    assert code == 0 and len(fake.requests()) == 2
    (out_dir / "b.json").unlink()
    code, out, _ = run_cli("verify", "--batch", str(cases), "--record", str(out_dir), "--skip-existing")
    assert code == 0
    assert [r["name"] for r in fake.requests()] == ["a", "b", "b"]  # only b ran again
    summary = json.loads((out_dir / "batch-summary.json").read_text())
    assert [(s["name"], s["status"], s["reused"]) for s in summary] == [("a", "pass", True), ("b", "pass", False)]


def test_skip_existing_needs_batch_and_record(fake):
    code, _, err = run_cli("verify", "x", "--skip-existing")
    assert code == 2 and "--skip-existing" in err


def test_crash_after_sizing_the_kv_cache_is_a_failed_start(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    lines = started_lines("llama3-8b_eager", result=False) + ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    fake("llama", lines, exit_code=1)
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager", "--name", "llama", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "refused"
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152  # what it printed before failing
    assert any("after sizing the KV cache" in n for n in doc["notes"])


def test_bad_record_name(fake, tmp_path):
    model = config_dir(tmp_path, "llama3-8b_eager")
    code, _, err = run_cli("verify", str(model), "--dummy-weights", "--name", "../x")
    assert code == 2 and "--name" in err


def test_from_log_of_a_real_child_log_needs_nothing_else():
    # A raw log of kvplan's child on the H200 carries the case, the config and the GPU memory.
    log = DATA.parent / "vllm-0.26.0-h200" / "llama3-8b_eager.log"
    code, out, _ = run_cli("verify", "--from-log", str(log), "--format", "json")
    doc = json.loads(out)
    assert doc["usage"] == "llm" and doc["vllm_version"] == "0.26.0"
    assert doc["engine_args"]["max_model_len"] == 8192 and doc["engine_args"]["enforce_eager"] is True
    assert doc["measured"]["num_gpu_blocks"] == 57_197
    assert doc["measured"]["kv_cache_bytes"] == 119_951_721_575
    assert doc["measured"]["non_torch_bytes"] == 241_172_480
    assert doc["measured_source"]["non_torch_bytes"] == "exact: worker"
    assert doc["predicted"]["total_bytes"] == 150_109_880_320  # the GPU the child measured
    assert code in (0, 1)


def test_verify_md_exit_1_covers_predicted_refusals():
    text = (Path(__file__).parents[2] / "docs" / "verify.md").read_text()
    row = next(s for s in text.splitlines() if s.startswith("| 1 |"))
    assert "kvplan predicted it would start" not in row
    assert "whether or not kvplan predicted" in row
