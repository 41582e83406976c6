"""Which vLLM version a command uses when none is named on it: the installed vllm package's
(read from its dist-info, never imported), the nearest supported one (labelled) when kvplan has
no rules for that, else the newest supported; and every output says which and why."""

from __future__ import annotations

import json
import sys

import pytest

from kvplan.engines.vllm import versions
from tests.helpers import run_cli, unwrapped

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # bundled


def _fake_vllm(tmp_path, monkeypatch, version: str) -> None:
    """A vllm distribution of ``version`` on sys.path: only its dist-info metadata, no package."""
    info = tmp_path / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.invalidate_caches()


@pytest.fixture
def no_vllm(monkeypatch):
    """No vllm installed, whatever the machine running the tests has."""
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)


def _estimate_json(*args: str) -> dict:
    code, out, err = run_cli("estimate", MODEL, "--max-model-len", "8192", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_the_newest_supported_version_is_the_default_without_vllm(no_vllm):
    assert versions.DEFAULT_VERSION == "0.34.0"  # the newest of the table (0.26.0, 0.33.0, 0.34.0)
    choice = versions.resolve(None)
    assert (choice.version, choice.reason, choice.wanted) == ("0.34.0", "newest supported; no vllm installed", None)
    doc = _estimate_json()
    assert doc["engine"]["vllm_version"] == "0.34.0"
    assert doc["vllm"] == {"version": "0.34.0", "reason": "newest supported; no vllm installed"}


def test_an_installed_vllm_with_rules_is_the_default(tmp_path, monkeypatch):
    _fake_vllm(tmp_path, monkeypatch, "0.26.0")
    assert "vllm" not in sys.modules  # read from metadata, not imported
    assert versions.installed_vllm() == "0.26.0"
    doc = _estimate_json()
    assert doc["engine"]["vllm_version"] == "0.26.0"
    assert doc["vllm"] == {"version": "0.26.0", "reason": "installed vllm 0.26.0"}
    assert "vllm" not in sys.modules
    # the flag still wins over the installed package
    doc = _estimate_json("--vllm-version", "0.33.0")
    assert doc["vllm"] == {"version": "0.33.0", "reason": "--vllm-version"}


def test_an_installed_local_build_of_a_release_is_that_release(tmp_path, monkeypatch):
    _fake_vllm(tmp_path, monkeypatch, "0.26.0+cu130")
    choice = versions.resolve(None)
    assert (choice.version, choice.wanted) == ("0.26.0", None)
    assert choice.reason == "installed vllm 0.26.0+cu130"


def test_an_installed_vllm_without_rules_uses_the_nearest_labelled(tmp_path, monkeypatch):
    _fake_vllm(tmp_path, monkeypatch, "0.30.1")
    doc = _estimate_json()
    # 0.30.1 is 3 minor releases from 0.33.0 and 4 from 0.26.0
    assert doc["vllm"] == {"version": "0.33.0", "reason": "installed vllm 0.30.1", "requested": "0.30.1"}
    assert doc["engine"]["vllm_version"] == "0.33.0"
    assert any("vLLM 0.30.1" in w and "nearest supported version, 0.33.0" in w for w in doc["warnings"])
    assert doc["evidence"]["checked"] is False
    assert doc["evidence"]["unchecked"][0].startswith("vLLM 0.30.1 itself")
    code, out, _ = run_cli("estimate", MODEL, "--max-model-len", "8192", "--enforce-eager")
    assert code == 0
    text = unwrapped(out)
    assert "vLLM 0.33.0, the nearest supported to 0.30.1 (installed vllm 0.30.1; kvplan has no rules for 0.30.1)" in text
    assert "derived from the source, not yet checked on hardware: vLLM 0.30.1 itself" in text


@pytest.mark.parametrize(
    ("text", "version", "wanted"),
    [
        ("0.26.0", "0.26.0", None),
        ("v0.33.0", "0.33.0", None),
        ("v0.26.0-cu130", "0.26.0", None),
        ("0.33.0+cu130", "0.33.0", None),
        ("v0.30.1", "0.33.0", "0.30.1"),
        ("v0.34.0", "0.34.0", None),
        ("v0.35.0", "0.34.0", "0.35.0"),  # newer than every release kvplan has read
        ("0.28.3", "0.26.0", "0.28.3"),  # not on the index: 2 minor releases from 0.26, 5 from 0.33
        ("0.33.0rc1", "0.33.0", "0.33.0rc1"),  # a pre-release is not the release
        ("1.0.0", "0.34.0", "1.0.0"),
    ],
)
def test_choose_reads_a_version_text_and_names_the_nearest(text, version, wanted):
    choice = versions.choose(text, "somewhere")
    assert (choice.version, choice.wanted) == (version, wanted)
    if wanted is not None:
        assert choice.warning().startswith(f"vLLM {wanted} (somewhere): kvplan has no rules for it")
        assert f"nearest supported version, {version}" in choice.warning()
    else:
        assert choice.warning() is None


def test_an_unknown_flag_version_is_still_refused(no_vllm):
    code, out, err = run_cli("estimate", MODEL, "--vllm-version", "0.30.1")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: --vllm-version: kvplan has no rules for vLLM '0.30.1'"


@pytest.mark.parametrize("command", ["estimate", "plan", "check", "verify", "schema"])
def test_help_says_how_the_default_is_chosen(command):
    code, out, _ = run_cli(command, "--help")
    assert code == 0
    text = unwrapped(out)
    assert "Default: the version of the installed vllm package" in text
    assert "else the newest supported" in text


def test_the_default_is_resolved_when_the_command_runs_not_at_import(tmp_path, monkeypatch):
    # kvplan.cli is imported already (other tests ran it); the package installed now counts
    import kvplan.cli  # noqa: F401

    _fake_vllm(tmp_path, monkeypatch, "0.26.0")
    code, out, _ = run_cli("plan", MODEL, "--max-model-len", "8192", "--concurrency", "4", "--gpus", "H200", "--format", "json")
    assert code == 0
    assert json.loads(out)["vllm"] == {"version": "0.26.0", "reason": "installed vllm 0.26.0"}
    code, out, _ = run_cli("schema")
    assert json.loads(out)["$comment"] == "flags of vLLM 0.26.0 (installed vllm 0.26.0)"
