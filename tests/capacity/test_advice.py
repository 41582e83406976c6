"""The advice `estimate` and `plan` give, and the inputs they refuse with a hint (TP sizes, tiny
GPUs, whole requests, --concurrency, utilization, batched tokens, block size, TP beyond a node).

Expected values are hand arithmetic written here, never read back from the code under test.
"""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

LLAMA8B = "meta-llama/Meta-Llama-3-8B"  # 32 heads, 8 KV heads, 32 layers, 8192 positions
QWEN7B = "Qwen/Qwen2.5-7B-Instruct"  # 28 heads, 4 KV heads
GiB = 1 << 30


def _bad_input(code, out, err, flag):
    assert code == 2, (code, out, err)
    assert out == "", out
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"error: {flag}"), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].lstrip().startswith("hint:")), err
    return lines


# ---------------------------------------------------------------- TP hint


def test_tp_hint_lists_only_sizes_kvplan_accepts():
    # 28 heads -> divisors 1, 2, 4, 7, 14, 28. KV heads 4: a size <= 4 must divide 4 (1, 2, 4);
    # a size > 4 must be a multiple of 4: 7 no, 14 no (14 = 3*4 + 2), 28 yes (7*4).
    lines = _bad_input(*run_cli("estimate", QWEN7B, "-tp", "3"), "--tensor-parallel-size 3")
    assert lines[1].strip() == "hint: valid sizes: 1, 2, 4, 28"
    for tp in ("1", "2", "4", "28"):
        code, out, err = run_cli("estimate", QWEN7B, "-tp", tp, "--format", "json")
        assert code in (0, 1), (tp, err)


def test_tp_kv_head_refusal_also_gives_the_hint():
    lines = _bad_input(*run_cli("estimate", QWEN7B, "-tp", "7"), "--tensor-parallel-size 7")
    assert lines[1].strip() == "hint: valid sizes: 1, 2, 4, 28"


# ---------------------------------------------------------------- tiny GPUs


def test_gpu_memory_without_unit_is_bad_input():
    # 80 bytes: below 1 GiB, surely a missing unit
    lines = _bad_input(*run_cli("estimate", LLAMA8B, "--gpu-memory", "80"), "--gpu-memory")
    assert "did you mean 80GiB?" in lines[1]


def test_gpu_memory_below_cuda_context_is_bad_input():
    # 0.5 GiB = 536,870,912 bytes < the CUDA context's 552,402,944 bytes: nothing can start
    lines = _bad_input(*run_cli("estimate", LLAMA8B, "--gpu-memory", "0.5GiB"), "--gpu-memory")
    assert "CUDA context" in lines[0]
    assert len(lines) == 2


def test_gpu_memory_of_one_gib_is_accepted():
    code, out, err = run_cli("estimate", LLAMA8B, "--gpu-memory", "1GiB", "--format", "json")
    assert code == 1, err  # 1 GiB cannot hold 15 GB of weights, but it is a GPU size
    rec = json.loads(out)["recommendations"].get("--gpu-memory-utilization")
    assert rec is None or 0 < rec["value"] <= 1, rec


def test_no_recommended_utilization_outside_0_1():
    # Through the library (the CLI refuses such a GPU): 512 MiB total, 527 MiB context -> nothing is free.
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan
    from kvplan.capacity.recommend import recommendations
    from kvplan.sources import load_spec

    spec, _ = load_spec(LLAMA8B, None)
    gpu = find_gpu("H200", load_profiles(None)).with_memory(512 << 20)
    p = plan(spec, gpu, EngineArgs(max_model_len=8192))
    utils = [r.value for r in recommendations(p) if r.flag == "--gpu-memory-utilization"]
    assert all(0 < u <= 1 for u in utils), utils


# ---------------------------------------------------------------- whole requests


def test_binding_limit_counts_whole_requests():
    # A10G, Llama-3-8B, 8192 tokens: 2,332 blocks x 16 = 37,312 tokens; 37,312 / 8,192 = 4.55
    # -> only 4 whole max-length requests fit (not 5).
    code, out, err = run_cli("estimate", LLAMA8B, "--gpu", "A10G", "--max-model-len", "8192", "--max-num-seqs", "2",
                             "--vllm-version", "0.26.0")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "4.55x" in flat
    assert "would hold 4 max-length requests" in flat
    assert "hold 5 " not in flat


# ---------------------------------------------------------------- --concurrency >= 1


