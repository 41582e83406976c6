"""benchmarks/device/bench.sh, run as on the GPU machine but against the fake vLLM server
(tests/verify/fake_vllm_server.py through $KVPLAN_BENCH_SERVER): one tarball holding the
record, the server log and the progress lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import TINY_LLAMA

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "device" / "bench.sh"
FAKE = ROOT / "tests" / "verify" / "fake_vllm_server.py"


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_bench_sh_bundles_record_log_and_progress(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(TINY_LLAMA))
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), GRID="quick", SECONDS_PER_POINT="0.2", KVPLAN_BENCH_SERVER=str(FAKE),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    bindir = Path(sys.executable).parent
    if not (bindir / "python3").exists():
        pytest.skip("the script calls python3; this interpreter's folder has none")
    p = subprocess.run(["bash", str(SCRIPT), str(model), "tiny", "--max-model-len", "2048"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    with tarfile.open(out / "tiny.tar.gz") as tar:
        names = sorted(n.lstrip("./") for n in tar.getnames() if n not in (".", "./"))
        assert names == ["tiny.json", "tiny.log", "tiny.stderr"]
        rec = json.loads(tar.extractfile("./tiny.json").read())
        progress = tar.extractfile("./tiny.stderr").read().decode()
    assert rec["kind"] == "kvplan-bench" and len(rec["points"]) == 4
    assert rec["engine_args"] == {"max_model_len": 2048}
    assert "closed-c4-32x8:" in progress and "vLLM stopped" in progress
    assert not (out / "tiny.d").exists()
