"""GLM-4.5 (Glm4MoeForCausalLM), GLM-5 / GLM-5.2 (GlmMoeDsaForCausalLM) and Hunyuan dense / MoE
(HunYuanDenseV1ForCausalLM / HunYuanMoEV1ForCausalLM) on real published configs
(tests/data/model_configs/, sources recorded there): weights equal the meta-device count
(tests/data/meta_param_counts.json, transformers 5.24) and hand arithmetic; KV bytes per token
and layer kinds by hand arithmetic (vLLM 0.26.0); the refusals are exit 2 naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json
from helpers import run_cli

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params, oracle_text_params

CONFIGS = Path(__file__).parents[2] / "data" / "model_configs"
V26 = ("--vllm-version", "0.26.0")


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())["config"]


def _oracle(name: str) -> int:
    return oracle_text_params(MODELS[f"model_configs/{name}.json"])


@pytest.mark.parametrize("name", [
    "zai-org__GLM-4.5-Air", "zai-org__GLM-5", "zai-org__GLM-5.2",
    "tencent__Hunyuan-A13B-Instruct", "tencent__Hunyuan-7B-Instruct",
])
def test_weights_equal_the_meta_device_count(name):
    config = _config(name)
    spec = parse_config(config, name, vllm_version="0.26.0")
    assert spec.architecture == config["architectures"][0]
    assert kvplan_text_params(spec) == _oracle(name)


def test_glm45_air_layout_weights_and_kv(tmp_path):
    config = _config("zai-org__GLM-4.5-Air")
    spec = parse_config(config, "glm45", vllm_version="0.26.0")
    assert spec.exact and spec.layer_kinds == (LayerKind.FULL,) * 46
    # first_k_dense_replace 1: layer 0 dense, 1..45 MoE (no moe_layer_freq in glm4_moe.py)
    assert spec.moe_layers == (False,) + (True,) * 45
    assert spec.moe.num_experts == 128 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 1408
    assert spec.moe.shared_intermediate_size == 1408 and spec.moe.router_bias
    assert spec.qkv_bias and not spec.o_bias and not spec.qk_norm
    assert spec.rotary_dim == 64  # partial_rotary_factor 0.5 of head_dim 128
    # by hand: q 96 x 128 = 12288 rows, k/v 8 x 128, o; q/k/v biases; 2 norms; layer 0 a dense MLP
    # 3 x 4096 x 10944; MoE layers 128 experts x 3 x 4096 x 1408 + shared 3 x 4096 x 1408 + router
    # 128 x 4096 + correction bias 128; untied embeddings 151552 x 4096 twice, final norm
    attn = 4096 * 12288 + 2 * 4096 * 1024 + 12288 * 4096 + 12288 + 2 * 1024 + 2 * 4096
    moe = 128 * 3 * 4096 * 1408 + 3 * 4096 * 1408 + 128 * 4096 + 128
    assert kvplan_text_params(spec) == 2 * 151552 * 4096 + 46 * attn + 3 * 4096 * 10944 + 45 * moe + 4096
    assert kvplan_text_params(spec) == 106_852_251_264
    out = estimate_json(config, tmp_path, "--max-model-len", "32768", "-tp", "4", *V26)
    # 46 layers x 8 KV heads / 4 ranks x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 46 * 2 * 128 * 2 * 2 == 47_104
    assert out["model"]["layer_kinds"] == {"full_attention": 46}
    assert out["exact"] is True


def test_glm45_partial_rotary_defaults_to_half_the_head():
    config = {k: v for k, v in _config("zai-org__GLM-4.5-Air").items() if k != "partial_rotary_factor"}
    assert parse_config(config, "glm45", vllm_version="0.26.0").rotary_dim == 64
    assert parse_config({**config, "partial_rotary_factor": 1.0}, "glm45", vllm_version="0.26.0").rotary_dim == 128


@pytest.mark.parametrize("name, indexer_layers, cut_indexer_layers", [
    ("zai-org__GLM-5", 78, 12),
    # index_skip_topk_offset 3, index_topk_freq 4: layer i keeps one where max(i - 2, 0) % 4 == 0:
    # 0, 1, 2, then 6, 10, ..., 74 (18 more); of the first 12 layers: 0, 1, 2, 6, 10
    ("zai-org__GLM-5.2", 3 + 18, 5),
])
def test_glm5_mla_indexer_and_kv(tmp_path, name, indexer_layers, cut_indexer_layers):
    config = _config(name)
    spec = parse_config(config, name, vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.MLA,) * 78
    assert spec.moe_layers == (False,) * 3 + (True,) * 75
    assert spec.mla.kv_lora_rank == 512 and spec.mla.qk_rope_head_dim == 64
    assert sum(spec.indexer_layers) == indexer_layers
    assert (spec.indexer_head_dim, spec.indexer_heads, spec.indexer_topk) == (128, 32, 2048)
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]
    # the 744B model does not fit 8 H200s in bf16: the KV per token on a 12-layer cut
    out = estimate_json({**config, "num_hidden_layers": 12}, tmp_path, "--max-model-len", "32768", "-tp", "8", *V26)
    # MLA keeps one latent per layer on every rank: (512 + 64) x 2 B; the indexer key 128 fp8 B +
    # one fp32 scale = 132 B on the layers that have one
    assert out["kv_cache"]["bytes_per_token"] == 12 * (512 + 64) * 2 + cut_indexer_layers * 132
    assert out["exact"] is False


def test_hunyuan_moe_layout_and_kv(tmp_path):
    config = _config("tencent__Hunyuan-A13B-Instruct")
    spec = parse_config(config, "hy", vllm_version="0.26.0")
    assert spec.exact and spec.layer_kinds == (LayerKind.FULL,) * 32 and spec.moe_layers == (True,) * 32
    assert spec.moe.num_experts == 64 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 3072
    assert spec.moe.shared_intermediate_size == 3072 and not spec.moe.router_bias
    assert spec.qk_norm and spec.tie_word_embeddings and not spec.qkv_bias
    # by hand: q, o 4096^2, k, v 1024 x 4096, q/k norms 128 each, 2 norms; 64 experts x 3 x 4096 x
    # 3072 + shared 3 x 4096 x 3072 + router 64 x 4096; tied 128167 x 4096; final norm
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 2 * 128 + 2 * 4096 + 64 * 3 * 4096 * 3072 + 3 * 4096 * 3072 + 64 * 4096
    assert kvplan_text_params(spec) == 128167 * 4096 + 32 * layer + 4096 == 80_393_183_232
    out = estimate_json(config, tmp_path, "--max-model-len", "2048", "-tp", "2", *V26)
    # 32 layers x 8 KV heads / 2 ranks x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 4 * 128 * 2 * 2 == 65_536
    assert out["model"]["layer_kinds"] == {"full_attention": 32}


def test_hunyuan_dense_layout_and_kv(tmp_path):
    config = _config("tencent__Hunyuan-7B-Instruct")
    spec = parse_config(config, "hy7", vllm_version="0.26.0")
    assert spec.exact and spec.moe is None and spec.qk_norm and spec.tie_word_embeddings
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 2 * 128 + 2 * 4096 + 3 * 4096 * 14336
    assert kvplan_text_params(spec) == 128167 * 4096 + 32 * layer + 4096
    out = estimate_json(config, tmp_path, "--max-model-len", "32768", *V26)
    assert out["kv_cache"]["bytes_per_token"] == 32 * 8 * 128 * 2 * 2


def test_hunyuan_attention_head_dim_and_bias_spellings():
    config = {k: v for k, v in _config("tencent__Hunyuan-A13B-Instruct").items() if k != "head_dim"}
    spec = parse_config({**config, "attention_head_dim": 64}, "hy", vllm_version="0.26.0")
    assert spec.attention.head_dim == 64  # hunyuan_v1.py: head_dim, else attention_head_dim
    spec = parse_config({**config, "bias": True}, "hy", vllm_version="0.26.0")
    assert spec.qkv_bias and spec.o_bias  # attention_bias or bias: q/k/v and o_proj


def test_hunyuan_refusals_name_the_key(tmp_path):
    config = _config("tencent__Hunyuan-A13B-Instruct")
    with pytest.raises(KvplanError, match="'use_cla'"):
        parse_config({**config, "use_cla": True, "cla_share_factor": 2}, "hy", vllm_version="0.26.0")
    with pytest.raises(KvplanError, match="'moe_topk'.*differs between layers"):
        parse_config({**config, "moe_topk": [8] * 31 + [4]}, "hy", vllm_version="0.26.0")
    # a CLA factor of 1 shares nothing: sized as usual
    assert parse_config({**config, "use_cla": True, "cla_share_factor": 1}, "hy", vllm_version="0.26.0").exact
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**config, "use_cla": True, "cla_share_factor": 2}))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", *V26)
    assert code == 2 and "use_cla" in err and "Traceback" not in err
