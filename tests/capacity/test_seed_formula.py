"""Keep docs/seed-formula.md (and the worked examples of docs/how-it-works.md) honest.

Every expected number here is hand arithmetic written out as a literal (or a vLLM-logged value
from ../shared/calibration), never recomputed with kvplan. Three kinds of checks:
  * the hand arithmetic the docs state is right, and the docs still state it;
  * kvplan's JSON for the article's setup has the structure the doc explains (per-GPU bytes per
    token, page and block sizes, the budget chain, blocks = floor, tokens = blocks x 16);
  * kvplan's calibrated result stays within 5 % of the block count the doc quotes, so a large
    calibration change makes the doc fail instead of going stale silently.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import run_cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
SEED = (DOCS / "seed-formula.md").read_text(encoding="utf-8")
HOW = (DOCS / "how-it-works.md").read_text(encoding="utf-8")

GiB = 1 << 30
TP = 4


def _estimate(*args: str) -> dict:
    code, out, err = run_cli("estimate", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def seed_plan() -> dict:
    return _estimate(
        "meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192", "--vllm-version", "0.26.0"
    )


def _quoted(n: int | str) -> bool:
    text = f"{n:,}" if isinstance(n, int) else n
    return text in SEED


# --- the article's own arithmetic -------------------------------------------------------------


def test_article_formula_gives_about_3528_not_1248():
    numerator = 320 * 0.9 - 140  # GB
    assert math.isclose(numerator, 148.0)
    denominator = 16 * 80 * 2 * 8192 * 2
    assert denominator == 41_943_040
    assert int(148_000_000_000 / denominator) == 3_528
    assert int(148 * GiB / denominator) == 3_788  # if "GB" meant GiB
    assert _quoted(41_943_040) and _quoted(3_528) and _quoted(3_788)


def test_1248_blocks_hold_two_requests_not_155():
    assert 1_248 * 16 == 19_968
    assert 19_968 // 8192 == 2
    assert 155 * (8192 // 16) == 79_360
    assert round(3_528 * 16 / 8192, 1) == 6.9
    assert _quoted(19_968) and _quoted(79_360) and "2.44" in SEED and "6.9" in SEED


def test_155_requests_exceed_the_four_gpus():
    need = 155 * 8192 * 327_680
    assert need == 416_074_956_800
    assert need / GiB == 387.5
    assert round(4 * 85_095_874_560 / GiB, 1) == 317.0
    assert _quoted(416_074_956_800) and "387.5 GiB" in SEED and "317.0 GiB" in SEED


def test_llama3_70b_bytes_per_token_and_gqa_factor():
    real = 80 * 2 * 8 * 128 * 2
    assumed = 80 * 2 * 8192 * 2
    assert real == 327_680 and assumed == 2_621_440
    assert assumed // real == 8  # 8192 / (8 x 128): the GQA factor is 8
    assert 16 * real == 5_242_880
    assert _quoted(327_680) and _quoted(2_621_440) and _quoted(5_242_880)
    assert "**8x**" in SEED


def test_kv_per_4096_token_request_is_1_25_gib_not_5_gb():
    assert 327_680 * 4096 == 1_342_177_280 == int(1.25 * GiB)
    assert 81_920 * 4096 == 335_544_320 == int(0.3125 * GiB)
    assert 2_621_440 * 4096 == 10_737_418_240 == 10 * GiB
    assert 4096 // 16 == 256
    for n in (1_342_177_280, 335_544_320, 10_737_418_240):
        assert _quoted(n)
    assert "1.25 GiB" in SEED


def test_waterfall_rows():
    # + GQA
    assert 148_000_000_000 // 5_242_880 == 28_228
    # + real memory: 4 x ceil(85,095,874,560 x 0.92) - 4 x 35,280,928,768
    assert 4 * 78_288_204_596 - 4 * 35_280_928_768 == 172_029_103_312
    assert 172_029_103_312 // 5_242_880 == 32_811
    # + activation and non-torch: 4 x (561,987,136 + 670,669,209)
    assert 4 * (919_323_136 + 670_669_209) == 6_359_969_380
    assert 172_029_103_312 - 6_359_969_380 == 165_669_133_932
    assert 165_669_133_932 // 5_242_880 == 31_598
    assert 32_811 - 31_598 == 1_213
    for n in (28_228, 172_029_103_312, 32_811, 6_359_969_380, 165_669_133_932, 1_213):
        assert _quoted(n)


def test_per_gpu_chain_by_hand():
    assert math.ceil(85_095_874_560 * 0.92) == 78_288_204_596
    available = 78_288_204_596 - 35_280_928_768 - 919_323_136 - 670_669_209
    assert available == 41_417_283_483
    assert 16 * 2 * (128 + 128) * 2 == 16_384
    assert 16_384 * 80 == 1_310_720
    assert divmod(41_417_283_483, 1_310_720) == (31_598, 1_152_923)
    assert round(31_598 / 512, 2) == 61.71
    assert int(31_598 / 512 * 8192) == 31_598 * 16 == 505_568
    for n in (78_288_204_596, 41_417_283_483, 16_384, 1_310_720, 1_152_923, 505_568):
        assert _quoted(n)
    assert "61.71" in SEED


def test_utilization_0_9_by_hand():
    assert math.ceil(85_095_874_560 * 0.9) == 76_586_287_104
    assert 76_586_287_104 - 35_280_928_768 - 919_323_136 - 670_669_209 == 39_715_365_991
    assert 39_715_365_991 // 1_310_720 == 30_300
    assert _quoted(76_586_287_104) and _quoted(39_715_365_991) and _quoted(30_300)


def test_doc_says_which_commit_produced_the_numbers():
    assert "kvplan 0.1.0 at commit `" in SEED


# --- kvplan's JSON has the structure the doc explains -------------------------------------------


def test_kvplan_bytes_per_token_is_per_gpu(seed_plan):
    kv = seed_plan["kv_cache"]
    assert kv["bytes_per_token"] == 81_920  # 80 x 2 x (8 // 4) x 128 x 2
    assert kv["bytes_per_token"] * TP == 327_680  # the whole model, by hand above
    assert kv["page_size_bytes"] == 16_384
    assert kv["bytes_per_block"] == 1_310_720
    assert kv["block_size"] == 16
    assert kv["padding_layers"] == 0
    [group] = kv["groups"]
    assert (group["kind"], group["num_layers"], group["blocks_per_max_len_request"]) == ("full", 80, 512)


def test_kvplan_budget_chain(seed_plan):
    m, kv, e = seed_plan["memory"], seed_plan["kv_cache"], seed_plan["engine"]
    assert seed_plan["gpu"]["memory_bytes"] == 85_095_874_560  # the profile the doc quotes
    assert seed_plan["gpu"]["count"] == 4
    assert m["requested_bytes"] == 78_288_204_596
    assert e["model_runner"] == "v2" and m["cudagraph_subtracted_bytes"] == 0
    assert m["kv_cache_bytes"] == (
        m["requested_bytes"] - m["weights_bytes"] - m["activation_peak_bytes"] - m["non_torch_bytes"]
    )
    assert kv["num_gpu_blocks"] == m["kv_cache_bytes"] // kv["bytes_per_block"]
    assert kv["gpu_kv_cache_tokens"] == kv["num_gpu_blocks"] * 16  # all layers full attention
    assert kv["max_concurrency"] == round(kv["num_gpu_blocks"] / 512, 2)
    assert (e["max_num_seqs"], e["max_num_batched_tokens"]) == (256, 2048)  # "a100" in the name


def test_kvplan_stays_near_the_quoted_numbers(seed_plan):
    kv, m = seed_plan["kv_cache"], seed_plan["memory"]
    assert abs(kv["num_gpu_blocks"] - 31_598) <= 0.05 * 31_598, "update docs/seed-formula.md"
    assert abs(m["weights_bytes"] - 35_280_928_768) <= 0.02 * 35_280_928_768, "update docs/seed-formula.md"
    # Far from the article either way: ~26x its 1,248 blocks, ~9x its formula's 3,528.
    assert kv["num_gpu_blocks"] > 8 * 3_528
    assert kv["max_concurrency"] < 155


def test_kvplan_at_utilization_0_9_near_quoted():
    d = _estimate(
        "meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.9", "--vllm-version", "0.33.0",  # the quote counts 16-token blocks
    )
    assert d["memory"]["requested_bytes"] == 76_586_287_104
    assert abs(d["kv_cache"]["num_gpu_blocks"] - 30_300) <= 0.05 * 30_300


# --- docs/how-it-works.md worked examples (vLLM's logged numbers) ---------------------------


def test_how_it_works_llama3_8b_example():
    assert math.ceil(150_109_880_320 * 0.92) == 138_101_089_895
    assert 16 * 8 * (128 + 128) * 2 == 65_536 and 65_536 * 32 == 2_097_152
    assert round(57_197 * 2_097_152 / GiB, 2) == 111.71  # vLLM: "Available KV cache memory: 111.71 GiB"
    assert round(57_197 / 512, 2) == 111.71
    assert int(57_197 / 512 * 8192) == 57_197 * 16 == 915_152  # vLLM: "GPU KV cache size: 915,152 tokens"
    for n in ("138,101,089,895", "2,097,152", "57,197", "915,152"):
        assert n in HOW


def test_how_it_works_gemma2_example():
    assert 16 * 8 * (256 + 256) * 2 == 131_072 and 131_072 * 21 == 2_752_512
    in_flight = 2 * 16_384
    sliding = -(-min(4096 - 1 + in_flight, 8192) // 16) + 1
    assert sliding == 513
    assert round(42_630 / (sliding + 512), 2) == 41.59  # vLLM: "Maximum concurrency ... 41.59x"
    assert int(42_630 / 1_025 * 8192) == 340_707  # vLLM: "GPU KV cache size: 340,707 tokens"
    for n in ("2,752,512", "513", "1,025", "42,630", "340,707"):
        assert n in HOW


def test_kvplan_gemma2_sliding_group_matches_how_it_works():
    d = _estimate(
        "google/gemma-2-9b", "--gpu", "H200", "--usage", "llm", "--enforce-eager", "--max-model-len", "8192",
        "--vllm-version", "0.33.0",  # the worked example's 16-token blocks
    )
    groups = {g["kind"]: g for g in d["kv_cache"]["groups"]}
    assert groups["sliding"]["blocks_per_max_len_request"] == 513
    assert groups["full"]["blocks_per_max_len_request"] == 512
    assert d["kv_cache"]["bytes_per_block"] == 2_752_512
