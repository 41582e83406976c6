"""The estimate table's header names the GPUs the deployment uses (TP x PP x DP x PCP, the same
count as JSON gpu.count) and the layout (DP, EP, DCP, PCP); the evidence names the process group
that makes NCCL memory uncertain, not "tensor/pipeline parallel > 1" for a TP=1, PP=1 layout."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli, unwrapped

MODEL = "deepseek-ai/DeepSeek-V3"


@pytest.mark.parametrize(("flags", "gpus", "layout"), [
    (("-dp", "8", "-ep"), 1 * 1 * 8 * 1, "TP=1, PP=1, DP=8, EP"),   # TP x PP x DP x PCP
    (("-tp", "2", "-pcp", "2"), 2 * 1 * 1 * 2, "TP=2, PP=1, PCP=2"),
    (("-tp", "8", "-dcp", "8"), 8 * 1 * 1 * 1, "TP=8, PP=1, DCP=8"),  # DCP reuses the TP ranks
    (("-tp", "8",), 8, "TP=8, PP=1"),
])
def test_header_counts_the_gpus_used_and_names_the_layout(flags, gpus, layout):
    code, out, err = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", *flags)
    assert code in (0, 1), err  # -tp 2 -pcp 2 does not fit (exit 1): the header still counts its GPUs
    assert unwrapped(out).startswith(f"{MODEL} on {gpus}x NVIDIA H200 SXM 141GB ({layout}) - vLLM")
    code, js, err = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", *flags, "--format", "json")
    assert json.loads(js)["gpu"]["count"] == gpus


def test_evidence_names_the_process_group_that_applies():
    code, js, err = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", "-dp", "8", "-ep",
                            "--format", "json")
    unchecked = json.loads(js)["evidence"]["unchecked"]
    assert not any(u.startswith("tensor/pipeline parallel") for u in unchecked)  # TP=1, PP=1
    assert ("a process group of 8 GPUs (8 data-parallel engines of a MoE model in one world): NCCL and custom "
            "all-reduce memory; every real start ran on one GPU") in unchecked
    code, js, err = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", "-tp", "2", "-pcp", "2",
                            "--format", "json")
    unchecked = json.loads(js)["evidence"]["unchecked"]
    assert any(u.startswith("a process group of 4 GPUs (tensor parallel 2, prefill context parallel 2)")
               for u in unchecked)
