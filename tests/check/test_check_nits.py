"""Flags newer than the deployment's vLLM (newer-flag), the gpu-count hint naming the flag that
overflows, and check's text output keeping model ids and paths whole."""

from __future__ import annotations

from tests.check.common import check, write
from tests.helpers import run_cli


def _k8s(image: str, args: str, gpus: int = 1) -> str:
    return f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: x}}
    spec:
      template:
        spec:
          hostIPC: true
          containers:
          - name: vllm
            image: vllm/vllm-openai:{image}
            args: [Qwen/Qwen2.5-7B-Instruct, {args}]
            resources: {{limits: {{nvidia.com/gpu: "{gpus}"}}}}
    """


def _flags(doc: dict) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] in ("newer-flag", "removed-flag", "unknown-flag")]


def test_a_flag_newer_than_the_image_is_not_yet_in_it(tmp_path):
    # --enable-extensible-kv-cache is read only from vLLM 0.34.0's source (releases.json)
    f = write(tmp_path, "d.yaml", _k8s("v0.26.0", "--enable-extensible-kv-cache"))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _flags(doc)
    assert code == 1 and d["check_id"] == "newer-flag" and d["severity"] == "error"
    assert "not yet in vLLM 0.26.0" in d["message"] and "0.34.0" in d["message"]


def test_an_older_flag_stays_removed_flag(tmp_path):
    f = write(tmp_path, "d.yaml", _k8s("v0.34.0", "--swap-space, \"4\""))
    (d,) = _flags(check(f, "--gpu", "H100")[1])
    assert d["check_id"] == "removed-flag" and "not yet" not in d["message"]


def test_an_unread_older_release_questions_every_flag_it_sets(tmp_path):
    # v0.10.2 is older than every release kvplan has read (0.20.0 on): --kv-offloading-size is in
    # 0.20.0's table, but nothing says 0.10.2 has it
    f = write(tmp_path, "d.yaml", _k8s("v0.10.2", "--kv-offloading-size, \"10\""))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = [d for d in _flags(doc) if d["check_id"] == "newer-flag"]
    assert d["severity"] == "warning" and "--kv-offloading-size" in d["message"] and "0.10.2" in d["message"]
    assert check(f, "--gpu", "H100", "--strict")[0] == 1


LWS = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: x}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        hostIPC: true
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.34.0
          command: [sh, -c, "ray start --head && vllm serve meta-llama/Llama-3.1-405B -tp 8 -pp 3 --distributed-executor-backend ray"]
          resources: {limits: {nvidia.com/gpu: "8"}}
    workerTemplate:
      spec:
        hostIPC: true
        containers:
        - name: vllm
          image: vllm/vllm-openai:v0.34.0
          command: [sh, -c, "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]
          resources: {limits: {nvidia.com/gpu: "8"}}
"""


def test_the_gpu_count_hint_names_pipeline_parallel_when_it_overflows(tmp_path):
    # TP 8 x PP 3 = 24 GPUs > the group's 2 x 8 = 16: PP 2 (8 x 2 = 16) fits, so does a smaller TP
    f = write(tmp_path, "lws.yaml", LWS)
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count" and d["severity"] == "error"]
    assert "-pp" in d["hint"] and d["hint"].index("-pp") < d["hint"].index("-tp")


def test_the_text_output_keeps_a_model_id_whole(tmp_path):
    f = write(tmp_path, "lws.yaml", LWS.replace("-pp 3", "-pp 2"))
    code, out, _ = run_cli("check", f, "--gpu", "H100")
    assert "meta-llama/Llama-3.1-405B" in out  # never split over two lines (rich's 80 columns in a pipe)
    assert "distributed/device_communicators/shm_broadcast.py" in out
