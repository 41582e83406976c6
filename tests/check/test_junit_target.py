"""`kvplan check --junit-xml`: the report never replaces one of the check's inputs (a file named
on the command line, one it read, a hard or symbolic link to either, a standard stream).

Expected values are worked out by hand in the comments; none is computed by kvplan here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.check.common import DATA, MODEL, _write

REPO = Path(__file__).parents[1] / "data" / "check" / "repo"


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()




# -- H3: --junit-xml must not overwrite an input ----------------------------------------------

CFG = f"model: {MODEL}\nmax-model-len: 8192\n"


def _refused(code: int, err: str, victim: Path, before: str) -> None:
    assert code == 2, err
    assert "--junit-xml" in err and "input of this check" in err, err
    assert _md5(victim) == before  # nothing written
    assert not list(victim.parent.glob("*.xml.tmp*")) and not [p for p in victim.parent.iterdir() if p.suffix == ".xml"]


def test_junit_xml_onto_the_checked_file_is_refused(tmp_path):
    src = _write(tmp_path / "in.yaml", CFG)
    before = _md5(src)
    code, out, err = run_cli("check", str(src), "--gpu", "H100", "--junit-xml", str(src))
    _refused(code, err, src, before)
    assert out == ""  # refused before the report is printed


def test_junit_xml_through_a_symlink_to_the_checked_file_is_refused(tmp_path):
    src = _write(tmp_path / "in2.yaml", CFG)
    (tmp_path / "lnk.yaml").symlink_to("in2.yaml")
    before = _md5(src)
    code, _, err = run_cli("check", str(src), "--gpu", "H100", "--junit-xml", str(tmp_path / "lnk.yaml"))
    _refused(code, err, src, before)
    assert (tmp_path / "lnk.yaml").is_symlink()


def test_junit_xml_onto_a_hard_link_of_the_checked_file_is_refused(tmp_path):
    src = _write(tmp_path / "in3.yaml", CFG)
    os.link(src, tmp_path / "hard.yaml")
    before = _md5(src)
    code, _, err = run_cli("check", str(src), "--gpu", "H100", "--junit-xml", str(tmp_path / "hard.yaml"))
    _refused(code, err, src, before)


def test_junit_xml_onto_a_manifest_config_target_is_refused(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / ".git").mkdir()
    monkeypatch.chdir(repo)
    victim = repo / "deploy" / "chat.yaml"
    before = _md5(victim)
    code, _, err = run_cli("check", "kvplan.yaml", "--junit-xml", "deploy/chat.yaml")
    _refused(code, err, victim, before)
    assert "deploy/chat.yaml" in err


def test_junit_xml_onto_a_script_config_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _write(tmp_path / "c.yaml", "max-model-len: 8192\n")
    sh = _write(tmp_path / "serve.sh", f"vllm serve {MODEL} --config c.yaml\n")
    before = _md5(cfg)
    code, _, err = run_cli("check", str(sh), "--gpu", "H100", "--junit-xml", "c.yaml")
    _refused(code, err, cfg, before)


def test_junit_xml_onto_gpu_profiles_is_refused(tmp_path):
    gp = _write(
        tmp_path / "gp.yaml",
        "gpus:\n  - id: mygpu\n    memory_bytes: 85899345920\n    compute_capability: '9.0'\n",
    )
    src = _write(tmp_path / "in.yaml", CFG)
    before = _md5(gp)
    code, _, err = run_cli("check", str(src), "--gpu", "H100", "--gpu-profiles", str(gp), "--junit-xml", str(gp))
    assert code == 2, err
    assert "--junit-xml" in err and "input of this check" in err, err
    assert _md5(gp) == before


def test_junit_xml_elsewhere_is_still_written(tmp_path):
    src = _write(tmp_path / "in.yaml", CFG)
    code, _, err = run_cli("check", str(src), "--gpu", "H100", "--junit-xml", str(tmp_path / "r.xml"))
    assert code == 0, err
    assert (tmp_path / "r.xml").read_text().startswith("<?xml")


# -- H4: referenced config files stay inside the repository ------------------------------------

SECRET = "max-model-len: sk-SECRET456\naws_secret_access_key: sk-SECRET123\n"


# -- H6: min_concurrency counts all data-parallel replicas, as `kvplan plan` does ---------------


@pytest.mark.parametrize("target", ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1"])
def test_junit_xml_refuses_standard_streams(target):
    code, out, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", target)
    assert code == 2 and out == ""
    assert err.startswith("error: --junit-xml: ") and target in err and "standard" in err


def test_junit_xml_refuses_a_dangling_symlink(tmp_path):
    gone = tmp_path / "missing-dir" / "report.xml"
    link = tmp_path / "link.xml"
    link.symlink_to(gone)
    code, out, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2
    assert f"is a broken symbolic link (-> {gone})" in err
    assert not gone.exists() and not gone.parent.exists()


def test_junit_xml_dangling_symlink_into_existing_dir_is_not_created(tmp_path):
    gone = tmp_path / "report.xml"
    link = tmp_path / "link.xml"
    link.symlink_to(gone)
    code, _, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2 and "broken symbolic link" in err and not gone.exists()
