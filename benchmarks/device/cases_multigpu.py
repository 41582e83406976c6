"""Multi-GPU real-start cases for the world of ranks (issue 20; runs are issue 7's).

Data only: each case is a `vllm serve` layout, the GPUs it needs, the log lines that check a
rule of kvplan/capacity/ranks.py, and the `kvplan estimate` command whose prediction it is
compared with (never a number written here: the prediction is computed when the case runs, the
measurement read from the log). Every case uses dummy weights (--load-format dummy) so no
checkpoint is downloaded; the config.json is the bundled one (model_specs/).

    python3 benchmarks/device/cases_multigpu.py            # writes .device/cases_multigpu.json
    python3 benchmarks/device/cases_multigpu.py --list     # prints the cases

What each case checks (vLLM 0.33.0 source, capacity/ranks.py):
* dsv2-lite_dp2_ep: 64 routed experts over EP 2 -> 32 a GPU ("Local/global number of experts:
  32/64" in each worker's EP log, expert_map_manager.py); two engines, one
  "GPU KV cache size" line each.
* qwen3-30b-a3b_dp4_ep: 128 experts over EP 4 -> 32 a GPU; four engine pools.
* mixtral_dp3_ep: 8 experts over EP 3 -> 3, 3, 2; the engines on the 3-expert GPUs log fewer
  blocks than the 2-expert one (kvplan's parallel.engines).
* qwen3-30b-a3b_dp2_no_ep: each GPU holds half of every expert ("Model loading took" per worker
  against kvplan's weights_bytes).
* dsv2-lite_tp2_dcp2 (and its -dcp 1 twin): the same num_gpu_blocks, about 2x the logged tokens.
* llama3-8b_pp3: 32 layers split 11, 11, 10 ("Hidden layers were unevenly partitioned: [11,11,10]").
* qwen3-8b_dp2: a dense model's two engines each log what a DP 1 start logs.
* qwen3-30b-a3b_2node_lws: the two-node launch (node 0 serves, node 1 --headless) emulated on
  one 4-GPU host with CUDA_VISIBLE_DEVICES halves and --data-parallel-address 127.0.0.1, as the
  LeaderWorkerSet fixture tests/data/check/multigpu/*-lws*.yaml launches it on two pods.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EAGER = ["--enforce-eager", "--load-format", "dummy", "--max-model-len", "8192"]

# name -> (bundled spec, GPUs, [per-node serve args], log lines to read, what it checks)
CASES = {
    "dsv2-lite_dp2_ep": ("deepseek-ai/DeepSeek-V2-Lite", 2, [["-dp", "2", "-ep"]],
                         ["Local/global number of experts", "GPU KV cache size", "Maximum concurrency"],
                         "EP split 64/2 = 32 whole experts a GPU; one pool per DP engine"),
    "qwen3-30b-a3b_dp4_ep": ("Qwen/Qwen3-30B-A3B", 4, [["-dp", "4", "-ep"]],
                             ["Local/global number of experts", "GPU KV cache size", "Maximum concurrency"],
                             "EP split 128/4 = 32; four engine pools"),
    "mixtral_dp3_ep": ("mistralai/Mixtral-8x7B-v0.1", 3, [["-dp", "3", "-ep"]],
                       ["Local/global number of experts", "Model loading took", "GPU KV cache size"],
                       "EP split 3, 3, 2 (the first 8 % 3 ranks one more); the 3-expert engines bind"),
    "qwen3-30b-a3b_dp2_no_ep": ("Qwen/Qwen3-30B-A3B", 2, [["-dp", "2"]],
                                ["Model loading took", "GPU KV cache size"],
                                "experts sharded over TP x DP = 2 without EP (half of every expert)"),
    "dsv2-lite_tp2_dcp1": ("deepseek-ai/DeepSeek-V2-Lite", 2, [["-tp", "2"]],
                           ["GPU KV cache size", "Maximum concurrency"], "the DCP twin's baseline"),
    "dsv2-lite_tp2_dcp2": ("deepseek-ai/DeepSeek-V2-Lite", 2, [["-tp", "2", "-dcp", "2"]],
                           ["GPU KV cache size", "Maximum concurrency"],
                           "same blocks as dsv2-lite_tp2_dcp1, about 2x the tokens (cdiv(L, dcp) per rank)"),
    "llama3-8b_pp3": ("meta-llama/Llama-3.1-8B-Instruct", 3, [["-pp", "3"]],
                      ["Hidden layers were unevenly partitioned", "GPU KV cache size"],
                      "get_pp_indices: 11, 11, 10; the min over stages"),
    "qwen3-8b_dp2": ("Qwen/Qwen3-8B", 2, [["-dp", "2"]], ["GPU KV cache size", "Maximum concurrency"],
                     "a dense model's DP engines are each a DP 1 deployment"),
    "qwen3-30b-a3b_2node_lws": (
        "Qwen/Qwen3-30B-A3B", 4,
        [["-dp", "4", "-dpl", "2", "-ep", "--nnodes", "2", "--node-rank", "0", "--data-parallel-address", "127.0.0.1"],
         ["-dp", "4", "-dpl", "2", "-ep", "--nnodes", "2", "--node-rank", "1", "--headless",
          "--data-parallel-address", "127.0.0.1"]],
        ["Local/global number of experts", "GPU KV cache size"],
        "two nodes (CUDA_VISIBLE_DEVICES=0,1 and 2,3): node 1 headless; four engine pools",
    ),
}


def requests() -> list[dict]:
    """The cases as the device runner's requests: per node the `vllm serve` argv (model = the
    bundled config's directory on the device), its CUDA_VISIBLE_DEVICES, and the kvplan
    estimate argv whose JSON ``parallel`` section the log is compared with."""
    out = []
    for name, (model, gpus, nodes, lines, checks) in CASES.items():
        spec = ROOT / "model_specs" / (model.replace("/", "__") + ".json")
        per_node = gpus // len(nodes)
        launches = []
        for k, args in enumerate(nodes):
            visible = ",".join(str(g) for g in range(k * per_node, (k + 1) * per_node))
            launches.append({"env": {"CUDA_VISIBLE_DEVICES": visible},
                             "argv": ["vllm", "serve", f"/tmp/cases/M/{name}", *args, *EAGER]})
        out.append({
            "name": name, "gpus": gpus, "config": str(spec.relative_to(ROOT)), "launches": launches,
            "read_log_lines": lines, "checks": checks,
            "predict": ["kvplan", "estimate", model, *nodes[0], "--max-model-len", "8192", "--enforce-eager",
                        "--format", "json"],
        })
    return out


def main(argv: list[str]) -> int:
    reqs = requests()
    if "--list" in argv:
        for r in reqs:
            print(f"{r['name']:28} {r['gpus']} GPUs  {r['checks']}")
        return 0
    dest = ROOT / ".device" / "cases_multigpu.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(reqs, indent=1))
    print(f"{len(reqs)} cases -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
