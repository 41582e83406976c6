"""GLM-4.7-Flash (kvplan/model/families/glm4_moe_lite.py: MLA + MoE) on its real config and
its real vLLM 0.26.0 start (tests/data/vllm-0.26.0-h200/families/glm4.7-flash_eager.log)."""

from __future__ import annotations

from family_starts import bundled_config, estimate_json, pct, replay, start

from kvplan.model.spec import LayerKind

START = start("glm4.7-flash_eager")


def test_bundled_config_is_the_one_started():
    assert bundled_config("zai-org/GLM-4.7-Flash") == START.config


def test_mla_layers_and_moe_layout():
    spec = START.spec()
    assert spec.layer_kinds == (LayerKind.MLA,) * 47  # MLA under a new model_type, not MHA
    assert spec.mla.kv_lora_rank == 512 and spec.mla.qk_rope_head_dim == 64 and spec.mla.q_lora_rank == 768
    assert spec.moe_layers == (False,) + (True,) * 46  # first_k_dense_replace 1
    assert spec.moe.num_experts == 64 and spec.moe.top_k == 4 and spec.moe.moe_intermediate_size == 1536
    assert spec.moe.shared_intermediate_size == 1536 and spec.moe.router_bias


def test_weights_match_vllms_measured_load():
    assert START.exact["weights"] == 59_993_332_224
    assert abs(pct(START.predicted_weights(), START.exact["weights"])) < 0.5


def test_kv_bytes_per_token_by_hand(tmp_path):
    out = estimate_json(START.config, tmp_path, "--max-model-len", "32768")
    # one latent per token per layer: (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B, 47 layers
    # (as multi-head attention it would be 20 heads x (192+64 + 256) x 2 B: 4.4x more)
    assert out["kv_cache"]["bytes_per_token"] == (512 + 64) * 2 * 47 == 54_144
    assert out["model"]["layer_kinds"] == {"mla": 47}
    group = START.exact["kv_cache_layout"]["groups"][0]
    assert group["spec"] == "MLAAttentionSpec" and group["page_size_bytes"] == 16 * (512 + 64) * 2


def test_real_start_replays_within_one_percent():
    out = replay(START)
    assert out["status"] == "pass"
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 1.0
