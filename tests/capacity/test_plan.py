"""`kvplan plan` (reverse planning) through the CLI, in-process and offline (bundled models)."""

from __future__ import annotations

import json

import pytest

from helpers import error_line, run_cli

from kvplan.capacity.search import _dominates

LLAMA8B = "meta-llama/Meta-Llama-3-8B"
LLAMA70B = "meta-llama/Llama-3.3-70B-Instruct"


def _json(*args):
    code, out, err = run_cli("plan", *args, "--format", "json")
    return code, (json.loads(out) if out.strip() else None), err


def test_model_that_fits_one_gpu_never_proposes_two():
    # Llama-3-8B bf16 (16 GB of weights) at 8k context for 16 users fits one 40-80 GB GPU; with
    # per-GPU prices (bundled or not), an option with more GPUs of one profile is dominated by a
    # one-GPU option of the same precision. (Across all profiles, 2x RTX 4090 at the bundled
    # $0.60 each can be cheaper than one L40S: that is a price call, so only GPUs that each
    # hold the model are offered here.)
    code, doc, _ = _json(LLAMA8B, "--max-model-len", "8192", "--concurrency", "16", "--gpus", "H200,A100-80GB,H100-80GB,L40S")
    assert code == 0
    assert doc["options"]
    assert {o["num_gpus"] for o in doc["options"]} == {1}
    code, doc, _ = _json(LLAMA8B, "--max-model-len", "8192", "--concurrency", "16", "--gpus", "H200,A100-80GB,H100-80GB", "--top", "100")
    assert code == 0
    assert all(o["num_gpus"] == 1 and o["tensor_parallel_size"] == 1 for o in doc["options"])
    # the first option keeps the checkpoint's precision
    assert doc["options"][0]["kv_cache_dtype"] == "auto" and doc["options"][0]["quantization"] is None


def test_unmet_target_exits_1_and_names_the_closest():
    # Only one engine shape is allowed: 8x H200 TP=8 bf16 - it starts but cannot serve 2000
    # requests of 32k tokens; it is the closest option and the message says how close.
    code, out, err = run_cli(
        "plan", LLAMA70B, "--max-model-len", "32768", "--concurrency", "2000", "--gpus", "H200",
        "--tensor-parallel-size", "8", "--pipeline-parallel-size", "1", "--kv-cache-dtype", "auto",
        "--quantization", "none", "--max-gpus", "8",
    )
    assert code == 1
    assert "no option meets the target" in out
    assert "closest: 8x NVIDIA H200" in out and "of 2,000 requests" in out  # thousands separated (never 1e+08)
    assert "--tensor-parallel-size 8" in out
    assert "Traceback" not in out + err


def test_unmet_target_json_has_closest():
    code, doc, _ = _json(LLAMA70B, "--max-model-len", "32768", "--concurrency", "2000", "--gpus", "H200")
    assert code == 1
    assert doc["options"] == []
    assert doc["closest"]["num_gpus"] <= 8
    assert doc["closest"]["achieved_concurrency"] < 2000
    assert doc["closest_note"].startswith("closest:")


def test_nothing_starts_names_the_nearest_engine():
    # Llama-3.1-405B cannot start on 8 L40S (48 GB each) even with fp8 weights.
    code, out, _ = run_cli("plan", "meta-llama/Llama-3.1-405B", "--max-model-len", "8192", "--concurrency", "1", "--gpus", "L40S")
    assert code == 1
    assert "closest: 8x NVIDIA L40S" in out and "does not start" in out


def test_prices_rank_priced_before_unpriced_and_cost_is_price_times_gpus():
    code, doc, _ = _json(
        LLAMA70B, "--max-model-len", "32768", "--concurrency", "20", "--gpus", "H200,GH200",
        "--kv-cache-dtype", "auto", "--quantization", "none", "--price", "H200=3.5",
    )
    assert code == 0
    opts = doc["options"]
    priced = [o for o in opts if o["price_known"]]
    assert priced and opts[: len(priced)] == priced  # priced first
    for o in priced:
        assert o["hourly_cost_usd"] == pytest.approx(3.5 * o["num_gpus"])
    assert all(o["hourly_cost_usd"] is None for o in opts[len(priced):])
    assert "gh200" in doc["unpriced_gpus"]  # no bundled price (kvplan/data/gpus.yaml)


