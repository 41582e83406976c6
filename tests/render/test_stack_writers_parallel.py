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


@pytest.mark.parametrize("fmt", ("k8s", "compose"))
def test_a_multi_node_layout_is_refused_where_it_cannot_be_written(fmt):
    model, gpu, flags, _, _ = NODES["qwen3-tp4-dp2"]
    code, out, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--nnodes 2" in err and "--format lws" in err


def _stack_pods(fmt: str, doc: dict) -> tuple[dict, list[dict]]:
    """(the parallelism the stack sizes its group from, the pod templates it runs)."""
    if fmt == "kserve":
        return doc["spec"]["parallelism"], [doc["spec"]["template"], doc["spec"]["worker"]]
    return doc["decode"]["parallelism"], [doc["decode"]]


@pytest.mark.parametrize("fmt", ("kserve", "llm-d"))
@pytest.mark.parametrize("case", sorted(NODES))
def test_kserve_and_llm_d_write_a_multi_node_data_parallel_deployment(tmp_path, fmt, case):
    # KServe: spec.worker + parallelism {tensor, data, dataLocal, expert} -> its data-parallel worker
    # template, a LeaderWorkerSet of data / dataLocal pods (ParallelismSpec.GetSize); llm-d:
    # multinode: true + parallelism -> the chart's LeaderWorkerSet of numWorkers = data / dataLocal
    # pods of dataLocal x tensor GPUs. Hand arithmetic: dsv3 -dp 16 -dpl 8 -> 2 pods of 8 x 1;
    # qwen3 -tp 4 -dp 2 --nnodes 2 -> dataLocal 1, 2 pods of 1 x 4
    model, gpu, flags, nodes, per_node = NODES[case]
    est, _ = _estimate(model, "--gpu", gpu, *flags)
    code, text, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 0, err
    assert f"({nodes} nodes of {per_node})" in text.splitlines()[0]
    doc = yaml.safe_load(text)
    par, pods = _stack_pods(fmt, doc)
    assert par["data"] // par["dataLocal"] == nodes and par["dataLocal"] * par["tensor"] == per_node
    assert [c["resources"]["limits"]["nvidia.com/gpu"] for p in pods for c in p["containers"]] == [str(per_node)] * len(pods)
    if fmt == "kserve":
        assert par.get("expert") is True  # both cases pass -ep
        extra = [e["value"] for e in pods[0]["containers"][0].get("env", []) if e["name"] == "VLLM_ADDITIONAL_ARGS"]
        # the template writes the parallel and per-node flags itself; nothing of them twice
        assert not any(f in " ".join(extra) for f in ("--nnodes", "--data-parallel", "--tensor-parallel", "--headless"))
    else:
        assert doc["multinode"] is True
        script = pods[0]["containers"][0]["args"][0]
        leader, worker = (ln for ln in script.splitlines() if "vllm serve" in ln)
        # vLLM entrypoints/cli/serve.py: node 0 runs the API server, the others `--headless`
        assert "--node-rank 0" in leader and "--headless" not in leader
        assert '--node-rank "$LWS_WORKER_INDEX"' in worker and "--headless" in worker
        assert all('--data-parallel-address "$LWS_LEADER_ADDRESS"' in ln for ln in (leader, worker))
    code, fig = _checked(_write(tmp_path, fmt, text), "--strict")
    assert code == 0, [d["text"] for d in fig["diagnostics"] if d["severity"] != "info"]
    assert not [d for d in fig["diagnostics"] if d["check_id"] == "gpu-count"]
    assert fig["num_gpu_blocks"] == est["kv_cache"]["num_gpu_blocks"]
    assert fig["kv_cache_bytes"] == est["memory"]["kv_cache_bytes"]


# one engine over several nodes: neither stack's multi-node pods can run it -> exit 2 naming the flag
SPANNING = {
    "pp-across-nodes": ("meta-llama/Llama-3.1-70B-Instruct", "A100-80GB",
                        ("-tp", "8", "-pp", "2", "--nnodes", "2", "--max-model-len", "32768"), "--pipeline-parallel-size 2"),
    "tp-across-nodes": ("Qwen/Qwen3-235B-A22B", "H100", ("-tp", "16", "--nnodes", "2"), "--tensor-parallel-size 16"),
}


@pytest.mark.parametrize("fmt", ("kserve", "llm-d"))
@pytest.mark.parametrize("case", sorted(SPANNING))
def test_one_engine_over_several_nodes_is_refused_by_kserve_and_llm_d(fmt, case):
    model, gpu, flags, named = SPANNING[case]
    assert run_cli("estimate", model, "--gpu", gpu, *flags, "--format", "lws")[0] == 0  # lws writes it
    code, out, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 2 and out == "" and "Traceback" not in err
    first = err.strip().splitlines()[0]
    assert named in first and "--nnodes 2" in first and f"--format {fmt}" in first and "--format lws" in err


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
