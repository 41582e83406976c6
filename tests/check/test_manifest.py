"""`kvplan check` regressions from docs/review/fresh-eyes-4.md (new items 2, 3, 4, 7, 10, 12, 13).

Fixtures are in tests/data/check/review4/; expected lines and values are worked out by hand in
the comments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import run_cli

R4 = Path(__file__).parent / "data" / "check" / "review4"


def _json(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "json")
    return code, json.loads(out)


def _diags(doc: dict, check_id: str) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == check_id]


# -- new 7: Kubernetes args must be strings ---------------------------------------------------


def test_k8s_args_non_string_item_is_an_error():
    # args: line 12 the model, 13 --max-model-len, 14 `- 4096` (an unquoted integer: args[2])
    code, doc = _json(str(R4 / "k8s-args-int.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "invalid-value")
    assert (e["severity"], e["line"], e["key"]) == ("error", 14, "args[2]")
    assert "4096" in e["message"] and "string" in e["message"]
    assert code == 1


# -- new 13: compose `command:` given as a mapping -----------------------------------------------


def test_compose_command_mapping_is_an_error():
    # line 4: `command: {a: 1}`; compose accepts a string or a list only
    code, doc = _json(str(R4 / "compose-command-mapping.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "invalid-value")
    assert (e["severity"], e["line"], e["key"]) == ("error", 4, "services.llm.command")
    assert e["file"].endswith("review4/compose-command-mapping.yaml")
    assert _diags(doc, "no-deployment") == []
    assert code == 1


# -- new 10: the tp hint uses the refusal's predicate ---------------------------------------------


def test_tp_hint_lists_only_sizes_check_accepts():
    # Qwen2.5-7B: 28 heads, 4 KV heads. Divisors of 28: 1, 2, 4, 7, 14, 28; 7 and 14 are > 4 KV
    # heads and not multiples of 4, so they are refused; 28 = 7 x 4 is accepted.
    code, doc = _json(str(R4 / "tp3-qwen.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "tp-divisibility")
    assert e["line"] == 2 and e["hint"] == "valid sizes: 1, 2, 4, 28"
    assert code == 1


# -- new 12: non-finite targets, empty file name --------------------------------------------------


def test_inf_min_concurrency_in_kvplan_block_is_refused():
    code, doc = _json(str(R4 / "inf-target.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (3, "kvplan.min_concurrency")
    assert "finite" in e["message"] and "inf" in e["message"]
    assert _diags(doc, "min-concurrency") == []
    assert code == 2


def test_inf_min_concurrency_in_manifest_is_refused():
    code, doc = _json(str(R4 / "manifest-inf" / "kvplan.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (5, "deployments[0].min_concurrency")
    assert "finite" in e["message"]
    assert code == 2


def test_empty_file_name():
    code, doc = _json("")
    (e,) = _diags(doc, "parse-error")
    assert e["message"] == "empty file name"
    assert "directory" not in json.dumps(doc)
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


def test_schema_manifest_requires_name():
    code, out, _ = run_cli("schema", "manifest")
    schema = json.loads(out)
    dep = schema["$defs"]["ManifestDeployment"]
    assert "name" in dep["required"] and code == 0


def test_node_selectors_not_read_above_the_working_directory(tmp_path, monkeypatch):
    # no .git anywhere here: plant/kvplan.yaml maps the H100 label to T4; from plant/a it is above
    # the working directory and must not be used
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    monkeypatch.chdir(plant / "a")
    code, doc = _json("b/dep.yaml")
    assert [d["check_id"] for d in doc["diagnostics"] if d["severity"] == "error"] == ["gpu-missing"]
    assert code == 2


def test_node_selectors_read_up_to_the_working_directory_with_a_note(tmp_path, monkeypatch):
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    monkeypatch.chdir(plant)
    code, doc = _json("a/b/dep.yaml")
    (dep,) = doc["files"][0]["deployments"]
    assert dep["gpu"] == "t4"
    (note,) = _diags(doc, "node-selectors")
    assert note["severity"] == "info" and "kvplan.yaml" in note["message"]
    assert (note["file"], note["line"]) == ("a/b/dep.yaml", 9)  # the nodeSelector label's line
    assert code == 1  # Llama-3.1-8B does not fit a T4


def test_node_selectors_stop_at_the_git_root(tmp_path, monkeypatch):
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    (plant / "a" / ".git").mkdir()  # a repository rooted at plant/a: plant/kvplan.yaml is outside
    monkeypatch.chdir(tmp_path)
    code, doc = _json("plant/a/b/dep.yaml")
    assert [d["check_id"] for d in doc["diagnostics"] if d["severity"] == "error"] == ["gpu-missing"]
    assert code == 2


# -- new 4: control characters from files are escaped in human and github output ----------------


def test_escape_sequences_are_escaped_in_human_and_github_output():
    for fmt in ("human", "github"):
        code, out, _ = run_cli("check", str(R4 / "escape.yaml"), "--gpu", "H100", "--format", fmt)
        assert "\x1b" not in out, fmt
        assert "\\x1b[31mRED" in out, fmt
        assert code == 2  # the model id is not valid: model-unresolved


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