def test_cheaper_priced_profile_ranks_first():
    # Both priced: the cheaper hourly bill wins even with more GPUs.
    code, doc, _ = _json(
        LLAMA8B, "--max-model-len", "8192", "--concurrency", "16", "--gpus", "H200,L40S",
        "--kv-cache-dtype", "auto", "--quantization", "none", "--price", "H200=4.0", "--price", "L40S=1.0",
    )
    assert code == 0
    costs = [o["hourly_cost_usd"] for o in doc["options"]]
    assert costs == sorted(costs)
    assert doc["options"][0]["gpu"] == "l40s"


def test_price_from_a_gpu_profiles_yaml(tmp_path):
    yml = tmp_path / "gpus.yaml"
    yml.write_text(
        "gpus:\n- id: my-80g\n  name: My 80 GiB GPU\n  memory_bytes: 85899345920\n  fp8_supported: true\n"
        "  price_per_hour_usd: 1.25\n"
    )
    code, doc, _ = _json(LLAMA70B, "--max-model-len", "32768", "--concurrency", "8", "--gpus", "my-80g",
                         "--gpu-profiles", str(yml), "--kv-cache-dtype", "auto", "--quantization", "none")
    assert code == 0
    first = doc["options"][0]
    assert first["gpu"] == "my-80g" and first["price_per_gpu_hour_usd"] == 1.25
    assert first["hourly_cost_usd"] == pytest.approx(1.25 * first["num_gpus"])
    # --price overrides the profile's price
    code, doc, _ = _json(LLAMA70B, "--max-model-len", "32768", "--concurrency", "8", "--gpus", "my-80g",
                         "--gpu-profiles", str(yml), "--kv-cache-dtype", "auto", "--quantization", "none", "--price", "my-80g=2")
    assert doc["options"][0]["hourly_cost_usd"] == pytest.approx(2 * doc["options"][0]["num_gpus"])


def test_data_parallel_replicas_when_one_engine_is_not_enough():
    # One H200 holds Llama-3-8B; 1000 requests of 8k need several engines: the plan replicates
    # the one-GPU engine (DP) rather than only growing TP.
    code, doc, _ = _json(
        LLAMA8B, "--max-model-len", "8192", "--concurrency", "300", "--gpus", "H200",
        "--kv-cache-dtype", "auto", "--quantization", "none", "--pipeline-parallel-size", "1",
    )
    assert code == 0
    first = doc["options"][0]
    dp = first["data_parallel_size"]
    assert dp > 1
    assert first["engine_concurrency"] * (dp - 1) < 300 <= first["engine_concurrency"] * dp + 0.01
    assert f"--data-parallel-size {dp}" in first["serve_command"]
    assert first["num_gpus"] == first["tensor_parallel_size"] * dp


