"""Layouts and flags that would get a green verdict without saying what is wrong: more GPUs on one
node than kvplan assumes a node holds (8), --headless on one node, --node-rank without --nnodes,
-ep on a dense model."""

from __future__ import annotations

import json

from helpers import run_cli

DSV3 = "deepseek-ai/DeepSeek-V3"


def _warnings(*args: str) -> tuple[int, list[str]]:
    code, out, err = run_cli("estimate", *args, "--max-model-len", "8192", "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)["warnings"]


def test_sixteen_gpus_on_one_node_warn_like_tp_16():
    # TP 8 x PP 1 x PCP 1 x DP 2 = 16 GPUs, no --nnodes: all on one node
    _, ws = _warnings(DSV3, "--gpu", "H200", "-tp", "8", "-dcp", "8", "-dp", "2")
    node = [w for w in ws if "kvplan assumes 8 GPUs per node" in w]
    assert len(node) == 1 and node[0].startswith("16 GPUs on one node") and "--nnodes 2" in node[0]
    # TP 8 x PP 2 = 16 GPUs of one engine on one node
    _, ws = _warnings(DSV3, "--gpu", "H200", "-tp", "8", "-pp", "2")
    assert any(w.startswith("16 GPUs on one node") for w in ws)
    # the same 16 GPUs over 2 nodes (8 each), and 8 GPUs on one node: no warning
    for flags in (("-tp", "8", "-dcp", "8", "-dp", "2", "--nnodes", "2"), ("-tp", "8", "-dcp", "8")):
        _, ws = _warnings(DSV3, "--gpu", "H200", *flags)
        assert not any("GPUs per node" in w for w in ws), ws
    # -tp 16 keeps its own warning, once
    _, ws = _warnings(DSV3, "--gpu", "H200", "-tp", "16")
    assert [w for w in ws if "GPUs per node" in w][0].startswith("--tensor-parallel-size 16 spans more than one node")
    assert len([w for w in ws if "GPUs per node" in w]) == 1


LLAMA = "meta-llama/Llama-3.1-8B"


def test_headless_on_one_node_warns_it_serves_nothing():
    # vLLM 0.33.0 entrypoints/cli/serve.py: --headless runs engines and no API server
    _, ws = _warnings(LLAMA, "--gpu", "H100", "--headless")
    assert any(w.startswith("--headless on one node") and "serves no request" in w for w in ws), ws
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "H100", "--headless", "--max-model-len", "8192")
    assert "--headless on one node" in " ".join(out.split())


def test_node_rank_without_nnodes_warns_and_out_of_range_is_refused():
    # vLLM engine/arg_utils.py checks 0 <= node_rank < nnodes only when nnodes > 1; with one
    # node it starts as node 0: a warning, not a refusal
    code, ws = _warnings(LLAMA, "--gpu", "H100", "--node-rank", "1")
    assert code == 0 and any(w.startswith("--node-rank 1 without --nnodes > 1: vLLM ignores it") for w in ws), ws
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "H100", "-tp", "2", "--nnodes", "2", "--node-rank", "2",
                             "--max-model-len", "8192")
    assert code == 2 and "--node-rank" in err
    _, ws = _warnings(LLAMA, "--gpu", "H100", "-tp", "2", "--nnodes", "2", "--node-rank", "1")
    assert not any("--node-rank" in w for w in ws)


def test_expert_parallel_on_a_dense_model_warns_it_has_no_effect():
    _, ws = _warnings(LLAMA, "--gpu", "H100", "-ep")
    assert any(w.startswith("--enable-expert-parallel on a dense model") and "no effect" in w for w in ws), ws
    _, ws = _warnings(DSV3, "--gpu", "H200", "-dp", "8", "-ep")  # a MoE model: EP applies
    assert not any("--enable-expert-parallel on a dense model" in w for w in ws)
