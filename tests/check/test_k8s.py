"""Kubernetes containers: ``$(VAR)`` expansion before a ``sh -c`` script is parsed, and
LeaderWorkerSet groups.

Expected behaviour comes from Kubernetes, not from kvplan: the kubelet replaces ``$(NAME)`` in
command and args with the value of NAME from the container's env (earlier env entries may be
used in a later entry's value), ``$$`` is a literal ``$``, and a reference to a name the
container's env does not define is left as it is ("Define a command and arguments for a
container", "Define dependent environment variables"). Only then does ``sh -c`` run the script.
A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) runs ``size`` pods per group: one leader and
size - 1 workers; vLLM's multi-node pattern (docs deployment/frameworks/lws.md) runs
`vllm serve` in the leader over a Ray cluster of the whole group.
"""

from __future__ import annotations

import pytest

from tests.check.common import check, DATA, diag, R4, write, _diags, _json
import shutil

K8S = DATA / "kubernetes"


def _dep(doc: dict, i: int = 0) -> dict:
    return [d for f in doc["files"] for d in f["deployments"]][i]


def test_sh_c_script_gets_the_model_from_the_container_env():
    # command: ["sh", "-c", "vllm serve $(MODEL) --tensor-parallel-size 2"], MODEL=Qwen/Qwen3-8B
    code, doc, _ = check(str(K8S / "sh-c-env.yaml"), "--gpu", "H100")
    assert code == 0, [d["text"] for d in doc["diagnostics"]]
    assert _dep(doc)["model"] == "Qwen/Qwen3-8B"
    # 2 GPUs in the pod and -tp 2: vLLM uses both, so no gpu-count note ("uses 1" meant TP was lost)
    assert "gpu-count" not in {d["check_id"] for d in doc["diagnostics"]}


def test_statefulset_script_with_backslash_continuations_keeps_its_flags():
    code, doc, _ = check(str(K8S / "statefulset-continuation.yaml"), "--gpu", "H100")
    assert code == 0, [d["text"] for d in doc["diagnostics"]]
    dep = _dep(doc)
    assert dep["model"] == "Qwen/Qwen3-8B"
    assert dep["figures"]["max_model_len"] == 8192  # from the third continued line
    assert "gpu-count" not in {d["check_id"] for d in doc["diagnostics"]}  # -tp 2 on 2 GPUs


POD = """
apiVersion: v1
kind: Pod
metadata: {{name: chat}}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.26.0
{body}
"""


def _pod(tmp_path, body: str) -> str:
    return write(tmp_path, "pod.yaml", POD.format(body=body))


