"""The 14 vLLM 0.26.0 starts of new families recorded on the lent H200 on 2026-12-02
(tests/data/vllm-0.26.0-h200/families/README.md, second batch): every started one replayed with
`kvplan verify --from-log LOG --vllm-version 0.26.0` within the error it really has (a bound
per case, not 1 % for all), the peaks the 0.26.0 source explains checked against the worker's
exact bytes by hand arithmetic, and the two starts vLLM refused reported as vLLM's failure."""

from __future__ import annotations

import json

import pytest
from family_starts import FAMILY_LOGS, pct, replay_at, start
from helpers import run_cli

GiB = 1 << 30

# case -> (vLLM's num_gpu_blocks from the log's RESULT line, bound on |kvplan's error| in %)
STARTED = {
    "ernie4.5-21b-a3b_eager": (99_554, 0.07),  # weights 49 MiB under
    "glm4.5-air-16L_eager": (57_220, 0.06),  # weights 25 MiB under
    "hunyuan-a13b-16L_eager": (49_517, 0.48),  # non-torch 232 MiB above the usual, not traced
    "mamba-2.8b_eager": (10_549, 0.07),  # weights 70 MiB under, not traced
    "mamba-codestral-7b_eager": (875, 0.12),  # weights 64 MiB under: one 128 MiB block
    "aya-23-8b_eager": (57_071, 0.005),
    "falcon-7b_eager": (932_628, 0.09),  # weights 96 MiB under
    "falcon-h1-7b_eager": (1_705, 0.06),  # one block of 1,568 tokens
    "granitemoe-1b-a400m_eager": (170_788, 0.02),
    "olmo2-7b_eager": (14_448, 0.33),  # attention peak under (q/k norms), not traced
    "smollm3-3b_eager": (110_438, 0.03),  # weights 28 MiB under
    "starcoder2-3b_eager": (265_536, 0.03),  # weights 28 MiB under
}


@pytest.mark.parametrize("name", sorted(STARTED))
def test_each_start_replays_within_its_own_error(name):
    s = start(name)
    blocks, bound = STARTED[name]
    assert s.num_gpu_blocks == blocks
    out = replay_at(s, "0.26.0")
    assert out["status"] == "pass"
    err = pct(out["predicted"]["num_gpu_blocks"], blocks)
    assert abs(err) <= bound, err


def _peak(name: str) -> tuple[int, int]:
    s = start(name)
    out = replay_at(s, "0.26.0")
    return out["predicted"]["activation_peak_bytes"], s.exact["peak_activation"]


def test_cohere_parallel_block_peak_to_the_byte():
    # commandr.py: CohereMLP keeps gate_up (4H + 3I) and the parallel block keeps the attention
    # output (+H): 5 x 4096 + 3 x 14336 = 63,488 elements x 2 B x 16384 tokens + 32 MiB fixed
    # (V2 runner, 33,571,328 B)
    predicted, measured = _peak("aya-23-8b_eager")
    assert measured == 2_113_946_112
    assert predicted == (5 * 4096 + 3 * 14336) * 2 * 16384 + 33_571_328 == measured


def test_transformers_backend_peak_to_the_byte():
    # SmolLM3 (Transformers backend): Llama's 3H + 3I, plus the loop's inputs_embeds (H) and
    # rotary cos + sin (2 x head_dim 128): (4 x 2048 + 3 x 11008 + 256) x 2 B x 16384 + fixed
    predicted, measured = _peak("smollm3-3b_eager")
    assert measured == 1_392_525_824
    assert predicted == (4 * 2048 + 3 * 11008 + 256) * 2 * 16384 + 33_571_328 == measured
    # StarCoder2 (plain MLP, 3H + 2I, same loop): 64 B per token under the worker's peak
    predicted, measured = _peak("starcoder2-3b_eager")
    assert predicted == (4 * 3072 + 2 * 12288 + 256) * 2 * 16384 + 33_571_328
    assert measured - predicted == 64 * 16384


def test_mamba2_torch_gated_norm_peak_by_hand():
    # Mamba-Codestral (n_groups 8: the gated RMSNorm runs in torch). bf16: residual + normed (2H),
    # in_proj out (2 x 8192 + 2 x 8 x 128 + 128), SSM out (8192); fp32: 2 x 8192 + 2 x 8 groups
    per_token = (2 * 4096 + 2 * 8192 + 2 * 8 * 128 + 128 + 8192) * 2 + 4 * (2 * 8192 + 2 * 8)
    assert per_token == 135_488
    predicted, measured = _peak("mamba-codestral-7b_eager")
    # the worker's exact peak, to the byte (V1 runner fixed part 33,554,432 B)
    assert predicted == per_token * 16384 + 33_554_432 == measured == 2_253_389_824


def test_mamba1_profile_is_sampler_bound():
    # Mamba-2.8B: the profiling forward (3 x 2560 + 3 x 5120) x 2 B = 46,080 B/token x 16384 is
    # below the V1 sampler stage: 1024 rows x 50,280 logits x 14 B + 2 x 1024 x 2560 x 2 B
    # + 132 SMs x 50,280 x 4 B + the forward's output 16384 x 2560 x 2 B, + 32 MiB fixed
    sampler = 1024 * 50280 * 14 + 2 * 1024 * 2560 * 2 + 132 * 50280 * 4 + 16384 * 2560 * 2
    assert (3 * 2560 + 3 * 5120) * 2 * 16384 < sampler
    predicted, measured = _peak("mamba-2.8b_eager")
    assert predicted == sampler + 33_554_432
    assert measured == 875_388_928 and abs(pct(predicted, measured)) < 0.02


@pytest.mark.parametrize(("name", "max_model_len"), [("mamba-2.8b_eager", 4096), ("mamba-codestral-7b_eager", 32768)])
def test_attention_free_block_size_is_max_model_len(name, max_model_len):
    s = start(name)
    assert s.exact["block_size"] == max_model_len  # as vLLM logged it (RESULT block_size)
    out = replay_at(s, "0.26.0")
    assert out["predicted"]["block_size"] == max_model_len
    assert out["errors"]["block_size"]["pct"] == 0.0


def test_attention_free_block_size_with_prefix_caching_is_block_size(tmp_path):
    d = tmp_path / "mamba"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(start("mamba-2.8b_eager").config), encoding="utf-8")
    base = ["estimate", str(d), "--gpu", "H200", "--max-model-len", "4096", "--vllm-version", "0.26.0", "--format", "json"]
    code, out, err = run_cli(*base)
    assert code == 0, err
    assert json.loads(out)["engine"]["block_size"] == 4096
    code, out, err = run_cli(*base, "--enable-prefix-caching")
    assert code == 0, err
    assert json.loads(out)["engine"]["block_size"] == 16


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("ling-lite-1.5_eager", "trust_remote_code=True"),
        ("mistral-small-3.2-24b_eager", "Mistral3ForConditionalGeneration"),
    ],
)
def test_refused_starts_report_vllms_failure(name, says):
    log = FAMILY_LOGS / f"{name}.log"
    text = log.read_text(encoding="utf-8")
    assert "RESULT " not in text and "KVPLAN_ERROR" in text
    code, out, err = run_cli("verify", "--from-log", str(log), "--vllm-version", "0.26.0", "--format", "json")
    assert code != 0
    d = json.loads(out)
    assert d["status"] == "failed" and d["prediction_error"] is None
    assert d["failure"].startswith("vLLM failed before sizing memory")
    assert any(says in line for line in d["error_lines"])
