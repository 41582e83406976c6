"""Round trips of the serving-stack writers for multi-GPU layouts: a manifest carries every GPU
of its serve line, TP x PP x DP x PCP (vLLM config/parallel.py: world_size = PP x TP x PCP per
engine, times DP engines), never TP x PP alone, and `kvplan check --strict` passes it with the
estimate's figures. The GPU counts expected are hand arithmetic written in each case; the KV
figures' oracle is the estimate's own JSON (the other command)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import run_cli
from tests.render.test_stack_writers import FORMATS, _checked, _write

# name: (model, GPU, flags, GPUs the serve line starts = hand arithmetic)
CASES = {
    "dsv3-dp8-ep": ("deepseek-ai/DeepSeek-V3", "H200", ("-dp", "8", "-ep", "--max-model-len", "8192"), 1 * 1 * 8 * 1),
    "qwen3-tp4-dp2-ep": ("Qwen/Qwen3-235B-A22B", "H100", ("-tp", "4", "-dp", "2", "-ep"), 4 * 1 * 2 * 1),
    "dense-dp2": ("meta-llama/Llama-3.1-8B", "H100", ("-dp", "2"), 1 * 1 * 2 * 1),
    "dense-tp2-pcp2": ("meta-llama/Llama-3.1-8B", "H100", ("-tp", "2", "-pcp", "2"), 2 * 1 * 1 * 2),
}


def _gpus(fmt: str, doc: dict) -> list[str]:
    """Every GPU count the manifest writes, pod by pod (as strings for Kubernetes, ints for compose)."""
    if fmt == "compose":
        return [d["count"] for d in doc["services"]["vllm"]["deploy"]["resources"]["reservations"]["devices"]]
    if fmt == "k8s":
        pods = [doc["spec"]["template"]["spec"]]
    elif fmt == "lws":
        lwt = doc["spec"]["leaderWorkerTemplate"]
        pods = [lwt[k]["spec"] for k in ("leaderTemplate", "workerTemplate") if k in lwt]
    elif fmt == "kserve":
        pods = [doc["spec"]["template"]]
    else:
        pods = [doc["decode"]]
    return [c["resources"]["limits"]["nvidia.com/gpu"] for p in pods for c in p["containers"]]


def _estimate(*args: str) -> tuple[dict, str]:
    code, out, err = run_cli("estimate", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out), err


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_parallel_layout_is_written_with_all_its_gpus(tmp_path, fmt, case):
    model, gpu, flags, gpus = CASES[case]
    est, _ = _estimate(model, "--gpu", gpu, *flags)
    assert est["parallel"]["gpus"] == gpus  # the estimate's own layout agrees with the hand count
    code, text, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 0, err
    assert f"{model} on {gpus} x {est['gpu']['name']}\n" in text.splitlines(keepends=True)[0]
    doc = yaml.safe_load(text)
    assert _gpus(fmt, doc) == ([gpus] if fmt == "compose" else [str(gpus)])
    if fmt != "compose":  # the DP engines are one serve line, not replicas of the stack
        assert (doc.get("spec") or doc["decode"])["replicas"] == 1
    code, fig = _checked(_write(tmp_path, fmt, text), "--strict")
    assert code == 0, [d["text"] for d in fig["diagnostics"] if d["severity"] != "info"]
    assert not [d for d in fig["diagnostics"] if d["check_id"] == "gpu-count"]
    assert fig["num_gpu_blocks"] == est["kv_cache"]["num_gpu_blocks"]
    assert fig["kv_cache_bytes"] == est["memory"]["kv_cache_bytes"]


# --nnodes: (model, GPU, flags, nodes, GPUs a node = hand arithmetic)
NODES = {
    "dsv3-dp16-dpl8": ("deepseek-ai/DeepSeek-V3", "H200",
                       ("-dp", "16", "-dpl", "8", "-ep", "--nnodes", "2", "--max-model-len", "8192"), 2, 16 // 2),
    "qwen3-tp4-dp2": ("Qwen/Qwen3-235B-A22B", "H100", ("-tp", "4", "-dp", "2", "-ep", "--nnodes", "2"), 2, 4 * 2 // 2),
}


def _args(pod: dict) -> list[str]:
    return pod["spec"]["containers"][0]["args"]


def _after(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("case", sorted(NODES))
def test_a_multi_node_layout_is_a_leader_worker_set_of_one_pod_a_node(tmp_path, case):
    model, gpu, flags, nodes, per_node = NODES[case]
    est, _ = _estimate(model, "--gpu", gpu, *flags)
    code, text, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", "lws")
    assert code == 0, err
    assert f"on {nodes * per_node} x {est['gpu']['name']} ({nodes} nodes of {per_node})" in text.splitlines()[0]
    lwt = yaml.safe_load(text)["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == nodes
    assert _gpus("lws", yaml.safe_load(text)) == [str(per_node)] * 2
    leader, worker = _args(lwt["leaderTemplate"]), _args(lwt["workerTemplate"])
    # vLLM entrypoints/cli/serve.py: node 0 runs the API server, the others `--headless`
    assert _after(leader, "--node-rank") == "0" and "--headless" not in leader
    assert _after(worker, "--node-rank") == "$(LWS_WORKER_INDEX)" and "--headless" in worker
    for a in (leader, worker):
        assert _after(a, "--nnodes") == str(nodes) and a.count("--nnodes") == 1
        assert _after(a, "--data-parallel-address") == "$(LWS_LEADER_ADDRESS)"
    code, fig = _checked(_write(tmp_path, "lws", text), "--strict")
    assert code == 0, [d["text"] for d in fig["diagnostics"] if d["severity"] != "info"]
    assert fig["num_gpu_blocks"] == est["kv_cache"]["num_gpu_blocks"]


@pytest.mark.parametrize("fmt", ("k8s", "compose", "kserve", "llm-d"))
def test_a_multi_node_layout_is_refused_where_it_cannot_be_written(fmt):
    model, gpu, flags, _, _ = NODES["qwen3-tp4-dp2"]
    code, out, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--nnodes 2" in err and "--format lws" in err


def test_plan_writes_a_moe_data_parallel_option_as_one_deployment(tmp_path):
    # DeepSeek-V3 at 256 requests of 8192 tokens on H200: the cheapest option is a DP + EP layout
    # whose serve line carries --data-parallel-size: one engine over its DP ranks, so one pod of
    # TP x PP x DP GPUs, never DP replicas of a TP x PP pod that itself asks for DP ranks
    args = ("deepseek-ai/DeepSeek-V3", "--max-model-len", "8192", "--concurrency", "256", "--gpus", "H200")
    code, out, err = run_cli("plan", *args, "--format", "json")
    assert code == 0, err
    best = json.loads(out)["options"][0]
    dp = best["data_parallel_size"]
    assert dp > 1 and f"--data-parallel-size {dp}" in best["serve_command"]
    gpus = best["tensor_parallel_size"] * best["pipeline_parallel_size"] * dp
    assert gpus == best["num_gpus"]
    code, text, err = run_cli("plan", *args, "--format", "k8s")
    assert code == 0, err
    doc = yaml.safe_load(text)
    assert doc["spec"]["replicas"] == 1 and _gpus("k8s", doc) == [str(gpus)]
    code, fig = _checked(_write(tmp_path, "k8s", text), "--strict")
    assert code == 0, [d["text"] for d in fig["diagnostics"] if d["severity"] != "info"]
    assert fig["num_gpu_blocks"] == best["num_gpu_blocks"]
