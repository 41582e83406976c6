"""Estimate at extreme inputs (absurd --kv-cache-memory or batch sizes, memory bar width, advice
with multi-GPU non-torch memory): bugs found by tests/capacity/test_properties.py, shrunk to
minimal examples.

Each test states the behaviour kvplan should have. While a bug was open its test was marked
``xfail(strict=True)``; all five are fixed now and run as plain regression tests (when a new bug
is pinned here, mark it the same way: a fix then turns the strict xfail into a failure, and the
fixer deletes the marker (and the matching branch of test_properties._known_open_bug, which keeps
the fuzz properties from tripping over the same bug meanwhile).

Commands that would allocate gigabytes while the bug is open run in a child process with a 2 GiB
address-space limit, so the failure is a quick MemoryError, never a machine out of memory.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest
from helpers import run_cli

LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"  # bundled: no network
BAR_CELLS = 60  # render.print_table draws the memory bar 60 cells wide


def _limited_kvplan(*args: str, limit_bytes: int = 2 << 30, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``python -m kvplan ARGS`` in a child with RLIMIT_AS = limit_bytes, offline."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-m", "kvplan", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        preexec_fn=limit,
    )


def _bar_cells(out: str) -> int:
    return sum(out.count(c) for c in "\u2588\u2591")


def test_memory_bar_stays_60_cells_when_kv_cache_memory_exceeds_the_gpu():
    code, out, err = run_cli("estimate", LLAMA3_8B, "--gpu", "H200", "--kv-cache-memory", "500GiB")
    assert code == 1, err  # 500 GiB of KV cache cannot sit on a 139.8 GiB GPU
    assert BAR_CELLS <= _bar_cells(out) <= BAR_CELLS + 2  # +2: five parts rounded one by one


def test_absurd_kv_cache_memory_is_a_clean_does_not_fit():
    proc = _limited_kvplan("estimate", LLAMA3_8B, "--gpu", "H200", "--kv-cache-memory", str(2**62))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode in (1, 2), proc.stderr[-2000:]  # 1: does not fit, or 2: refused as absurd
    if proc.returncode == 2:
        assert proc.stderr.startswith("error: --kv-cache-memory-bytes"), proc.stderr
    else:
        assert "will not start" in proc.stdout
        assert BAR_CELLS <= _bar_cells(proc.stdout) <= BAR_CELLS + 2


def test_absurd_max_num_batched_tokens_is_a_clean_does_not_fit():
    proc = _limited_kvplan("estimate", LLAMA3_8B, "--gpu", "H200", "--max-num-batched-tokens", str(10**20))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode in (1, 2), proc.stderr[-2000:]  # 1: does not fit, or 2: refused as absurd
    if proc.returncode == 2:
        assert proc.stderr.startswith("error: --max-num-batched-tokens"), proc.stderr
    else:
        assert BAR_CELLS <= _bar_cells(proc.stdout) <= BAR_CELLS + 2


def test_no_gpu_memory_utilization_advice_when_kv_cache_memory_is_set():
    import json

    code, out, err = run_cli("estimate", LLAMA3_8B, "--gpu", "H200", "--kv-cache-memory", "500GiB", "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert "--gpu-memory-utilization" not in doc["recommendations"], doc["recommendations"]


def test_tp_advice_counts_the_multi_gpu_non_torch_memory():
    import json

    args = ("estimate", "facebook/opt-125m", "--gpu", "H200", "--gpu-memory", "1GiB", "--gpu-memory-utilization", "0.95")
    code, out, err = run_cli(*args, "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    before = doc["memory"]["kv_cache_bytes"]  # -85,112,465 B: weights 0.23 + activation 0.57 + non-torch 0.22 GiB
    rec = doc["recommendations"].get("--tensor-parallel-size")
    if rec is None:
        return  # no TP advice at all is right: no TP helps here
    code, out, err = run_cli(*args, "--tensor-parallel-size", str(rec["value"]), "--format", "json")
    after = json.loads(out)["memory"]["kv_cache_bytes"]  # -291,377,420 B with the advised -tp 4
    assert after > before, (rec, before, after)
