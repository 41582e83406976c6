"""vLLM versions are selected once through one table (kvplan.engines.vllm.versions): a new
version is one rules object plus one line in that table, and the estimate follows it."""

from __future__ import annotations

import dataclasses

import pytest

from kvplan.capacity.estimate import plan
from kvplan.engines.vllm import versions
from kvplan.engines.vllm.args import EngineArgs
from kvplan.errors import KvplanError
from kvplan.gpus import find_gpu, load_profiles
from kvplan.sources import load_spec

MiB = 1 << 20


def _fake_rules(extra_non_torch: int):
    """A fictitious vLLM "9.9.9": 0.26.0's rules with more non-torch memory per GPU."""
    base = versions.SUPPORTED["0.26.0"]
    c = base.coefficients
    return dataclasses.replace(
        base,
        version="9.9.9",
        evidence="test rules",
        coefficients=dataclasses.replace(c, non_torch_single_gpu=c.non_torch_single_gpu + extra_non_torch),
    )


def _llama3_8b_h200(version: str):
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    gpu = find_gpu("H200", load_profiles())
    return plan(spec, gpu, EngineArgs(max_model_len=8192, vllm_version=version))


def test_a_registered_version_changes_the_estimate_by_hand_computed_bytes(monkeypatch):
    # One block of Llama-3-8B on one GPU: 32 layers x 16 tokens x 8 KV heads x 128 x (K+V) x 2 B
    # = 2,097,152 B. Ten blocks' worth more non-torch memory leaves exactly ten blocks fewer.
    block = 32 * 16 * 8 * 128 * 2 * 2
    assert block == 2 * MiB
    monkeypatch.setitem(versions.SUPPORTED, "9.9.9", _fake_rules(10 * block))
    old, new = _llama3_8b_h200("0.26.0"), _llama3_8b_h200("9.9.9")
    assert new.rules is versions.SUPPORTED["9.9.9"] and old.rules is versions.SUPPORTED["0.26.0"]
    assert new.layout.bytes_per_block == old.layout.bytes_per_block == block
    b_old, b_new = old.stages[0].budget, new.stages[0].budget
    assert b_new.non_torch_bytes - b_old.non_torch_bytes == 10 * block
    assert b_old.kv_cache_bytes - b_new.kv_cache_bytes == 10 * block
    assert old.num_gpu_blocks - new.num_gpu_blocks == 10
    assert new.effective["vllm_version"] == "9.9.9"


def test_an_unknown_version_is_refused_by_the_table():
    with pytest.raises(KvplanError) as exc:
        versions.select("0.1.0")
    assert exc.value.message == "--vllm-version: kvplan has no rules for vLLM '0.1.0'"
    assert exc.value.hint == "supported: " + ", ".join(versions.SUPPORTED)
    with pytest.raises(KvplanError):
        _llama3_8b_h200("0.1.0")
