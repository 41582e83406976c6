"""Fresh-eyes review 6, N1: a symbolic link committed inside a repository must not make
`kvplan check` read (and echo into CI annotations) a file outside the repository, whether the
link is named on the command line (a glob over deploy/*.yaml) or is the kvplan.yaml the
node_selectors search finds. A file outside any repository is the user's own choice and is read."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli

SECRET = "sk-SECRET456"


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
