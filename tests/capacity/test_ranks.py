"""The world of ranks (capacity/ranks.py): data, expert, decode/prefill context and pipeline
parallel as vLLM builds them (issue 20).

Every expected number is hand arithmetic written here from the model's config.json (bundled in
model_specs/) and the vLLM rule named beside it, never read from kvplan's code:

* experts over TP x PCP x DP (fused_moe/config.py FusedMoEParallelConfig.make), whole experts
  under EP ((E + R) // ep, the first (E + R) % ep ranks one more: determine_expert_map);
* one routed expert's bytes: gate+up (hidden x 2 x inter) + down (inter x hidden) elements;
* DCP: a request of L tokens costs cdiv(cdiv(L, dcp), block) blocks (kv_cache_interface.py);
* PP: get_pp_indices gives the remainder to the stages before the last.
"""

from __future__ import annotations

import json

import pytest

from helpers import error_line, run_cli, unwrapped

NOT_CHECKED = "derived from the vLLM source, not checked on multi-GPU hardware"


def estimate(*args: str) -> dict:
    code, out, err = run_cli("estimate", *args, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def experts_bytes(doc: dict) -> int:
    return doc["memory"]["weights_breakdown"]["experts"]


# -- DeepSeek-V3 (FP8 block 128x128 checkpoint) -dp 8 -ep on H200: vLLM's recipe ----------------

# one routed expert of one layer, FP8 (1 byte) + fp32 block scales of 128x128:
#   gate+up 7168 x 4096 + down 2048 x 7168 = 29,360,128 + 14,680,064 = 44,040,192 bytes
#   scales ceil(4096/128) x ceil(7168/128) + ceil(7168/128) x ceil(2048/128) = 32x56 + 56x16 = 2,688 x 4 B = 10,752
DSV3_EXPERT = 44_040_192 + 10_752
DSV3_MOE_LAYERS = 61 - 3  # first_k_dense_replace = 3


def test_deepseek_v3_dp8_ep_holds_32_of_256_routed_experts_per_gpu():
    doc = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "-ep", "--max-model-len", "4096")
    par = doc["parallel"]
    assert par["expert_parallel_size"] == 8 and par["num_experts"] == 256
    assert [c["local_experts"] for c in par["rank_classes"]] == [32]  # 256 // 8, no remainder
    assert par["gpus"] == 8 and doc["gpu"]["count"] == 8
    assert experts_bytes(doc) == 32 * DSV3_MOE_LAYERS * DSV3_EXPERT  # 81,758,552,064 bytes
    assert doc["fits"] is True  # the recipe starts (issue 20: kvplan check called it a weights failure)
    # every engine logs its own pool: 8 engines, equal (every GPU holds 32 experts)
    assert [e["data_parallel_rank"] for e in par["engines"]] == list(range(8))
    assert {e["num_gpu_blocks"] for e in par["engines"]} == {doc["kv_cache"]["num_gpu_blocks"]}
    assert par["cluster"]["gpu_kv_cache_tokens"] == 8 * doc["kv_cache"]["gpu_kv_cache_tokens"]
    assert NOT_CHECKED in doc["evidence"]["label"] and par["evidence"] == NOT_CHECKED


def test_qwen3_235b_tp4_dp2_ep_on_h100_holds_16_experts_a_rank():
    doc = estimate("Qwen/Qwen3-235B-A22B", "--gpu", "H100", "-tp", "4", "-dp", "2", "-ep", "--max-model-len", "4096")
    par = doc["parallel"]
    assert par["expert_parallel_size"] == 8  # TP 4 x DP 2
    assert [c["local_experts"] for c in par["rank_classes"]] == [16]  # 128 // 8
    # bf16: 16 experts x 94 MoE layers x (4096 x 2 x 1536 + 1536 x 4096) x 2 bytes
    assert experts_bytes(doc) == 16 * 94 * (4096 * 2 * 1536 + 1536 * 4096) * 2
    assert doc["fits"] is True and par["gpus"] == 8 and par["gpus_per_engine"] == 4
    assert len(par["engines"]) == 2


