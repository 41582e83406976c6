"""The real starts of the add-on features (issue 21), replayed through `kvplan verify --from-log`.

The lead's session-5 device batch (one H100 80GB HBM3, dummy weights, one engine in-process; the
logs' KVPLAN_EXACT lines carry vLLM's own figures) ran each feature under vLLM 0.26.0. Each log
here must replay within 1 % of vLLM's num_gpu_blocks; the add-on rules a start checked are the
version's CHECKED_FEATURES (kvplan/engines/vllm/v0_26/addons.py), and no other rule may say
"calibrated".

A kvplan child's log names the draft by the path it had on the device; the replay gives the same
config from tests/data (``--speculative-config`` overrides the log's).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import run_cli

DATA = Path(__file__).parents[1] / "data" / "vllm-0.26.0-h100"
EAGLE3_DRAFT = DATA / "drafts" / "specforge__llama3-8B-eagle3"  # benchmarks/device/configs/specforge__llama3-8B-eagle3.json

# case -> (extra verify flags, the add-on rule it checks (addons.UNCHECKED_WORDS key))
CASES = {
    "v026-llama31-8b_eagle3": (
        ("--speculative-config", json.dumps({"method": "eagle3", "model": str(EAGLE3_DRAFT), "num_speculative_tokens": 3})),
        "eagle3",
    ),
}


def _replay(name: str) -> tuple[dict, str]:
    path = DATA / f"{name}.log"
    flags, _ = CASES[name]
    code, out, err = run_cli("verify", "--from-log", str(path), *flags, "--format", "json")
    assert code == 0, (code, err[-2000:])
    return json.loads(out), path.read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_feature_start_replays_within_one_percent(name):
    doc, text = _replay(name)
    blocks = int(re.search(r"RESULT num_gpu_blocks=(\d+)", text).group(1))
    assert doc["measured"]["num_gpu_blocks"] == blocks
    pred = doc["predicted"]["num_gpu_blocks"]
    assert abs(pred - blocks) / blocks <= 0.01, (name, pred, blocks)


def test_the_eagle3_start_has_33_layers_a_block_as_kvplan_says():
    doc, text = _replay("v026-llama31-8b_eagle3")
    exact = json.loads(re.search(r"^KVPLAN_EXACT (.*)$", text, re.M).group(1))
    assert exact["kv_cache_layout"]["groups"][0]["num_layers"] == 33  # vLLM's own grouping
    assert exact["use_v2_model_runner"] is True  # 0.26.0 runs eagle3 on the V2 runner (addons.uses_v2_runner)
    # the measured figures kvplan was fitted and checked on (KVPLAN_EXACT): weights within 0.2 %,
    # the profile peak within 0.01 % (its drafter term is fitted on this start: addons.py)
    assert abs(doc["predicted"]["weights_bytes"] - exact["weights"]) / exact["weights"] < 0.002
    assert abs(doc["predicted"]["activation_peak_bytes"] - exact["peak_activation"]) / exact["peak_activation"] < 1e-4


def test_only_the_checked_features_are_calibrated():
    from kvplan.engines.vllm.v0_26 import addons

    assert addons.CHECKED_FEATURES == {key for _, key in CASES.values()}
    code, out, _ = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--vllm-version", "0.26.0", "--gpu", "H200",
                           "--max-model-len", "8192", "--enforce-eager", "--enable-lora", "--format", "json")
    ev = json.loads(out)["evidence"]
    assert not ev["checked"] and "LoRA slots, their profile and doubled CUDA graphs" in ev["unchecked"]


# -- vLLM 0.34.0 (tests/data/vllm-0.34.0-h100; kvplan/engines/vllm/v0_34/addons.py) -------------

DATA_034 = Path(__file__).parents[1] / "data" / "vllm-0.34.0-h100"


def _replay_034(name: str, *flags: str) -> tuple[dict, int]:
    path = DATA_034 / f"{name}.log"
    code, out, err = run_cli("verify", "--from-log", str(path), *flags, "--format", "json")
    assert code in (0, 1), (code, err[-2000:])
    blocks = int(re.search(r"RESULT num_gpu_blocks=(\d+)", path.read_text()).group(1))
    return json.loads(out), blocks


@pytest.mark.parametrize("name, key", [("llama31-8b_lora4x64", "lora"), ("llama31-8b_kvoffload16", "kv_offload")])
def test_the_checked_034_features_replay_within_one_percent(name, key):
    from kvplan.engines.vllm.v0_34 import addons

    doc, blocks = _replay_034(name)
    assert doc["measured"]["num_gpu_blocks"] == blocks
    assert abs(doc["predicted"]["num_gpu_blocks"] - blocks) / blocks <= 0.01, (name, doc["predicted"]["num_gpu_blocks"], blocks)
    assert key in addons.CHECKED_FEATURES


# 0.34.0 drafter starts: log -> --speculative-config the replay passes (the draft's config from
# tests/data; an MTP start needs none beyond the log's own method, its draft is the target's
# config in the log). A new start (the lead's DeepSeek-V3 / Qwen3-Next MTP logs) is one line here.
SPEC_034 = {
    "llama31-8b_eagle3": {"method": "eagle3", "model": str(EAGLE3_DRAFT), "num_speculative_tokens": 3},
}
GiB = 2**30
# the log prints F, C, P and G to 0.01 GiB: a predicted term within this of the logged one agrees
LOG_TERM_TOLERANCE = 0.03 * GiB


def _spec_flags(name: str) -> tuple[str, ...]:
    spec = SPEC_034[name]
    return ("--speculative-config", json.dumps(spec)) if spec else ()


@pytest.mark.parametrize("name", sorted(SPEC_034))
def test_each_034_drafter_start_replays_within_half_a_percent_term_by_term(name):
    # vLLM 0.34.0's extensible KV cache keeps F + C - max(1 GiB, 0.75 P) - max(P, G) (the log's
    # "Memory after warmup" line): kvplan's drafter moves each term as the log does
    # (v0_34/addons.py: the runner's drafter buffers, the drafter's transient in P, its growth in G)
    doc, blocks = _replay_034(name, *_spec_flags(name))
    assert doc["measured"]["num_gpu_blocks"] == blocks
    assert abs(doc["predicted"]["num_gpu_blocks"] - blocks) / blocks <= 0.005, (name, doc["predicted"]["num_gpu_blocks"], blocks)
    terms = doc["kv_cache_sizing"]
    for key in ("free_after_warmup_bytes", "transient_peak_bytes", "reserve_growth_bytes"):
        assert abs(terms["predicted"][key] - terms["measured"][key]) <= LOG_TERM_TOLERANCE, (name, key, terms)


def test_the_034_eagle3_start_moves_p_g_and_the_kept_memory_against_the_plain_start():
    # what the drafter changes, read off vLLM's own lines (no kvplan figure): the plain Llama-3.1-8B
    # start of the same folder (kvoffload16: the GPU side is the plain start's) logs P 1.69 GiB,
    # G 2.00 GiB; the EAGLE3 start P 2.31 GiB (+0.62: the drafter's 5 x 16384 x 4096 x 2 B =
    # 0.625 GiB transient), G 3.31 GiB (+1.31: 2.1 x that transient, the fitted factor)
    line = re.compile(r"Memory after warmup: ([\d.]+) GiB free, ([\d.]+) GiB committed .*\(([\d.]+) GiB allocated at "
                      r"peak, ([\d.]+) GiB of torch reservation growth\)")
    plain = [float(x) for x in line.search((DATA_034 / "llama31-8b_kvoffload16.log").read_text()).groups()]
    eagle = [float(x) for x in line.search((DATA_034 / "llama31-8b_eagle3.log").read_text()).groups()]
    transient = 5 * 16384 * 4096 * 2 / GiB
    assert transient == 0.625
    assert abs((eagle[2] - plain[2]) - transient) <= 0.01
    assert abs((eagle[3] - plain[3]) / transient - 2.096) <= 0.02
    from kvplan.engines.vllm.v0_34 import addons

    assert addons.DRAFTER_RESERVE_GROWTH_FACTOR == 2.096


def test_the_034_drafter_buffers_are_the_runners_hand_arithmetic():
    # Llama-3.1-8B + EAGLE3 K = 3 at max_num_batched_tokens 16384, max_num_seqs 1024 (the start's):
    # the speculator's hidden_states buffer 16384 x 4096 x 2 B, and K = 3 more bitmask rows per
    # request: cdiv(128256, 32) = 4008 int32 words + one int32 logits index
    code, out, err = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--vllm-version", "0.34.0", "--gpu", "H100",
                             "--max-model-len", "8192", "--enforce-eager", "--max-num-seqs", "1024",
                             "--max-num-batched-tokens", "16384", "--speculative-config",
                             json.dumps(SPEC_034["llama31-8b_eagle3"]), "--format", "json")
    assert code == 0, err[-2000:]
    got = json.loads(out)["addons"]["bytes"]
    assert got["speculator_hidden_states"] == 16384 * 4096 * 2 == 134_217_728
    assert got["bitmask_rows_for_drafts"] == 1024 * 3 * (4008 * 4 + 4) == 49_262_592
    assert got["sizing_peak_extra"] == got["profile_activation_extra"] == 5 * 16384 * 4096 * 2
    assert got["reserve_growth_extra"] == int(5 * 16384 * 4096 * 2 * 2.096)


def test_an_mtp_drafter_keeps_its_hidden_states_buffer_and_a_multi_module_one_its_cache():
    # DeepSeek-V3 (hidden 7168, vocab 129280, one MTP layer): the MTP speculator shares EAGLE's
    # TargetDependentARSpeculator (v1/worker/gpu/spec_decode/mtp/speculator.py), so the same
    # [max_num_batched_tokens, hidden] buffer; one MTP layer is never multi-module
    from types import SimpleNamespace

    from kvplan.engines.vllm.v0_34 import addons

    target = SimpleNamespace(vocab_size=129280)
    feats = SimpleNamespace(speculative=SimpleNamespace(method="mtp", num_speculative_tokens=3))
    one = SimpleNamespace(method="mtp", spec=SimpleNamespace(hidden_size=7168, num_hidden_layers=1))
    got = addons.draft_persistent_bytes(one, target, feats, max_num_batched_tokens=8192, max_num_seqs=256, dtype_bytes=2)
    assert got == {"bitmask_rows_for_drafts": 256 * 3 * (4040 * 4 + 4), "speculator_hidden_states": 8192 * 7168 * 2}
    # several MTP layers and K > 1: MultiModuleMTPSpeculator also caches [max_num_seqs, K - 1, hidden]
    four = SimpleNamespace(method="mtp", spec=SimpleNamespace(hidden_size=7168, num_hidden_layers=4))
    got = addons.draft_persistent_bytes(four, target, feats, max_num_batched_tokens=8192, max_num_seqs=256, dtype_bytes=2)
    assert got["speculator_hidden_states"] == 8192 * 7168 * 2 + 256 * 2 * 7168 * 2


def test_every_0_34_drafter_estimate_says_its_growth_term_is_fitted_on_one_start():
    spec = json.dumps(SPEC_034["llama31-8b_eagle3"])
    code, out, _ = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192",
                           "--speculative-config", spec, "--format", "json")
    est = json.loads(out)
    assert est["exact"] is False
    reasons = json.dumps(est["approximate"])
    assert "fitted on one real start" in reasons and "2.27 % high before it" in reasons
    from kvplan.engines.vllm.v0_34 import addons

    assert "eagle3" not in addons.CHECKED_FEATURES  # a coefficient fitted on the start is no check of it


# --- session 6's 0.26.0 add-on starts (one H100): two measured misses, labelled, and the offload
# flag the V2 runner ignores ----------------------------------------------------------------------

def _verify_json(name: str, *flags: str) -> tuple[int, dict, str]:
    path = DATA / f"{name}.log"
    code, out, err = run_cli("verify", "--from-log", str(path), *flags, "--format", "json")
    return code, json.loads(out), path.read_text()


@pytest.mark.parametrize("name, blocks, miss", [
    # vLLM's own block counts (RESULT lines); kvplan's misses as the version rules state them
    ("v026-llama31-8b_ngram128k", 27_496, "3.69 %"),
    ("v026-dsv3-4L_mtp", 413_468, "10.7 %"),
])
def test_measured_add_on_misses_are_labelled_not_hidden(name, blocks, miss):
    code, doc, text = _verify_json(name)
    assert int(re.search(r"RESULT num_gpu_blocks=(\d+)", text).group(1)) == blocks == doc["measured"]["num_gpu_blocks"]
    assert code != 0  # outside the 1 % tolerance: verify says MISMATCH, never PASS
    assert any(miss in reason for reason in doc["approximate"])  # the prediction says so itself


def test_the_mtp_draft_weights_are_its_checkpoint_fp8():
    # the MTP layer is cut from the block-FP8 checkpoint: weights within 0.1 % of vLLM's 28,893,173,248 B
    _, doc, _ = _verify_json("v026-dsv3-4L_mtp")
    assert abs(doc["predicted"]["weights_bytes"] - 28_893_173_248) / 28_893_173_248 < 0.001


def test_offload_on_the_0_26_v2_runner_does_not_start_as_vllm_did_not():
    # vLLM 0.26.0 ran out of GPU memory loading Llama-3.1-70B with --cpu-offload-gb 80 (the
    # no-op offloader's wrap_modules is in its traceback): kvplan says it will not start
    _, doc, text = _verify_json("v026-llama31-70b_offload80")
    assert "OutOfMemoryError" in text and "offloader/base.py" in text
    assert doc["predicted"]["num_gpu_blocks"] == 0
