"""vLLM 0.33.0's rules (kvplan/engines/vllm/v0_33): the 15 real H200 starts replayed through
`kvplan verify --from-log`, and the new rules checked against hand arithmetic."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import run_cli
from kvplan.capacity.estimate import plan
from kvplan.engines.vllm import versions
from kvplan.engines.vllm.args import EngineArgs
from kvplan.gpus import find_gpu, load_profiles
from kvplan.sources import load_spec
from kvplan.verify.log import grammar_for, parse_log

DATA = Path(__file__).parents[1] / "data" / "vllm-0.33.0-h200"
LOGS = sorted(p for p in DATA.glob("*.log") if not p.name.startswith("install33"))
GiB = 1 << 30


def _replay(path: Path) -> dict:
    code, out, err = run_cli("verify", "--from-log", str(path), "--format", "json")
    assert code == 0, (code, err[-2000:])
    return json.loads(out)


def test_there_are_fifteen_real_starts():
    assert len(LOGS) == 15
    assert versions.SUPPORTED["0.33.0"].evidence.startswith(
        "derived from the vLLM 0.33.0 source and checked on 15 real H200 starts"
    )
    assert "calibrated" in versions.SUPPORTED["0.26.0"].evidence
    assert versions.DEFAULT_VERSION == "0.34.0"  # newer than 0.33.0 (tests/engines/test_vllm_034.py)


def test_every_start_replays_within_one_percent(capsys):
    rows = []
    for path in LOGS:
        doc = _replay(path)
        text = path.read_text()
        logged_tokens = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", text).group(1).replace(",", ""))
        blocks = int(re.search(r"RESULT num_gpu_blocks=(\d+)", text).group(1))
        assert doc["vllm_version"] == "0.33.0"
        assert doc["measured"]["gpu_kv_cache_tokens"] == logged_tokens  # read exactly
        assert doc["measured"]["num_gpu_blocks"] == blocks
        assert not any("kvplan predicts with vLLM 0.26.0" in n for n in doc["notes"]), doc["notes"]
        pred = doc["predicted"]["num_gpu_blocks"]
        err = 100.0 * (pred - blocks) / blocks
        rows.append((path.stem, blocks, pred, err))
        assert abs(err) <= 1.0, (path.stem, blocks, pred)
        assert doc["predicted"]["block_size"] == doc["measured"]["block_size"]
    with capsys.disabled():
        print("\ncase                          measured  predicted   error")
        for name, m, p, e in rows:
            print(f"{name:28s} {m:>9,} {p:>10,} {e:+7.3f}%")


def test_the_0_33_grammar_reads_the_merged_kv_line_and_the_new_actual_usage_line():
    text = (DATA / "llama3-8b_eager.log").read_text()
    assert grammar_for(text).VERSION == "0.33.0"
    log = parse_log(text)
    assert log.vllm_version == "0.33.0"
    assert log.gpu_kv_cache_tokens == 912_192
    assert log.max_concurrency == pytest.approx(111.35)
    assert log.concurrency_max_model_len == 8192
    # "... 1.62 GiB for peak activation, and 0.0 GiB for CUDAGraph memory."
    assert log.activation_peak_bytes == round(1.62 * GiB)
    assert log.cudagraph_bytes == 0
    # the 0.26.0 grammar does not read the new summary line
    from kvplan.engines.vllm.v0_26 import log_grammar as g26

    assert not g26.RE_ACTUAL_USAGE.search(text)


def _h200_plan(model: str, version: str, **kw):
    spec, _ = load_spec(model)
    gpu = find_gpu("H200", load_profiles())
    return plan(spec, gpu, EngineArgs(vllm_version=version, **kw))


def test_qwen3_next_block_size_576_and_align_pages_by_hand():
    # GDN state per layer on one GPU (bf16): conv (3 x (2x16x128 + 32x128) x 2 B) + recurrent
    # (32 x 128 x 128 x 2 B) = 49,152 + 1,048,576 = 1,097,728 B; attention per token: 2 KV heads x
    # 256 x (K+V) x 2 B = 2,048 B. 0.33.0: align = lcm(16, 64) = 64; 64 x cdiv(1,097,728,
    # 64 x 2,048) = 64 x 9 = 576 tokens (0.26.0: 16 x cdiv(1,097,728, 16 x 2,048) = 16 x 34 = 544).
    p33 = _h200_plan("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.33.0", max_model_len=32768, enforce_eager=True)
    p26 = _h200_plan("Qwen/Qwen3-Next-80B-A3B-Instruct", "0.26.0", max_model_len=32768, enforce_eager=True)
    assert (p33.block_size, p26.block_size) == (576, 544)
    assert p33.page_size_bytes == 576 * 2048
    # per request: cdiv(32768, 576) = 57 attention blocks + 3 GDN groups x (2 + 1 checkpoint)
    assert p33.layout.blocks_per_request(32768, p33.max_in_flight_tokens) == 57 + 9
    assert p33.max_concurrency == pytest.approx(p33.num_gpu_blocks / 66)
    assert p33.effective["enable_prefix_caching"] is True
    assert p26.effective["enable_prefix_caching"] is False


@pytest.mark.parametrize(
    ("log", "tokens", "concurrency"),
    [
        # the "GPU KV cache size: N tokens, Maximum concurrency for 32,768 tokens per request: Cx"
        # lines of the two hybrid logs (Mamba-2 and GDN state groups in align mode)
        ("granite4h-small_eager", 2_894_870, 88.34),
        ("qwen3-next-80b_fp8_eager", 1_882_670, 57.45),
    ],
)
def test_hybrid_align_starts_replay_tokens_and_concurrency_within_0_3_percent(log, tokens, concurrency):
    text = (DATA / f"{log}.log").read_text()
    assert f"GPU KV cache size: {tokens:,} tokens" in text and f"{concurrency:.2f}x" in text
    doc = _replay(DATA / f"{log}.log")
    pred = doc["predicted"]
    assert abs(pred["gpu_kv_cache_tokens"] - tokens) / tokens <= 0.003, pred["gpu_kv_cache_tokens"]
    assert abs(pred["max_concurrency"] - concurrency) / concurrency <= 0.003, pred["max_concurrency"]


def test_granite_mamba2_groups_hold_a_checkpoint_page_by_hand():
    # Granite-4.0-H-Small: 4 attention + 36 Mamba-2 layers -> groups of 4: 1 attention group and
    # 9 Mamba-2 groups; block 528 (as logged). Per request at 32,768 tokens: cdiv(32768, 528) = 63
    # attention blocks + 9 x (2 align pages + 1 prefill checkpoint, mamba_mixer2.py) = 90;
    # the log: 7,951 blocks / 90 = 88.34x.
    p33 = _h200_plan("ibm-granite/granite-4.0-h-small", "0.33.0", max_model_len=32768, enforce_eager=True)
    assert p33.block_size == 528
    assert p33.layout.blocks_per_request(32768, p33.max_in_flight_tokens) == 63 + 27
    assert p33.max_concurrency == pytest.approx(p33.num_gpu_blocks / 90)
    assert p33.gpu_kv_cache_tokens == int(p33.num_gpu_blocks / 90 * 32768)


def test_the_null_block_is_reserved_in_the_start_up_check():
    # Llama-3-8B, one block = 2,097,152 B; a 8,192-token request needs 512 blocks; 0.33.0's check
    # also keeps the null block: 513 blocks' bytes.
    p = _h200_plan("meta-llama/Meta-Llama-3-8B", "0.33.0", max_model_len=8192, enforce_eager=True)
    assert p.layout.bytes_per_block == 2_097_152
    assert p.stages[0].bytes_for_max_len == 513 * 2_097_152
    q = _h200_plan("meta-llama/Meta-Llama-3-8B", "0.26.0", max_model_len=8192, enforce_eager=True)
    assert q.stages[0].bytes_for_max_len == 512 * 2_097_152
    # a budget of exactly 512 blocks starts on 0.26.0 and is refused on 0.33.0
    kw = dict(max_model_len=8192, enforce_eager=True, kv_cache_memory_bytes=512 * 2_097_152)
    assert _h200_plan("meta-llama/Meta-Llama-3-8B", "0.26.0", **kw).fits
    assert not _h200_plan("meta-llama/Meta-Llama-3-8B", "0.33.0", **kw).fits


def test_the_160_gib_batch_tier():
    d33 = versions.SUPPORTED["0.33.0"].defaults
    d26 = versions.SUPPORTED["0.26.0"].defaults
    b200 = 192 * GiB
    assert d33.batch_defaults(b200, "NVIDIA B200", "serve") == (16384, 1024)
    assert d26.batch_defaults(b200, "NVIDIA B200", "serve") == (8192, 1024)
    h200_nvml = 150_754_820_096  # 140.4 GiB: below the tier
    assert d33.batch_defaults(h200_nvml, "NVIDIA H200", "serve") == (8192, 1024)
    assert d33.batch_defaults(h200_nvml, "NVIDIA H200", "llm") == (16384, 1024)
    assert d33.batch_defaults(80 * GiB, "NVIDIA A100-SXM4-80GB", "serve") == (2048, 256)


def test_sampler_state_is_charged_by_hand():
    # Llama-3 vocabulary 128,256 and 1,024 sequences: output_bin_counts 1,024 x 128,256 x 4 B +
    # prompt_bin_mask 1,024 x ceil(128,256 / 32) x 4 B = 525,336,576 + 16,416,768 = 541,753,344 B
    act = versions.SUPPORTED["0.33.0"].activation
    assert act.penalty_state_bytes(128_256, 1024) == 541_753_344
    # so max_num_seqs 256 instead of 1024 frees 768 x (529,056 + 30,731) B for the KV cache
    # (LLM class: 16,384 batched tokens, so the forward pass, not the sampler, sets the peak)
    a = _h200_plan("meta-llama/Meta-Llama-3-8B", "0.33.0", max_model_len=8192, enforce_eager=True, usage="llm")
    b = _h200_plan(
        "meta-llama/Meta-Llama-3-8B", "0.33.0", max_model_len=8192, enforce_eager=True, usage="llm", max_num_seqs=256
    )
    assert a.stages[0].activation.bound_by == b.stages[0].activation.bound_by == "forward"
    freed = b.stages[0].budget.kv_cache_bytes - a.stages[0].budget.kv_cache_bytes
    assert freed == 768 * (529_056 + 30_731)


def test_cuda_graph_estimate_is_subtracted_on_0_33_only():
    g33 = _h200_plan("meta-llama/Meta-Llama-3-8B", "0.33.0", max_model_len=8192)
    g26 = _h200_plan("meta-llama/Meta-Llama-3-8B", "0.26.0", max_model_len=8192)
    assert g26.stages[0].budget.cudagraph_applied_bytes == 0
    # 750,000,000 + 32 x 9,400,000 captured + 49 x 1 MiB of extrapolated FULL graphs
    assert g33.stages[0].budget.cudagraph_applied_bytes == 750_000_000 + 32 * 9_400_000 + 49 * (1 << 20)
