"""A multi-GPU engine's shared-memory rings in /dev/shm (check.rules.shm queue_check, the
version's check_rules.node_rings) and the /dev/shm the manifest writers mount for them.

The rings by hand, from vLLM 0.34.0's source (0.26.0 and 0.33.0 alike):
shm_broadcast.py ShmRingBuffer: one ring = (max_chunk_bytes + 1 + local readers) x max_chunks;
multiproc_executor.py: one rpc_broadcast_mq per engine, MessageQueue(world, local world,
max_chunk_bytes = VLLM_MQ_MAX_CHUNK_BYTES_MB 16 MiB), 10 chunks; one worker_response_mq per
worker, MessageQueue(1, 1): 24 MiB x 10, one reader; parallel_state.py: one mq_broadcaster per
TP group of > 1 ranks, 1 << 22 = 4 MiB x 6, TP - 1 readers. 0.33.0 added check_shm_free_space
before each ring.
"""

from __future__ import annotations

import pytest
import yaml

from tests.check.common import MOUNT_DSHM, check, vllm_deployment, write
from tests.helpers import run_cli

MIB = 2**20
# TP 4, one engine: rpc (16 MiB + 1 + 4) x 10, 4 x (24 MiB + 1 + 1) x 10, one TP group (4 MiB + 1 + 3) x 6
TP4 = (16 * MIB + 5) * 10 + 4 * (24 * MIB + 2) * 10 + (4 * MIB + 4) * 6
RESPONSE = (24 * MIB + 2) * 10  # the largest ring: 251,658,260 B > 64 MiB = 67,108,864 B
# 8 DP engines of one GPU on a pod: 8 x (rpc (16 MiB + 2) x 10 + one response ring)
DP8 = 8 * ((16 * MIB + 2) * 10 + RESPONSE)


