"""`kvplan check` on multi-GPU recipes (issue 20): vLLM's DeepSeek-V3 recipe (DP 8 + expert
parallel on 8x H200) and Qwen3-235B-A22B TP 4 x DP 2 + EP on 8x H100, as a vLLM --config YAML,
a Kubernetes Deployment and a LeaderWorkerSet, pass with per-engine figures and the
not-checked-on-multi-GPU-hardware label; a LeaderWorkerSet is one deployment whose GPUs are
counted across the group, and its headless worker is not a server of its own.

Expected engine counts are the recipes' own flags (DP 8, DP 2, DP 16); the per-engine figures'
arithmetic is tests/capacity/test_ranks.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "check" / "multigpu"
NOT_CHECKED = "derived from the vLLM source, not checked on multi-GPU hardware"


def check_json(path: Path, gpu: str) -> dict:
    code, out, err = run_cli("check", str(path), "--gpu", gpu, "--format", "json")
    doc = json.loads(out)
    assert code == doc["exit_code"], err
    return doc


def deployments(doc: dict) -> list[dict]:
    return [d for f in doc["files"] for d in f["deployments"]]


def diagnostics(doc: dict, dep: dict) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["deployment"] == dep["name"]]


@pytest.mark.parametrize(
    "name, gpu, engines, gpus",
    [
        ("deepseek-v3-dp8-ep.yaml", "H200", 8, 8),
        ("deepseek-v3-deployment.yaml", "H200", 8, 8),
        ("deepseek-v3-lws-dp16.yaml", "H200", 16, 16),
        ("deepseek-v3-two-nodes.sh", "H200", 16, 16),  # a leader/worker pair in a script
        ("qwen3-235b-tp4-dp2-ep.yaml", "H100", 2, 8),
        ("qwen3-235b-deployment.yaml", "H100", 2, 8),
        ("qwen3-235b-lws.yaml", "H100", 2, 8),
    ],
)
def test_recipe_passes_with_per_engine_figures_and_the_label(name, gpu, engines, gpus):
    doc = check_json(DATA / name, gpu)
    assert doc["exit_code"] == 0, json.dumps(deployments(doc), indent=1)[:3000]
    (dep,) = deployments(doc)  # a LeaderWorkerSet is one deployment: its headless worker is not listed
    fig = dep["figures"]
    assert fig["fits"] is True and fig["gpus"] == gpus and len(fig["engines"]) == engines
    assert all(e["max_concurrency"] == fig["max_concurrency"] for e in fig["engines"])
    assert fig["cluster_max_concurrency"] == pytest.approx(engines * fig["max_concurrency"], abs=0.01 * engines)
    assert fig["multi_gpu"] == NOT_CHECKED
    assert NOT_CHECKED in dep["evidence"]["label"]
    assert not [d for d in diagnostics(doc, dep) if d["severity"] == "error"]


def test_table_verdict_says_per_engine_and_not_checked():
    code, out, err = run_cli("check", str(DATA / "deepseek-v3-dp8-ep.yaml"), "--gpu", "H200")
    text = " ".join(out.split())
    assert code == 0
    assert "per engine, 8 engine(s) on 8 GPUs" in text and NOT_CHECKED in text


def test_lws_with_too_few_gpus_per_pod_names_the_data_parallel_flag(tmp_path):
    # 8 engines per pod (--data-parallel-size-local 8) on 4-GPU pods: 8 GPUs needed per node
    text = (DATA / "deepseek-v3-lws-dp16.yaml").read_text().replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "4"')
    path = tmp_path / "lws.yaml"
    path.write_text(text)
    doc = check_json(path, "H200")
    assert doc["exit_code"] == 1
    (dep,) = deployments(doc)
    (err,) = [d for d in diagnostics(doc, dep) if d["check_id"] == "gpu-count"]
    assert err["severity"] == "error" and "needs 8" in err["message"]
    assert "--data-parallel-size-local" in err["hint"]


def test_moe_dp_without_ep_that_does_not_fit_names_expert_parallel(tmp_path):
    path = tmp_path / "dsv3-dp2.yaml"
    path.write_text("model: deepseek-ai/DeepSeek-V3\ndata-parallel-size: 2\n")
    doc = check_json(path, "H200")
    assert doc["exit_code"] == 1
    (dep,) = deployments(doc)
    errs = [d for d in diagnostics(doc, dep) if d["severity"] == "error"]
    assert errs and "data-parallel-size 2" in errs[0]["message"]
    assert "--enable-expert-parallel" in errs[0]["hint"]


def test_dcp_is_modelled_8x_the_tokens_in_the_same_blocks():
    # issue 20: `-tp 8 -dcp 8` passed with a 'not modelled' note; vLLM logs ~8x the tokens
    (base,) = deployments(check_json(DATA / "deepseek-v3-tp8.yaml", "H200"))
    doc = check_json(DATA / "deepseek-v3-tp8-dcp8.yaml", "H200")
    (dcp,) = deployments(doc)
    assert doc["exit_code"] == 0
    assert not [d for d in diagnostics(doc, dcp) if d["check_id"] == "not-modelled"]
    assert dcp["figures"]["num_gpu_blocks"] == base["figures"]["num_gpu_blocks"]
    # 32768 tokens = cdiv(32768, 8) = 4096 per rank: blocks / (4096 / bs) requests of 32768 tokens
    assert dcp["figures"]["gpu_kv_cache_tokens"] == 8 * base["figures"]["gpu_kv_cache_tokens"]
    assert NOT_CHECKED in dcp["evidence"]["label"] and NOT_CHECKED not in base["evidence"]["label"]
