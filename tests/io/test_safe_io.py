"""What kvplan reads and writes (the guarded reads and writes of safe_io, through every command).

Reads: every user file is read only when it is a regular file (a FIFO would hang the read, a
device such as /dev/zero never ends) and never past its cap, even when ``stat`` says 0.
Writes (--junit-xml, --plot): a FIFO, device or directory is never replaced, a symbolic link is
followed to its file, and an unwritable directory fails before anything is printed.

FIFOs are made with os.mkfifo under tmp_path (removed with it). Commands that could block on a
FIFO run in a child process with a timeout, so a regression fails instead of hanging the suite.
Nothing here writes under /dev; /dev/zero and /dev/null are only stat-ed (and refused).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.io import files as safe_io
from kvplan.io.files import InputError
from tests.helpers import run_cli

REPO = Path(__file__).resolve().parents[2]
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # bundled


def kvplan(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m kvplan ARGS` in a child process (a blocking open cannot hang the suite)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The error line of a refused command: exit 2, no traceback, nothing on stdout."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path: Path):
    def make(name: str) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p)
        return p

    return make


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


# --- safe_io itself ---------------------------------------------------------------------------


@needs_fifo
def test_read_text_refuses_a_fifo_without_opening_it_for_a_blocking_read(fifo):
    with pytest.raises(InputError) as exc:
        safe_io.read_text(fifo("pipe.yaml"))
    assert exc.value.message == "is a FIFO (named pipe), not a regular file; kvplan reads only regular files"
    assert exc.value.kind == "not-regular"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_read_text_refuses_a_device():
    with pytest.raises(InputError) as exc:
        safe_io.read_text(Path("/dev/zero"))
    assert exc.value.message.startswith("is a character device, not a regular file")


def test_read_text_refuses_a_directory(tmp_path):
    with pytest.raises(InputError) as exc:
        safe_io.read_text(tmp_path)
    assert exc.value.message == "is a directory, not a file"


def test_read_stops_at_the_cap_plus_one_byte_when_stat_says_zero(tmp_path, monkeypatch):
    """A file whose size stat does not know (/proc, a growing file): the read itself is capped."""
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * 5000)
    asked = []
    real_open = safe_io.open_regular

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def fileno(self):
            return self.fh.fileno()

        def read(self, n=-1):
            asked.append(n)
            return self.fh.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    real_fstat = os.fstat
    monkeypatch.setattr(safe_io, "open_regular", lambda p: Spy(real_open(p)))
    monkeypatch.setattr(
        safe_io.os, "fstat", lambda fd: os.stat_result((stat.S_IFREG | 0o644,) + tuple(real_fstat(fd))[1:6] + (0, 0, 0, 0))
    )
    with pytest.raises(InputError) as exc:
        safe_io.read_bytes(big, 1000)
    assert asked == [1001]  # never more than cap + 1
    assert exc.value.kind == "too-large"
    assert exc.value.message == "file is over 1,000 bytes; kvplan reads at most 1,000 bytes per file"


# --- kvplan check -----------------------------------------------------------------------------


@needs_fifo
def test_check_refuses_a_fifo_with_one_parse_error(fifo):
    p = fifo("deploy.yaml")
    proc = kvplan("check", str(p), "--format", "json")
    assert proc.returncode == 2, proc.stderr
    doc = json.loads(proc.stdout)
    (d,) = doc["diagnostics"]
    assert d["check_id"] == "parse-error"
    assert d["message"] == "is a FIFO (named pipe), not a regular file; kvplan reads only regular files"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_check_refuses_dev_zero_at_once():
    proc = kvplan("check", "/dev/zero", "--format", "json", timeout=20)
    assert proc.returncode == 2
    (d,) = json.loads(proc.stdout)["diagnostics"]
    assert d["file"] == "/dev/zero" and "character device" in d["message"]


@needs_fifo
def test_manifest_config_that_is_a_fifo_is_one_diagnostic_and_the_rest_is_checked(tmp_path, fifo):
    fifo("deploy/chat.yaml")
    (tmp_path / "kvplan.yaml").write_text(
        "deployments:\n"
        "  - name: chat\n    config: deploy/chat.yaml\n    gpu: H100\n"
        f"  - name: tiny\n    command: vllm serve {LLAMA} --max-model-len 2048\n    gpu: H100\n",
        encoding="utf-8",
    )
    proc = kvplan("check", "kvplan.yaml", "--format", "json", cwd=tmp_path)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2
    errors = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert [(d["check_id"], d["file"]) for d in errors] == [("parse-error", "deploy/chat.yaml")]
    assert "FIFO" in errors[0]["message"] and "deployment 'chat'" in errors[0]["message"]
    assert [d["name"] for d in doc["files"][0]["deployments"]] == ["tiny"]


# --- --gpu-profiles, --workload, config.json --------------------------------------------------


@needs_fifo
def test_gpu_profiles_fifo_is_one_line(fifo):
    p = fifo("gpus.yaml")
    line = one_error_line(kvplan("estimate", LLAMA, "--gpu-profiles", str(p)))
    assert line == f"error: --gpu-profiles {p}: is a FIFO (named pipe), not a regular file; kvplan reads only regular files"


def test_gpu_profiles_empty_name_says_so():
    code, out, err = run_cli("estimate", LLAMA, "--gpu-profiles", "")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: --gpu-profiles: empty file name"


def test_gpu_profiles_negative_memory_is_plain_words(tmp_path):
    p = tmp_path / "gpus.yaml"
    p.write_text("gpus:\n  - id: tiny-gpu\n    memory_bytes: -5\n", encoding="utf-8")
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "tiny-gpu", "--gpu-profiles", str(p))
    assert code == 2
    assert err.splitlines()[0] == (
        f"error: --gpu-profiles {p}: gpus[0].memory_bytes (id 'tiny-gpu'): must be greater than 0 (got -5)"
    )
    assert "Input should" not in err


@needs_fifo
def test_workload_fifo_is_one_line(fifo):
    p = fifo("w.csv")
    line = one_error_line(kvplan("estimate", LLAMA, "--workload", str(p)))
    assert line == f"error: --workload: {p}: is a FIFO (named pipe), not a regular file; kvplan reads only regular files"


@needs_fifo
def test_a_fifo_named_config_json_is_named_as_such(tmp_path, fifo):
    fifo("model/config.json")
    line = one_error_line(kvplan("estimate", str(tmp_path / "model")))
    assert line == (
        f"error: {tmp_path / 'model' / 'config.json'}: is a FIFO (named pipe), not a regular file; "
        "kvplan reads only regular files"
    )


def test_missing_shards_warning_is_grammatical():
    from kvplan.sources.local import missing_shards_text

    assert missing_shards_text(["model-00002-of-00004.safetensors"]) == (
        "model-00002-of-00004.safetensors, a shard of the series, is not there"
    )
    assert missing_shards_text(["model-00002-of-00004.safetensors", "b", "c"]) == (
        "model-00002-of-00004.safetensors and 2 more shards of the series are not there"
    )
    assert missing_shards_text(["a", "b"]) == "a and 1 more shard of the series are not there"


# --- verify --from-log / --batch --------------------------------------------------------------


@needs_fifo
def test_from_log_fifo_is_one_line(fifo):
    p = fifo("vllm.log")
    line = one_error_line(kvplan("verify", "--from-log", str(p)))
    assert line == f"error: --from-log: {p}: is a FIFO (named pipe), not a regular file; kvplan reads only regular files"


def test_from_log_over_64_mib_is_refused_from_its_size(tmp_path):
    p = tmp_path / "huge.log"
    with open(p, "wb") as fh:  # sparse: 64 MiB + 1 byte without writing them
        fh.truncate(64 * 2**20 + 1)
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        f"error: --from-log: {p}: file is 67,108,865 bytes; kvplan reads at most 67,108,864 bytes (64 MiB) per file"
    )


def test_from_log_with_record_is_refused_not_ignored(tmp_path):
    log = REPO / "tests/data/logs/older/v0.8_v0-engine_h100_cuda-blocks.log"
    code, out, err = run_cli("verify", LLAMA, "--from-log", str(log), "--record", str(tmp_path / "rec"))
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith("error: --record: not used with --from-log")
    assert not (tmp_path / "rec").exists()


@pytest.mark.parametrize(
    "name", ["v0.8_v0-engine_h100_cuda-blocks.log", "v0.6.4_llama31-8b_rtx3090_20k.log"]
)
def test_from_log_of_the_v0_engine_carries_the_version_note(name):
    log = REPO / "tests/data/logs/older" / name
    code, out, err = run_cli("verify", LLAMA, "--from-log", str(log), "--format", "json", "--vllm-version", "0.26.0")
    doc = json.loads(out)
    assert doc["vllm_version"] is None
    notes = [n for n in doc["notes"] if "V0 engine" in n]
    assert len(notes) == 1 and "0.26.0 rules" in notes[0]


def test_from_log_of_vllm_0_26_has_no_version_note():
    record = REPO / "tests/data/logs/vllm-0.26.0-h200/llama3-8b_eager.json"
    code, out, err = run_cli("verify", "--from-log", str(record), "--format", "json")
    doc = json.loads(out)
    assert doc["vllm_version"] == "0.26.0"
    assert not any("V0 engine" in n or "the log is from vLLM" in n for n in doc["notes"])


def test_batch_with_deeply_nested_yaml_is_one_line(tmp_path):
    p = tmp_path / "deep2.yaml"
    p.write_text("cases: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    code, out, err = run_cli("verify", "--batch", str(p))
    assert code == 2 and out == ""
    assert "Traceback" not in err and "RecursionError" not in err
    assert err.splitlines()[0].startswith(f"error: --batch: {p}:1: not valid YAML")


@needs_fifo
def test_batch_fifo_is_one_line(fifo):
    p = fifo("cases.yaml")
    line = one_error_line(kvplan("verify", "--batch", str(p)))
    assert line == f"error: --batch: {p}: is a FIFO (named pipe), not a regular file; kvplan reads only regular files"


# --- --junit-xml and --plot never replace what is not a regular file -------------------------


def _pass_config(tmp_path: Path) -> str:
    p = tmp_path / "ok.yaml"
    p.write_text(f"model: {LLAMA}\nmax-model-len: 8192\n", encoding="utf-8")
    return str(p)


@needs_fifo
def test_junit_xml_refuses_a_fifo_and_leaves_it(tmp_path, fifo):
    target = fifo("report.xml")
    line = one_error_line(kvplan("check", _pass_config(tmp_path), "--gpu", "H100", "--junit-xml", str(target)))
    assert line == (
        f"error: --junit-xml: {target} is a FIFO (named pipe), not a regular file; kvplan writes only regular files"
    )
    assert stat.S_ISFIFO(os.lstat(target).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_junit_xml_refuses_a_device_node(tmp_path):
    link = tmp_path / "null.xml"
    link.symlink_to("/dev/null")  # through a link: nothing under /dev is opened for writing
    code, out, err = run_cli("check", _pass_config(tmp_path), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (
        f"error: --junit-xml: {link} is a character device (a symbolic link to /dev/null), not a regular file; "
        "kvplan writes only regular files"
    )
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_junit_xml_through_a_symlink_writes_the_target_and_keeps_the_link(tmp_path):
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "junit.xml"
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "junit-link.xml"
    link.symlink_to(real)
    code, out, err = run_cli("check", _pass_config(tmp_path), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8").startswith('<?xml version="1.0"')
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["junit.xml"]  # no temporary file left


def test_junit_xml_to_a_dangling_symlink_is_refused(tmp_path):
    # Following a dangling link once created its target anywhere (even /nonexistent).
    link = tmp_path / "junit.xml"
    link.symlink_to(tmp_path / "made.xml")
    code, out, err = run_cli("check", _pass_config(tmp_path), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2, err
    assert "broken symbolic link" in err and out == ""
    assert link.is_symlink() and not (tmp_path / "made.xml").exists()


def _unwritable_dir() -> str | None:
    """An existing directory where no file can be created even by root (/sys, /proc)."""
    import tempfile

    for d in ("/sys", "/proc"):
        if not os.path.isdir(d):
            continue
        try:
            fd, p = tempfile.mkstemp(dir=d)
        except OSError:
            return d
        os.close(fd)
        os.unlink(p)
    return None


@pytest.mark.skipif(_unwritable_dir() is None, reason="no directory where creating a file fails")
def test_junit_xml_in_an_unwritable_existing_directory_fails_before_the_report():
    d = _unwritable_dir()
    code, out, err = run_cli("check", str(REPO / "tests/data/check/pass/chat-llama8b.yaml"), "--gpu", "H100",
                             "--junit-xml", f"{d}/kvplan-junit.xml")
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(f"error: --junit-xml: cannot write {d}/kvplan-junit.xml: directory {d} is not writable")


@pytest.mark.skipif(_unwritable_dir() is None, reason="no directory where creating a file fails")
@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_plot_in_an_unwritable_existing_directory_fails_before_the_report(command):
    d = _unwritable_dir()
    args = [command, LLAMA, "--plot", f"{d}/x.png"] + (["--gpus", "H100"] if command == "plan" else [])
    code, out, err = run_cli(*args)
    assert code == 2 and out == "", out
    assert err.splitlines()[0].startswith(f"error: --plot: cannot write {d}/x.png: directory {d} is not writable")


@needs_fifo
def test_plot_refuses_a_fifo_and_a_directory(tmp_path, fifo):
    pytest.importorskip("matplotlib")
    target = fifo("x.png")
    code, out, err = run_cli("estimate", LLAMA, "--plot", str(target))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == f"error: --plot: {target} is a FIFO (named pipe), not a regular file; kvplan writes only regular files"
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    (tmp_path / "d.png").mkdir()
    code, out, err = run_cli("estimate", LLAMA, "--plot", str(tmp_path / "d.png"))
    assert code == 2 and out == "" and "is a directory" in err.splitlines()[0]


def test_plot_through_a_symlink_writes_the_target(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "sl").mkdir()
    real = tmp_path / "real.png"
    link = tmp_path / "sl" / "link.png"
    real.write_bytes(b"old")  # an existing target is rewritten through the link
    link.symlink_to(real)
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "H100", "--max-model-len", "8192", "--plot", str(link))
    assert code == 0, err
    assert link.is_symlink() and real.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
