"""The repository boundary: a symbolic link committed inside a repository must not make
`kvplan check` read (and echo into CI annotations) a file outside the repository, whether the
link is named on the command line (a glob over deploy/*.yaml) or is the kvplan.yaml the
node_selectors search finds; a --config / config: file outside the repository (or working
directory) is not read either. A file outside any repository is the user's own choice and is read."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli
import json
import os
import pytest
from tests.check.common import MODEL, _diags, _json, _write

SECRET = "sk-SECRET456"
# a --config file whose values must never reach CI annotations
CONFIG_SECRET = "max-model-len: sk-SECRET456\naws_secret_access_key: sk-SECRET123\n"


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "creds.yaml").write_text(f"model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: {SECRET}\n")
    return out / "creds.yaml"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "deploy").mkdir()
    return repo


def test_command_line_link_out_of_the_repository_is_not_read(tmp_path, monkeypatch):
    creds = _outside(tmp_path)
    repo = _repo(tmp_path)
    (repo / "deploy" / "evil.yaml").symlink_to(creds)
    monkeypatch.chdir(repo)
    code, out, err = run_cli("check", "deploy/evil.yaml", "--gpu", "H100", "--format", "github")
    assert code == 2, (out, err)
    assert SECRET not in out + err
    assert "is a symbolic link to" in out and "outside the repository" in out


def test_node_selector_kvplan_yaml_linked_out_of_the_repository_is_not_used(tmp_path, monkeypatch):
    out_dir = tmp_path / "outside"
    out_dir.mkdir()
    (out_dir / "kv.yaml").write_text("node_selectors:\n  NVIDIA-H100-80GB-HBM3: T4\n")
    repo = _repo(tmp_path)
    (repo / "kvplan.yaml").symlink_to(out_dir / "kv.yaml")
    (repo / "deploy" / "dep.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n"
        "      containers:\n      - name: vllm\n        image: vllm/vllm-openai\n"
        "        args: [--model, meta-llama/Llama-3.1-8B-Instruct, --max-model-len, '4096']\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    monkeypatch.chdir(repo)
    code, out, err = run_cli("check", "deploy/dep.yaml", "--format", "json")
    assert "T4" not in out.replace("NVIDIA", "")  # the linked file's mapping is never applied
    assert "outside the repository" in out


def test_a_file_outside_any_repository_is_still_read(tmp_path, monkeypatch):
    cfg = tmp_path / "plain.yaml"
    cfg.write_text("model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 4096\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(cfg)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("check", str(link), "--gpu", "H100")
    assert code == 0, (out, err)


def _assert_outside_refused(code: int, out: str, reads: list[str], outside: Path, needle: str, exit_code: int = 1) -> None:
    assert code == exit_code, out
    assert "sk-SECRET" not in out
    assert os.path.realpath(outside) not in reads
    assert "outside the repository" in out and needle in out, out


def _outside_setup(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    outside = _write(tmp_path / "outside" / "creds.yaml", CONFIG_SECRET)
    repo = tmp_path / "repo2"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    return repo, outside


@pytest.fixture
def reads(monkeypatch):
    """Every path the kvplan.check modules read through safe_io.read_text."""
    import importlib
    import pkgutil

    import kvplan.check
    import kvplan.io.files

    seen: list[str] = []
    real = kvplan.io.files.read_text

    def spy(path, *a, **k):
        seen.append(os.path.realpath(path))
        return real(path, *a, **k)

    for info in pkgutil.walk_packages(kvplan.check.__path__, "kvplan.check."):
        mod = importlib.import_module(info.name)
        if getattr(mod, "read_text", None) is real:
            monkeypatch.setattr(mod, "read_text", spy)
    return seen


def test_empty_file_name():
    code, doc = _json("")
    (e,) = _diags(doc, "parse-error")
    assert e["message"] == "empty file name"
    assert "directory" not in json.dumps(doc)
    assert code == 2


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_script_config_outside_the_repository_is_not_read(tmp_path, monkeypatch, reads, how):
    repo, outside = _outside_setup(tmp_path, monkeypatch)
    ref = str(outside) if how == "absolute" else "../../outside/creds.yaml"
    _write(repo / "sub" / "e.sh", f"vllm serve {MODEL} --config {ref}\n")
    code, out, err = run_cli("check", "sub/e.sh", "--gpu", "H100", "--format", "github")
    _assert_outside_refused(code, out, reads, outside, ref)
    # exactly one error, at the script's --config line
    assert out.count("::error") == 1, out
    assert "file=sub/e.sh,line=1" in out


def test_script_config_symlink_out_of_the_repository_is_not_read(tmp_path, monkeypatch, reads):
    repo, outside = _outside_setup(tmp_path, monkeypatch)
    _write(repo / "sub" / "e.sh", f"vllm serve {MODEL} --config link.yaml\n")
    (repo / "sub" / "link.yaml").symlink_to(outside)
    code, out, _ = run_cli("check", "sub/e.sh", "--gpu", "H100", "--format", "github")
    _assert_outside_refused(code, out, reads, outside, "link.yaml")


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_manifest_config_outside_the_repository_is_not_read(tmp_path, monkeypatch, reads, how):
    repo, outside = _outside_setup(tmp_path, monkeypatch)
    ref = str(outside) if how == "absolute" else "../outside/creds.yaml"
    _write(repo / "kvplan.yaml", f"deployments:\n  - name: leak\n    config: {ref}\n    gpu: H100\n")
    code, out, _ = run_cli("check", "kvplan.yaml", "--format", "github")
    # a bad `config:` entry is an input error of kvplan.yaml (invalid-kvplan-key): exit 2
    _assert_outside_refused(code, out, reads, outside, ref, exit_code=2)
    assert out.count("::error") == 1, out
    assert "file=kvplan.yaml,line=3" in out  # the `config:` line


def test_without_git_the_working_directory_is_the_boundary(tmp_path, monkeypatch, reads):
    outside = _write(tmp_path / "outside" / "creds.yaml", CONFIG_SECRET)
    work = tmp_path / "work"
    _write(work / "e.sh", f"vllm serve {MODEL} --config ../outside/creds.yaml\n")
    monkeypatch.chdir(work)
    code, out, _ = run_cli("check", "e.sh", "--gpu", "H100", "--format", "github")
    assert code == 1
    assert "sk-SECRET" not in out and os.path.realpath(outside) not in reads
    assert "outside the working directory" in out and "../outside/creds.yaml" in out, out


def test_config_inside_the_repository_is_still_read(tmp_path, monkeypatch):
    repo = tmp_path / "repo3"
    (repo / ".git").mkdir(parents=True)
    _write(repo / "conf" / "c.yaml", "max-model-len: 8192\n")
    _write(repo / "sub" / "e.sh", f"vllm serve {MODEL} --config ../conf/c.yaml\n")
    monkeypatch.chdir(repo)
    code, doc = _json("sub/e.sh", "--gpu", "H100")
    assert code == 0, doc["diagnostics"]
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 8192
