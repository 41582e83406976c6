"""Workload-aware capacity (kvplan.capacity.workload) against block counts derived by hand.

Block rules (vLLM 0.26.0 v1/core/single_type_kv_cache_manager.py): full attention holds
cdiv(L, 16) blocks for L tokens; a sliding window W frees the blocks wholly before the window
(skipped tokens = (L - 1) - W + 1); Mamba holds one state block. A request with prompt P and
output O holds L = P, P+1, ..., P+O-1 tokens over its O steps.

Llama-3-8B on one GPU with --kv-cache-memory 1 GiB: one block costs 32 layers x 16 tokens x
8 KV heads x 128 x 2 (K, V) x 2 bytes = 2,097,152 bytes, so 1 GiB = 512 blocks.
"""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.capacity.workload import (
    GroupRule,
    Sharing,
    WorkloadModel,
    load_pairs_file,
    parse_distribution,
    parse_workload,
    sequence_blocks,
)

GiB = 1 << 30
DATA = __import__("pathlib").Path(__file__).parents[1] / "data" / "workload"
FULL16 = (GroupRule("full", 16),)


def _plan(model="meta-llama/Meta-Llama-3-8B", kv_bytes=GiB, **kw):
    from kvplan.cli.plan import load_spec
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan

    # 0.33.0's rules (16-token blocks: the hand arithmetic below); 0.34.0: tests/engines/test_vllm_034.py
    args = EngineArgs(kv_cache_memory_bytes=kv_bytes, **{"vllm_version": "0.33.0", **kw})
    return plan(load_spec(model, None), find_gpu("H200", load_profiles()), args)


# ---------------------------------------------------------------- fixed lengths, one full group


def test_fixed_lengths_full_attention_blocks_by_hand():
    # P=100, O=29: L = 100..128. cdiv(L,16) = 7 for L = 100..112 (13 steps), 8 for 113..128 (16).
    wl = parse_workload("prompt=100 output=29")
    steady = sequence_blocks(FULL16, wl, Sharing(False), 8192)
    assert steady.per_sequence == pytest.approx((13 * 7 + 16 * 8) / 29)  # 219/29
    # tokens actually stored: sum(100..128) = 3306 -> 3306/16 block-equivalents over 29 steps
    assert steady.real_per_sequence == pytest.approx(3306 / 16 / 29)
    final = sequence_blocks(FULL16, wl, Sharing(False), 8192, at_completion=True)
    assert final.per_sequence == 8  # cdiv(128, 16); the 129th token never gets a slot


def test_partly_filled_last_block_counts_whole():
    # P=1, O=1: one token still takes one whole 16-token block.
    wl = parse_workload("prompt=1 output=1")
    assert sequence_blocks(FULL16, wl, Sharing(False), 8192).per_sequence == 1
    # P=16, O=2: L = 16 (1 block), 17 (2 blocks) -> 1.5
    wl = parse_workload("prompt=16 output=2")
    assert sequence_blocks(FULL16, wl, Sharing(False), 8192).per_sequence == pytest.approx(1.5)


def test_capacity_on_a_real_plan_fixed_lengths():
    p = _plan(max_model_len=2048)
    assert p.num_gpu_blocks == 512
    cap = WorkloadModel(parse_workload("prompt=100 output=29"), enable_prefix_caching=False).capacity(p)
    assert cap.kv_sequences == pytest.approx(512 * 29 / 219)  # 67.80
    assert cap.kv_sequences_at_completion == pytest.approx(512 / 8)  # 64
    # static: every sequence reserves cdiv(2048, 16) = 128 blocks -> floor(512/128) = 4
    assert cap.static_blocks_per_sequence == 128
    assert cap.static_sequences == 4
    assert cap.paged_utilization == pytest.approx(3306 / 16 / 219)  # 94.3%: only the tail block is partly empty
    assert cap.static_utilization == pytest.approx(3306 / 16 / 29 / 128)  # 5.6%
    # H200 defaults: max_num_seqs 1024, max_num_batched_tokens 8192; a sequence computes
    # 100 + 28 tokens over 29 steps -> 8192 * 29 / 128 = 1856 sustained
    assert cap.mbt_sequences == pytest.approx(8192 * 29 / 128)
    assert cap.binding == "kv_cache"
    assert cap.sequences == pytest.approx(512 * 29 / 219)


