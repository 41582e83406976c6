"""benchmarks/regression.py can fail: a changed output is reported by name and exits 1.

The harness is what proves that a refactor moves no number; a harness whose compare always
said "identical" would prove nothing, so this records two cases, checks that an untouched
baseline compares identical, then changes one recorded output and expects exit 1 naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "benchmarks" / "regression.py"
ESTIMATE = "estimate/Qwen_Qwen3-8B/H200-tp1-len4096"
CHECK = "check/file/pass_chat-llama8b.yaml"
SELECT = ["-k", ESTIMATE, "-k", CHECK]


def harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HARNESS), *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_compare_names_a_changed_output_and_exits_1(tmp_path):
    base = tmp_path / "baseline"
    rec = harness("record", str(base), *SELECT)
    assert rec.returncode == 0, rec.stderr
    manifest = json.loads((base / "manifest.json").read_text())
    assert sorted(manifest["cases"]) == sorted([ESTIMATE, CHECK])
    assert manifest["counts"] == {"replay": 0, "check": 1, "estimate": 1, "total": 2}

    same = harness("compare", str(base), *SELECT)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical     2  differing    0  missing    0  new    0" in same.stdout

    # one number in the estimate's recorded JSON changes by one
    case = base / "cases" / (ESTIMATE + ".json")
    doc = json.loads(case.read_text())
    blocks = json.loads(doc["stdout"])["kv_cache"]["num_gpu_blocks"]
    needle = f'"num_gpu_blocks": {blocks}'
    assert needle in doc["stdout"]
    doc["stdout"] = doc["stdout"].replace(needle, f'"num_gpu_blocks": {blocks + 1}', 1)
    case.write_text(json.dumps(doc))

    diff = harness("compare", str(base), *SELECT)
    assert diff.returncode == 1, diff.stdout + diff.stderr
    assert "identical     1  differing    1" in diff.stdout
    assert f"DIFFERS {ESTIMATE}" in diff.stdout and f"DIFFERS {CHECK}" not in diff.stdout
    assert "num_gpu_blocks" in diff.stdout  # the short diff shows the changed line


def test_a_case_gone_from_the_run_is_missing_and_fails(tmp_path):
    base = tmp_path / "baseline"
    assert harness("record", str(base), "-k", CHECK).returncode == 0
    manifest = json.loads((base / "manifest.json").read_text())
    manifest["cases"]["check/file/no-such-fixture.yaml"] = "0" * 16
    (base / "manifest.json").write_text(json.dumps(manifest))
    res = harness("compare", str(base), "-k", CHECK, "-k", "check/file/no-such-fixture.yaml")
    assert res.returncode == 1
    assert "MISSING check/file/no-such-fixture.yaml" in res.stdout


def test_a_pinned_version_and_dropped_labels_compare_only_what_else_moved(tmp_path):
    # recorded under --vllm-version 0.26.0, compared under 0.33.0: the numbers move (differing)
    # even without the labels; compared under 0.26.0 without the labels: identical
    base = tmp_path / "pinned"
    assert harness("record", str(base), "-k", ESTIMATE, "--vllm-version", "0.26.0").returncode == 0
    doc = json.loads(json.loads((base / "cases" / (ESTIMATE + ".json")).read_text())["stdout"])
    assert doc["vllm"] == {"version": "0.26.0", "reason": "--vllm-version"}
    moved = harness("compare", str(base), "-k", ESTIMATE, "--vllm-version", "0.33.0", "--drop-version-labels")
    assert moved.returncode == 1 and "differing    1" in moved.stdout
    # a label-only change: the baseline's labels rewritten, the numbers kept
    case = base / "cases" / (ESTIMATE + ".json")
    rec = json.loads(case.read_text())
    out = json.loads(rec["stdout"])
    out["vllm"]["reason"], out["evidence"]["label"] = "elsewhere", "something else"
    rec["stdout"] = json.dumps(out, indent=2)
    case.write_text(json.dumps(rec))
    assert harness("compare", str(base), "-k", ESTIMATE, "--vllm-version", "0.26.0").returncode == 1
    same = harness("compare", str(base), "-k", ESTIMATE, "--vllm-version", "0.26.0", "--drop-version-labels")
    assert same.returncode == 0, same.stdout