@pytest.mark.parametrize("value", ["1e-300", "0.5", "0.999"])
def test_plan_concurrency_below_one_is_bad_input(value):
    _bad_input(*run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--concurrency", value), "--concurrency")


def test_plan_concurrency_one_is_fine():
    code, out, err = run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--concurrency", "1", "--gpus", "H200")
    assert code == 0, err


# ---------------------------------------------------------------- utilization no engine can use


def test_plan_utilization_above_free_everywhere_is_bad_input():
    # H200: 150,109,880,320 B total x 1.0 > 149,557,477,376 B free (total - the 552,402,944 B CUDA context)
    lines = _bad_input(
        *run_cli("plan", LLAMA8B, "--gpus", "h200", "--gpu-memory-utilization", "1.0", "--concurrency", "10",
                 "--max-model-len", "8192", "--vllm-version", "0.33.0"),  # 0.34.0's extensible cache accepts 1.0
        "--gpu-memory-utilization 1.0",
    )
    assert "free" in lines[0]
    assert "closest" not in " ".join(lines)




def test_plan_gpus_empty_string_is_an_empty_list():
    lines = _bad_input(*run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--gpus", ""), "--gpus")
    assert lines[0] == "error: --gpus: empty list"
    lines = _bad_input(*run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--gpus", ",,"), "--gpus")
    assert lines[0] == "error: --gpus: empty list"


def test_plan_batched_tokens_reason_said_once():
    # H200's default max_num_seqs is 1024, smaller GPUs' 256: one reason, both numbers
    lines = _bad_input(*run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--max-num-batched-tokens", "1"),
                       "--max-num-batched-tokens 1")
    assert lines[0].count("--max-num-batched-tokens 1") == 1, lines[0]
    assert "256" in lines[0] and "1024" in lines[0]


def test_plan_batched_tokens_distinct_names_are_not_merged():
    from kvplan.capacity.search import SearchSpace, Skipped, refusal_message

    sk = [Skipped("a", 1, 1, "auto", None, "unsupported", "--dtype bfloat16: NVIDIA H100 has no x"),
          Skipped("b", 1, 1, "auto", None, "unsupported", "--dtype bfloat16: NVIDIA H200 has no x")]
    msg = refusal_message(sk, SearchSpace(gpus=()))
    assert "H100" in msg and "H200" in msg


def test_workload_header_error_names_the_flag(tmp_path):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0:root:/root:/bin/bash\n")
    lines = _bad_input(*run_cli("plan", LLAMA8B, "--max-model-len", "8192", "--workload", str(f)), "--workload")
    assert lines[0].startswith(f"error: --workload: {f}:1:")


# ---------------------------------------------------------------- silent choices


def test_block_size_change_is_explained():
    # DeepSeek-V2-Lite is MLA; on B200 (compute capability 10.0) vLLM's FLASHINFER_MLA backend
    # prefers 32-token blocks; on H200 (9.0, bf16 KV) FLASH_ATTN_MLA keeps 16 (vLLM 0.33.0; 0.34.0
    # gives 64 on both, its default).
    code, out, err = run_cli("estimate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "B200", "--max-model-len", "4096",
                             "--format", "json", "--vllm-version", "0.33.0")
    doc = json.loads(out)
    assert doc["kv_cache"]["block_size"] == 32
    notes = [w for w in doc["warnings"] if "block_size 32" in w]
    assert len(notes) == 1 and "MLA" in notes[0] and "16" in notes[0], doc["warnings"]
    code, out, err = run_cli("estimate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H200", "--max-model-len", "4096",
                             "--format", "json", "--vllm-version", "0.33.0")
    assert not [w for w in json.loads(out)["warnings"] if "block_size" in w]


def test_explicit_block_size_gets_no_notice():
    code, out, err = run_cli("estimate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "B200", "--max-model-len", "4096",
                             "--block-size", "32", "--format", "json")
    assert not [w for w in json.loads(out)["warnings"] if "block_size" in w]


def test_tp_beyond_a_node_warns():
    # 32 heads, 8 KV heads: TP 32 is valid (32 = 4 x 8), but 32 GPUs > 8 per node
    code, out, err = run_cli("estimate", LLAMA8B, "-tp", "32", "--max-model-len", "8192", "--format", "json")
    ws = [w for w in json.loads(out)["warnings"] if "node" in w]
    assert len(ws) == 1 and "32" in ws[0] and "8" in ws[0], ws
    code, out, err = run_cli("estimate", LLAMA8B, "-tp", "8", "--max-model-len", "8192", "--format", "json")
    assert not [w for w in json.loads(out)["warnings"] if "per node" in w]
