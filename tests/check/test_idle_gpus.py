"""GPUs a multi-node manifest requests per pod beyond what vLLM uses on that node: held by the
pod, paid for, idle. `kvplan check` names them (a gpu-count note, as for one pod with more GPUs
than its serve line uses) in every output format: text, JSON, SARIF, the GitHub summary."""

from __future__ import annotations

import json

import pytest

from tests.check.common import check, write
from tests.helpers import run_cli

# vLLM's multi-node launch (--nnodes 2) of TP 4 x PP 2 = 8 workers: 8 / 2 = 4 GPUs on each node
# (config/parallel.py world_size / nnodes), in a LeaderWorkerSet whose two pods ask 8 each:
# 4 idle on the leader + 4 on the one worker = 8 idle over the group
LWS = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: x}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        hostIPC: true  # the host's /dev/shm for vLLM's shared-memory rings (check's shm-queues)
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.34.0
          args: [meta-llama/Llama-3.1-8B-Instruct, -tp, "4", -pp, "2", --nnodes, "2", --node-rank, "0",
                 --master-addr, $(LWS_LEADER_ADDRESS)]
          resources: {limits: {nvidia.com/gpu: "8"}}
    workerTemplate:
      spec:
        hostIPC: true
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.34.0
          args: [meta-llama/Llama-3.1-8B-Instruct, -tp, "4", -pp, "2", --nnodes, "2", --node-rank, $(LWS_WORKER_INDEX),
                 --master-addr, $(LWS_LEADER_ADDRESS), --headless]
          resources: {limits: {nvidia.com/gpu: "8"}}
"""

# KServe's data-parallel worker template: data 8 / dataLocal 4 = 2 pods, each running
# dataLocal x tensor = 4 x 1 GPUs' engines, each pod asking 8: 4 + 4 = 8 idle
KSERVE = """
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: x}
spec:
  model: {uri: hf://Qwen/Qwen3-30B-A3B}
  parallelism: {tensor: 1, data: 8, dataLocal: 4, expert: true}
  template:
    containers:
    - name: main
      image: vllm/vllm-openai:v0.34.0
      resources: {limits: {nvidia.com/gpu: "8"}}
  worker:
    containers:
    - name: main
      image: vllm/vllm-openai:v0.34.0
      resources: {limits: {nvidia.com/gpu: "8"}}
"""


def _idle(doc: dict) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count"]


@pytest.mark.parametrize("text", [LWS, KSERVE], ids=["lws-nnodes", "kserve-data-parallel"])
def test_idle_gpus_of_a_multi_node_group_are_named(tmp_path, text):
    assert (8 - 4) + (2 - 1) * (8 - 4) == 8  # leader's idle + one worker's
    f = write(tmp_path, "m.yaml", text)
    code, doc, _ = check(f, "--gpu", "H100")
    msgs = [d["message"] for d in _idle(doc)]
    assert all(d["severity"] == "info" for d in _idle(doc)) and code == 0
    assert any("8 GPU(s) on the leader pod but vLLM uses 4" in m and "4 GPU(s) idle" in m for m in msgs), msgs
    assert any("8 GPU(s) idle over the group of 2 pods" in m and "paid for and unused" in m for m in msgs), msgs


def test_idle_gpus_reach_every_output_format(tmp_path, monkeypatch):
    f = write(tmp_path, "m.yaml", LWS)
    phrase = "8 GPU(s) idle over the group of 2 pods"
    code, out, _ = run_cli("check", f, "--gpu", "H100")
    assert phrase in " ".join(out.split())  # the table wraps its lines
    code, out, _ = run_cli("check", f, "--gpu", "H100", "--format", "json")
    assert any(phrase in d["message"] for d in json.loads(out)["diagnostics"])
    code, out, _ = run_cli("check", f, "--gpu", "H100", "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert any(phrase in r["message"]["text"] and r["level"] == "note" for r in results)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run_cli("check", f, "--gpu", "H100")
    assert phrase in summary.read_text()


def test_a_group_using_every_gpu_has_no_idle_note(tmp_path):
    f = write(tmp_path, "m.yaml", LWS.replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "4"'))
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0 and not [d for d in _idle(doc) if "idle" in d["message"]]
