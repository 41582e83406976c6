"""benchmarks/device/build.py (the one device runner's batch builder, benchmarks/device/README.md):
it lays out a batch from a small case file, refuses a malformed one without writing, and every
committed case file under benchmarks/device/cases/ parses and names configs that exist."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE = ROOT / "benchmarks" / "device"
_spec = importlib.util.spec_from_file_location("device_build", DEVICE / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

TARGET = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2, "_note": "dropped"}
DRAFT = {"architectures": ["Eagle3LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1}


def _case_file(tmp_path: Path, cases: list[dict]) -> Path:
    p = tmp_path / "cases.json"
    p.write_text(json.dumps({"about": "test", "cases": cases}))
    return p


def test_build_lays_out_a_start_with_a_draft_and_a_bench_case(tmp_path):
    (tmp_path / "target.json").write_text(json.dumps({"source": "a record", "config": TARGET}))
    (tmp_path / "draft.json").write_text(json.dumps(DRAFT))
    cases = [
        {"name": "eagle", "vllm": "0.34.0", "model": str(tmp_path / "target.json"), "override": {"num_hidden_layers": 4},
         "draft": str(tmp_path / "draft.json"), "env": {"VLLM_USE_DEEP_GEMM": "0"},
         "engine_args": {"enforce_eager": True, "speculative_config": {"method": "eagle3", "model": "@draft",
                                                                       "num_speculative_tokens": 3}}},
        {"name": "srv", "kind": "bench", "vllm": "0.26.0", "config": {**DRAFT, "_hf_quant_config": {"quant_algo": "FP8"}},
         "grid": "quick", "serve_flags": ["--max-model-len", "4096"], "bench_flags": ["--bench-seconds", "5"]},
    ]
    out = tmp_path / "batch"
    assert build.main([str(_case_file(tmp_path, cases)), "--out", str(out)]) == 0

    assert sorted(p.name for p in out.iterdir()) == ["bench.sh", "eagle", "queue.txt", "requests.json", "runner.sh", "srv"]
    assert (out / "queue.txt").read_text() == "eagle\nsrv\n"
    # the target: the record's "config", "_" keys dropped, the override applied
    assert json.loads((out / "eagle" / "config.json").read_text()) == {
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 4}
    assert json.loads((out / "eagle" / "draft" / "config.json").read_text()) == DRAFT
    # ModelOpt's quantization file goes beside config.json, not into it
    assert json.loads((out / "srv" / "config.json").read_text()) == DRAFT
    assert json.loads((out / "srv" / "hf_quant_config.json").read_text()) == {"quant_algo": "FP8"}

    req = json.loads((out / "requests.json").read_text())
    assert req["eagle"] == {
        "kind": "start", "vllm": "0.34.0", "env": {"VLLM_USE_DEEP_GEMM": "0"}, "timeout": 240,
        "request": {"name": "eagle", "model": "/tmp/dev/batch/eagle", "usage": "llm", "dummy_weights": True,
                    "expect_vllm": "0.34.0",
                    "engine_args": {"enforce_eager": True, "speculative_config": {
                        "method": "eagle3", "model": "/tmp/dev/batch/eagle/draft", "num_speculative_tokens": 3}}}}
    assert req["srv"] == {"kind": "bench", "vllm": "0.26.0", "env": {}, "timeout": 560, "model": "/tmp/dev/batch/srv",
                          "grid": "quick", "args": ["--bench-seconds", "5", "--max-model-len", "4096"]}
    assert (out / "runner.sh").read_text() == (DEVICE / "runner.sh").read_text()


@pytest.mark.parametrize("bad, says", [
    ({"name": "a", "vllm": "0.34.0", "model": "model_specs/x.json", "engine_arg": {}}, "unknown key 'engine_arg'"),
    ({"name": "a", "vllm": "0.34.0", "model": "model_specs/x.json", "kind": "bench"}, "needs a grid"),
    ({"name": "a", "vllm": "0.34.0", "model": "model_specs/x.json", "config": {}}, "exactly one of model"),
    ({"name": "a", "vllm": "latest", "config": {}}, "vllm must be a version"),
    ({"name": "a", "vllm": "0.34.0", "config": {}, "draft": "d.json", "engine_args": {}}, "@draft"),
    ({"name": "a", "vllm": "0.34.0", "model": "no/such/config.json"}, "no/such/config.json: no such file"),
])
def test_a_malformed_case_is_refused_and_nothing_is_written(tmp_path, capsys, bad, says):
    out = tmp_path / "batch"
    assert build.main([str(_case_file(tmp_path, [bad])), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "case a" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_repeated_name_is_refused(tmp_path):
    c = {"name": "a", "vllm": "0.34.0", "config": {}}
    with pytest.raises(build.CaseError, match="case a: name already used"):
        build.load_cases([str(_case_file(tmp_path, [c, c]))])


@pytest.mark.parametrize("path", sorted((DEVICE / "cases").glob("*.json")), ids=lambda p: p.name)
def test_every_committed_case_file_parses_and_names_configs_in_the_repo(path):
    cases = build.load_cases([str(path)])
    assert cases and json.loads(path.read_text())["about"]
    for c in cases:
        for key in ("model", "draft"):
            if key in c:  # inside the repository (CI has no ../shared), and there
                assert not c[key].startswith(("/", "..")) and (ROOT / c[key]).is_file(), (c["name"], c[key])
        if c["kind"] == "bench":
            from kvplan.verify.bench.workload import GRIDS
            assert c["grid"] in GRIDS, c["name"]
    configs, drafts = build.resolve(cases)
    # a config.json: an architecture or at least a model_type (p-jamba-8L's bundled spec has no architectures,
    # which is why vLLM started it as a pooling model: tests/data/logs/device-h200-2026-11-29/README.md)
    assert all(cfg.get("architectures") or cfg.get("model_type") for cfg in configs.values())
    assert len(drafts) == sum("draft" in c for c in cases)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_runner_and_bench_scripts_parse():
    for f in ("runner.sh", "bench.sh"):
        subprocess.run(["bash", "-n", str(DEVICE / f)], check=True)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None or shutil.which("setsid") is None,
                    reason="needs bash, timeout and setsid")
def test_runner_runs_a_bench_and_a_start_case_in_queue_order(tmp_path):
    """runner.sh end to end on this machine, under $KVPLAN_DEVICE_TMP, with vLLM 0.26.0 marked installed
    (an empty site folder) and the fake OpenAI server (tests/verify/fake_vllm_server.py through
    $KVPLAN_BENCH_SERVER) in vLLM's place: the bench case goes through bench.sh and leaves one tarball
    (record, server log, progress lines); the start case runs kvplan.verify.child, which stops at
    `import torch` (no torch here) and says so in its log. (This test replaces
    tests/verify/bench/test_bench_device_script.py, which ran bench.sh alone.)"""
    import os
    import sys
    import tarfile

    from helpers import TINY_LLAMA

    bindir = Path(sys.executable).parent
    if not (bindir / "python3").exists():
        pytest.skip("the runner calls python3; this interpreter's folder has none")
    dev = tmp_path / "t"
    (dev / "site-0.26.0").mkdir(parents=True)
    (dev / "site-0.26.0.READY").touch()
    cases = [
        {"name": "tiny", "kind": "bench", "vllm": "0.26.0", "config": TINY_LLAMA, "grid": "quick",
         "serve_flags": ["--max-model-len", "2048"], "bench_flags": ["--bench-seconds", "0.2"], "timeout": 60},
        {"name": "start", "vllm": "0.26.0", "config": TINY_LLAMA, "timeout": 60,
         "engine_args": {"max_model_len": 2048, "enforce_eager": True}},
    ]
    batch = tmp_path / "batch"
    assert build.main([str(_case_file(tmp_path, cases)), "--out", str(batch), "--remote", str(dev / "dev" / "batch")]) == 0
    env = dict(os.environ, KVPLAN_DEVICE_TMP=str(dev), KVPLAN_BENCH_SERVER=str(ROOT / "tests" / "verify" / "fake_vllm_server.py"),
               PATH=str(bindir) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    p = subprocess.run(["bash", str(batch / "runner.sh")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr

    logs = dev / "logs"
    assert (logs / "done.txt").read_text() == "tiny\nstart\n"
    progress = [line.split(" ", 1)[1] for line in (logs / "progress.txt").read_text().splitlines()]
    assert progress[:2] == ["runner start", "start tiny"] and progress[2].startswith("end tiny rc=0 ")
    assert progress[-2:] == ["queue empty", "runner end"]
    with tarfile.open(logs / "bench" / "tiny.tar.gz") as tar:
        names = sorted(n.lstrip("./") for n in tar.getnames() if n not in (".", "./"))
        assert names == ["tiny.json", "tiny.log", "tiny.stderr"]
        rec = json.loads(tar.extractfile("./tiny.json").read())
        stderr = tar.extractfile("./tiny.stderr").read().decode()
    assert rec["kind"] == "kvplan-bench" and len(rec["points"]) == 4  # the quick grid: 4 points
    assert rec["engine_args"] == {"max_model_len": 2048}
    assert "closed-c4-32x8:" in stderr and "vLLM stopped" in stderr
    assert not (logs / "bench" / "tiny.d").exists()
    start = (logs / "start.log").read_text()
    assert f'"model":"{dev}/dev/batch/start"' in start and "KVPLAN_ERROR" in start and "torch" in start