def test_value_from_is_unknown_and_says_so(tmp_path):
    f = _pod(tmp_path, """
      command: ["sh", "-c", "vllm serve $(MODEL) --tensor-parallel-size 2"]
      env:
        - name: MODEL
          valueFrom: {secretKeyRef: {name: s, key: model}}
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 2
    d = diag(doc, "model-unresolved")
    assert "valueFrom" in d["message"] and "secretKeyRef" in d["message"]


def test_undefined_reference_in_args_reaches_vllm_as_text(tmp_path):
    # Kubernetes leaves $(LEN) as it is: vLLM gets the text "$(LEN)" and exits
    f = _pod(tmp_path, """
      args: ["--model", "$(MODEL)", "--max-model-len", "$(LEN)"]
      env:
        - {name: MODEL, value: Qwen/Qwen3-8B}
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1
    d = diag(doc, "literal-variable")
    assert d["key"] == "--max-model-len" and d["severity"] == "error" and "$(LEN)" in d["message"]
    assert _dep(doc)["model"] == "Qwen/Qwen3-8B"


def test_env_from_makes_an_unknown_name_unresolved_not_literal(tmp_path):
    f = _pod(tmp_path, """
      args: ["--model", "Qwen/Qwen3-8B", "--max-model-len", "$(LEN)"]
      envFrom: [{configMapRef: {name: vllm}}]
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0
    assert diag(doc, "unresolved-value")["key"] == "--max-model-len"
    assert "literal-variable" not in {d["check_id"] for d in doc["diagnostics"]}


def test_escaped_reference_is_a_command_substitution_for_the_shell(tmp_path):
    # $$(MODEL) -> $(MODEL) for the shell, which runs a command named MODEL: not the env value
    f = _pod(tmp_path, """
      command: ["sh", "-c", "vllm serve $$(MODEL) -tp 2"]
      env:
        - {name: MODEL, value: Qwen/Qwen3-8B}
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 2
    assert "as a command" in diag(doc, "model-unresolved")["message"]


def test_env_value_uses_an_earlier_entry(tmp_path):
    f = _pod(tmp_path, """
      args: ["--model", "$(M2)"]
      env:
        - {name: M1, value: Qwen/Qwen3-8B}
        - {name: M2, value: "$(M1)"}
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0, [d["text"] for d in doc["diagnostics"]]
    assert _dep(doc)["model"] == "Qwen/Qwen3-8B"


def test_leaderworkerset_counts_the_gpus_of_the_group():
    # vLLM's documented manifest: size 2, 8 GPUs per pod, --tensor-parallel-size 8
    # --pipeline_parallel_size 2 -> 8 x 2 = 16 = 8 (leader) + 1 x 8 (worker)
    code, doc, _ = check(str(K8S / "lws-tp8-pp2.yaml"), "--gpu", "H100")
    assert code == 0, [d["text"] for d in doc["diagnostics"]]
    assert "gpu-count" not in {d["check_id"] for d in doc["diagnostics"]}
    deps = [d for f in doc["files"] for d in f["deployments"]]
    assert len(deps) == 1 and "leader" in deps[0]["name"]  # the workers run Ray, not vllm serve


def test_leaderworkerset_group_too_small_names_the_group(tmp_path):
    text = (K8S / "lws-tp8-pp2.yaml").read_text()
    head, worker = text.split("workerTemplate:")
    f = tmp_path / "lws.yaml"
    f.write_text(head + "workerTemplate:" + worker.replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "4"'))
    code, doc, _ = check(str(f), "--gpu", "H100")
    assert code == 1
    d = diag(doc, "gpu-count")
    # 8 (leader) + 1 x 4 (worker) = 12 GPUs < 8 x 2 = 16
    assert d["severity"] == "error" and d["message"].startswith("12 GPU(s) in the LeaderWorkerSet group of 2 pods")
    assert "needs 16" in d["message"]


def test_k8s_args_non_string_item_is_an_error():
    # args: line 12 the model, 13 --max-model-len, 14 `- 4096` (an unquoted integer: args[2])
    code, doc = _json(str(R4 / "k8s-args-int.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "invalid-value")
    assert (e["severity"], e["line"], e["key"]) == ("error", 14, "args[2]")
    assert "4096" in e["message"] and "string" in e["message"]
    assert code == 1


def test_node_selectors_not_read_above_the_working_directory(tmp_path, monkeypatch):
    # no .git anywhere here: plant/kvplan.yaml maps the H100 label to T4; from plant/a it is above
    # the working directory and must not be used
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    monkeypatch.chdir(plant / "a")
    code, doc = _json("b/dep.yaml")
    # the T4 mapping is not read: the GPU is the one GPU feature discovery's label names
    assert _dep(doc)["gpu"] == "h100-sxm" and not [d for d in doc["diagnostics"] if "kvplan.yaml" in d["message"]]


def test_node_selectors_read_up_to_the_working_directory_with_a_note(tmp_path, monkeypatch):
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    monkeypatch.chdir(plant)
    code, doc = _json("a/b/dep.yaml")
    (dep,) = doc["files"][0]["deployments"]
    assert dep["gpu"] == "t4"
    (note,) = _diags(doc, "node-selectors")
    assert note["severity"] == "info" and "kvplan.yaml" in note["message"]
    assert (note["file"], note["line"]) == ("a/b/dep.yaml", 9)  # the nodeSelector label's line
    assert code == 1  # Llama-3.1-8B does not fit a T4


def test_node_selectors_stop_at_the_git_root(tmp_path, monkeypatch):
    plant = tmp_path / "plant"
    shutil.copytree(R4 / "plant", plant)
    (plant / "a" / ".git").mkdir()  # a repository rooted at plant/a: plant/kvplan.yaml is outside
    monkeypatch.chdir(tmp_path)
    code, doc = _json("plant/a/b/dep.yaml")
    assert _dep(doc)["gpu"] == "h100-sxm"  # GFD's label, not plant/kvplan.yaml's T4


def _gfd_pod(value: str) -> str:
    return f"""
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: chat}}
        spec:
          template:
            spec:
              nodeSelector: {{nvidia.com/gpu.product: {value}}}
              containers:
                - name: vllm
                  image: vllm/vllm-openai:v0.26.0
                  args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
                  resources: {{limits: {{nvidia.com/gpu: 1}}}}
        """


# label values as NVIDIA's gpu-feature-discovery writes them: the NVML device name with runs of
# spaces made "-" (k8s-device-plugin internal/lm/resource.go); seen on real clusters in public
# scripts and docs (e.g. `kubectl get nodes -l nvidia.com/gpu.product=NVIDIA-L4`)
@pytest.mark.parametrize(
    ("label", "gpu"),
    [
        ("NVIDIA-H200", "h200"),
        ("NVIDIA-H100-80GB-HBM3", "h100-sxm"),
        ("NVIDIA-A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA-A100-80GB-PCIe", "a100-80gb-pcie"),
        ("NVIDIA-L40S", "l40s"),
        ("NVIDIA-L4", "l4"),
    ],
)
def test_a_gpu_feature_discovery_product_label_names_the_gpu(tmp_path, label, gpu):
    code, doc, _ = check(write(tmp_path, "deploy.yaml", _gfd_pod(label)))
    assert _dep(doc)["gpu"] == gpu, [d["text"] for d in doc["diagnostics"]]
    (note,) = _diags(doc, "node-selectors")
    assert note["severity"] == "info" and f"nvidia.com/gpu.product={label}" in note["message"]
    assert (note["line"], note["key"]) == (7, "nodeSelector.nvidia.com/gpu.product")
    assert "gpu-missing" not in {d["check_id"] for d in doc["diagnostics"]}


@pytest.mark.parametrize("label", ["NVIDIA-H200-SHARED", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-X999", "nvidia-h200"])
def test_an_unknown_gpu_product_label_is_gpu_missing_naming_it(tmp_path, label):
    # a time-sliced GPU (-SHARED) or a MIG slice is not a whole GPU; GFD's labels are case-exact
    code, doc, _ = check(write(tmp_path, "deploy.yaml", _gfd_pod(label)))
    assert code == 2
    e = diag(doc, "gpu-missing")
    assert f"nvidia.com/gpu.product={label}" in e["hint"]


def test_a_node_selectors_mapping_wins_over_the_gpu_feature_discovery_label(tmp_path):
    write(tmp_path, "kvplan.yaml", "node_selectors:\n  nvidia.com/gpu.product:\n    NVIDIA-H200: H100-80GB\n")
    code, doc, _ = check(write(tmp_path, "deploy.yaml", _gfd_pod("NVIDIA-H200")))
    assert _dep(doc)["gpu"] == "h100-sxm"
