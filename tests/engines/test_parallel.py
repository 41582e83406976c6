"""Tensor/pipeline-parallel rules checked against hand arithmetic and public vLLM reports.

No multi-GPU start was available (issue 7); these pin the rules kvplan restates from vLLM 0.26.0.
"""

from __future__ import annotations

import json

from helpers import run_cli

GiB = 2**30


def est(*args: str) -> dict:
    # vLLM 0.33.0's 16-token blocks (the page sizes by hand below)
    code, out, err = run_cli("estimate", *args, "--format", "json", "--vllm-version", "0.33.0")
    assert out.strip(), err
    return json.loads(out)


def test_llama3_70b_tp4_page_size_by_hand():
    # 8 KV heads / TP 4 = 2 heads per GPU; K+V; head_dim 128; bf16; 16 tokens per block; 80 layers.
    d = est("meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192")
    assert d["kv_cache"]["page_size_bytes"] == 16 * 2 * 2 * 128 * 2  # 16384
    assert d["kv_cache"]["bytes_per_block"] == 16 * 2 * 2 * 128 * 2 * 80  # 1,310,720
    assert d["kv_cache"]["bytes_per_token"] == 2 * 2 * 128 * 2 * 80  # 81,920 per GPU
    # 8192 tokens / 16 = 512 blocks per max-length request
    assert d["kv_cache"]["groups"][0]["blocks_per_max_len_request"] == 512


def test_kv_heads_replicate_when_tp_exceeds_them():
    # Llama-3-8B: 8 KV heads; at TP=16 each GPU still holds one (replicated) head of 128 dims.
    d = est("meta-llama/Meta-Llama-3-8B", "--gpu", "H100", "-tp", "16", "--max-model-len", "8192")
    assert d["kv_cache"]["page_size_bytes"] == 16 * 1 * 2 * 128 * 2
    assert any("replicated" in w for w in d["warnings"])


def test_tp_must_divide_heads_exit_2():
    code, out, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "-tp", "3")
    assert code == 2
    assert "--tensor-parallel-size 3" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


def test_mla_latent_is_not_split_by_tp():
    # DeepSeek-V2-Lite MLA: one latent of kv_lora_rank 512 + rope 64 = 576 elements per token
    # per layer, bf16, identical on every TP rank.
    one = est("deepseek-ai/DeepSeek-V2-Lite", "--max-model-len", "8192")
    two = est("deepseek-ai/DeepSeek-V2-Lite", "--max-model-len", "8192", "-tp", "2")
    assert one["kv_cache"]["page_size_bytes"] == 16 * 576 * 2
    assert two["kv_cache"]["page_size_bytes"] == 16 * 576 * 2


def test_pipeline_stages_split_layers_like_get_pp_indices():
    # 32 layers over 2 stages: 16 + 16; DeepSeek-V3's 61 over 4: 15, 15, 16, 15 (the remainder
    # goes to the stages before the last).
    d = est("meta-llama/Meta-Llama-3-8B", "-pp", "2", "--max-model-len", "8192")
    assert [s["layers"] for s in d["stages"]] == [[0, 16], [16, 32]]
    # each stage's block covers its 16 layers: 16 tokens x 8 heads x 256 x 2 B x 16 layers
    assert d["kv_cache"]["bytes_per_block"] == 16 * 8 * 256 * 2 * 16
    v3 = est("deepseek-ai/DeepSeek-V3", "-pp", "4", "-tp", "8", "--gpu", "H200", "--max-model-len", "4096")
    assert [s["layers"][1] - s["layers"][0] for s in v3["stages"]] == [15, 15, 16, 15]
    # vLLM keeps the smallest stage count
    assert v3["kv_cache"]["num_gpu_blocks"] == min(s["num_gpu_blocks"] for s in v3["stages"])


def test_llama3_8b_tp2_weights_match_public_report():
    # vllm PR #10511 sanity log: `vllm serve meta-llama/Meta-Llama-3-8B -tp 2`
    # "model weights take 7.48GiB" (rounded to 0.01 GiB).
    d = est("meta-llama/Meta-Llama-3-8B", "-tp", "2", "--gpu", "H100", "--max-model-len", "8192")
    assert abs(d["memory"]["weights_bytes"] / GiB - 7.48) <= 0.006


def test_llama3_8b_tp2_weights_by_hand():
    # embed + lm_head: 128256 x 4096 each, split in 2; per layer: q 4096x4096, k,v 4096x1024,
    # o 4096x4096, gate/up 4096x14336, down 14336x4096 split in 2; norms 2x4096 per layer and the
    # final norm replicated; RoPE cache 8192 x 128 (bf16) replicated.
    embed = 128256 * 4096 // 2
    layer = (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096 + 3 * 4096 * 14336) // 2 + 2 * 4096
    total_params = 2 * embed + 32 * layer + 4096 + 8192 * 128
    d = est("meta-llama/Meta-Llama-3-8B", "-tp", "2", "--gpu", "H100", "--max-model-len", "8192")
    assert d["memory"]["weights_bytes"] == total_params * 2


def test_fp8_kv_doubles_tokens_as_in_public_report():
    # vllm issue #42058 (0.26.0, Qwen3-8B, A100-80GB, eager): 389,872 tokens auto vs 779,760 fp8,
    # exactly 2x. kvplan: fp8 halves the page, so tokens double within one block.
    auto = est("Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--enforce-eager", "--max-model-len", "32768")
    fp8 = est("Qwen/Qwen3-8B", "--gpu", "A100-80GB", "--enforce-eager", "--max-model-len", "32768", "--kv-cache-dtype", "fp8")
    assert fp8["kv_cache"]["page_size_bytes"] * 2 == auto["kv_cache"]["page_size_bytes"]
    ratio = fp8["kv_cache"]["gpu_kv_cache_tokens"] / auto["kv_cache"]["gpu_kv_cache_tokens"]
    assert abs(ratio - 2.0) < 0.01


def test_multi_gpu_says_non_torch_is_unverified():
    d = est("meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192")
    # kvplan's own uncertainty, which the user cannot act on: a JSON note (--verbose in the table)
    assert any("unverified" in w for w in d["notes"])
