"""`kvplan check` regressions from docs/review/fresh-eyes-5.md (H3, H4, H6).

Expected values are worked out by hand in the comments; none is computed by kvplan here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import run_cli

REPO = Path(__file__).parent / "data" / "check" / "repo"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _json(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "json")
    return code, json.loads(out)


def _diags(doc: dict, check_id: str) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == check_id]


def _md5(p: Path) -> str:
    return hashlib.md5(p.read_bytes()).hexdigest()


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


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


@pytest.fixture
def reads(monkeypatch):
    """Every path kvplan.check reads through safe_io.read_text."""
    import kvplan.check as check_mod

    seen: list[str] = []
    real = check_mod.read_text

    def spy(path, *a, **k):
        seen.append(os.path.realpath(path))
        return real(path, *a, **k)

    monkeypatch.setattr(check_mod, "read_text", spy)
    return seen


def _outside_setup(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    outside = _write(tmp_path / "outside" / "creds.yaml", SECRET)
    repo = tmp_path / "repo2"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    return repo, outside


def _assert_outside_refused(code: int, out: str, reads: list[str], outside: Path, needle: str, exit_code: int = 1) -> None:
    assert code == exit_code, out
    assert "sk-SECRET" not in out
    assert os.path.realpath(outside) not in reads
    assert "outside the repository" in out and needle in out, out


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
    outside = _write(tmp_path / "outside" / "creds.yaml", SECRET)
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


def test_unknown_key_in_a_config_file_is_not_a_second_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.yaml", "some_unknown_key: value-one\nmax-model-len: 8192\n")
    _write(tmp_path / "e.sh", f"vllm serve {MODEL} --config c.yaml\n")
    code, doc = _json("e.sh", "--gpu", "H100")
    texts = [d["message"] for d in doc["diagnostics"]]
    assert not any("given twice" in t for t in texts), texts
    assert not any("value-one" in t for t in texts), texts
    (u,) = _diags(doc, "unknown-flag")
    assert u["key"] == "some_unknown_key" and u["line"] == 1
    assert code == 1


def test_unknown_key_first_in_a_config_file_without_a_positional_model(tmp_path, monkeypatch):
    # `vllm serve --config c.yaml` where c.yaml names the model: the unknown key's value is
    # its value, not the positional model
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.yaml", f"some_unknown_key: value-two\nmodel: {MODEL}\nmax-model-len: 8192\n")
    _write(tmp_path / "e.sh", "vllm serve --config c.yaml\n")
    code, doc = _json("e.sh", "--gpu", "H100")
    texts = [d["message"] for d in doc["diagnostics"]]
    assert not any("given twice" in t for t in texts), texts
    assert doc["files"][0]["deployments"][0]["model"] == MODEL


def test_a_real_second_model_is_still_reported(tmp_path):
    sh = _write(tmp_path / "e.sh", f"vllm serve {MODEL} --model meta-llama/Meta-Llama-3-8B\n")
    code, doc = _json(str(sh), "--gpu", "H100")
    assert any("given twice" in d["message"] for d in doc["diagnostics"]), doc["diagnostics"]
    assert code == 1


# -- H6: min_concurrency counts all data-parallel replicas, as `kvplan plan` does ---------------


def _dp_config(tmp_path: Path, dp: int, target: float) -> Path:
    # max-num-seqs 8 caps one replica at 8 requests (the KV cache of Llama-3.1-8B on H100 at
    # 1024 tokens holds hundreds), so per replica = 8, and dp replicas = 8 x dp by hand.
    return _write(
        tmp_path / f"dp{dp}.yaml",
        f"model: {MODEL}\nmax-model-len: 1024\nmax-num-seqs: 8\ndata-parallel-size: {dp}\n"
        f"kvplan: {{gpu: H100, min_concurrency: {target}}}\n",
    )


def test_min_concurrency_counts_every_data_parallel_replica(tmp_path):
    # 8 per replica x 2 replicas = 16 >= 16: passes (one replica alone, 8, would not)
    code, doc = _json(str(_dp_config(tmp_path, 2, 16)))
    assert code == 0, doc["diagnostics"]
    assert not _diags(doc, "min-concurrency")
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["concurrency_at_request_len"] == 16.0
    assert fig["concurrency_per_replica_at_request_len"] == 8.0
    assert fig["data_parallel_size"] == 2


def test_min_concurrency_below_the_dp_total_names_both_figures(tmp_path):
    # 8 x 2 = 16 < 17
    code, doc = _json(str(_dp_config(tmp_path, 2, 17)))
    assert code == 1
    (d,) = _diags(doc, "min-concurrency")
    assert "8.00 requests of 1024 tokens fit at once per replica, x2 replicas = 16.00" in d["message"], d["message"]
    assert "below the target 17" in d["message"]


def test_min_concurrency_without_data_parallelism_is_unchanged(tmp_path):
    code, doc = _json(str(_dp_config(tmp_path, 1, 9)))  # 8 < 9
    assert code == 1
    (d,) = _diags(doc, "min-concurrency")
    assert d["message"].startswith("8.00 requests of 1024 tokens fit at once (max-num-seqs limits it;"), d["message"]
    assert "replica" not in d["message"]


def test_plan_dp_option_passes_check_with_the_plans_target(tmp_path):
    # fresh-eyes-5 H6: plan's option "2x h100-sxm 1/1/2 ... 2016.9 req" for --concurrency 2000;
    # estimate gives 1008.45 per replica (fp8 KV + fp8 weights, max-model-len 1024), and
    # 1008.45 x 2 = 2016.90 >= 2000 by hand.
    sh = _write(
        tmp_path / "dp.sh",
        "# kvplan: gpu=H100 min_concurrency=2000\n"
        f"vllm serve {MODEL} --max-model-len 1024 --kv-cache-dtype fp8 --quantization fp8 --data-parallel-size 2\n",
    )
    code, doc = _json(str(sh))
    assert code == 0, doc["diagnostics"]
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["concurrency_per_replica_at_request_len"] == 1008.45
    assert 2016.9 <= fig["concurrency_at_request_len"] < 2016.92
