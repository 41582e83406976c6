"""vLLM 0.33+'s /dev/shm KV offload region against the /dev/shm a deployment file gives vLLM
(check.rules.shm, check.sources.shm), and the /dev/shm the manifest writers mount for it.

The region by hand, from vLLM 0.34.0's rule (v1/kv_offload/cpu/spec.py CPUOffloadingSpec:
kv_bytes_per_chunk = world_size x worker_kv_bytes_per_block x blocks_per_chunk, rounded up to
mmap.PAGESIZE = 4096; num_chunks = cpu_bytes_to_use // that; shared_offload_region.py
SharedOffloadRegion total_size_bytes = num_chunks x chunk; config/vllm.py: cpu_bytes_to_use =
--kv-offloading-size x 2**30): Qwen2.5-7B-Instruct (28 layers, 4 KV heads of 128, bf16) on one
H100 under 0.34.0 uses 64-token blocks (the figures' block_size, asserted below), so one block
is 2 (K, V) x 28 x 4 x 128 x 2 B x 64 = 3,670,016 B = 896 pages (aligned as it is), and
--kv-offloading-size 100 maps 107,374,182,400 // 3,670,016 = 29,257 chunks = 107,373,658,112 B
(99.9995 GiB) of /dev/shm.
"""

from __future__ import annotations

import pytest
import yaml

from tests.check.common import MOUNT_DSHM, check, vllm_deployment, write
from tests.helpers import run_cli

MODEL = "Qwen/Qwen2.5-7B-Instruct"
BLOCK = 2 * 28 * 4 * 128 * 2 * 64
CHUNKS = 100 * 2**30 // BLOCK
REGION = CHUNKS * BLOCK


def test_the_hand_arithmetic():
    assert BLOCK == 3_670_016 and BLOCK % 4096 == 0
    assert CHUNKS == 29_257 and REGION == 107_373_658_112


def _k8s(image: str = "v0.34.0", pod: str = "", mounts: str = "", flags: str = "", limits: str = "") -> str:
    return vllm_deployment(f'"{MODEL}", "--kv-offloading-size", "100"{flags}', image=image, pod=pod, mounts=mounts,
                           limits=limits)


MOUNT = MOUNT_DSHM


def _volume(spec: str) -> str:
    return f"""          volumes:
          - name: dshm
            {spec}
"""


def _shm(doc: dict) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == "shm-size"]


def test_no_volume_at_dev_shm_is_the_runtimes_64_mib(tmp_path):
    # no mount at /dev/shm: the container runtime's tmpfs of 64 MiB = 67,108,864 B < REGION:
    # check_shm_free_space raises "Insufficient space in /dev/shm" -> vLLM does not start
    f = write(tmp_path, "d.yaml", _k8s())
    code, doc, _ = check(f, "--gpu", "H100")
    assert doc["files"][0]["deployments"][0]["figures"]["block_size"] == 64  # the block the arithmetic uses
    (d,) = _shm(doc)
    assert code == 1 and d["severity"] == "error" and d["key"] == "--kv-offloading-size"
    # the pool kvplan sized is the hand count of chunks (one block a chunk)
    assert any(f"({CHUNKS:,} blocks)" in n["message"] for n in doc["diagnostics"] if n["check_id"] == "planner-note")
    assert f"{REGION / 2**30:.2f} GiB" in d["message"] and f"{64 * 2**20 / 2**30:.2f} GiB" in d["message"]
    assert "64 MiB default" in d["message"] and "sizeLimit: 100Gi" in d["hint"]


@pytest.mark.parametrize("size, severity", [("100Gi", "info"), ("99Gi", "error")])
def test_a_sized_memory_emptydir(tmp_path, size, severity):
    # 100Gi = 107,374,182,400 B >= REGION (107,373,158,912 B): it fits; 99Gi = 106,300,440,576 B does not
    assert (100 * 2**30 >= REGION) and (99 * 2**30 < REGION)
    f = write(tmp_path, "d.yaml", _k8s(pod=_volume(f"emptyDir: {{medium: Memory, sizeLimit: {size}}}"), mounts=MOUNT))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _shm(doc)
    assert d["severity"] == severity and f"sizeLimit {size}" in d["message"]
    assert code == (0 if severity == "info" else 1)


def test_a_memory_emptydir_is_bounded_by_the_pods_memory_limits(tmp_path):
    # Kubernetes: a memory emptyDir holds at most min(sizeLimit, the containers' memory limits);
    # without either the node's memory bounds it, a size the file does not say -> warning
    f = write(tmp_path, "d.yaml", _k8s(pod=_volume("emptyDir: {medium: Memory}"), mounts=MOUNT))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _shm(doc)
    assert d["severity"] == "warning" and "no sizeLimit and no memory limit" in d["message"]
    assert check(f, "--gpu", "H100", "--strict")[0] == 1
    # a 64Gi memory limit bounds the tmpfs below the region (sizeLimit 200Gi or none)
    f = write(tmp_path, "e.yaml", _k8s(pod=_volume("emptyDir: {medium: Memory, sizeLimit: 200Gi}"), mounts=MOUNT,
                                       limits=", memory: 64Gi"))
    code, doc, _ = check(f, "--gpu", "H100")
    assert [(d["severity"], d["key"]) for d in _shm(doc)] == [("error", "--kv-offloading-size")]
    assert "memory limits" in _shm(doc)[0]["message"]


