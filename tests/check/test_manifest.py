"""kvplan.yaml manifests: deployments need a name, a file a manifest names is checked there once,
node-selector sources are validated as the manifest itself.

Fixtures are in tests/data/check/review4/; expected lines and values are worked out by hand in
the comments.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.check.common import DATA, R4, _diags, _json



# -- new 7: Kubernetes args must be strings ---------------------------------------------------


# -- new 13: compose `command:` given as a mapping -----------------------------------------------


# -- new 10: the tp hint uses the refusal's predicate ---------------------------------------------


# -- new 12: non-finite targets, empty file name --------------------------------------------------


def test_inf_min_concurrency_in_manifest_is_refused():
    code, doc = _json(str(R4 / "manifest-inf" / "kvplan.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (5, "deployments[0].min_concurrency")
    assert "finite" in e["message"]
    assert code == 2


# -- new 2: kvplan.yaml lookup and validation -----------------------------------------------------


def test_manifest_without_name_checked_directly_is_refused():
    # line 5: `- model: ...`, the entry with no name (the schema requires one)
    code, doc = _json(str(R4 / "noname" / "kvplan.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (5, "deployments[0].name")
    assert code == 2


def test_manifest_without_name_as_node_selector_source_is_refused_the_same_way():
    code, doc = _json(str(R4 / "noname" / "dep.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (5, "deployments[0].name") and e["file"].endswith("review4/noname/kvplan.yaml")
    direct = _diags(_json(str(R4 / "noname" / "kvplan.yaml"))[1], "invalid-kvplan-key")[0]
    assert e["message"] == direct["message"]
    assert code == 2


# -- new 4: control characters from files are escaped in human and github output ----------------


# -- new 3: --junit-xml must not be the file stdout or stderr is written to ---------------------


def _kvplan(args: list[str], cwd: Path, stdout) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvplan", *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def test_junit_xml_same_file_as_stdout_is_refused(tmp_path):
    cfg = R4 / "tp3-qwen.yaml"
    with open(tmp_path / "r.txt", "w") as fh:
        p = _kvplan(["check", str(cfg), "--gpu", "H100", "--junit-xml", "r.txt"], tmp_path, fh)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "--junit-xml" in p.stderr and "standard output" in p.stderr
    assert (tmp_path / "r.txt").read_text() == ""


def test_junit_xml_through_a_link_to_proc_fd_is_refused(tmp_path):
    cfg = R4 / "tp3-qwen.yaml"
    os.symlink("/proc/self/fd", tmp_path / "fdd")
    with open(tmp_path / "o.txt", "w") as fh:
        p = _kvplan(["check", str(cfg), "--gpu", "H100", "--junit-xml", "fdd/1"], tmp_path, fh)
    assert p.returncode == 2 and "--junit-xml" in p.stderr
    assert (tmp_path / "o.txt").read_text() == ""


def test_file_covered_by_manifest_in_same_run_takes_its_gpu(monkeypatch):
    monkeypatch.chdir(DATA / "repo")
    code, doc = _json("deploy/chat.yaml", "kvplan.yaml")
    # deploy/chat.yaml has no GPU of its own; kvplan.yaml says `config: deploy/chat.yaml, gpu: H100`
    assert _diags(doc, "gpu-missing") == []
    # ... and it is checked once, as the manifest's deployment "chat", not again as a bare file
    assert [f["file"] for f in doc["files"]] == ["kvplan.yaml"]
    chat = next(d for d in doc["files"][0]["deployments"] if d["name"] == "chat")
    assert chat["gpu"] == "h100-sxm"
    # the only error left is kvplan.yaml's own `tiny` target (line 24: max_gpu_memory_utilization 0.85)
    errors = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert [(e["file"], e["line"], e["check_id"]) for e in errors] == [("kvplan.yaml", 24, "max-gpu-memory-utilization")]
    assert code == 1


def test_manifest_given_first_also_covers_the_file(monkeypatch):
    monkeypatch.chdir(DATA / "repo")
    code, doc = _json("kvplan.yaml", "deploy/chat.yaml")
    assert _diags(doc, "gpu-missing") == [] and [f["file"] for f in doc["files"]] == ["kvplan.yaml"]
    assert code == 1