def test_the_hand_arithmetic():
    assert TP4 == 1_199_571_098 and -(-TP4 // 2**30) + 1 == 3  # the writers' sizeLimit: 2 GiB + 1 GiB of room
    assert RESPONSE == 251_658_260 > 64 * MIB
    assert DP8 == 3_355_443_520 and -(-DP8 // 2**30) + 1 == 5


def test_the_rule_gives_the_hand_sizes():
    from kvplan.engines.vllm import versions

    rules = versions.select("0.34.0").check_rules
    assert sum(rules.node_rings(4, 4, 1)) == TP4 and max(rules.node_rings(4, 4, 1)) == RESPONSE
    assert sum(rules.node_rings(1, 1, 8)) == DP8
    assert rules.node_rings(1, 1, 1) == ()  # one GPU: the in-process executor, no ring
    assert rules.RING_FREE_SPACE_CHECKED and not versions.select("0.26.0").check_rules.RING_FREE_SPACE_CHECKED


def _k8s(image: str = "v0.34.0", pod: str = "", mounts: str = "", gpus: int = 4) -> str:
    return vllm_deployment(f'"meta-llama/Llama-3.1-70B-Instruct", "-tp", "{gpus}"', image=image, pod=pod,
                           mounts=mounts, gpus=str(gpus))


MOUNT = MOUNT_DSHM


def _q(doc: dict) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == "shm-queues"]


def test_the_64_mib_default_refuses_a_tp_engine_from_vllm_0_33(tmp_path):
    # 0.34.0: the 240 MiB response ring is checked against 64 MiB free -> "Insufficient space"
    f = write(tmp_path, "d.yaml", _k8s())
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _q(doc)
    assert code == 1 and d["severity"] == "error"
    assert f"{TP4 / MIB:.0f} MiB in all" in d["message"] and f"{RESPONSE / MIB:.0f} MiB each" in d["message"]
    assert "sizeLimit: 3Gi" in d["hint"]


def test_vllm_0_26_creates_the_rings_unchecked_a_warning(tmp_path):
    f = write(tmp_path, "d.yaml", _k8s(image="v0.26.0"))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _q(doc)
    assert d["severity"] == "warning" and "NCCL" in d["message"] and code == 0
    assert check(f, "--gpu", "H100", "--strict")[0] == 1


@pytest.mark.parametrize("pod, mounts, severity", [
    ("          volumes:\n          - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 2Gi}}\n", MOUNT, "info"),
    # 1Gi = 1,073,741,824 B holds the largest ring but not the 1,199,571,098 B of all of them full
    ("          volumes:\n          - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 1Gi}}\n", MOUNT, "info"),
    ("          volumes:\n          - {name: dshm, emptyDir: {medium: Memory, sizeLimit: 128Mi}}\n", MOUNT, "error"),
    ("          hostIPC: true\n", "", "info"),
])
def test_a_mounted_dev_shm(tmp_path, pod, mounts, severity):
    assert 1 * 2**30 < TP4 <= 2 * 2**30 and 128 * MIB < RESPONSE <= 2**30
    f = write(tmp_path, "d.yaml", _k8s(pod=pod, mounts=mounts))
    code, doc, _ = check(f, "--gpu", "H100")
    assert [d["severity"] for d in _q(doc)] == [severity]


def test_one_gpu_has_no_ring(tmp_path):
    f = write(tmp_path, "d.yaml", _k8s(gpus=1).replace("Llama-3.1-70B", "Llama-3.1-8B"))
    assert not _q(check(f, "--gpu", "H100")[1])


def test_every_output_format_carries_it(tmp_path, monkeypatch):
    import json

    f = write(tmp_path, "d.yaml", _k8s())
    phrase = "shared-memory rings"
    code, out, _ = run_cli("check", f, "--gpu", "H100")
    assert phrase in " ".join(out.split()) and "shm-queues" in out
    code, out, _ = run_cli("check", f, "--gpu", "H100", "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert any(r["ruleId"] == "shm-queues" and r["level"] == "error" for r in results)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run_cli("check", f, "--gpu", "H100")
    assert "shm-queues" in summary.read_text()


@pytest.mark.parametrize("fmt, model, flags, size", [
    ("k8s", "meta-llama/Llama-3.1-70B-Instruct", ("-tp", "4"), "3Gi"),
    ("kserve", "meta-llama/Llama-3.1-70B-Instruct", ("-tp", "4"), "3Gi"),
    ("llm-d", "meta-llama/Llama-3.1-70B-Instruct", ("-tp", "4"), "3Gi"),
    ("lws", "deepseek-ai/DeepSeek-V3", ("-dp", "16", "-dpl", "8", "-ep", "--nnodes", "2"), "5Gi"),
    ("llm-d", "deepseek-ai/DeepSeek-V3", ("-dp", "16", "-dpl", "8", "-ep", "--nnodes", "2"), "5Gi"),
])
def test_writers_mount_a_dev_shm_for_a_multi_gpu_engine(tmp_path, fmt, model, flags, size):
    gpu = "H200" if "DeepSeek" in model else "H100"
    code, text, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 0, err
    assert f"sizeLimit: {size}" in text and "mountPath: /dev/shm" in text and "medium: Memory" in text
    p = tmp_path / f"{fmt}.yaml"
    p.write_text(text)
    code, doc, _ = check(str(p))
    assert [d["severity"] for d in _q(doc)] and {d["severity"] for d in _q(doc)} == {"info"}


def test_the_lws_ray_pattern_mounts_the_pods_share(tmp_path):
    # 405B, TP 8 x PP 2 = 16 GPUs over 2 pods of 8 (Ray): 8 workers on a pod:
    # rpc (16 MiB + 9) x 10 + 8 response rings + one TP group of 8 (4 MiB + 8) x 6
    rings = (16 * MIB + 9) * 10 + 8 * RESPONSE + (4 * MIB + 8) * 6
    assert -(-rings // 2**30) + 1 == 4
    code, text, err = run_cli("estimate", "meta-llama/Llama-3.1-405B", "--gpu", "H100", "-tp", "8", "-pp", "2",
                              "--format", "lws")
    assert code == 0, err
    doc = yaml.safe_load(text)
    for t in ("leaderTemplate", "workerTemplate"):
        (vol,) = doc["spec"]["leaderWorkerTemplate"][t]["spec"]["volumes"]
        assert vol["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}


def test_compose_keeps_ipc_host_for_a_multi_gpu_engine():
    code, text, _ = run_cli("estimate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "-tp", "4",
                            "--format", "compose")
    assert code == 0 and yaml.safe_load(text)["services"]["vllm"]["ipc"] == "host"
