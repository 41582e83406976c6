"""Several vLLM processes on one host using one GPU (kvplan.check.rules.shared_gpus): vLLM 0.26.0
asks for gpu_memory_utilization x the GPU's total memory at start and exits when less than that
is free (v1/worker/utils.py request_memory), so two processes at 0.92 on one GPU cannot both
start (0.92 + 0.92 = 1.84 > 1), while 0.45 + 0.45 = 0.90 can. GPUs pinned apart
(CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, compose device_ids) do not share, and neither do
separate Kubernetes pods.
"""

from __future__ import annotations

from tests.check.common import check, write

M = "meta-llama/Llama-3.1-8B-Instruct"


def _shared(doc) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == "shared-gpu"]


def _service(name: str, extra_cmd: str = "", devices: str = "count: 1", env: str = "") -> str:
    return f"""
  {name}:
    image: vllm/vllm-openai:v0.26.0
    command: ["--model", "{M}", "--max-model-len", "8192"{extra_cmd}]{env}
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              {devices}
              capabilities: [gpu]
"""


def _compose(tmp_path, *services: str) -> str:
    return write(tmp_path, "docker-compose.yml", "# kvplan: gpu=H100\nservices:" + "".join(services))


def test_two_compose_services_on_one_gpu_at_the_default_utilization_fail(tmp_path):
    f = _compose(tmp_path, _service("a"), _service("b", ', "--gpu-memory-utilization", "0.92"'))
    code, doc, _ = check(f, "--vllm-version", "0.26.0")
    found = _shared(doc)
    assert code == 1 and {d["deployment"] for d in found} == {"service a", "service b"}
    a = next(d for d in found if d["deployment"] == "service a")
    assert "GPU 0 is also used by service b (0.92)" in a["message"] and "1.84" in a["message"]
    assert "(the default)" in a["message"]  # a sets no --gpu-memory-utilization
    b = next(d for d in found if d["deployment"] == "service b")
    assert b["key"] == "--gpu-memory-utilization" and "service a (0.92)" in b["message"]


def test_shares_that_add_up_to_at_most_one_pass(tmp_path):
    half = ', "--gpu-memory-utilization", "0.45"'
    code, doc, _ = check(_compose(tmp_path, _service("a", half), _service("b", half)), "--vllm-version", "0.26.0")
    assert not _shared(doc) and code == 0


def test_device_ids_and_visible_devices_pin_them_apart(tmp_path):
    f = _compose(tmp_path, _service("a", devices='device_ids: ["0"]'), _service("b", devices='device_ids: ["1"]'))
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])
    env0 = "\n    environment:\n      - CUDA_VISIBLE_DEVICES=0"
    env1 = "\n    environment:\n      - CUDA_VISIBLE_DEVICES=1"
    f = _compose(tmp_path, _service("a", devices="count: all", env=env0), _service("b", devices="count: all", env=env1))
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])
    # CUDA_VISIBLE_DEVICES=1 inside a container given host GPUs 3 and 0 is host GPU 0: shared with a
    f = _compose(tmp_path, _service("a", devices='device_ids: ["0"]'),
                 _service("b", devices='device_ids: ["3", "0"]', env=env1))
    found = _shared(check(f, "--vllm-version", "0.26.0")[1])
    assert found and "GPU 0 is also used" in found[0]["message"]


def test_script_commands_in_the_background_share_the_gpus(tmp_path):
    f = write(tmp_path, "two.sh", f"""
        #!/bin/sh
        # kvplan: gpu=H100
        vllm serve {M} --max-model-len 8192 &
        vllm serve {M} --max-model-len 8192 --gpu-memory-utilization 0.5 > b.log 2>&1 &
        wait
        """)
    code, doc, _ = check(f, "--vllm-version", "0.26.0")
    found = _shared(doc)
    assert code == 1 and len(found) == 2 and all("1.42" in d["message"] for d in found)  # 0.92 + 0.5


def test_script_commands_pinned_apart_or_run_one_after_another_do_not_share(tmp_path):
    f = write(tmp_path, "pinned.sh", f"""
        #!/bin/sh
        # kvplan: gpu=H100
        CUDA_VISIBLE_DEVICES=0 vllm serve {M} --max-model-len 8192 &
        CUDA_VISIBLE_DEVICES=1 vllm serve {M} --max-model-len 8192 &
        wait
        """)
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])
    # the script waits for the first server (no &) before it starts the second
    f = write(tmp_path, "seq.sh", f"# kvplan: gpu=H100\nvllm serve {M} --max-model-len 8192\nvllm serve {M} --max-model-len 8192\n")
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])


def test_separate_kubernetes_pods_do_not_share(tmp_path):
    pod = """
apiVersion: v1
kind: Pod
metadata: {{name: {n}}}
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.26.0
    args: ["--model", "%s", "--max-model-len", "8192"]
    resources: {{limits: {{nvidia.com/gpu: 1}}}}
""" % M
    f = write(tmp_path, "pods.yaml", "# kvplan: gpu=H100\n" + pod.format(n="a") + "---" + pod.format(n="b"))
    code, doc, _ = check(f, "--vllm-version", "0.26.0")
    assert len([d for f_ in doc["files"] for d in f_["deployments"]]) == 2
    assert not _shared(doc)


def _pod(containers: str) -> str:
    return f"""# kvplan: gpu=H100
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:{containers}
"""


def _container(name: str, env: str | None, limit: bool = False) -> str:
    envs = f"\n    env:\n    - name: NVIDIA_VISIBLE_DEVICES\n      value: \"{env}\"" if env is not None else ""
    res = "\n    resources: {limits: {nvidia.com/gpu: 1}}" if limit else ""
    return f"""
  - name: {name}
    image: vllm/vllm-openai:v0.26.0
    args: ["--model", "{M}", "--max-model-len", "8192"]{envs}{res}"""


def test_containers_of_one_pod_that_see_the_same_node_gpus_share_them(tmp_path):
    # without a device-plugin limit, NVIDIA_VISIBLE_DEVICES names the node GPUs a container sees
    f = write(tmp_path, "pod.yaml", _pod(_container("a", "0") + _container("b", "0,1")))
    found = _shared(check(f, "--vllm-version", "0.26.0")[1])
    assert {d["deployment"] for d in found} == {"Pod/p container a", "Pod/p container b"}
    f = write(tmp_path, "apart.yaml", _pod(_container("a", "0") + _container("b", "1")))
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])
    # nvidia.com/gpu limits: the device plugin gives each container GPUs of its own
    f = write(tmp_path, "limits.yaml", _pod(_container("a", None, limit=True) + _container("b", None, limit=True)))
    assert not _shared(check(f, "--vllm-version", "0.26.0")[1])