def test_csv_and_jsonl_pairs_are_weighted_by_steps():
    # fixed.csv: (100,29) x2 and (200,8). (200,8): L = 200..207, all cdiv = 13 -> 104 block-steps.
    for name in ("fixed.csv", "fixed.jsonl"):
        wl = load_pairs_file(DATA / name)
        steady = sequence_blocks(FULL16, wl, Sharing(False), 8192)
        assert steady.per_sequence == pytest.approx((2 * 219 + 104) / (2 * 29 + 8))  # 542/66
        final = sequence_blocks(FULL16, wl, Sharing(False), 8192, at_completion=True)
        assert final.per_sequence == pytest.approx((2 * 8 + 13) / 3)


def test_requests_longer_than_max_model_len_are_left_out():
    wl = load_pairs_file(DATA / "fixed.csv")
    # max_model_len 150: (200, 8) is rejected by vLLM; only (100, 29) remains.
    steady = sequence_blocks(FULL16, wl, Sharing(False), 150)
    assert steady.per_sequence == pytest.approx(219 / 29)
    with pytest.raises(KvplanError, match="--max-model-len"):
        sequence_blocks(FULL16, wl, Sharing(False), 100)


# ---------------------------------------------------------------- other KV-cache groups


def test_sliding_window_frees_blocks_before_the_window():
    # W = 64, L = 100 (P=100, O=1): 99 tokens computed, skipped = 99 - 64 + 1 = 36 tokens
    # -> 2 whole blocks freed; cdiv(100,16) = 7 -> 5 blocks held (tokens 32..99).
    rule = (GroupRule("sliding", 16, sliding_window=64),)
    wl = parse_workload("prompt=100 output=1")
    assert sequence_blocks(rule, wl, Sharing(False), 8192).per_sequence == 5
    # bound: never more than cdiv(W, 16) + 1 = 5 blocks, however long the sequence
    wl = parse_workload("prompt=5000 output=300")
    assert sequence_blocks(rule, wl, Sharing(False), 8192).per_sequence <= 5


def test_sliding_window_keeps_the_block_the_window_starts_in():
    # W = 64, L = 79: 78 tokens computed, skipped = 78 - 64 + 1 = 15 tokens - not one whole
    # block - so all cdiv(79, 16) = 5 blocks stay (the window 15..78 starts inside block 0).
    rule = (GroupRule("sliding", 16, sliding_window=64),)
    assert sequence_blocks(rule, parse_workload("prompt=79 output=1"), Sharing(False), 8192).per_sequence == 5
    # one token later (L = 80): skipped = 16 -> block 0 freed, cdiv(80, 16) - 1 = 4
    assert sequence_blocks(rule, parse_workload("prompt=80 output=1"), Sharing(False), 8192).per_sequence == 4


def test_sliding_window_with_shared_prefix():
    # W = 64, P = 100, N = 64 (blocks 0-3 shared), O = 1: the window keeps blocks 2..6; blocks
    # 0-1 of the prefix are freed, 2-3 are the shared ones still held, 4-6 are the sequence's own.
    rule = (GroupRule("sliding", 16, sliding_window=64),)
    s = sequence_blocks(rule, parse_workload("prompt=100 output=1"), Sharing(True, 64, 1), 8192)
    assert s.global_shared == 2
    assert s.per_sequence == 3


def test_gpt_oss_two_groups_sum_per_group():
    # gpt-oss-20b: a sliding group (W=128) and a full group, 12 layers each, 16-token blocks;
    # one block id = 12 x 32768 bytes, so 1 GiB = floor(1073741824 / 393216) = 2730 blocks.
    p = _plan("openai/gpt-oss-20b", max_model_len=8192)
    assert p.num_gpu_blocks == 2730
    cap = WorkloadModel(parse_workload("prompt=1000 output=1"), enable_prefix_caching=False).capacity(p)
    # full: cdiv(1000,16) = 63; sliding: skipped (999 - 128 + 1) // 16 = 54 -> 63 - 54 = 9
    assert cap.blocks.per_sequence == 63 + 9
    assert cap.kv_sequences == pytest.approx(2730 / 72)
    # static (vLLM's own max-length figure): full 8192/16 = 512; sliding
    # cdiv(min(127 + 16384 in-flight, 8192), 16) + 1 = 513 -> 1025 per sequence -> 2 sequences
    assert cap.static_blocks_per_sequence == 1025
    assert cap.static_sequences == 2


