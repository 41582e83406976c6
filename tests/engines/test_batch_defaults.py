"""vLLM 0.26.0 engine/arg_utils.py get_batch_defaults: the device's own total memory picks the
scheduler defaults. >= 70 GiB (and not an A100): max_num_batched_tokens 8192 / max_num_seqs 1024
for `vllm serve`; below: 2048 / 256. A --gpu-memory total replaces the device's, tier included."""

from __future__ import annotations

import json

from tests.helpers import run_cli

GiB = 1 << 30


def _engine(*args: str) -> dict:
    code, out, err = run_cli("estimate", "Qwen/Qwen3-8B", *args, "--format", "json", "--vllm-version", "0.26.0")
    assert code == 0, err
    return json.loads(out)


def test_small_gpu_memory_gets_the_small_tier_defaults():
    doc = _engine("--gpu-memory", "23.69GiB")  # no --gpu: the H200 profile with 23.69 GiB
    assert (doc["engine"]["max_num_batched_tokens"], doc["engine"]["max_num_seqs"]) == (2048, 256)
    # and the figures are those of a 23.69 GiB device with those values set by hand
    pinned = _engine("--gpu-memory", "23.69GiB", "--max-num-batched-tokens", "2048", "--max-num-seqs", "256")
    assert doc["kv_cache"]["gpu_kv_cache_tokens"] == pinned["kv_cache"]["gpu_kv_cache_tokens"]


def test_large_gpu_memory_keeps_the_large_tier():
    doc = _engine("--gpu-memory", "80GiB")
    assert (doc["engine"]["max_num_batched_tokens"], doc["engine"]["max_num_seqs"]) == (8192, 1024)
    doc = _engine("--gpu-memory", "69GiB")
    assert (doc["engine"]["max_num_batched_tokens"], doc["engine"]["max_num_seqs"]) == (2048, 256)