def test_mixtral_dp3_ep_splits_experts_3_3_2_and_the_rank_with_3_binds():
    # vLLM 0.33.0: each DP engine keeps its own pool (0.34.0's world-group min: below)
    doc = estimate("mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "-dp", "3", "-ep", "--max-model-len", "4096",
                   "--vllm-version", "0.33.0")
    par = doc["parallel"]
    classes = {c["local_experts"]: c for c in par["rank_classes"]}
    assert set(classes) == {3, 2}  # 8 // 3 = 2, the first 8 % 3 = 2 ranks one more: 3, 3, 2
    assert classes[3]["gpus"] == 2 and classes[2]["gpus"] == 1
    assert classes[3]["binding"] and not classes[2]["binding"]
    # one expert: 32 layers x (4096 x 2 x 14336 + 14336 x 4096) x 2 bytes = 11,274,289,152 bytes
    one_expert = 32 * (4096 * 2 * 14336 + 14336 * 4096) * 2
    assert classes[3]["weights_bytes"] - classes[2]["weights_bytes"] == one_expert
    assert experts_bytes(doc) == 3 * one_expert  # the table's figures are the binding rank's
    engines = par["engines"]
    assert [e["local_experts"] for e in engines] == [3, 3, 2]
    assert engines[0]["num_gpu_blocks"] == engines[1]["num_gpu_blocks"] == doc["kv_cache"]["num_gpu_blocks"]
    assert engines[2]["num_gpu_blocks"] > engines[0]["num_gpu_blocks"]  # 11 GB more room for the KV cache
    assert par["cluster"]["gpu_kv_cache_tokens"] == sum(e["gpu_kv_cache_tokens"] for e in engines)


