"""`kvplan check -` (and /dev/stdin) reads standard input; --stdin-name says what it is; a run
that finds no deployment at all warns (a failure under --strict, as every warning is)."""

from __future__ import annotations

import io
import json
import sys

import pytest
from helpers import run_cli

CONFIG = b"model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
SCRIPT = b"#!/bin/sh\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096\n"


@pytest.fixture
def stdin(monkeypatch):
    def give(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    return give


def _check(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "json")
    assert "Traceback" not in out + err
    return code, json.loads(out)


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_yaml_on_stdin_is_read_as_yaml(stdin, name):
    stdin(CONFIG)
    code, doc = _check(name, "--gpu", "H100")
    assert code == 0, doc["diagnostics"]
    f = doc["files"][0]
    assert f["kind"] == "vllm-config" and f["file"] == "<stdin>"
    assert f["deployments"][0]["figures"]["max_model_len"] == 8192


def test_stdin_name_decides_the_kind_and_names_the_findings(stdin):
    stdin(CONFIG)
    code, doc = _check("-", "--stdin-name", "deploy/chat.yaml", "--gpu", "H100")
    assert code == 0 and doc["files"][0]["file"] == "deploy/chat.yaml" and doc["files"][0]["kind"] == "vllm-config"
    stdin(CONFIG)
    code, doc = _check("-", "--stdin-name", "serve.sh", "--gpu", "H100")  # YAML text, read as a script
    assert doc["files"][0]["kind"] == "command" and doc["summary"]["deployments"] == 0


def test_script_and_dockerfile_on_stdin(stdin):
    stdin(SCRIPT)
    code, doc = _check("-", "--gpu", "H100")
    assert code == 0 and doc["files"][0]["kind"] == "command" and doc["summary"]["deployments"] == 1
    stdin(b"FROM vllm/vllm-openai:v0.26.0\nCMD [\"--model\", \"meta-llama/Llama-3.1-8B-Instruct\", \"--max-model-len\", \"4096\"]\n")
    code, doc = _check("-", "--gpu", "H100")
    assert doc["files"][0]["kind"] == "dockerfile" and doc["summary"]["deployments"] == 1, doc


def test_zero_deployments_is_a_warning_and_fails_under_strict(stdin, tmp_path):
    f = tmp_path / "notes.sh"
    f.write_text("echo nothing to serve here\n")
    code, doc = _check(str(f))
    warn = [d for d in doc["diagnostics"] if d["severity"] == "warning"]
    assert code == 0 and [d["check_id"] for d in warn] == ["no-deployment"]
    assert "0 deployments" in warn[0]["message"]
    code, doc = _check(str(f), "--strict")
    assert code == 1


def test_bad_bytes_on_stdin_are_a_parse_error(stdin):
    stdin(b"model: a\xff\n")
    code, doc = _check("-", "--gpu", "H100")
    assert code == 2 and doc["diagnostics"][0]["check_id"] == "parse-error"
