"""MiniMax-M2.5 (kvplan/model/families/minimax_m2.py: MoE, fp8 block weights) on its real config
and its real vLLM 0.26.0 start, cut to 8 of 62 layers to fit one H200
(tests/data/vllm-0.26.0-h200/families/minimax-m2.5-8L_eager.log)."""

from __future__ import annotations

from family_starts import bundled_config, estimate_json, pct, replay, start

from kvplan.model.spec import LayerKind

START = start("minimax-m2.5-8L_eager")


def test_bundled_config_is_the_one_started_uncut():
    full = bundled_config("MiniMaxAI/MiniMax-M2.5")
    assert full["num_hidden_layers"] == 62
    assert {**full, "num_hidden_layers": 8} == START.config


def test_layers_moe_and_quantization():
    spec = START.spec()
    assert spec.layer_kinds == (LayerKind.FULL,) * 8
    assert spec.moe.num_experts == 256 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 1536
    assert spec.moe_layers == (True,) * 8 and spec.moe.router_bias and spec.moe.shared_intermediate_size == 0
    assert spec.rotary_dim == 64 and spec.qk_norm_across_heads
    assert spec.quantization.method == "fp8" and tuple(spec.quantization.block_size) == (128, 128)


def test_weights_match_vllms_measured_load():
    assert START.exact["weights"] == 31_896_721_408
    assert abs(pct(START.predicted_weights(), START.exact["weights"])) < 0.5


def test_kv_bytes_per_token_by_hand(tmp_path):
    out = estimate_json(START.config, tmp_path, "--max-model-len", "32768")
    # 8 layers x 8 KV heads x head_dim 128 x K and V x 2 B (bf16 KV cache)
    assert out["kv_cache"]["bytes_per_token"] == 8 * 8 * 128 * 2 * 2 == 32_768
    assert out["model"]["layer_kinds"] == {"full_attention": 8}
    assert START.exact["kv_cache_layout"]["groups"][0]["page_size_bytes"] == 16 * 8 * 128 * 2 * 2
    full = estimate_json(bundled_config("MiniMaxAI/MiniMax-M2.5"), tmp_path, "--max-model-len", "32768",
                         "-tp", "4")
    # the 62-layer model on 4 GPUs: 2 KV heads per rank
    assert full["kv_cache"]["bytes_per_token"] == 62 * 2 * 128 * 2 * 2


def test_real_start_replays_within_one_percent():
    out = replay(START)
    assert out["status"] == "pass"
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 1.0