def test_moe_dp4_without_ep_holds_a_quarter_of_every_expert():
    one = estimate("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--max-model-len", "4096")
    four = estimate("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "4", "--max-model-len", "4096")
    # 128 experts x 48 layers x (2048 x 2 x 768/4 + 768/4 x 2048) x 2 bytes: inter 768 over TP x PCP x DP = 4
    assert experts_bytes(four) == 128 * 48 * (2048 * 2 * 192 + 192 * 2048) * 2
    assert experts_bytes(one) == 4 * experts_bytes(four)
    par = four["parallel"]
    assert par["expert_parallel"] is False and par["rank_classes"][0]["expert_shards"] == 4
    assert par["rank_classes"][0]["local_experts"] is None


def test_mixtral_dp3_without_ep_is_refused_naming_the_flag():
    # FusedMoEConfig asserts intermediate % (TP x PCP x DP) == 0: 14336 % 3 = 2
    line = error_line(*run_cli("estimate", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "-dp", "3"))
    assert line.startswith("error: --data-parallel-size:") and "14336" in line


def test_deepseek_v3_tp8_dcp8_logs_8x_the_tokens_in_the_same_blocks():
    base = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--max-model-len", "4096")
    dcp = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "-dcp", "8", "--max-model-len", "4096")
    blocks, bs = base["kv_cache"]["num_gpu_blocks"], base["kv_cache"]["block_size"]
    assert dcp["kv_cache"]["num_gpu_blocks"] == blocks and dcp["kv_cache"]["block_size"] == bs
    assert 4096 % (8 * bs) == 0
    # concurrency = blocks / cdiv(cdiv(4096, dcp), bs); tokens = int(concurrency x 4096)
    assert base["kv_cache"]["gpu_kv_cache_tokens"] == int(blocks / (4096 // bs) * 4096)
    assert dcp["kv_cache"]["gpu_kv_cache_tokens"] == int(blocks / (512 // bs) * 4096)
    assert dcp["kv_cache"]["gpu_kv_cache_tokens"] == 8 * base["kv_cache"]["gpu_kv_cache_tokens"]
    assert dcp["parallel"]["decode_context_parallel_size"] == 8 and dcp["parallel"]["gpus"] == 8


@pytest.mark.parametrize(
    "args, flag, words",
    [
        # Llama-3.1-8B: 8 KV heads; DCP for GQA needs TP > KV heads (config/model.py)
        (("meta-llama/Llama-3.1-8B-Instruct", "-tp", "8", "-dcp", "2"), "--decode-context-parallel-size", "KV heads (8)"),
        # tp % dcp (config/parallel.py, PCP 1)
        (("deepseek-ai/DeepSeek-V3", "-tp", "8", "-dcp", "3"), "--decode-context-parallel-size", "must divide"),
        # --enable-eplb needs -ep; redundant experts need EPLB (config/parallel.py)
        (("deepseek-ai/DeepSeek-V3", "-dp", "8", "--enable-eplb"), "--enable-eplb", "--enable-expert-parallel"),
        (("deepseek-ai/DeepSeek-V3", "-dp", "8", "-ep", "--eplb-config", '{"num_redundant_experts": 32}'),
         "--eplb-config", "EPLB is not enabled"),
        (("Qwen/Qwen3-8B", "-dp", "2", "-dpl", "4"), "--data-parallel-size-local", "<= --data-parallel-size"),
        (("Qwen/Qwen3-8B", "-dp", "3", "--nnodes", "2"), "--nnodes", "must divide"),
        (("Qwen/Qwen3-8B", "-tp", "2", "--nnodes", "2", "--node-rank", "2"), "--node-rank", "0..1"),
        (("Qwen/Qwen3-8B", "-tp", "2", "--nnodes", "2", "--distributed-executor-backend", "ray"), "--nnodes", "mp"),
    ],
)
def test_layouts_vllm_refuses_exit_2_naming_the_flag(args, flag, words):
    line = error_line(*run_cli("estimate", *args, "--gpu", "H200"))
    assert line.startswith(f"error: {flag}"), line
    assert words in line


def test_pcp_with_dp_is_a_per_version_rule():
    # 0.26.0 config/parallel.py refuses PCP with DP; 0.33.0 dropped the check
    args = ("Qwen/Qwen3-30B-A3B", "--gpu", "H200", "-pcp", "2", "-dp", "2", "--max-model-len", "4096")
    line = error_line(*run_cli("estimate", *args, "--vllm-version", "0.26.0"))
    assert line.startswith("error: --prefill-context-parallel-size")
    doc = estimate(*args, "--vllm-version", "0.33.0")
    # PCP adds GPUs, not KV capacity: 2 x 2 GPUs; experts over TP x PCP x DP = 4
    assert doc["parallel"]["gpus"] == 4 and doc["parallel"]["rank_classes"][0]["expert_shards"] == 4


def test_eplb_redundant_experts_join_the_split():
    # 256 + 32 redundant over 8: 36 each
    doc = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "-ep", "--enable-eplb",
                   "--eplb-config", '{"num_redundant_experts": 32}', "--max-model-len", "4096")
    assert [c["local_experts"] for c in doc["parallel"]["rank_classes"]] == [36]
    assert experts_bytes(doc) == 36 * DSV3_MOE_LAYERS * DSV3_EXPERT


def test_pp3_splits_61_layers_20_21_20():
    # get_pp_indices: 61 // 3 = 20 each; remainder 1 to the stage before the last
    doc = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "-pp", "3", "--max-model-len", "4096")
    assert [s["layers"] for s in doc["stages"]] == [[0, 20], [20, 41], [41, 61]]
    assert doc["kv_cache"]["num_gpu_blocks"] == min(s["num_gpu_blocks"] for s in doc["stages"])


def test_dense_dp4_is_four_dp1_engines():
    one = estimate("Qwen/Qwen3-8B", "--gpu", "H200", "--max-model-len", "8192")
    four = estimate("Qwen/Qwen3-8B", "--gpu", "H200", "-dp", "4", "--max-model-len", "8192")
    for key in ("num_gpu_blocks", "gpu_kv_cache_tokens", "max_concurrency"):
        assert four["kv_cache"][key] == one["kv_cache"][key]
    assert four["memory"] == one["memory"]  # a dense DP rank is a DP 1 deployment, byte for byte
    par = four["parallel"]
    assert par["engines_independent"] is True and par["gpus"] == 4 and four["gpu"]["count"] == 4
    assert [e["num_gpu_blocks"] for e in par["engines"]] == [one["kv_cache"]["num_gpu_blocks"]] * 4
    assert par["cluster"]["gpu_kv_cache_tokens"] == 4 * one["kv_cache"]["gpu_kv_cache_tokens"]


def test_every_format_says_multi_gpu_figures_are_not_checked():
    args = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "-ep", "--max-model-len", "4096")
    code, out, err = run_cli("estimate", *args)
    assert code == 0 and NOT_CHECKED in unwrapped(out)
    code, out, err = run_cli("estimate", *args, "--format", "yaml")
    assert code == 0 and NOT_CHECKED in out and NOT_CHECKED in unwrapped(err)
    code, out, err = run_cli("estimate", *args, "--format", "serve")
    assert code == 0 and NOT_CHECKED in unwrapped(err)
    # a plain single-GPU estimate says nothing of the kind
    code, out, err = run_cli("estimate", "Qwen/Qwen3-8B", "--gpu", "H200", "--format", "json")
    assert NOT_CHECKED not in out and "parallel" not in json.loads(out)


def test_two_nodes_get_a_launch_line_each_workers_headless():
    doc = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "16", "-ep", "--nnodes", "2",
                   "--max-model-len", "4096")
    launch = doc["parallel"]["launch"]
    assert [ln["node_rank"] for ln in launch] == [0, 1]
    assert "--headless" not in launch[0]["command"] and "--headless" in launch[1]["command"]
    for k, ln in enumerate(launch):
        assert f"--nnodes 2 --node-rank {k}" in ln["command"]
        assert "--data-parallel-address <LEADER_ADDRESS>" in ln["command"]
    assert doc["parallel"]["engines_per_node"] == 8  # world 16 / 2 nodes / 1 GPU per engine


