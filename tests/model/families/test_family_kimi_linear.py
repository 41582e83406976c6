"""Kimi-Linear (kvplan/model/families/kimi_linear.py; vLLM 0.26.0 models/kimi_linear.py, its config
class transformers_utils/configs/kimi_linear.py and layers/mamba/gdn/kimi_gdn_linear_attn.py) on the
published Kimi-Linear-48B-A3B-Instruct fields (tests/data/model_configs/, partial, source recorded
there).

transformers has no kimi_linear (vLLM registers its own KimiLinearConfig; the Hub config's auto_map
names remote code), so there is no meta-device count: the weights are counted by hand from vLLM's
module tree, the KV bytes per token and the KDA state by hand from mamba_utils.py kda_state_shape /
kda_state_dtype, the layer kinds from the 1-based kda_layers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json, run_cli

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

NAME = "moonshotai__Kimi-Linear-48B-A3B-Instruct"
CONFIG = json.loads((Path(__file__).parents[2] / "data" / "model_configs" / f"{NAME}.json").read_text())["config"]
V26 = ("--vllm-version", "0.26.0")

H, V, L = 2304, 163840, 27
KDA_LAYERS = [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]  # 1-based
HEADS, HD, KERNEL = 32, 128, 4
PROJ = HEADS * HD  # 4096

# --- by hand from vLLM's module tree (TP 1, bf16 = 2 B, fp32 = 4 B) ---
# KDA layer: q/k/v 3 x H x 4096; f_a, g_a H x 128 into f_b, g_b 128 x 4096; b_proj H x 32;
# o_norm 128; o_proj 4096 x H (bf16) + q/k/v conv 3 x 4 x 4096, dt_bias 4096, A_log 32 (fp32)
KDA_BF16 = 3 * H * PROJ + 2 * (H * HD + HD * PROJ) + H * HEADS + HD + PROJ * H
KDA_FP32 = 3 * KERNEL * PROJ + PROJ + HEADS
# MLA layer (no q LoRA): q_proj H x 32 x (128 + 64), kv_a_proj_with_mqa H x (512 + 64),
# kv_a_layernorm 512, kv_b_proj 512 x 32 x (128 + 128), o_proj 32 x 128 x H
MLA = H * 32 * 192 + H * 576 + 512 + 512 * 32 * 256 + 32 * 128 * H
DENSE_MLP = 3 * H * 9216  # layer 0 (first_k_dense_replace 1)
# MoE layers 1..26: 256 experts 3 x H x 1024, router H x 256 + correction bias 256, 1 shared 3 x H x 1024
MOE = 256 * 3 * H * 1024 + H * 256 + 256 + 3 * H * 1024
NORMS = 2 * H


def test_layer_kinds_follow_the_one_based_kda_list():
    spec = parse_config(CONFIG, "kimi", vllm_version="0.26.0")
    # 0-based layer i is KDA when i + 1 is listed: 0, 1, 2 KDA, 3 MLA, ..., 26 (27th) MLA
    expected = tuple(LayerKind.LINEAR if i + 1 in KDA_LAYERS else LayerKind.MLA for i in range(L))
    assert spec.layer_kinds == expected
    assert spec.layer_kinds[0] == LayerKind.LINEAR and spec.layer_kinds[3] == LayerKind.MLA
    assert spec.layer_kinds.count(LayerKind.MLA) == 7 and spec.layer_kinds.count(LayerKind.LINEAR) == 20
    assert spec.moe_layers == (False,) + (True,) * 26
    assert spec.moe.num_experts == 256 and spec.moe.top_k == 8 and spec.moe.shared_intermediate_size == 1024
    assert spec.mla.kv_lora_rank == 512 and spec.mla.qk_rope_head_dim == 64 and spec.mla.q_lora_rank is None
    g = spec.gdn
    assert (g.num_k_heads, g.num_v_heads, g.head_k_dim, g.head_v_dim, g.conv_kernel) == (32, 32, 128, 128, 4)
    assert g.kimi_delta
    # the defaults the partial config takes are said
    assert any("tie_word_embeddings=False" in n for n in spec.notes)


def test_kv_state_weights_and_estimate_end_to_end(tmp_path):
    out = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096", *V26)
    kv = out["kv_cache"]
    # MLA: one latent head of 512 + 64 elements x 2 B per token per layer, 7 MLA layers
    mla_tok = (512 + 64) * 2
    assert kv["bytes_per_token"] == 7 * mla_tok == 8_064
    # KDA state per sequence per layer: conv (3 x 4096 channels) x (4 - 1) in bf16 + the
    # recurrent 32 x 128 x 128 in float32 (kda_state_dtype)
    state = 3 * PROJ * (KERNEL - 1) * 2 + HEADS * HD * HD * 4
    assert state == 2_170_880
    # hybrid alignment: the smallest multiple of 16 tokens whose MLA page holds one state
    block = 16 * -(-state // (16 * mla_tok))
    assert kv["block_size"] == block == 1_888
    assert kv["page_size_bytes"] == block * mla_tok == 2_174_976
    # 27 layers in groups of 7 (the MLA layers): 3 state groups (7, 7, 6 + 1 padding) and 1 MLA group
    kinds = [(g["kind"], g["num_layers"], g["padding_layers"]) for g in kv["groups"]]
    assert kinds == [("mamba", 7, 0), ("mamba", 7, 0), ("mamba", 6, 1), ("mla", 7, 0)]

    m = out["memory"]
    assert m["weights_breakdown"]["linear_attn"] == 20 * (KDA_BF16 * 2 + KDA_FP32 * 4)
    assert m["weights_breakdown"]["attn"] == 7 * MLA * 2
    assert "rotary_cache" not in m["weights_breakdown"] or m["weights_breakdown"]["rotary_cache"] == 0
    bf16 = 2 * V * H + H + L * NORMS + 7 * MLA + 20 * KDA_BF16 + DENSE_MLP + 26 * MOE
    assert m["weights_bytes"] == bf16 * 2 + 20 * KDA_FP32 * 4 == 98_247_494_656
    assert out["model"]["layer_kinds"] == {"linear_attention": 20, "mla": 7}

    # the activation of KDA layers is the GDN rule's: approximate, and said
    assert out["exact"] is False
    reasons = json.dumps(out)
    assert "Kimi Delta Attention" in reasons and "activation" in reasons


@pytest.mark.parametrize("over, key", [
    ({"linear_attn_config": {**CONFIG["linear_attn_config"], "num_k_heads": 16}}, "'linear_attn_config.num_k_heads'"),
    ({"linear_attn_config": {**CONFIG["linear_attn_config"], "kda_layers": [0, 1, 2]}}, "'linear_attn_config.kda_layers'"),
    ({"mla_use_nope": False}, "'mla_use_nope'"),
    ({"q_lora_rank": 1536}, "'q_lora_rank'"),
])
def test_refusals_name_the_key(over, key):
    with pytest.raises(KvplanError, match=key):
        parse_config({**CONFIG, **over}, "kimi", vllm_version="0.26.0")


def test_unknown_linear_attn_key_exits_2(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    bad = {**CONFIG, "linear_attn_config": {**CONFIG["linear_attn_config"], "gate_low_rank_dim": 64}}
    (d / "config.json").write_text(json.dumps(bad))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--max-model-len", "4096", *V26)
    assert code == 2 and out == ""
    assert "'linear_attn_config.gate_low_rank_dim'" in err and "Traceback" not in err


def test_full_attn_layers_disagreeing_is_noted_and_ignored():
    cfg = {**CONFIG, "linear_attn_config": {**CONFIG["linear_attn_config"], "full_attn_layers": [4]}}
    spec = parse_config(cfg, "kimi", vllm_version="0.26.0")
    assert spec.layer_kinds.count(LayerKind.MLA) == 7  # follows kda_layers, as vLLM does
    assert any("full_attn_layers" in n and "complement" in n for n in spec.notes)


def test_without_linear_attn_config_every_layer_is_mla(tmp_path):
    cfg = {k: v for k, v in CONFIG.items() if k != "linear_attn_config"}
    spec = parse_config(cfg, "kimi", vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.MLA,) * L and spec.gdn is None
    out = estimate_json(cfg, tmp_path, "--max-model-len", "4096", *V26)
    assert out["kv_cache"]["bytes_per_token"] == L * (512 + 64) * 2


def test_on_vllm_0_33_the_unread_kimi_k3_implementation_is_said(tmp_path):
    # vLLM 0.33.0's registry serves KimiLinearForCausalLM from vllm/models/kimi_k3, code kvplan's
    # rules were not checked against: the estimate says so (0.26.0's does not)
    reason = "vLLM 0.33.0 serves Kimi-Linear from a new implementation (vllm/models/kimi_k3)"
    new = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096", "--vllm-version", "0.33.0")
    old = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096", *V26)
    assert new["exact"] is False and reason in json.dumps(new)
    assert reason not in json.dumps(old)
