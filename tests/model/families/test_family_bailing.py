"""Bailing / Ling MoE (kvplan/model/families/bailing.py, vLLM 0.26.0 bailing_moe.py) on the real
Ling-lite-1.5 config (tests/data/model_configs/, source recorded there). transformers has no
bailing_moe model, so there is no meta-device count (meta_param_counts.json records the error):
weights by hand arithmetic, KV bytes per token and layer kinds by hand; the Ling-2.0 keys
(BailingMoeV2ForCausalLM: qk RMSNorm, partial rotary, expert bias, fp32 router) on top."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params

NAME = "inclusionAI__Ling-lite-1.5"
CONFIG = json.loads((Path(__file__).parents[2] / "data" / "model_configs" / f"{NAME}.json").read_text())["config"]
V26 = ("--vllm-version", "0.26.0")
# by hand: query_key_value 2048 -> 2048 + 2 x 512 (16 heads, 4 KV heads of 128), dense 2048 x 2048,
# 2 norms; MoE: 64 experts x 3 x 2048 x 1408, 2 shared fused into 3 x 2048 x 2816, router 64 x 2048
ATTN = 2048 * 2048 * 2 + 2 * 2048 * 512 + 2 * 2048
MOE = 64 * 3 * 2048 * 1408 + 3 * 2048 * 2816 + 64 * 2048


def test_transformers_cannot_build_it():
    assert "error" in MODELS[f"model_configs/{NAME}.json"]


def test_ling_lite_layout_weights_and_kv(tmp_path):
    spec = parse_config(CONFIG, "ling", vllm_version="0.26.0")
    assert spec.exact and spec.layer_kinds == (LayerKind.FULL,) * 28
    assert spec.moe_layers == (True,) * 28  # first_k_dense_replace 0
    assert spec.moe.num_experts == 64 and spec.moe.top_k == 6 and spec.moe.shared_intermediate_size == 2 * 1408
    assert not (spec.qkv_bias or spec.o_bias or spec.mlp_bias or spec.qk_norm or spec.tie_word_embeddings)
    # untied 126464 x 2048 twice, final norm
    assert kvplan_text_params(spec) == 2 * 126464 * 2048 + 28 * (ATTN + MOE) + 2048 == 16_801_974_272
    out = estimate_json(CONFIG, tmp_path, "--max-model-len", "32768", *V26)
    # 28 layers x 4 KV heads x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 28 * 4 * 128 * 2 * 2 == 57_344
    assert out["model"]["layer_kinds"] == {"full_attention": 28}
    assert out["exact"] is True


def test_ling_v2_keys():
    v2 = {**CONFIG, "architectures": ["BailingMoeV2ForCausalLM"], "first_k_dense_replace": 1, "use_qk_norm": True,
          "use_rmsnorm": True, "partial_rotary_factor": 0.5, "moe_router_enable_expert_bias": True,
          "moe_shared_expert_intermediate_size": 1024, "num_shared_experts": 1, "use_qkv_bias": True}
    spec = parse_config(v2, "ling2", vllm_version="0.26.0")
    assert spec.exact and spec.moe_layers == (False,) + (True,) * 27
    assert spec.qk_norm and spec.qkv_bias and not spec.o_bias and spec.rotary_dim == 64
    assert spec.moe.router_bias and spec.moe.shared_intermediate_size == 1024
    # layer 0 a dense MLP 3 x 2048 x 1408; qkv biases 3072, q/k norms 2 x 128; the shared expert
    # 3 x 2048 x 1024 and the expert bias 64 on the MoE layers
    attn = ATTN + 3072 + 2 * 128
    moe = 64 * 3 * 2048 * 1408 + 3 * 2048 * 1024 + 64 * 2048 + 64
    assert kvplan_text_params(spec) == 2 * 126464 * 2048 + 28 * attn + 3 * 2048 * 1408 + 27 * moe + 2048
    fp32 = parse_config({**v2, "router_dtype": "fp32"}, "ling2", vllm_version="0.26.0")
    assert not fp32.exact and "router_dtype 'fp32'" in fp32.approximations[0].reason


@pytest.mark.parametrize("over, key", [({"use_bias": True}, "'use_bias'"), ({"use_qk_norm": True}, "'use_qk_norm'")])
def test_refusals_name_the_key(over, key):
    with pytest.raises(KvplanError, match=key):
        parse_config({**CONFIG, **over}, "ling", vllm_version="0.26.0")
