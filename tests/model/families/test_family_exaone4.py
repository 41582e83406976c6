"""EXAONE-4.0 (kvplan/model/families/exaone4.py: 3 sliding : 1 full) on its real config and
its real vLLM 0.26.0 start (tests/data/vllm-0.26.0-h200/families/exaone4-32b_eager.log)."""

from __future__ import annotations

from family_starts import bundled_config, estimate_json, pct, replay, start

from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

START = start("exaone4-32b_eager")
S, F = LayerKind.SLIDING, LayerKind.FULL


def test_bundled_config_is_the_one_started():
    assert bundled_config("LGAI-EXAONE/EXAONE-4.0-32B") == START.config


def test_sliding_window_pattern_gives_three_sliding_to_one_full():
    spec = START.spec()
    assert spec.layer_kinds == (S, S, S, F) * 16  # not every layer sliding
    assert spec.sliding_window == 4096 and spec.qk_norm
    # vLLM's own groups: three sliding groups of 16 layers (first layers 0, 1, 2) and one full (3)
    groups = START.exact["kv_cache_layout"]["groups"]
    assert [g["spec"] for g in groups] == ["SlidingWindowSpec"] * 3 + ["FullAttentionSpec"]
    assert [g["first_layer"] for g in groups] == [f"model.layers.{i}.self_attn.attn" for i in range(4)]
    # no window: every layer full attention (Exaone4Config)
    no_window = {k: v for k, v in START.config.items() if k != "sliding_window"}
    assert parse_config(no_window, "x").layer_kinds == (F,) * 64


def test_weights_match_vllms_measured_load():
    assert START.exact["weights"] == 64_155_494_400
    assert abs(pct(START.predicted_weights(), START.exact["weights"])) < 0.5


def test_kv_bytes_per_token_by_hand(tmp_path):
    out = estimate_json(START.config, tmp_path, "--max-model-len", "32768")
    # 64 layers x 8 KV heads x head_dim 128 x K and V x 2 B (sliding layers store per token too)
    assert out["kv_cache"]["bytes_per_token"] == 64 * 8 * 128 * 2 * 2 == 262_144
    assert out["model"]["layer_kinds"] == {"sliding_attention": 48, "full_attention": 16}
    assert all(g["page_size_bytes"] == 16 * 8 * 128 * 2 * 2 for g in START.exact["kv_cache_layout"]["groups"])


def test_real_start_replays_within_one_percent():
    out = replay(START)
    assert out["status"] == "pass"
    # post-norm residual add (family_quirks: unfused_norm_hidden_tensors) makes the peak exact
    assert out["predicted"]["activation_peak_bytes"] == START.exact["peak_activation"]
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 1.0
