"""Peak activation on the V1 model runner (MoE and hybrid models) against the worker's exact bytes.

The expected numbers are vLLM 0.26.0's own: ``exact_bytes.peak_activation`` of records written by
`kvplan verify --record` on the H200 (tests/data/vllm-0.26.0-h200), plus one hand computation of
the sampler stage (v1/worker/gpu_model_runner.py _dummy_sampler_run; fused-MoE workspace kept by
v1/worker/workspace.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli

RECORDS = Path(__file__).parents[1] / "data" / "vllm-0.26.0-h200"
MiB = 1 << 20


def _estimate(record: dict, tmp_path: Path) -> dict:
    model = tmp_path / record["name"]
    model.mkdir()
    (model / "config.json").write_text(json.dumps(record["config"]), encoding="utf-8")
    args = ["estimate", str(model), "--gpu", "H200", "--usage", "llm", "--format", "json", "--vllm-version", "0.26.0"]
    args += ["--max-num-seqs", str(record["max_num_seqs"]), "--max-num-batched-tokens", str(record["max_num_batched_tokens"])]
    args += ["--max-model-len", str(record["max_model_len"])]
    if record["engine_args"].get("enforce_eager"):
        args.append("--enforce-eager")
    code, out, err = run_cli(*args)
    assert code == 0, err
    return json.loads(out)


# (record, allowed |predicted - exact| in bytes)
V1_RECORDS = [
    ("granite4h-small_eager", 1 * MiB),  # Mamba-2 hybrid + MoE, sampler stage with the workspace
    ("qwen3-30b-a3b_eager_serve", 2 * MiB),  # MoE, 8192 tokens
    ("qwen3-30b-a3b_graphs", 2 * MiB),  # MoE, 16384 tokens, torch.compile
    ("gpt-oss-20b_eager", 16 * MiB),  # MXFP4 experts: no workspace kept
    ("gpt-oss-120b_eager", 16 * MiB),
]


@pytest.mark.parametrize("name,tolerance", V1_RECORDS, ids=[n for n, _ in V1_RECORDS])
def test_v1_peak_activation_matches_the_worker(name, tolerance, tmp_path):
    record = json.loads((RECORDS / f"{name}.json").read_text(encoding="utf-8"))
    exact = record["exact_bytes"]["peak_activation"]
    predicted = _estimate(record, tmp_path)["memory"]["activation_peak_bytes"]
    assert abs(predicted - exact) <= tolerance, (name, predicted, exact, (predicted - exact) / MiB)


def test_granite_sampler_stage_by_hand(tmp_path):
    """Granite-4.0-H-Small, 16384 batched tokens, 1024 sequences, H = 4096, vocab 100,352,
    10 experts per token of intermediate 768, one H200 (132 SMs)."""
    logits = 1024 * 100_352 * (2 + 4 + 4 + 4)  # bf16 logits, fp32 copy, fp32 probs, fp32 noise
    assert logits == 1_438_646_272
    scratch = 132 * 100_352 * 4  # Triton top-k/top-p: one fp32 row of the vocabulary per SM
    assert scratch == 52_985_856
    hidden_rows = 2 * 1024 * 4096 * 2  # rand_like(hidden) and the sampled rows, bf16
    forward_out = 16_384 * 4096 * 2  # the forward's [T, H] output is still referenced
    ws13 = 16_384 * 10 * max(768, 4096) * 2  # max(workspace13, output), bf16
    ws2 = 16_384 * 10 * max(2 * 768, 4096) * 2
    assert ws13 + ws2 == 2_684_354_560
    cublas = 32 * MiB
    by_hand = logits + scratch + hidden_rows + forward_out + ws13 + ws2 + cublas
    assert by_hand == 4_360_536_064

    record = json.loads((RECORDS / "granite4h-small_eager.json").read_text(encoding="utf-8"))
    assert record["exact_bytes"]["peak_activation"] == 4_360_587_264  # vLLM's own figure
    assert abs(by_hand - 4_360_587_264) < 64 * 1024
    assert _estimate(record, tmp_path)["memory"]["activation_peak_bytes"] == by_hand


def test_fp8_block_dense_peak_from_the_qwen3_32b_fp8_log(tmp_path):
    """Qwen3-32B-FP8 (fp8 weights in 128x128 blocks; Qwen3's MLP keeps gate_up alive through
    down_proj) at 16384 batched tokens: down_proj's input is quantized into a new fp8 tensor plus
    one fp32 scale per 128 elements while the bf16 tensors are still referenced.

    By hand, per token (H = 5120, I = 25600): bf16 rule (4H + 3I) x 2 B = 194,560 B; fp8 input
    25,600 B + 25600/128 x 4 B = 800 B of scales -> 220,960 B. x 16384 tokens = 3,620,208,640 B,
    plus the fixed 33,571,328 B = 3,653,779,968 B. vLLM's log (2-decimal GiB, qwen3-32b-fp8_eager.log):
    128.62 requested - 32.07 weights - 92.95 KV - 0.22 non-torch = 3.38 GiB (+-0.02)."""
    per_token = (4 * 5120 + 3 * 25600) * 2 + 25600 + 25600 // 128 * 4
    assert per_token == 220_960
    by_hand = per_token * 16384 + 33_571_328
    assert by_hand == 3_653_779_968
    from_log = (128.62 - 32.07 - 92.95 - 0.22) * 2**30
    assert abs(by_hand - from_log) < 0.04 * 2**30

    config = json.loads(next(
        line[len("KVPLAN_CONFIG "):] for line in (RECORDS / "qwen3-32b-fp8_eager.log").read_text(encoding="utf-8").splitlines()
        if line.startswith("KVPLAN_CONFIG ")
    ))
    model = tmp_path / "qwen3-32b-fp8"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, err = run_cli(
        "estimate", str(model), "--gpu", "H200", "--usage", "llm", "--max-model-len", "32768", "--enforce-eager",
        "--max-num-seqs", "1024", "--max-num-batched-tokens", "16384", "--format", "json", "--vllm-version", "0.26.0",
    )
    assert code == 0, err
    assert json.loads(out)["memory"]["activation_peak_bytes"] == by_hand