def test_mamba_state_binds_for_short_requests():
    # Jamba: 7 Mamba groups + 1 full-attention group, 80-token blocks (hybrid alignment),
    # 1 GiB / 1,310,720 bytes per block = 819 blocks. P=100, O=21: L = 100..120 -> full
    # attention cdiv(L, 80) = 2, Mamba 7 x 1 -> 9 blocks per sequence, 7 of them state.
    p = _plan("ai21labs/Jamba-v0.1", max_model_len=8192)
    assert p.num_gpu_blocks == 819
    cap = WorkloadModel(parse_workload("prompt=100 output=21")).capacity(p)
    assert cap.sharing.enable_prefix_caching is False  # vLLM 0.26.0 default for hybrid models
    assert cap.blocks.per_sequence == 9
    assert cap.blocks.state_per_sequence == 7
    assert cap.kv_sequences == pytest.approx(819 / 9)
    assert cap.binding == "kv_state"


# ---------------------------------------------------------------- sharing


def test_shared_prefix_counted_once_in_whole_blocks():
    wl = parse_workload("prompt=100 output=29")
    base = sequence_blocks(FULL16, wl, Sharing(True, 0, 1), 8192)
    shared = sequence_blocks(FULL16, wl, Sharing(True, 64, 1), 8192)
    # 64 tokens = 4 whole blocks: held once, removed from every sequence
    assert shared.global_shared == 4
    assert shared.per_sequence == pytest.approx(base.per_sequence - 4)
    # 70 tokens: still 4 whole blocks - the 6 tokens in the 5th block are not shared
    partial = sequence_blocks(FULL16, wl, Sharing(True, 70, 1), 8192)
    assert partial.global_shared == 4
    assert partial.per_sequence == pytest.approx(base.per_sequence - 4)
    # prefix caching off: nothing shared
    off = sequence_blocks(FULL16, wl, Sharing(False, 64, 1), 8192)
    assert off.global_shared == 0 and off.per_sequence == pytest.approx(base.per_sequence)


def test_prompt_equal_to_prefix_shares_one_block_less():
    # P = N = 96 tokens = 6 blocks, but a cache hit covers at most P - 1 = 95 tokens -> 5 blocks.
    wl = parse_workload("prompt=96 output=1")
    s = sequence_blocks(FULL16, wl, Sharing(True, 96, 1), 8192)
    assert s.global_shared == 5
    assert s.per_sequence == 1  # cdiv(96,16) = 6 blocks, 5 shared


def test_shared_prefix_on_a_real_plan():
    p = _plan(max_model_len=2048)
    cap = WorkloadModel(parse_workload("prompt=100 output=29"), shared_prefix_tokens=64).capacity(p)
    # (512 - 4 shared) / (219/29 - 4) = 508 * 29 / 103
    assert cap.kv_sequences == pytest.approx(508 * 29 / 103)


def test_beam_width_shares_prompt_blocks_not_branch_blocks():
    # n = 4, P = 100: floor(99/16) = 6 whole prompt blocks held once per request; each branch
    # holds its partial prompt block and output blocks. Saved per request: (4 - 1) x 6 = 18.
    wl = parse_workload("prompt=100 output=29")
    one = sequence_blocks(FULL16, wl, Sharing(True, 0, 1), 8192)
    four = sequence_blocks(FULL16, wl, Sharing(True, 0, 4), 8192)
    assert 4 * one.per_sequence - 4 * four.per_sequence == pytest.approx(18)
    assert 4 * four.per_sequence == pytest.approx(6 + 4 * (219 - 29 * 6) / 29)
    final = sequence_blocks(FULL16, wl, Sharing(True, 0, 4), 8192, at_completion=True)
    assert 4 * final.per_sequence == pytest.approx(6 + 4 * (8 - 6))  # 14 instead of 32
    # without prefix caching, vLLM 0.26.0 shares nothing between the n child requests
    off = sequence_blocks(FULL16, wl, Sharing(False, 0, 4), 8192)
    assert off.per_sequence == pytest.approx(one.per_sequence)


# ---------------------------------------------------------------- binding limits and fixes


def test_max_num_batched_tokens_binds_long_prompts_and_the_fix():
    # 8 GiB = 4096 blocks. P=4000, O=10: L = 4000 (250 blocks), 4001..4009 (251) -> 2509/10.
    p = _plan(max_model_len=8192, kv_bytes=8 * GiB, max_num_batched_tokens=2048, max_num_seqs=256)
    assert p.num_gpu_blocks == 4096
    model = WorkloadModel(parse_workload("prompt=4000 output=10"), enable_prefix_caching=False)
    cap = model.capacity_with_fixes(p)
    assert cap.kv_sequences == pytest.approx(4096 * 10 / 2509)  # 16.33
    # each sequence computes 4000 + 9 tokens over 10 steps: 2048 * 10 / 4009 = 5.11
    assert cap.mbt_sequences == pytest.approx(2048 * 10 / 4009)
    assert cap.binding == "max_num_batched_tokens"
    fix = cap.changes[0]
    assert fix.flag == "--max-num-batched-tokens"
    # to sustain 16.33 sequences: 16.33 * 4009 / 10 = 6546 tokens -> rounded up to 256: 6656
    assert fix.value == 6656
    assert fix.sequences == pytest.approx(4096 * 10 / 2509)  # KV binds again (KV memory is fixed)
    assert fix.binding_after == "kv_cache"


