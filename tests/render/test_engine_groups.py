"""Mixtral-8x7B -dp 3 -ep (8 experts over 3 GPUs: 3, 3, 2 whole experts): under vLLM 0.33.0 each
engine's blocks are the min over its own workers (engines differ); under 0.34.0 with the
extensible KV cache the min over the whole world group (every engine logs the binding class's
blocks), and the table prints the equal engines as one line."""

from __future__ import annotations

import json

from helpers import run_cli

MIXTRAL = ("estimate", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "-dp", "3", "-ep", "--max-model-len", "8192")


def _parallel(*extra: str) -> dict:
    code, out, err = run_cli(*MIXTRAL, *extra, "--format", "json")
    assert code == 0, err
    return json.loads(out)["parallel"]


def test_034_engines_take_the_world_min_and_print_as_one_line():
    par = _parallel("--vllm-version", "0.34.0")
    classes = {c["local_experts"]: c["num_gpu_blocks"] for c in par["rank_classes"]}
    assert set(classes) == {3, 2} and classes[3] != classes[2]  # the two GPU shares differ
    blocks = [e["num_gpu_blocks"] for e in par["engines"]]
    assert blocks == [min(classes.values())] * 3  # the world-group min, on every engine
    code, out, err = run_cli(*MIXTRAL, "--vllm-version", "0.34.0")
    text = " ".join(out.split())
    assert f"engines 0-2: {blocks[0]:,} blocks" in text and "engine 2:" not in text
    assert "every engine takes the smallest pool" in text


def test_033_engines_keep_their_own_min():
    par = _parallel("--vllm-version", "0.33.0")
    classes = {c["local_experts"]: c["num_gpu_blocks"] for c in par["rank_classes"]}
    # engines 0, 1 have a 3-expert GPU; engine 2 a 2-expert one (8 = 3 + 3 + 2)
    assert [e["num_gpu_blocks"] for e in par["engines"]] == [classes[3], classes[3], classes[2]]
    code, out, err = run_cli(*MIXTRAL, "--vllm-version", "0.33.0")
    text = " ".join(out.split())
    assert "engines 0-1:" in text and "engine 2:" in text and "every engine takes the smallest pool" not in text
