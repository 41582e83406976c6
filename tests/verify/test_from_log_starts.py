"""`kvplan verify --from-log` on a log that holds several vLLM starts, and MODEL next to a log
that names another model.

Expected figures are the fixture lines' own (calibration records llama3-8b_eager: 915,152 KV
tokens at --gpu-memory-utilization 0.92; llama3-8b_eager_u05: 434,144 tokens at 0.5).
"""

from __future__ import annotations

import json
from pathlib import Path

from helpers import run_cli
from test_verify import config_dir, record

from kvplan.verify.log import split_starts

PREFIX = "INFO 11-29 09:40:43 [api_utils.py:273] "


def _start(name: str, util: float) -> list[str]:
    args = {"max_model_len": 8192, "enforce_eager": True, "gpu_memory_utilization": util}
    return [PREFIX + f"non-default args: {args!r}", *record(name)["log_excerpt"]]


def _two_starts(tmp_path: Path) -> Path:
    p = tmp_path / "restarted.log"
    p.write_text("\n".join(_start("llama3-8b_eager", 0.92) + _start("llama3-8b_eager_u05", 0.5)) + "\n")
    return p


def _verify(tmp_path: Path, log: Path, *extra: str):
    model = config_dir(tmp_path, "llama3-8b_eager")
    return run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm", "--format", "json",
                   "--vllm-version", "0.33.0", *extra)  # 0.26.0 lines naming no version: 16-token blocks


def test_split_starts_finds_a_restart_but_not_repeated_rank_lines():
    one = _start("llama3-8b_eager", 0.92)
    assert split_starts("\n".join(one)) == [(1, 9)]
    assert split_starts("\n".join(one + one)) == [(1, 9), (10, 18)]
    # every tensor-parallel rank repeats the KV lines: still one start
    assert split_starts("\n".join(one + one[4:6])) == [(1, 11)]
    # a calibration excerpt has no start line: one start
    assert split_starts("\n".join(one[1:] + one[1:])) == [(1, 16)]


def test_two_starts_use_the_last_and_say_so(tmp_path):
    code, out, err = _verify(tmp_path, _two_starts(tmp_path))
    doc = json.loads(out)
    assert doc["measured"]["gpu_kv_cache_tokens"] == 434_144  # the second start's line
    note = next(n for n in doc["notes"] if "vLLM starts" in n)
    assert "2 vLLM starts" in note and "the last, start 2" in note and "--start" in note


def test_start_picks_the_first(tmp_path):
    code, out, err = _verify(tmp_path, _two_starts(tmp_path), "--start", "1")
    doc = json.loads(out)
    assert doc["measured"]["gpu_kv_cache_tokens"] == 915_152
    assert code == 0


def test_start_out_of_range_is_one_line(tmp_path):
    code, out, err = _verify(tmp_path, _two_starts(tmp_path), "--start", "3")
    assert code == 2 and out == ""
    assert err.startswith("error: --start: 3 is not a start of ") and "holds 2 vLLM starts" in err


def test_start_without_from_log_is_refused():
    code, out, err = run_cli("verify", "meta-llama/Meta-Llama-3-8B", "--start", "1")
    assert code == 2 and err.startswith("error: --start: only with --from-log")


def test_model_given_is_the_one_named_and_a_different_logged_model_warns(tmp_path):
    lines = ["INFO 11-29 09:40:43 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
             "model='Qwen/Qwen3-8B', max_seq_len=8192, enforce_eager=True", *record("llama3-8b_eager")["log_excerpt"]]
    p = tmp_path / "qwen.log"
    p.write_text("\n".join(lines) + "\n")
    model = config_dir(tmp_path, "llama3-8b_eager")
    code, out, err = run_cli("verify", str(model), "--from-log", str(p), "--gpu", "H200", "--usage", "llm",
                             "--max-model-len", "8192", "--enforce-eager", "--format", "json")
    doc = json.loads(out)
    assert doc["model"] == str(model)
    assert any("'Qwen/Qwen3-8B'" in n and "predicted" in n for n in doc["notes"]), doc["notes"]
