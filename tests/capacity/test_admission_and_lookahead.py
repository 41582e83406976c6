"""The numbers a fresh-user trial found wrong, each against vLLM's own rule (hand arithmetic here).

1. vLLM 0.34.0's extensible KV cache checks one max-model-len request against the final pool:
   v1/core/kv_cache_planning.py shrink_kv_cache_configs compares (num_blocks - 1) x
   bytes_per_block (the null block held back) with the request's pages, and its "estimated
   maximum model length" is searched over that same figure. So a length fits iff
   cdiv(len, block_size) <= num_gpu_blocks - 1, and the largest is (num_gpu_blocks - 1) x block_size.
2. Speculative decoding: a max-length request occupies, per KV group, what the concurrency figure
   counts (get_max_concurrency_for_kv_cache_config), at len + lookahead tokens; recurrent groups
   hold num_speculative_tokens more state pages (mamba/abstract.py num_speculative_blocks).
3. No note says "vLLM starts" beside a refusal.
4. Flag nits: a non-finite float, LoRA flags without --enable-lora, the TP hint with --cpu-offload-gb.
"""

from __future__ import annotations

import json
import re

import pytest

from kvplan.capacity.options import plan_from_options
from tests.check.common import check, write
from tests.helpers import run_cli

GiB = 2**30
MiB = 2**20
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # 32 layers, 8 KV heads of 128, bf16
# one layer's page at 64 tokens: 64 x 8 x 128 x (K + V) x 2 B = 262,144 B; a block: 32 x that
PAGE_64, BPB_64 = 262_144, 8_388_608


def _plan(model=LLAMA, gpu="L4", **kw):
    return plan_from_options(model=model, gpu=gpu, gpu_memory=None, gpu_profiles=None, revision=None, **kw)[0]


def _granule_blocks(kv_bytes: int) -> int:
    # 0.34.0 extensible: every one of the 32 layer segments is committed in 2 MiB granules, so a
    # pool of n blocks needs 32 x roundup(n x 262,144, 2 MiB) <= kv_bytes
    per_layer = kv_bytes // 32 // (2 * MiB) * (2 * MiB)
    return per_layer // PAGE_64


LORA = dict(enable_lora=True, max_loras=4, max_lora_rank=64, gpu_memory_utilization=0.95)


@pytest.mark.parametrize("extra", [{}, LORA], ids=["plain", "lora"])
def test_034_largest_max_model_len_is_the_pool_less_the_null_block(extra):
    p = _plan(max_model_len=32768, vllm_version="0.34.0", **extra)
    assert not p.fits and p.block_size == 64
    blocks = _granule_blocks(p.worst_stage.budget.kv_cache_bytes)
    assert p.num_gpu_blocks == blocks
    # cdiv(L, 64) <= blocks - 1  ->  L <= (blocks - 1) x 64
    assert p.largest_max_model_len == (blocks - 1) * 64
    # the message gives both block counts: 32,768 / 64 = 512 pages + the null block = 513
    assert f"(513 blocks incl. vLLM's null block)" in p.failure
    assert f"({blocks:,} blocks)" in p.failure
    # the recommended length starts, one token more does not, and no max-length request exceeds the pool
    ok = _plan(max_model_len=p.largest_max_model_len, vllm_version="0.34.0", **extra)
    assert ok.fits and ok.num_gpu_blocks == blocks and ok.gpu_kv_cache_tokens >= ok.effective["max_model_len"]
    over = _plan(max_model_len=p.largest_max_model_len + 1, vllm_version="0.34.0", **extra)
    assert not over.fits and over.largest_max_model_len == (blocks - 1) * 64


def test_034_the_trial_numbers():
    # the trial's L4 case: the pool is 496 blocks (31,744 tokens); the old search on the
    # measured bytes said 31,744 fits (it needs 496 + 1 null = 497 blocks) and refused 31,745..31,808
    # only by bytes; vLLM's rule: 495 x 64 = 31,680
    p = _plan(max_model_len=32768, vllm_version="0.34.0")
    assert p.num_gpu_blocks == 496 and p.largest_max_model_len == 31_680
    lora = _plan(max_model_len=32768, vllm_version="0.34.0", **LORA)
    assert lora.num_gpu_blocks == 232 and lora.largest_max_model_len == 231 * 64 == 14_784