def test_plan_plans_moe_data_parallel_as_vllm_shards_it():
    # DeepSeek-V3 does not start on one H200 (628 GiB of weights); -dp 8 -ep does (32 experts a GPU):
    # plan proposes the DP + EP layout, and its serve line carries --enable-expert-parallel
    code, out, err = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--max-model-len", "32768", "--concurrency", "64",
                             "--gpus", "H200", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    ep = [o for o in doc["options"] if o["enable_expert_parallel"]]
    assert ep, [o["serve_command"] for o in doc["options"]]
    for o in ep:
        assert o["tensor_parallel_size"] == 1 and o["data_parallel_size"] * o["pipeline_parallel_size"] == o["num_gpus"]
        assert "--enable-expert-parallel" in o["serve_command"]
        assert f"--data-parallel-size {o['data_parallel_size']}" in o["serve_command"]
        assert o["achieved_concurrency"] >= 64


def test_perf_refuses_multi_gpu_layouts_naming_the_flag():
    line = error_line(*run_cli("perf", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "-ep",
                               "--input-len", "100", "--output-len", "100", "--concurrency", "8"))
    assert line.startswith("error: --enable-expert-parallel:")
    line = error_line(*run_cli("perf", "Qwen/Qwen3-8B", "--gpu", "H200", "-dp", "4", "--input-len", "100",
                               "--output-len", "100", "--concurrency", "10"))
    assert line.startswith("error: --concurrency 10:")  # 10 requests do not split evenly over 4 engines
    line = error_line(*run_cli("estimate", "Qwen/Qwen3-8B", "--gpu", "H200", "-dp", "2",
                               "--workload", "prompt=100 output=100", "--perf"))
    assert line.startswith("error: --data-parallel-size 2:")


def test_perf_of_dense_dp_is_one_dp1_engine_at_its_share_of_the_load():
    common = ("Qwen/Qwen3-8B", "--gpu", "H200", "--input-len", "500", "--output-len", "100", "--no-saturation",
              "--format", "json")
    # 4 engines at 16 in flight and 200 requests: each a DP 1 engine at 16 / 4 = 4 in flight, 200 / 4 = 50 requests
    code, out, err = run_cli("perf", *common, "--concurrency", "4", "--num-requests", "50")
    assert code == 0, err
    one = json.loads(out)
    code, out, err = run_cli("perf", *common, "--concurrency", "16", "--num-requests", "200", "-dp", "4")
    assert code == 0, err
    four = json.loads(out)
    assert four["metrics"] == one["metrics"]
    dp = four["data_parallel"]
    assert dp["engines"] == 4 and dp["figures_are_per_engine"] is True
    assert dp["output_throughput"] == round(4 * one["metrics"]["output_throughput"], 3)
    assert "not checked on multi-GPU hardware" in dp["balancer"] and dp["balancer"] in four["approximate"]


