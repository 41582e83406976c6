"""Granite, Granite-MoE, Seed-OSS and StarCoder2 (kvplan/model/families/{granite,seed_oss,
starcoder2}.py) on real published configs (tests/data/model_configs/, sources recorded there):
weights equal the meta-device count (tests/data/meta_param_counts.json, transformers 5.24),
KV bytes per token and layer kinds by hand arithmetic (vLLM 0.26.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json

from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params, oracle_text_params

CONFIGS = Path(__file__).parents[2] / "data" / "model_configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())["config"]


def _oracle(name: str) -> int:
    return oracle_text_params(MODELS[f"model_configs/{name}.json"])


def _kv(tmp_path, config) -> dict:
    # 2048: the partial Granite copies leave max_position_embeddings to GraniteConfig's default 2048
    return estimate_json(config, tmp_path, "--max-model-len", "2048", "--vllm-version", "0.26.0")


@pytest.mark.parametrize("name", [
    "ByteDance-Seed__Seed-OSS-36B-Instruct", "bigcode__starcoder2-3b",
    "ibm-granite__granite-3.1-2b-base", "ibm-granite__granite-3.0-1b-a400m-instruct",
])
def test_weights_equal_the_meta_device_count(name):
    config = _config(name)
    spec = parse_config(config, name, vllm_version="0.26.0")
    assert spec.exact and spec.architecture == config["architectures"][0]
    assert kvplan_text_params(spec) == _oracle(name)


def test_seed_oss_layout_and_kv(tmp_path):
    spec = parse_config(_config("ByteDance-Seed__Seed-OSS-36B-Instruct"), "seed", vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.FULL,) * 64
    assert spec.qkv_bias and not spec.o_bias and not spec.mlp_bias
    # by hand: 64 layers x (q 80x128 + k, v 8x128 + o, biases 80x128 + 2x8x128) + MLP 3 x 5120 x 27648 + 2 norms
    per_layer = (5120 * 10240 + 2 * 5120 * 1024 + 10240 * 5120 + 10240 + 2 * 1024
                 + 3 * 5120 * 27648 + 2 * 5120)
    assert kvplan_text_params(spec) == 2 * 155136 * 5120 + 64 * per_layer + 5120
    out = _kv(tmp_path, _config("ByteDance-Seed__Seed-OSS-36B-Instruct"))
    # 64 layers x 8 KV heads x head_dim 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 64 * 8 * 128 * 2 * 2 == 262_144
    assert out["model"]["layer_kinds"] == {"full_attention": 64}


def test_seed_oss_ignores_the_bias_flags_vllm_ignores():
    # vLLM seed_oss.py builds qkv bias=True, o_proj and MLP bias=False whatever the config says
    config = {**_config("ByteDance-Seed__Seed-OSS-36B-Instruct"), "attention_bias": False,
              "attention_out_bias": True, "mlp_bias": True}
    spec = parse_config(config, "seed", vllm_version="0.26.0")
    assert spec.qkv_bias and not spec.o_bias and not spec.mlp_bias


def test_starcoder2_plain_mlp_biases_and_sliding_kv(tmp_path):
    spec = parse_config(_config("bigcode__starcoder2-3b"), "sc2", vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.SLIDING,) * 30 and spec.sliding_window == 4096
    assert not spec.gated_mlp and spec.norm_has_bias and spec.tie_word_embeddings
    # by hand: c_fc + c_proj (2 x 3072 x 12288 + biases 12288 + 3072), q/o 3072x3072, k/v 256x3072,
    # biases 3072 + 2x256 + 3072, two LayerNorms of weight + bias
    per_layer = (2 * 3072 * 12288 + 12288 + 3072 + 2 * 3072 * 3072 + 2 * 256 * 3072
                 + 3072 + 2 * 256 + 3072 + 2 * 2 * 3072)
    assert kvplan_text_params(spec) == 49152 * 3072 + 30 * per_layer + 2 * 3072
    out = _kv(tmp_path, _config("bigcode__starcoder2-3b"))
    # 30 sliding layers x 2 KV heads x 128 x K and V x 2 B per token
    assert out["kv_cache"]["bytes_per_token"] == 30 * 2 * 128 * 2 * 2 == 30_720
    assert out["model"]["layer_kinds"] == {"sliding_attention": 30}


def test_starcoder2_without_biases_is_refused(tmp_path):
    from helpers import run_cli

    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**_config("bigcode__starcoder2-3b"), "use_bias": False}))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--max-model-len", "4096")
    assert code == 2 and "use_bias" in err and "Traceback" not in err and out == ""


def test_granite_moe_experts_and_kv(tmp_path):
    spec = parse_config(_config("ibm-granite__granite-3.0-1b-a400m-instruct"), "gmoe", vllm_version="0.26.0")
    assert spec.moe.num_experts == 32 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 512
    assert spec.moe_layers == (True,) * 24 and spec.moe.shared_intermediate_size == 0
    # by hand: 24 layers x (q, o 1024x1024 + k, v 512x1024 + router 32x1024 + 32 experts x 3 x 1024 x 512
    # + 2 norms), embeddings and LM head 49155 x 1024 (untied), final norm
    per_layer = 2 * 1024 * 1024 + 2 * 512 * 1024 + 32 * 1024 + 32 * 3 * 1024 * 512 + 2 * 1024
    assert kvplan_text_params(spec) == 2 * 49155 * 1024 + 24 * per_layer + 1024
    out = _kv(tmp_path, _config("ibm-granite__granite-3.0-1b-a400m-instruct"))
    # 24 layers x 8 KV heads x 64 x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 24 * 8 * 64 * 2 * 2 == 49_152


def test_granite_moe_shared_adds_the_shared_mlp():
    config = {**_config("ibm-granite__granite-3.0-1b-a400m-instruct"), "architectures": ["GraniteMoeSharedForCausalLM"],
              "model_type": "granitemoeshared", "shared_intermediate_size": 1024}
    spec = parse_config(config, "gshared", vllm_version="0.26.0")
    base = parse_config(_config("ibm-granite__granite-3.0-1b-a400m-instruct"), "gmoe", vllm_version="0.26.0")
    # granitemoeshared.py shared_mlp: input_linear 1024 -> 2 x 1024, output_linear 1024 -> 1024, per layer
    assert kvplan_text_params(spec) - kvplan_text_params(base) == 24 * 3 * 1024 * 1024


def test_granite_dense_kv(tmp_path):
    out = _kv(tmp_path, _config("ibm-granite__granite-3.1-2b-base"))
    # 40 layers x 8 KV heads x 64 (2048 / 32) x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 40 * 8 * 64 * 2 * 2 == 81_920
    assert out["model"]["layer_kinds"] == {"full_attention": 40}


def test_ernie45_moe_layers_experts_and_kv(tmp_path):
    config = _config("baidu__ERNIE-4.5-21B-A3B-PT")
    spec = parse_config(config, "ernie", vllm_version="0.26.0")
    assert spec.exact
    # moe_layer_start_index 1 .. moe_layer_end_index 27, interval 1: layer 0 dense, 1..27 MoE
    assert spec.moe_layers == (False,) + (True,) * 27
    assert spec.moe.num_experts == 64 and spec.moe.top_k == 6 and spec.moe.moe_intermediate_size == 1536
    assert spec.moe.shared_intermediate_size == 2 * 1536 and not spec.moe.shared_expert_gate
    # by hand: attention q, o 2560 x 2560 + k, v 512 x 2560 (no biases), 2 norms; layer 0 a dense MLP
    # 3 x 2560 x 12288; layers 1..27: 64 experts x 3 x 2560 x 1536, shared 3 x 2560 x 3072, router
    # 64 x 2560 and its correction bias 64; tied embeddings 103424 x 2560, final norm
    attn = 2 * 2560 * 2560 + 2 * 512 * 2560 + 2 * 2560
    moe = 64 * 3 * 2560 * 1536 + 3 * 2560 * 3072 + 64 * 2560 + 64
    total = 103424 * 2560 + 28 * attn + 3 * 2560 * 12288 + 27 * moe + 2560
    assert kvplan_text_params(spec) == total == _oracle("baidu__ERNIE-4.5-21B-A3B-PT") == 21_825_437_888
    out = _kv(tmp_path, config)
    # 28 layers x 4 KV heads x head_dim 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 28 * 4 * 128 * 2 * 2 == 57_344
    assert out["model"]["layer_kinds"] == {"full_attention": 28}


def test_ernie45_moe_with_biases_is_refused():
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match="'use_bias' is true"):
        parse_config({**_config("baidu__ERNIE-4.5-21B-A3B-PT"), "use_bias": True}, "ernie", vllm_version="0.26.0")


def test_cohere_parallel_block_tied_and_no_biases(tmp_path):
    config = _config("CohereForAI__aya-23-8B")
    spec = parse_config(config, "aya", vllm_version="0.26.0")
    assert spec.exact and spec.tie_word_embeddings and spec.norms_per_layer == 1
    assert not (spec.qkv_bias or spec.o_bias or spec.mlp_bias)
    # by hand: tied 256000 x 4096; 32 layers x (q, o 4096^2 + k, v 1024 x 4096 + 3 x 4096 x 14336 + one
    # LayerNorm weight 4096); final norm 4096
    per_layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 4096
    assert kvplan_text_params(spec) == 256000 * 4096 + 32 * per_layer + 4096 == _oracle("CohereForAI__aya-23-8B")
    # commandr.py: a CohereConfig model is all full attention, even with a sliding_window key
    assert parse_config({**config, "sliding_window": 4096}, "aya").layer_kinds == (LayerKind.FULL,) * 32
    out = _kv(tmp_path, config)
    # 32 layers x 8 KV heads x 128 x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 8 * 128 * 2 * 2 == 131_072


def test_cohere2_derives_layer_types_from_sliding_window_pattern(tmp_path):
    # The Cohere shape above as a cohere2 config without layer_types (not a published file: the
    # Cohere2Config derivation is what is tested): every 4th layer full, the rest sliding 4096
    config = {**_config("CohereForAI__aya-23-8B"), "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2",
              "sliding_window": 4096, "sliding_window_pattern": 4}
    spec = parse_config(config, "c2", vllm_version="0.26.0")
    S, F = LayerKind.SLIDING, LayerKind.FULL
    assert spec.layer_kinds == (S, S, S, F) * 8 and spec.sliding_window == 4096
    out = _kv(tmp_path, config)
    assert out["model"]["layer_kinds"] == {"sliding_attention": 24, "full_attention": 8}
    # per token every layer stores K and V of 8 heads x 128 at 2 B (sliding ones only for the window)
    assert out["kv_cache"]["bytes_per_token"] == 32 * 8 * 128 * 2 * 2
    # use_qk_norm: vLLM commandr.py adds q_norm (32 x 128) and k_norm (8 x 128) per layer
    qk = parse_config({**config, "use_qk_norm": True}, "c2qk", vllm_version="0.26.0")
    assert kvplan_text_params(qk) - kvplan_text_params(spec) == 32 * (32 + 8) * 128


def test_olmo2_norms_after_blocks_and_qk_norm_across_heads(tmp_path):
    config = _config("allenai__OLMo-2-1124-7B-Instruct")
    spec = parse_config(config, "olmo2", vllm_version="0.26.0")
    assert spec.exact and spec.qk_norm and spec.qk_norm_across_heads and spec.layer_kinds == (LayerKind.FULL,) * 32
    # by hand: untied 2 x 100352 x 4096; 32 layers x (q, k, v, o 4096^2 + q_norm 4096 + k_norm 32 x 128 +
    # gate/up/down 3 x 4096 x 11008 + post-attention and post-feedforward norms 2 x 4096); final norm
    per_layer = 4 * 4096 * 4096 + 4096 + 4096 + 3 * 4096 * 11008 + 2 * 4096
    total = 2 * 100352 * 4096 + 32 * per_layer + 4096
    assert kvplan_text_params(spec) == total == _oracle("allenai__OLMo-2-1124-7B-Instruct") == 7_298_617_344
    out = _kv(tmp_path, config)
    # 32 layers x 32 KV heads x 128 x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 32 * 128 * 2 * 2 == 524_288


def test_olmo3_sliding_layers_from_its_config_class(tmp_path):
    # The OLMo-2 shape as an olmo3 config without layer_types (not a published file: Olmo3Config's
    # derivation is what is tested): every 4th layer full, the rest sliding 4096; same weights
    # (transformers' meta-device count of this config: 7,298,617,344, as OLMo-2)
    config = {**_config("allenai__OLMo-2-1124-7B-Instruct"), "architectures": ["Olmo3ForCausalLM"],
              "model_type": "olmo3", "sliding_window": 4096}
    spec = parse_config(config, "olmo3", vllm_version="0.26.0")
    S, F = LayerKind.SLIDING, LayerKind.FULL
    assert spec.layer_kinds == (S, S, S, F) * 8 and spec.sliding_window == 4096
    assert kvplan_text_params(spec) == 7_298_617_344
    out = _kv(tmp_path, config)
    assert out["model"]["layer_kinds"] == {"sliding_attention": 24, "full_attention": 8}


def test_granite_3_3_tied_vocab_padding_and_kv(tmp_path):
    config = _config("ibm-granite__granite-3.3-8b-instruct")
    spec = parse_config(config, "g33", vllm_version="0.26.0")
    assert spec.exact and spec.tie_word_embeddings
    # by hand: tied 49159 x 4096 (vLLM pads to 49216 rows; the oracle has 49159); 40 layers x (q, o
    # 4096^2 + k, v 1024 x 4096 + 3 x 4096 x 12800 + 2 norms); final norm
    per_layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 12800 + 2 * 4096
    assert kvplan_text_params(spec) == 49159 * 4096 + 40 * per_layer + 4096 == _oracle("ibm-granite__granite-3.3-8b-instruct")
    out = _kv(tmp_path, config)
    # 40 layers x 8 KV heads x 128 x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 40 * 8 * 128 * 2 * 2 == 163_840


def test_falcon_7b_multi_query_parallel_block(tmp_path):
    config = _config("tiiuae__falcon-7b")
    spec = parse_config(config, "f7", vllm_version="0.26.0")
    assert spec.exact and spec.attention.num_key_value_heads == 1 and spec.norms_per_layer == 1
    assert not spec.gated_mlp and spec.norm_has_bias and spec.tie_word_embeddings and not spec.qkv_bias
    # by hand: tied 65024 x 4544; 32 layers x (query_key_value (71 + 2) x 64 x 4544 + dense 4544^2 +
    # plain MLP 2 x 4544 x 18176 + one LayerNorm (weight and bias)); final LayerNorm
    per_layer = 73 * 64 * 4544 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    assert kvplan_text_params(spec) == 65024 * 4544 + 32 * per_layer + 2 * 4544 == _oracle("tiiuae__falcon-7b")
    out = _kv(tmp_path, config)
    # multi_query: 32 layers x 1 KV head x head_dim 64 (4544 / 71) x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 1 * 64 * 2 * 2 == 8_192


def test_falcon_40b_new_decoder_architecture_kv_heads(tmp_path):
    config = _config("tiiuae__falcon-40b")
    spec = parse_config(config, "f40", vllm_version="0.26.0")
    assert spec.attention.num_key_value_heads == 8 and spec.norms_per_layer == 2  # ln_attn + ln_mlp
    # by hand: query_key_value (128 + 16) x 64 x 8192, dense 8192^2, MLP 2 x 8192 x 32768, two LayerNorms
    per_layer = 144 * 64 * 8192 + 8192 * 8192 + 2 * 8192 * 32768 + 2 * 2 * 8192
    assert kvplan_text_params(spec) == 65024 * 8192 + 60 * per_layer + 2 * 8192 == _oracle("tiiuae__falcon-40b")
    out = _kv(tmp_path, config)
    # 60 layers x 8 KV heads x 64 x 2 x 2 B (not 128 heads: issue 12's 16x)
    assert out["kv_cache"]["bytes_per_token"] == 60 * 8 * 64 * 2 * 2 == 122_880


def test_falcon_with_a_mlp_width_vllm_cannot_load_is_refused():
    from kvplan.errors import KvplanError

    with pytest.raises(KvplanError, match="'ffn_hidden_size' is 20,000, but vLLM's Falcon MLP is always 4 x hidden_size"):
        parse_config({**_config("tiiuae__falcon-7b"), "ffn_hidden_size": 20000}, "f", vllm_version="0.26.0")


def test_smollm3_nope_layers_change_no_size(tmp_path):
    config = _config("HuggingFaceTB__SmolLM3-3B-Base")
    spec = parse_config(config, "smol", vllm_version="0.26.0")
    assert spec.exact and spec.tie_word_embeddings and spec.layer_kinds == (LayerKind.FULL,) * 36
    # by hand: tied 128256 x 2048; 36 layers x (q, o 2048^2 + k, v 512 x 2048 + 3 x 2048 x 11008 + 2 norms)
    per_layer = 2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 2048 * 11008 + 2 * 2048
    assert kvplan_text_params(spec) == 128256 * 2048 + 36 * per_layer + 2048 == _oracle("HuggingFaceTB__SmolLM3-3B-Base")
    out = _kv(tmp_path, config)
    # 36 layers x 4 KV heads x 128 x 2 x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 36 * 4 * 128 * 2 * 2 == 73_728
    # SmolLM3Config: with use_sliding_window, the NoPE layers (every 4th) are the sliding ones
    windowed = parse_config({**config, "use_sliding_window": True, "sliding_window": 4096}, "smolw")
    S, F = LayerKind.SLIDING, LayerKind.FULL
    assert windowed.layer_kinds == (F, F, F, S) * 9