def test_max_num_seqs_binds_short_requests_and_the_fix():
    # 4096 blocks; P=10, O=10: L = 10..16 one block (7 steps), 17..19 two (3) -> 1.3 blocks.
    p = _plan(max_model_len=8192, kv_bytes=8 * GiB, max_num_seqs=256)
    cap = WorkloadModel(parse_workload("prompt=10 output=10"), enable_prefix_caching=False).capacity_with_fixes(p)
    assert cap.kv_sequences == pytest.approx(4096 / 1.3)  # 3150.8
    assert cap.binding == "max_num_seqs"
    assert cap.sequences == 256
    fix = cap.changes[0]
    assert (fix.flag, fix.value) == ("--max-num-seqs", 3150)
    assert fix.gain == pytest.approx(3150 - 256)


# ---------------------------------------------------------------- parsing


def test_distribution_mean_and_p95_are_kept():
    wl = parse_distribution("prompt=1000,3000 output=200,500")
    assert wl.mean_prompt_tokens == pytest.approx(1000, rel=0.02)
    assert wl.mean_output_tokens == pytest.approx(200, rel=0.02)
    assert wl.percentile("prompt", 0.95) == pytest.approx(3000, rel=0.06)
    assert wl.percentile("output", 0.95) == pytest.approx(500, rel=0.06)


def test_distribution_with_shared_prefix_keeps_every_prompt_above_it():
    wl = parse_distribution("prompt=2000,4000 output=100", shared_prefix_tokens=1000)
    assert min(p for p, _, _ in wl.pairs) >= 1000
    assert wl.mean_prompt_tokens == pytest.approx(2000, rel=0.02)


@pytest.mark.parametrize(
    "text, match",
    [
        ("prompt=100", "missing output="),
        ("prompt=abc output=1", "prompt mean"),
        ("prompt=100,50 output=10", "below its mean"),
        ("prompt=100,1000 output=10", "lognormal"),
        ("foo=1 output=1", "unknown key"),
        ("prompt=0 output=1", ">= 1"),
    ],
)
def test_bad_distributions_name_the_flag(text, match):
    with pytest.raises(KvplanError, match=match) as exc:
        parse_workload(text)
    assert exc.value.message.startswith("--workload")


@pytest.mark.parametrize(
    "name, match",
    [("bad_value.csv", r"bad_value.csv:3: output_tokens"), ("bad_header.csv", r"bad_header.csv:1"), ("bad_line.jsonl", r"bad_line.jsonl:2")],
)
def test_bad_files_name_file_and_line(name, match):
    with pytest.raises(KvplanError, match=match):
        parse_workload(str(DATA / name))


def test_prompt_shorter_than_prefix_is_refused():
    wl = load_pairs_file(DATA / "fixed.csv")
    with pytest.raises(KvplanError, match="--shared-prefix-tokens 150"):
        sequence_blocks(FULL16, wl, Sharing(True, 150, 1), 8192)


def test_closed_form_sums_match_token_by_token_enumeration():
    # _sum_range adds up a request's blocks in closed form; enumerate L one token at a time with
    # the per-length rule (_held) instead, over random windows, prefixes, n and lengths.
    import random

    from kvplan.capacity.workload import _held, _shared_ends, _sum_range

    rng = random.Random(5)
    for _ in range(1500):
        kind = rng.choice(["full", "sliding", "chunked", "mamba"])
        rule = GroupRule(kind, rng.choice([16, 32, 80]), sliding_window=rng.randint(1, 400), chunk_size=rng.choice([64, 160, 256]))
        prompt, output = rng.randint(1, 700), rng.randint(1, 700)
        prefix, n, caching = rng.randint(0, prompt), rng.randint(1, 4), rng.random() < 0.7
        s_n, s_p = _shared_ends(rule, prompt, prefix, n, caching)
        a_max = b = c = tok = 0
        for L in range(prompt, prompt + output):
            a1, b1, c1, t1 = _held(rule, L, s_n, s_p)
            a_max, b, c, tok = max(a_max, a1), b + b1, c + c1, tok + t1
        assert _sum_range(rule, prompt, prompt + output - 1, s_n, s_p) == (a_max, b, c, tok, output), (rule, prompt, output, prefix, n)
