"""Phi-3.5-MoE (kvplan/model/families/phimoe.py) on its real config and its real vLLM 0.26.0
start (tests/data/vllm-0.26.0-h200/families/phi3.5-moe_eager.log)."""

from __future__ import annotations

from family_starts import bundled_config, estimate_json, pct, replay, start

from kvplan.model.spec import LayerKind

START = start("phi3.5-moe_eager")


def test_bundled_config_is_the_one_started():
    assert bundled_config("microsoft/Phi-3.5-MoE-instruct") == START.config


def test_layers_moe_biases_and_defaults():
    spec = START.spec()
    assert spec.layer_kinds == (LayerKind.FULL,) * 32
    assert spec.moe.num_experts == 16 and spec.moe.top_k == 2 and spec.moe.moe_intermediate_size == 6400
    assert spec.moe_layers == (True,) * 32
    assert spec.qkv_bias and spec.o_bias and spec.norm_has_bias  # vLLM phimoe.py: bias=True, nn.LayerNorm
    assert spec.derived_max_model_len == 131072  # PhimoeConfig default (the trimmed config has no rope_scaling)


def test_weights_match_vllms_measured_load():
    assert START.exact["weights"] == 83_799_849_984
    assert abs(pct(START.predicted_weights(), START.exact["weights"])) < 0.5


def test_kv_bytes_per_token_by_hand(tmp_path):
    out = estimate_json(START.config, tmp_path, "--max-model-len", "4096")
    # 32 layers x 8 KV heads x head_dim 128 (4096 / 32) x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 8 * 128 * 2 * 2 == 131_072
    assert out["model"]["layer_kinds"] == {"full_attention": 32}
    assert START.exact["kv_cache_layout"]["groups"][0]["page_size_bytes"] == 16 * 8 * 128 * 2 * 2


def test_real_start_replays_within_one_percent():
    out = replay(START)
    assert out["status"] == "pass"
    # the family quirks (unfused LayerNorm residual, sparsemixer fp32 scores) make the peak
    # activation exact: 2,165,309,440 B
    assert out["predicted"]["activation_peak_bytes"] == START.exact["peak_activation"]
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 1.0
