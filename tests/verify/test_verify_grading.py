"""What verify grades: num_gpu_blocks, and beside it the two figures of vLLM's "GPU KV cache
size: N tokens, Maximum concurrency for L tokens per request: Cx" line, each within the same
tolerance. A real 0.33.0 start is replayed as logged (a pass) and with that line (and the child's
exact copy of it) lowered, so the blocks still agree but the tokens and concurrency do not."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, unwrapped

LOG = Path(__file__).parents[1] / "data" / "vllm-0.33.0-h200" / "llama3-8b_eager.log"
# as logged: 57,012 blocks, 912,192 tokens, 111.35x (exact 111.3515625) for 8,192 tokens


def _lowered(tmp_path: Path, factor: float) -> Path:
    """The log with its tokens and concurrency multiplied by ``factor`` (block count untouched)."""
    tokens, conc = int(912_192 * factor), 111.3515625 * factor
    text = LOG.read_text(encoding="utf-8")
    for old, new in (
        ("GPU KV cache size: 912,192 tokens", f"GPU KV cache size: {tokens:,} tokens"),
        ("per request: 111.35x", f"per request: {conc:.2f}x"),
        ('"gpu_kv_cache_tokens":912192', f'"gpu_kv_cache_tokens":{tokens}'),
        ('"max_concurrency":111.3515625', f'"max_concurrency":{conc}'),
    ):
        assert old in text
        text = text.replace(old, new)
    out = tmp_path / "start.log"
    out.write_text(text, encoding="utf-8")
    return out


def _verify(path: Path, *extra: str) -> tuple[int, dict]:
    code, out, err = run_cli("verify", "--from-log", str(path), "--vllm-version", "0.33.0", *extra, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_the_real_start_passes_on_all_three_figures():
    code, doc = _verify(LOG)
    assert (code, doc["status"], doc["compared_on"]) == (0, "pass", "num_gpu_blocks")
    assert "mismatched_on" not in doc


def test_tokens_and_concurrency_off_by_5_percent_are_a_mismatch_though_the_blocks_agree(tmp_path):
    log = _lowered(tmp_path, 0.95)
    code, doc = _verify(log)
    assert abs(doc["errors"]["num_gpu_blocks"]["pct"]) <= 1.0
    assert (code, doc["status"]) == (1, "mismatch")
    assert doc["mismatched_on"] == ["gpu_kv_cache_tokens", "max_concurrency"]
    code, out, _ = run_cli("verify", "--from-log", str(log), "--vllm-version", "0.33.0")
    text = unwrapped(out)
    assert code == 1
    assert "PASS" not in text
    assert "MISMATCH: gpu_kv_cache_tokens off by +5.2" in text  # 1/0.95 - 1 = +5.26 %
    assert "MISMATCH: max_concurrency off by +5.2" in text
    assert "num_gpu_blocks within 1%" in text


def test_the_same_tolerance_grades_all_three(tmp_path):
    log = _lowered(tmp_path, 0.995)  # tokens and concurrency about +0.5 % off
    assert _verify(log)[1]["status"] == "pass"
    code, doc = _verify(log, "--tolerance", "0.3")
    assert doc["status"] == "mismatch" and "gpu_kv_cache_tokens" in doc["mismatched_on"]