def test_the_hosts_dev_shm_is_a_warning(tmp_path):
    f = write(tmp_path, "d.yaml", _k8s(pod="          hostIPC: true\n"))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _shm(doc)
    assert code == 0 and d["severity"] == "warning" and d["key"] == "hostIPC"


def test_data_parallel_engines_map_a_region_each(tmp_path):
    # -dp 2 on one pod: two engines, engine ids x_dp0 and x_dp1, two files: 2 x REGION =
    # 214,747,316,224 B > 150Gi = 161,061,273,600 B
    assert 2 * REGION > 150 * 2**30
    f = write(tmp_path, "d.yaml", _k8s(pod=_volume("emptyDir: {medium: Memory, sizeLimit: 150Gi}"), mounts=MOUNT,
                                       flags=', "-dp", "2"').replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"'))
    code, doc, _ = check(f, "--gpu", "H100")
    (d,) = _shm(doc)
    assert d["severity"] == "error" and f"{2 * REGION / 2**30:.2f} GiB" in d["message"] and "2 engines" in d["message"]


def test_vllm_0_26_keeps_the_pool_in_pinned_memory(tmp_path):
    # 0.26.0: one pinned torch tensor per KV tensor (v0_26/addons.py), no /dev/shm file
    f = write(tmp_path, "d.yaml", _k8s(image="v0.26.0"))
    code, doc, _ = check(f, "--gpu", "H100")
    assert not _shm(doc)


COMPOSE = f"""
services:
  vllm:
    image: vllm/vllm-openai:v0.34.0
    command: ["{MODEL}", "--kv-offloading-size", "100"]
"""


@pytest.mark.parametrize("extra, severity", [("", "error"), ("    shm_size: 100gb\n", "info"),
                                             ("    shm_size: 99g\n", "error"), ("    ipc: host\n", "warning")])
def test_compose_shm_size(tmp_path, extra, severity):
    # Docker's default /dev/shm is 64m; shm_size in powers of 1024 (100gb = 107,374,182,400 B)
    f = write(tmp_path, "docker-compose.yaml", COMPOSE + extra)
    code, doc, _ = check(f, "--gpu", "H100")
    assert [d["severity"] for d in _shm(doc)] == [severity]


@pytest.mark.parametrize("opts, severity", [("--shm-size 16g", "error"), ("--shm-size=128g", "info"), ("--ipc=host", "warning")])
def test_docker_run_shm_size(tmp_path, opts, severity):
    # 16 GiB < REGION <= 128 GiB
    f = write(tmp_path, "serve.sh", f"docker run --gpus all {opts} vllm/vllm-openai:v0.34.0 {MODEL} --kv-offloading-size 100\n")
    code, doc, _ = check(f, "--gpu", "H100")
    assert [d["severity"] for d in _shm(doc)] == [severity]


def test_a_plain_serve_line_has_no_container_dev_shm(tmp_path):
    # on the host: its own /dev/shm, not a container's; nothing to compare
    f = write(tmp_path, "serve.sh", f"vllm serve {MODEL} --kv-offloading-size 100\n")
    code, doc, _ = check(f, "--gpu", "H100", "--vllm-version", "0.34.0")
    assert not _shm(doc)


@pytest.mark.parametrize("fmt", ("k8s", "lws", "kserve", "llm-d", "compose"))
def test_writers_mount_a_dev_shm_that_holds_the_region(tmp_path, fmt):
    # sizeLimit = ceil(REGION / GiB) + 1 GiB of room (render/served.py SHM_HEADROOM_GIB) = 100 + 1
    assert -(-REGION // 2**30) + 1 == 101
    code, text, err = run_cli("estimate", MODEL, "--gpu", "H100", "--kv-offloading-size", "100", "--format", fmt)
    assert code == 0, err
    doc = yaml.safe_load(text)
    if fmt == "compose":
        svc = doc["services"]["vllm"]
        assert svc["shm_size"] == "101gb" and "ipc" not in svc
    else:
        assert "sizeLimit: 101Gi" in text and "mountPath: /dev/shm" in text and "memory: 101Gi" in text
    p = tmp_path / ("docker-compose.yaml" if fmt == "compose" else f"{fmt}.yaml")
    p.write_text(text)
    code, doc, _ = check(str(p), "--strict")
    assert code == 0, [d["text"] for d in doc["diagnostics"] if d["severity"] != "info"]
    (d,) = _shm(doc)
    assert d["severity"] == "info" and "101.00 GiB" in d["message"]


def test_without_offloading_the_writers_mount_nothing():
    code, text, _ = run_cli("estimate", MODEL, "--gpu", "H100", "--format", "k8s")
    assert code == 0 and "/dev/shm" not in text and "volumes" not in text


def test_the_simple_cpu_offload_connector_pins_memory_instead(tmp_path):
    # SimpleCPUOffloadConnector allocates pinned torch tensors (v1/simple_kv_offload/worker.py
    # _alloc_cpu_caches), no /dev/shm file: nothing to compare with the 64 MiB default
    cfg = '{\\"kv_connector\\":\\"SimpleCPUOffloadConnector\\",\\"kv_role\\":\\"kv_both\\",' \
          '\\"kv_connector_extra_config\\":{\\"cpu_bytes_to_use\\":107374182400}}'
    f = write(tmp_path, "d.yaml", _k8s().replace('"--kv-offloading-size", "100"', f'"--kv-transfer-config", "{cfg}"'))
    code, doc, _ = check(f, "--gpu", "H100")
    assert any("SimpleCPUOffloadConnector" in d["message"] for d in doc["diagnostics"])  # the connector was read
    assert not _shm(doc)