def test_plan_warns_where_tensor_parallel_runs_without_nvlink():
    # the L40S profile's perf.link is "PCIe 4.0 x16" (its datasheet in perf.source); H200's is NVLink 4
    code, out, err = run_cli("plan", "Qwen/Qwen3-32B", "--max-model-len", "32768", "--concurrency", "32",
                             "--gpus", "L40S,H200", "--format", "json", "--top", "50")
    assert code == 0, err
    opts = json.loads(out)["options"]
    for o in opts:
        no_nvlink = [w for w in o["warnings"] if "no NVLink" in w]
        if o["gpu"] == "l40s" and o["tensor_parallel_size"] > 1:
            assert no_nvlink and "PCIe 4.0 x16" in no_nvlink[0]
        else:
            assert not no_nvlink


def test_schema_config_types_the_parallel_flags():
    # vLLM config/parallel.py ParallelConfig: data_parallel_size_local ge=0, node_rank ge=0,
    # nnodes / decode_context_parallel_size ge=1, DistributedExecutorBackend literal
    code, out, err = run_cli("schema", "config")
    assert code == 0, err
    props = json.loads(out)["properties"]
    assert props["data-parallel-size-local"]["minimum"] == 0
    assert props["node-rank"]["minimum"] == 0
    assert props["nnodes"]["minimum"] == 1 and props["decode-context-parallel-size"]["minimum"] == 1
    assert props["distributed-executor-backend"]["enum"] == ["ray", "mp", "uni", "external_launcher"]
    assert props["enable-expert-parallel"]["type"] == "boolean"


def test_dense_dp_evidence_names_independent_engines_and_no_nccl_memory():
    doc = estimate("Qwen/Qwen3-8B", "--gpu", "H200", "-dp", "4", "--max-model-len", "8192")
    unchecked = doc["evidence"]["unchecked"]
    assert any("data parallel 4 (independent engines)" in u and NOT_CHECKED in u for u in unchecked)
    # each engine is one GPU of its own (TP 1): no process group, no NCCL memory to doubt
    assert not any(u.startswith("tensor/pipeline parallel") for u in unchecked)


def test_plan_offers_decode_context_parallel_for_mla():
    # DeepSeek-V3 TP 8 on H200 serves 20 requests of 32768 tokens (the MLA cache replicated on the
    # 8 GPUs); -dcp 8 spreads each request over them: 8x the requests in the same blocks
    code, out, err = run_cli("plan", "deepseek-ai/DeepSeek-V3", "--max-model-len", "32768", "--concurrency", "64",
                             "--gpus", "H200", "--format", "json", "--all")
    assert code == 0, err
    opts = json.loads(out)["options"] + json.loads(out).get("dominated_options", [])
    dcp = [o for o in opts if o.get("decode_context_parallel_size", 1) > 1]
    assert dcp, [o["serve_command"] for o in opts]
    o = dcp[0]
    assert o["tensor_parallel_size"] == 8 and o["decode_context_parallel_size"] == 8 and o["num_gpus"] == 8
    assert "--decode-context-parallel-size 8" in o["serve_command"]
    base = estimate("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--max-model-len", "32768",
                    *(["--kv-cache-dtype", o["kv_cache_dtype"]] if o["kv_cache_dtype"] != "auto" else []))
    assert o["num_gpu_blocks"] == base["kv_cache"]["num_gpu_blocks"]


