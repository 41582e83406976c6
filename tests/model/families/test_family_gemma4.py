"""Gemma-4 (kvplan/model/families/gemma4.py): refused with the reason, never sized by guess.
The real config is the one whose vLLM 0.26.0 start failed before loading
(tests/data/vllm-0.26.0-h200/families/gemma4-26b-a4b_eager.log, rc=1)."""

from __future__ import annotations

import json

from family_starts import FAMILY_LOGS
from helpers import run_cli

LOG = FAMILY_LOGS / "gemma4-26b-a4b_eager.log"
TEXT = LOG.read_text(encoding="utf-8", errors="replace")
CONFIG = json.loads(next(line for line in TEXT.splitlines() if line.startswith("KVPLAN_CONFIG ")).split(" ", 1)[1])


def _dir(tmp_path):
    d = tmp_path / "gemma4"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    return str(d)


def test_the_logged_start_failed_reading_the_config():
    assert "AmbiguousGlobalPerLayerAttributeError" in TEXT and "get_head_size" in TEXT
    assert "RESULT num_gpu_blocks" not in TEXT


def test_vllm_0_26_refusal_says_vllm_cannot_start_it(tmp_path):
    code, out, err = run_cli("estimate", _dir(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "vLLM 0.26.0 does not start it" in err and "AmbiguousGlobalPerLayerAttributeError" in err
    assert "global_head_dim" in err and "attention_k_eq_v" in err


def test_other_versions_still_refuse_without_the_0_26_failure():
    from kvplan.errors import KvplanError
    from kvplan.model.parse import parse_config

    try:
        parse_config(CONFIG, "gemma4", vllm_version="0.33.0")
    except KvplanError as exc:
        assert "does not start it" not in exc.message and "no rules yet" in exc.message
    else:
        raise AssertionError("Gemma-4 sized")


def test_check_reports_it_and_does_not_pass(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text(f"vllm serve {_dir(tmp_path)} --max-model-len 32768\n")
    code, out, err = run_cli("check", str(script), "--gpu", "H200", "--vllm-version", "0.26.0", "--format", "json")
    assert code != 0, (out, err)
    assert "does not start it" in out + err
