"""What the CLI does with its standard streams and with names the file system refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"
# Linux refuses a path component over NAME_MAX (255 bytes) with ENAMETOOLONG.
LONG = "a/" + "b" * 5000


def _closed_stderr(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-c", "from kvplan._entry import main; main()", *args],
        preexec_fn=lambda: os.close(2),  # the child starts with file descriptor 2 closed (`2>&-`)
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=120,
    )


def test_closed_stderr_error_is_dropped_not_written_to_stdout():
    # a bad flag: the error line must not land in the answer; exit code 2 is kept
    r = _closed_stderr("estimate", LLAMA3_8B, "--gpu", "H100", "--max-model-len", "banana", "--format", "json")
    assert r.returncode == 2
    assert r.stdout == ""


def test_closed_stderr_json_stays_json():
    r = _closed_stderr("estimate", LLAMA3_8B, "--gpu", "H100", "--max-model-len", "8192", "--format", "json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["model"]


def test_closed_stderr_warning_is_dropped_not_written_to_stdout():
    # 20% of an 80 GB H100 (~15.8 GiB) cannot hold Llama-3-8B's 14.96 GiB of bf16 weights plus
    # activation: the "does not start" warning goes to stderr; with stderr closed stdout is the
    # serve line only
    r = _closed_stderr("estimate", LLAMA3_8B, "--gpu", "H100", "--gpu-memory-utilization", "0.2", "--format", "serve")
    assert r.returncode == 1
    assert r.stdout.startswith("vllm serve ") and len(r.stdout.splitlines()) == 1


@pytest.mark.parametrize("command", ["estimate", "plan", "verify"])
def test_model_name_too_long_is_one_line(command):
    code, out, err = run_cli(command, LONG)
    assert code == 2
    assert "Traceback" not in err and "File name too long" in err
    assert err.startswith("error: ") and len(err.splitlines()[0]) < 200


def test_gpu_profiles_name_too_long_is_one_line():
    code, out, err = run_cli("estimate", LLAMA3_8B, "--gpu-profiles", LONG)
    assert code == 2
    assert err.startswith("error: --gpu-profiles ") and "File name too long" in err
    assert len(err.splitlines()) == 1


def test_check_model_value_too_long_is_a_finding(tmp_path):
    cfg = tmp_path / "vllm.yaml"
    cfg.write_text(f"model: {LONG}\n")
    code, out, err = run_cli("check", str(cfg), "--gpu", "H100")
    assert code == 2
    assert "Traceback" not in out + err
    text = " ".join(out.split())  # the table wraps its lines (never inside a word: the id stays whole)
    assert "model-unresolved" in text and "File name too long" in text