def test_033_estimate_path_keeps_its_byte_rule():
    # 0.33.0 sizes by bytes: num_blocks = floor(kv / bpb) with 16-token blocks (page 65,536 B,
    # block 2,097,152 B); the check needs (cdiv(L, 16) + 1) x 2,097,152 <= kv, i.e. the same
    # (num_blocks - 1) x 16 largest length
    p = _plan(max_model_len=131072, vllm_version="0.33.0")
    kv = p.worst_stage.budget.kv_cache_bytes
    assert p.num_gpu_blocks == kv // 2_097_152
    assert p.largest_max_model_len == (kv // 2_097_152 - 1) * 16


# -- 2. speculative decoding on a hybrid model ------------------------------------------------

QWEN_NEXT = dict(model="Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="H200", tensor_parallel_size=2,
                 gpu_memory_utilization=0.6, max_model_len=200_000)


def test_mtp_blocks_per_request_follow_each_group():
    p = _plan(**QWEN_NEXT, speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 2}))
    assert p.block_size == 576
    # groups: 3 Gated-DeltaNet groups of 12 (+ the MTP layer's padding) and 1 full-attention group
    # of 12 + the MTP layer. Full: cdiv(200,000 + 2, 576) = 348 (347 x 576 = 199,872 < 200,002).
    # GDN, mode align: 2 state pages + 2 speculative + 1 prefill checkpoint = 5 each, 3 groups = 15.
    assert p.addons.blocks_per_max_len_request == 348 + 3 * 5 == 363
    # vLLM's concurrency counts the same pages at 200,000 tokens: cdiv(200,000, 576) = 348
    assert p.max_concurrency == pytest.approx(p.num_gpu_blocks / 363)
    assert p.num_gpu_blocks >= 363 and p.addons.max_len_request_schedulable
    assert not any("never be scheduled" in w for w in p.warnings)
    assert any("occupies 363 blocks" in w for w in p.warnings)
    # without speculative decoding: 348 + 3 x 3 = 357 pages, no speculative ones
    plain = _plan(**QWEN_NEXT)
    assert plain.max_concurrency == pytest.approx(plain.num_gpu_blocks / 357)


# -- 3. no "vLLM starts" beside a refusal -------------------------------------------------------

DSV3_MTP = dict(model="deepseek-ai/DeepSeek-V3", gpu="H200", tensor_parallel_size=4,
                speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 1}))


def test_a_refused_start_has_no_note_that_vllm_starts():
    # DeepSeek-V3's 671B parameters (fp8, ~161 GiB per GPU at TP 4) do not fit a 141 GB H200
    p = _plan(**DSV3_MTP)
    assert not p.fits
    assert not any("vLLM starts" in m for m in p.warnings + p.notes)


def test_check_reports_no_start_note_beside_the_weights_refusal(tmp_path):
    f = write(tmp_path, "dsv3.yaml", """
        model: deepseek-ai/DeepSeek-V3
        tensor-parallel-size: 4
        speculative-config: '{"method": "mtp", "num_speculative_tokens": 1}'
    """)
    code, doc, _ = check(f, "--gpu", "H200")
    assert code == 1
    texts = [d["message"] for d in doc["diagnostics"]]
    assert any(d["check_id"] == "weights-fit" and d["severity"] == "error" for d in doc["diagnostics"]), texts
    assert not any("vLLM starts" in t for t in texts), texts


# -- 4. flag nits -------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_offload_is_refused_as_not_a_number(value):
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "L4", f"--cpu-offload-gb={value}")
    assert code == 2 and "Traceback" not in out + err
    assert f"--cpu-offload-gb: must be a finite number (got {value})" in out + err


def test_lora_flags_without_enable_lora_are_named_as_ignored():
    # vLLM builds LoRAConfig only with --enable-lora (engine/arg_utils.py create_engine_config)
    p = _plan(max_model_len=8192, max_lora_rank=64, max_loras=4)
    assert p.addons is None or p.addons.features.lora is None
    hits = [w for w in p.warnings if "without --enable-lora" in w]
    assert len(hits) == 1 and "--max-loras 4" in hits[0] and "--max-lora-rank 64" in hits[0]
    assert "vLLM ignores them" in hits[0]
    # ... and the same figures as without them (no LoRA slot is reserved)
    assert p.num_gpu_blocks == _plan(max_model_len=8192).num_gpu_blocks


def test_a_max_lora_rank_vllm_does_not_parse_is_refused_even_without_enable_lora():
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "L4", "--max-lora-rank", "7")
    assert code == 2 and "--max-lora-rank 7: vLLM accepts only" in out + err


def test_the_tp_hint_counts_the_cpu_offload():
    # Llama-3.1-70B bf16 on an L40S with --cpu-offload-gb 40: the resident weights after the
    # offload are what the hint starts from; at TP 2 each GPU holds half the model (about
    # 131.4 GiB / 2 = 65.7 GiB) less up to 40 GiB offloaded again: about 25-26 GiB, not
    # (weights after offload) / 2
    p = _plan(model="meta-llama/Llama-3.1-70B-Instruct", gpu="L40S", cpu_offload_gb=40)
    from kvplan.capacity.recommend import recommendations

    rec = next(r for r in recommendations(p) if r.flag == "--tensor-parallel-size")
    share = float(re.search(r"each holds about ([\d.]+) GiB", rec.reason).group(1))
    resident = p.worst_stage.budget.weights_bytes / GiB
    moved = -p.addons.parts["cpu_offloaded"] / GiB  # up to 40 GiB left the GPU
    assert 39 < moved < 41  # whole parameters: the last one may pass the limit
    full = resident + moved
    assert abs(share - (full / rec.value - moved)) < 1.0
    assert abs(share - resident / rec.value) > 5
