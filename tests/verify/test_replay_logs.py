"""Replay every recorded vLLM 0.26.0 start through `kvplan verify --from-log`.

Records live in tests/data/vllm-0.26.0-h200/: JSON records in the calibration shape (written by
`kvplan verify --record DIR`, or copied from ../shared/calibration) and raw child logs
(`<name>.log`). For each one this test asserts that

* verify reports vLLM's logged KV-cache tokens ("GPU KV cache size: N tokens") exactly, and
* kvplan's predicted num_gpu_blocks is within 1% of vLLM's (the record's RESULT line, read here
  with this test's own regex); without a RESULT line, the predicted KV tokens are within 1%.

A start vLLM refused (no "GPU KV cache size" line) must be reported as refused (exit 1).
The folder may be empty: the test then skips. $KVPLAN_REPLAY_DIR points it at another folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from helpers import run_cli

# $KVPLAN_REPLAY_DIR replays another folder (e.g. records just fetched from the GPU machine).
RECORDS = Path(os.environ.get("KVPLAN_REPLAY_DIR") or Path(__file__).parents[1] / "data" / "vllm-0.26.0-h200")
TOLERANCE_PCT = 1.0
KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
RESULT_BLOCKS = re.compile(r"^RESULT .*\bnum_gpu_blocks=(\d+)")


def _items() -> list:
    if not RECORDS.is_dir():
        return []
    out = []
    for p in sorted(RECORDS.iterdir()):
        if p.suffix == ".log" or (p.suffix == ".json" and p.name != "batch-summary.json"):
            out.append(p)
    return out


ITEMS = _items()
PARAMS = [pytest.param(p, id=p.name) for p in ITEMS] or [
    pytest.param(None, id="no-records", marks=pytest.mark.skip(reason=f"no records in {RECORDS} yet"))
]


def _lines(path: Path) -> list[str]:
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "log_excerpt" not in data:
            pytest.skip(f"{path.name}: not a start record (no log_excerpt)")
        return [str(s) for s in data["log_excerpt"]]
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _model_args(path: Path, lines: list[str], tmp_path: Path) -> list[str]:
    """A raw log without its own KVPLAN_CONFIG line takes the config of its sibling record."""
    if path.suffix != ".log" or any(s.startswith("KVPLAN_CONFIG ") for s in lines):
        return []
    sibling = path.with_suffix(".json")
    if sibling.is_file():
        config = json.loads(sibling.read_text(encoding="utf-8")).get("config")
        if isinstance(config, dict):
            d = tmp_path / path.stem
            d.mkdir()
            (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
            return [str(d)]
    return []


@pytest.mark.parametrize("path", PARAMS)
def test_replay(path: Path, tmp_path):
    lines = _lines(path)
    tokens = [int(m.group(1).replace(",", "")) for s in lines if (m := KV_TOKENS.search(s))]
    blocks = [int(m.group(1)) for s in lines if (m := RESULT_BLOCKS.search(s.strip()))]
    if path.suffix == ".log" and not tokens and not any(
        s.startswith("KVPLAN_ERROR ") or "Error" in s or "refused" in s for s in lines
    ):
        pytest.skip(f"{path.name}: an interrupted start (no KV line, no error): nothing to replay")
    code, out, err = run_cli("verify", *_model_args(path, lines, tmp_path), "--from-log", str(path), "--format", "json")
    assert code in (0, 1), f"{path.name}: exit {code}: {err}"
    doc = json.loads(out)
    if not tokens:
        assert doc["status"] == "refused" and code == 1, f"{path.name}: no KV line, yet status {doc['status']}"
        return
    assert doc["measured"]["gpu_kv_cache_tokens"] == tokens[0]
    if blocks:
        measured = blocks[0]
        assert doc["measured"]["num_gpu_blocks"] == measured
        predicted = doc["predicted"]["num_gpu_blocks"]
        err_pct = 100.0 * (predicted - measured) / measured
        assert abs(err_pct) <= TOLERANCE_PCT, f"{path.name}: predicted {predicted} blocks, vLLM {measured} ({err_pct:+.3f}%)"
    else:
        predicted = doc["predicted"]["gpu_kv_cache_tokens"]
        err_pct = 100.0 * (predicted - tokens[0]) / tokens[0]
        assert abs(err_pct) <= TOLERANCE_PCT, f"{path.name}: predicted {predicted} tokens, vLLM {tokens[0]} ({err_pct:+.3f}%)"