def test_plan_layout_flags_narrow_the_search():
    args = ("plan", "deepseek-ai/DeepSeek-V3", "--max-model-len", "32768", "--concurrency", "64", "--gpus", "H200",
            "--format", "json", "--all")
    code, out, err = run_cli(*args, "--no-enable-expert-parallel", "-dcp", "1")
    assert code == 0, err
    doc = json.loads(out)
    opts = doc["options"] + doc.get("dominated", [])
    assert not any(o["enable_expert_parallel"] or o["decode_context_parallel_size"] > 1 for o in opts)
    code, out, err = run_cli(*args, "--enable-expert-parallel")
    doc = json.loads(out)
    moe_dp = [o for o in doc["options"] + doc.get("dominated", []) if o["data_parallel_size"] > 1]
    assert moe_dp and all(o["enable_expert_parallel"] for o in moe_dp)
    line = error_line(*run_cli("plan", "deepseek-ai/DeepSeek-V3", "--concurrency", "64", "--gpus", "H200", "-dcp", "2"))
    assert line.startswith("error: --decode-context-parallel-size:")


def test_a_version_with_the_min_over_the_world_gives_every_moe_engine_the_same_blocks(monkeypatch):
    # the hook a later version's rules set (parallel.BLOCKS_MIN_OVER_WORLD): Mixtral -dp 3 -ep's
    # 2-expert engine then allocates the 3-expert engines' blocks
    from kvplan.engines.vllm import versions

    args = ("mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "-dp", "3", "-ep", "--max-model-len", "4096",
            "--vllm-version", "0.33.0")
    own = [e["num_gpu_blocks"] for e in estimate(*args)["parallel"]["engines"]]
    assert own[0] == own[1] < own[2]
    monkeypatch.setattr(versions.select("0.33.0").parallel, "BLOCKS_MIN_OVER_WORLD", True)
    world = [e["num_gpu_blocks"] for e in estimate(*args)["parallel"]["engines"]]
    assert world == [own[0]] * 3


MIXTRAL_DP3_EP = ("mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "-dp", "3", "-ep", "--max-model-len", "4096")


def test_vllm_034_extensible_cache_gives_every_moe_engine_the_world_min():
    # vLLM 0.34.0 gpu_worker.py _min_across_ranks: with the extensible KV cache the block count is
    # reduced over the whole world group, so the 2-expert engine allocates what the 3-expert ones do
    own = [e["num_gpu_blocks"] for e in estimate(*MIXTRAL_DP3_EP, "--vllm-version", "0.33.0")["parallel"]["engines"]]
    doc = estimate(*MIXTRAL_DP3_EP, "--vllm-version", "0.34.0")
    blocks = [e["num_gpu_blocks"] for e in doc["parallel"]["engines"]]
    assert blocks[0] == blocks[1] == blocks[2] == doc["kv_cache"]["num_gpu_blocks"]
    assert own[0] == own[1] < own[2]  # 0.33.0: each engine its own min
    # the estimate path (--kv-cache-memory-bytes turns the extensible cache off) keeps 0.33.0's per-engine min
    fixed = estimate(*MIXTRAL_DP3_EP, "--vllm-version", "0.34.0", "--kv-cache-memory", "8GiB")
    assert [c["local_experts"] for c in fixed["parallel"]["engines"]] == [3, 3, 2]


def test_vllm_034_eplb_adds_the_fewest_redundant_experts_that_divide_the_group():
    # config/parallel.py compute_eplb_num_redundant_experts (0.34.0): (ep - E mod ep) mod ep with
    # ep = TP x PCP x DP = 3 and E = 8: (3 - 2) mod 3 = 1 replica, 9 experts over 3 GPUs = 3 each
    new = estimate(*MIXTRAL_DP3_EP, "--enable-eplb", "--vllm-version", "0.34.0")
    assert [e["local_experts"] for e in new["parallel"]["engines"]] == [3, 3, 3]
    # 0.33.0: num_redundant_experts defaults to 0: 8 over 3 = 3, 3, 2
    old = estimate(*MIXTRAL_DP3_EP, "--enable-eplb", "--vllm-version", "0.33.0")
    assert [e["local_experts"] for e in old["parallel"]["engines"]] == [3, 3, 2]
    # a configured count is taken as given in both
    cfg = estimate(*MIXTRAL_DP3_EP, "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 4}', "--vllm-version", "0.34.0")
    assert [e["local_experts"] for e in cfg["parallel"]["engines"]] == [4, 4, 4]  # 12 over 3
