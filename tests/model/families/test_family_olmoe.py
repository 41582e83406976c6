"""OLMoE (kvplan/model/families/olmoe.py) on its real config and its real vLLM 0.26.0 start
(tests/data/vllm-0.26.0-h200/families/olmoe-1b-7b_eager.log)."""

from __future__ import annotations

from family_starts import bundled_config, estimate_json, pct, replay, start

from kvplan.model.spec import LayerKind

START = start("olmoe-1b-7b_eager")


def test_bundled_config_is_the_one_started():
    assert bundled_config("allenai/OLMoE-1B-7B-0924") == START.config


def test_layers_moe_and_defaults():
    spec = START.spec()
    assert spec.layer_kinds == (LayerKind.FULL,) * 16
    assert spec.moe.num_experts == 64 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 1024
    assert spec.moe_layers == (True,) * 16 and spec.moe.shared_intermediate_size == 0
    assert spec.qk_norm and spec.qk_norm_across_heads
    # the partial config omits max_position_embeddings: OlmoeConfig's 4096, said in a note
    assert spec.derived_max_model_len == 4096
    assert any("OlmoeConfig" in n and "max_position_embeddings=4096" in n for n in spec.notes)


def test_weights_match_vllms_measured_load():
    # vLLM 0.26.0's own model memory (KVPLAN_EXACT weights): 13,842,550,784 B.
    assert START.exact["weights"] == 13_842_550_784
    assert abs(pct(START.predicted_weights(), START.exact["weights"])) < 0.5


def test_kv_bytes_per_token_by_hand(tmp_path):
    out = estimate_json(START.config, tmp_path, "--max-model-len", "4096")
    # 16 layers x 16 KV heads x head_dim 128 (2048 / 16) x K and V x 2 B (bf16)
    assert out["kv_cache"]["bytes_per_token"] == 16 * 16 * 128 * 2 * 2 == 131_072
    assert out["model"]["layer_kinds"] == {"full_attention": 16}
    # vLLM's own group: one FullAttentionSpec page of 16 tokens = 131,072 B per layer
    group = START.exact["kv_cache_layout"]["groups"][0]
    assert group["page_size_bytes"] == 16 * 16 * 128 * 2 * 2


def test_real_start_replays_within_one_percent():
    out = replay(START)
    assert out["status"] == "pass"
    assert START.num_gpu_blocks == 58_215
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 1.0
