"""ChatGLM and MPT (kvplan/model/families/{chatglm,mpt}.py): the old-key families, on real
published configs (tests/data/model_configs/, sources recorded there).

MPT's weights equal the meta-device count (tests/data/meta_param_counts.json, transformers 5.24).
ChatGLM is remote code (transformers has no ``chatglm`` model type; the oracle records the error),
so its weights are checked by hand arithmetic from vLLM 0.26.0's chatglm.py, written below. KV
bytes per token and layer kinds by hand arithmetic (vLLM 0.26.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json
from helpers import run_cli

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params, oracle_text_params

CONFIGS = Path(__file__).parents[2] / "data" / "model_configs"


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())["config"]


def _published_glm4() -> dict:
    # the keys ChatGLMConfig derives itself (printed in the stored copy) left out, as the issue's
    # config-only run had it: kvplan used to stop at "missing required key 'vocab_size'"
    return {k: v for k, v in _config("THUDM__glm-4-9b-chat").items() if k not in ("vocab_size", "num_hidden_layers")}


def _refused(tmp_path, config: dict) -> str:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--max-model-len", "2048", "--vllm-version", "0.26.0")
    assert code == 2 and "Traceback" not in err and out == "", (code, err)
    return err


def test_glm4_9b_weights_by_hand():
    spec = parse_config(_published_glm4(), "glm4", vllm_version="0.26.0")
    assert spec.exact and spec.architecture == "ChatGLMModel" and spec.vocab_size == 151552
    assert spec.num_hidden_layers == 40 and spec.attention.num_key_value_heads == 2 and spec.attention.head_dim == 128
    assert spec.qkv_bias and not spec.o_bias and not spec.mlp_bias and spec.gated_mlp and not spec.norm_has_bias
    assert not spec.tie_word_embeddings
    # by hand (vLLM chatglm.py): embedding and output_layer 2 x 151552 x 4096 (151552 = 2368 x 64, no
    # padding); per layer query_key_value 4096 -> 32 x 128 + 2 x 2 x 128 = 4608 with its bias 4608, dense
    # 4096 x 4096, dense_h_to_4h 4096 -> 2 x 13696 and dense_4h_to_h 13696 -> 4096, two RMSNorms 4096;
    # final_layernorm 4096
    per_layer = 4096 * 4608 + 4608 + 4096 * 4096 + 3 * 4096 * 13696 + 2 * 4096
    assert kvplan_text_params(spec) == 2 * 151552 * 4096 + 40 * per_layer + 4096 == 9_399_951_360
    # the remote-code config is not one transformers builds: the oracle says so instead of a count
    assert "error" in MODELS["model_configs/THUDM__glm-4-9b-chat.json"]
    # the stored copy with the derived keys present sizes the same
    assert kvplan_text_params(parse_config(_config("THUDM__glm-4-9b-chat"), "glm4", vllm_version="0.26.0")) == 9_399_951_360


def test_glm4_9b_kv_rope_and_estimate(tmp_path):
    spec = parse_config(_published_glm4(), "glm4", vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.FULL,) * 40
    # RoPE on half of each head (chatglm.py partial_rotary_factor 0.5), cos/sin cache of seq_length rows
    assert spec.rotary_dim == 64 and spec.rope_max_position == 131072 and spec.derived_max_model_len == 131072
    out = estimate_json(_published_glm4(), tmp_path, "--max-model-len", "4096", "--vllm-version", "0.26.0")
    assert out["exact"] is True and "approximate" not in out
    # 40 layers x 2 KV heads (multi_query_group_num) x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 40 * 2 * 128 * 2 * 2 == 40_960
    assert out["model"]["layer_kinds"] == {"full_attention": 40}


def test_chatglm_bias_and_norm_switches():
    base = parse_config(_published_glm4(), "glm4", vllm_version="0.26.0")
    # add_bias_linear: dense (4096), dense_h_to_4h (2 x 13696) and dense_4h_to_h (4096) biases per layer
    biased = parse_config({**_published_glm4(), "add_bias_linear": True}, "b", vllm_version="0.26.0")
    assert kvplan_text_params(biased) - kvplan_text_params(base) == 40 * (4096 + 2 * 13696 + 4096)
    # rmsnorm false: LayerNorms, each with a bias of 4096: 2 per layer x 40 + the final one = 81
    ln = parse_config({**_published_glm4(), "rmsnorm": False}, "ln", vllm_version="0.26.0")
    assert kvplan_text_params(ln) - kvplan_text_params(base) == 81 * 4096
    # without multi_query_attention every query head has its own K and V
    mha = parse_config({**_published_glm4(), "multi_query_attention": False}, "mha", vllm_version="0.26.0")
    assert mha.attention.num_key_value_heads == 32


@pytest.mark.parametrize("key, value, named", [
    ("kv_channels", 64, "kv_channels"),
    ("post_layer_norm", False, "post_layer_norm"),
    ("multi_query_group_num", "2", "multi_query_group_num"),
    ("quantization_bit", 4, "quantization_bit"),  # chatglm2-6b-int4's cpm_kernels weights
])
def test_chatglm_keys_it_cannot_size_are_exit_2(tmp_path, key, value, named):
    assert named in _refused(tmp_path, {**_published_glm4(), key: value})


def test_chatglm_bad_vocabulary_names_the_key_as_written():
    with pytest.raises(KvplanError, match="'padded_vocab_size'"):
        parse_config({**_published_glm4(), "padded_vocab_size": 0}, "glm4", vllm_version="0.26.0")


def test_mpt_7b_weights_equal_the_meta_device_count():
    spec = parse_config(_config("mosaicml__mpt-7b"), "mpt", vllm_version="0.26.0")
    assert spec.exact and spec.architecture == "MPTForCausalLM" and spec.tie_word_embeddings
    assert not (spec.qkv_bias or spec.o_bias or spec.mlp_bias or spec.norm_has_bias) and not spec.gated_mlp
    assert spec.rotary_dim is None and spec.learned_positions == 0  # ALiBi: no rotary cache, no wpe
    # by hand: tied 50432 x 4096; 32 layers x (Wqkv 3 x 4096^2 + out_proj 4096^2 + up/down 2 x 4096 x 16384 +
    # two bias-free LayerNorms 4096); norm_f 4096
    per_layer = 4 * 4096 * 4096 + 2 * 4096 * 16384 + 2 * 4096
    total = 50432 * 4096 + 32 * per_layer + 4096
    assert kvplan_text_params(spec) == total == oracle_text_params(MODELS["model_configs/mosaicml__mpt-7b.json"])
    assert total == 6_649_286_656


def test_mpt_7b_kv_and_estimate(tmp_path):
    spec = parse_config(_config("mosaicml__mpt-7b"), "mpt", vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.FULL,) * 32 and spec.derived_max_model_len == 2048  # max_seq_len
    out = estimate_json(_config("mosaicml__mpt-7b"), tmp_path, "--max-model-len", "2048", "--vllm-version", "0.26.0")
    assert out["exact"] is True
    # 32 layers x 32 KV heads (multi-head) x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 32 * 32 * 128 * 2 * 2 == 524_288
    assert out["model"]["layer_kinds"] == {"full_attention": 32}


def test_mpt_grouped_kv_heads_biases_and_qk_ln():
    config = _config("mosaicml__mpt-7b")
    base = parse_config(config, "mpt", vllm_version="0.26.0")
    gqa = parse_config({**config, "attn_config": {**config["attn_config"], "kv_n_heads": 8}}, "g", vllm_version="0.26.0")
    assert gqa.attention.num_key_value_heads == 8
    # Wqkv loses 2 x (32 - 8) x 128 output rows of 4096 per layer
    assert kvplan_text_params(base) - kvplan_text_params(gqa) == 32 * 2 * 24 * 128 * 4096
    # no_bias false: Wqkv (3 x 4096), out_proj, up (16384), down biases, and both LayerNorms' biases, per layer,
    # and norm_f's
    biased = parse_config({**config, "no_bias": False}, "b", vllm_version="0.26.0")
    assert kvplan_text_params(biased) - kvplan_text_params(base) == 32 * (3 * 4096 + 4096 + 16384 + 4096 + 2 * 4096) + 4096
    # qk_ln without biases: q_ln and k_ln LayerNorm weights over d_model per layer
    qk = parse_config({**config, "attn_config": {**config["attn_config"], "qk_ln": True}}, "q", vllm_version="0.26.0")
    assert kvplan_text_params(qk) - kvplan_text_params(base) == 32 * 2 * 4096


@pytest.mark.parametrize("change, named", [
    ({"attn_config": {"alibi": False}}, "attn_config.alibi"),
    ({"attn_config": {"alibi": True, "prefix_lm": True}}, "attn_config.prefix_lm"),
    ({"attn_config": {"alibi": True, "qk_ln": True, "kv_n_heads": 8}}, "attn_config.qk_ln"),
    ({"tie_word_embeddings": False}, "tie_word_embeddings"),
    ({"norm_type": "rmsnorm"}, "norm_type"),
    ({"n_layers": 0}, "n_layers"),
    ({"expansion_ratio": "4"}, "expansion_ratio"),
])
def test_mpt_what_vllm_cannot_serve_is_exit_2_naming_the_key(tmp_path, change, named):
    err = _refused(tmp_path, {**_config("mosaicml__mpt-7b"), **change})
    assert f"'{named}'" in err


def test_chatglm_standard_names_and_class_defaults_as_its_config_class_reads_them():
    # ChatGLMConfig's attribute_map: a given num_hidden_layers sets num_layers; without either, its
    # default 28. The embedding always has padded_vocab_size rows (default 65024), whatever vocab_size says.
    config = {k: v for k, v in _published_glm4().items() if k not in ("num_layers", "padded_vocab_size")}
    spec = parse_config({**config, "num_hidden_layers": 12, "vocab_size": 1000}, "glm4", vllm_version="0.26.0")
    assert spec.num_hidden_layers == 12 and spec.vocab_size == 65024
    spec = parse_config(config, "glm4", vllm_version="0.26.0")
    assert spec.num_hidden_layers == 28 and spec.vocab_size == 65024
    assert any("num_layers=28" in n and "padded_vocab_size=65024" in n for n in spec.notes), spec.notes


def test_mpt_is_refused_for_a_vllm_that_removed_it(tmp_path):
    # vLLM 0.33.0 registry.py _PREVIOUSLY_SUPPORTED_MODELS: MPTForCausalLM / MptForCausalLM until v0.28.0
    with pytest.raises(KvplanError, match="vLLM 0.33.0 no longer serves MPTForCausalLM: its registry says it was "
                       "supported until v0.28.0"):
        parse_config(_config("mosaicml__mpt-7b"), "mpt", vllm_version="0.33.0")
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(_config("mosaicml__mpt-7b")))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--vllm-version", "0.33.0")
    assert code == 2 and "no longer serves MPTForCausalLM" in err and out == "" and "Traceback" not in err
    # ChatGLM stays served (0.33.0 chatglm.py builds the same layers)
    assert parse_config(_published_glm4(), "glm4", vllm_version="0.33.0").exact