def test_invalid_tp_is_skipped_with_the_reason_under_explain():
    # Qwen2.5-7B: 28 attention heads, 4 KV heads - TP=8 divides neither.
    code, doc, _ = _json("Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--concurrency", "4", "--gpus", "H200", "--explain")
    assert code == 0
    bad = [s for s in doc["skipped"] if s["category"] == "invalid_parallel"]
    assert bad and all(s["tensor_parallel_size"] == 8 for s in bad)
    assert "--tensor-parallel-size 8" in bad[0]["reason"]
    code, out, _ = run_cli("plan", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--gpus", "H200", "--explain")
    assert "invalid_parallel" in out


def test_workload_raises_achieved_concurrency_over_max_length():
    args = [LLAMA8B, "--max-model-len", "8192", "--concurrency", "200", "--gpus", "H200",
            "--kv-cache-dtype", "auto", "--quantization", "none", "--pipeline-parallel-size", "1",
            "--vllm-version", "0.33.0"]  # 16-token blocks (8192 / 16 below)
    code, plain, _ = _json(*args)
    code_w, wl, _ = _json(*args, "--workload", "prompt=100 output=29", "--no-enable-prefix-caching")
    assert code == 0 and code_w == 0
    # max-length requests: 200 users need several H200s; 129-token requests fit one.
    assert plain["options"][0]["num_gpus"] > 1
    first = wl["options"][0]
    assert first["num_gpus"] == 1
    blocks = first["num_gpu_blocks"]
    cap = first["workload"]
    # steady state: 219/29 blocks per sequence (see test_workload)
    assert cap["paged"]["kv_sequences_steady_state"] == pytest.approx(blocks * 29 / 219, abs=0.01)
    assert cap["static"]["blocks_per_sequence"] == 512  # 8192 / 16
    assert cap["static"]["sequences"] == blocks // 512
    assert wl["workload"]["capacity_of_first_option"]["binding_limit"] in ("kv_cache", "max_num_seqs")


def test_workload_table_report_names_binding_and_fix():
    code, out, _ = run_cli(
        "plan", LLAMA8B, "--max-model-len", "8192", "--concurrency", "10", "--gpus", "H200", "--kv-cache-dtype", "auto",
        "--quantization", "none", "--workload", "prompt=100 output=29", "--max-num-seqs", "64",
    )
    assert code == 0
    assert "PagedAttention" in out and "static max-length" in out
    assert "binding: --max-num-seqs" in out
    assert "--max-num-seqs" in out.split("binding:")[1]


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--price", "H200=abc"], "--price"),
        (["--price", "H200"], "--price"),
        (["--price", "NoSuchGPU=1"], "--price"),
        (["--gpus", "NoSuchGPU"], "--gpus"),
        (["--kv-cache-dtype", "fp9"], "--kv-cache-dtype"),
        (["--quantization", "int3"], "--quantization"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
        (["--tensor-parallel-size", "two"], "--tensor-parallel-size"),
        (["--concurrency", "0"], "--concurrency"),
        (["--max-gpus", "0"], "--max-gpus"),
        (["--max-model-len", "auto"], "--max-model-len"),
        (["--max-model-len", "10000000"], "--max-model-len"),
        (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
        (["--workload", "prompt=1"], "--workload"),
        (["--workload", "tests/data/workload/bad_value.csv"], "bad_value.csv:3"),
        (["--shared-prefix-tokens", "10"], "--shared-prefix-tokens"),
        (["--format", "xml"], "--format"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, flag):
    code, out, err = run_cli("plan", LLAMA8B, "--max-model-len", "8192", *args)
    assert code == 2, (out, err)
    assert flag in err
    assert "Traceback" not in err
    assert err.strip().splitlines()[0].startswith("error:")


def test_multi_node_engine_is_labelled():
    # Llama-3.1-405B bf16 (~810 GB) needs more than one node of 8 L40S: TP=8 x PP=4 = 32 GPUs.
    code, doc, _ = _json(
        "meta-llama/Llama-3.1-405B", "--max-model-len", "8192", "--concurrency", "1", "--gpus", "L40S",
        "--max-gpus", "32", "--kv-cache-dtype", "auto", "--quantization", "none",
    )
    assert code == 0
    first = doc["options"][0]
    assert first["multi_node"] is True
    assert first["pipeline_parallel_size"] > 1 and first["tensor_parallel_size"] <= 8


def test_dominance_rules():
    # (gpu id, GPUs, hourly cost, fp8 KV, fp8 weights)
    assert _dominates(("h200", 1, None, False, False), ("h200", 2, None, False, False))  # same GPU, fewer
    assert _dominates(("h200", 1, None, False, False), ("l40s", 2, None, False, False))  # unpriced: count
    assert not _dominates(("h200", 1, None, True, False), ("l40s", 2, None, False, False))  # fp8 never hides bf16
    assert _dominates(("l40s", 1, 1.0, False, False), ("h200", 1, 4.0, False, False))  # priced: cheaper, same count
    assert not _dominates(("l40s", 2, 2.0, False, False), ("h200", 1, 4.0, False, False))  # cheaper but more GPUs: both kept
    assert not _dominates(("l40s", 2, 2.0, False, False), ("h200", 1, None, False, False))  # priced vs unknown
    assert not _dominates(("h200", 1, None, False, False), ("h200", 1, None, False, False))  # not strictly better


def test_estimate_max_model_len_auto_is_the_largest_that_fits():
    # --kv-cache-memory 256 MiB on Llama-3-8B: 256 MiB / 2 MiB per 16-token block = 128 blocks
    # -> the largest context one request fits is 128 x 16 = 2048 tokens.
    # (vLLM 0.26.0: 0.33.0 subtracts one null block first, 2032 tokens)
    code, out, _ = run_cli("estimate", LLAMA8B, "--gpu", "H200", "--max-model-len", "auto", "--kv-cache-memory", "256MiB",
                           "--format", "json", "--vllm-version", "0.26.0")
    assert code == 0
    doc = json.loads(out)
    assert doc["kv_cache"]["num_gpu_blocks"] == 128
    assert doc["engine"]["max_model_len"] == 2048


def test_estimate_extras_adds_the_workload_to_an_estimate_document():
    # The hook kvplan.cli's `estimate` can call for --workload (see docs/plan.md).
    from kvplan.cli.plan import estimate_extras, load_spec
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan

    p = plan(load_spec(LLAMA8B, None), find_gpu("H200", load_profiles()), EngineArgs(max_model_len=2048, kv_cache_memory_bytes=1 << 30, vllm_version="0.33.0"))
    doc: dict = {}
    estimate_extras(p, fmt="json", doc=doc, workload="prompt=100 output=29", enable_prefix_caching=False)
    assert doc["workload"]["paged"]["kv_sequences_steady_state"] == pytest.approx(512 * 29 / 219, abs=0.01)
    assert doc["workload"]["static"]["sequences"] == 4  # 512 blocks / 128 per 2048-token sequence
    from kvplan.cli.plan import workload_model_from_flags

    doc = {}
    wl = workload_model_from_flags("prompt=100 output=29", 64, 1, True)
    estimate_extras(p, fmt="json", doc=doc, workload=wl)
    assert doc["workload"]["paged"]["kv_sequences_steady_state"] == pytest.approx(508 * 29 / 103, abs=0.01)  # 4 prefix blocks once
    doc = {}
    estimate_extras(p, fmt="json", doc=doc)
    assert doc["workload"] is None


# --- prices (bundled list prices, --price) -----------------------------------------------------


def test_plan_ranks_by_bundled_price_not_fewest_gpus():
    # Llama-3-8B, 64 concurrent 8192-token requests: 1x B300 fits but has no bundled price, so
    # it must not rank first; every priced option comes before every unpriced one
    code, out, err = run_cli("plan", "meta-llama/Meta-Llama-3-8B", "--concurrency", "64", "--format", "json", "--top", "60")
    assert code == 0, err
    doc = json.loads(out)
    opts = doc["options"]
    known = [o["price_known"] for o in opts]
    assert known[0] is True
    assert known == sorted(known, reverse=True)  # priced first, then unpriced
    priced = [o["hourly_cost_usd"] for o in opts if o["price_known"]]
    assert priced == sorted(priced)
    assert "b300" in doc["unpriced_gpus"]


def test_price_given_twice_for_one_gpu_under_two_aliases_is_an_error():
    code, out, err = run_cli("plan", "meta-llama/Meta-Llama-3-8B", "--concurrency", "64",
                             "--price", "H100=2", "--price", "h100-sxm=3")
    assert code == 2 and out == ""
    assert err.startswith("error: --price: 'H100' and 'h100-sxm' are the same GPU (h100-sxm)")


MODEL = "meta-llama/Meta-Llama-3-8B"  # bundled spec: resolves offline


def test_plan_fp8_inc_says_cannot_size_yet():
    line = error_line(*run_cli("plan", MODEL, "--kv-cache-dtype", "fp8_inc", "--max-model-len", "8192",
                                   "--concurrency", "10"))
    assert line.startswith("error: --kv-cache-dtype: vLLM (0.26.0, 0.33.0, 0.34.0") and (
        "accepts 'fp8_inc' but kvplan cannot size it yet" in line), line


def test_plan_unknown_kv_dtype_still_unknown():
    line = error_line(*run_cli("plan", MODEL, "--kv-cache-dtype", "fp9", "--max-model-len", "8192",
                                   "--concurrency", "10"))
    assert "unknown value 'fp9'" in line
