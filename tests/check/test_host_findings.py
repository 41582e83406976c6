"""Host-memory and /dev/shm findings that do not depend on --max-model-len, and compose's
memory limits (check.rules.memory host_checks_without_max_model_len, check.sources.compose
compose_memory_limit).

The region by hand (as tests/check/test_shm.py, vLLM 0.34.0 v1/kv_offload/cpu/spec.py): a
Qwen2.5-7B-Instruct block on one H100 is 2 x 28 layers x 4 KV heads x 128 x 2 B x 64 tokens =
3,670,016 B; --kv-offloading-size N maps (N x 2**30 // 3,670,016) blocks of it.
"""

from __future__ import annotations

import pytest

from tests.check.common import check, write

MODEL = "Qwen/Qwen2.5-7B-Instruct"  # max_position_embeddings 32768
BLOCK = 2 * 28 * 4 * 128 * 2 * 64


def _region(gib: int) -> int:
    return gib * 2**30 // BLOCK * BLOCK


def _ids(doc: dict, severity: str) -> set[str]:
    return {d["check_id"] for d in doc["diagnostics"] if d["severity"] == severity}


def test_a_too_long_max_model_len_hides_no_host_finding(tmp_path):
    # 262,144 > 32,768 tokens: vLLM refuses --max-model-len; independently the 100 GiB pool
    # (107,373,658,112 B) is above the 64Gi = 68,719,476,736 B limit (OOM-kill) and above the
    # runtime's 64 MiB /dev/shm (check_shm_free_space): three errors in one round
    assert _region(100) == 107_373_658_112 > 64 * 2**30 > 64 * 2**20
    f = write(tmp_path, "d.yaml", f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: x}}
    spec:
      template:
        spec:
          containers:
          - name: vllm
            image: vllm/vllm-openai:v0.34.0
            args: ["{MODEL}", "--max-model-len", "262144", "--kv-offloading-size", "100"]
            resources:
              limits: {{nvidia.com/gpu: "1", memory: 64Gi}}
    """)
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1
    assert {"max-model-len-over-limit", "host-memory", "shm-size"} <= _ids(doc, "error")


COMPOSE = f"""
services:
  vllm:
    image: vllm/vllm-openai:v0.34.0
    command: ["{MODEL}", "--kv-offloading-size", "30"]
"""


@pytest.mark.parametrize("limit, severity", [
    ("    mem_limit: 16g\n", "error"),  # 16 x 2**30 < _region(30) (32,212,254,720 B at most)
    ("    deploy: {resources: {limits: {memory: 16G}}}\n", "error"),
    ("    mem_limit: 16g\n    deploy: {resources: {limits: {memory: 16384M}}}\n", "error"),  # equal: both read
    ("    mem_limit: 64g\n", "info"),  # 68,719,476,736 B > the pool
])
def test_compose_memory_limits_are_compared(tmp_path, limit, severity):
    assert 16 * 2**30 < _region(30) < 64 * 2**30
    f = write(tmp_path, "docker-compose.yaml", COMPOSE + "    ipc: host\n" + limit)
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = [d for d in doc["diagnostics"] if d["check_id"] == "host-memory"]
    assert d["severity"] == severity and "no container memory limit" not in d["message"]
    assert ("16.00 GiB" if severity == "error" else "64.00 GiB") in d["message"]
    assert "invalid-value" not in _ids(doc, "error")
    assert code == (1 if severity == "error" else 0)


def test_distinct_compose_memory_limits_are_refused(tmp_path):
    # compose-go loader/validate.go: "can't set distinct values on 'mem_limit' and
    # 'deploy.resources.limits.memory'"; the smaller (16 GiB) is compared
    f = write(tmp_path, "docker-compose.yaml",
              COMPOSE + "    ipc: host\n    mem_limit: 16g\n    deploy: {resources: {limits: {memory: 64G}}}\n")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1 and {"invalid-value", "host-memory"} <= _ids(doc, "error")


def test_the_shm_hint_does_not_offer_ipc_host_when_it_is_set(tmp_path):
    f = write(tmp_path, "docker-compose.yaml", COMPOSE + "    ipc: host\n")
    _, doc, _ = check(f, "--gpu", "H100")
    (d,) = [d for d in doc["diagnostics"] if d["check_id"] == "shm-size"]
    assert d["severity"] == "warning" and "share the host's with ipc: host" not in d["hint"]
    assert "drop ipc: host" in d["hint"]
    f = write(tmp_path, "docker-compose.yaml", COMPOSE)  # a private 64 MiB /dev/shm: ipc: host is a fix
    _, doc, _ = check(f, "--gpu", "H100")
    (d,) = [d for d in doc["diagnostics"] if d["check_id"] == "shm-size"]
    assert d["severity"] == "error" and "ipc: host" in d["hint"]
