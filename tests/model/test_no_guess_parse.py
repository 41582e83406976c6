"""Issue 12 part 3, "no silent guess", at the parse: an architecture vLLM cannot serve as a
generative model is refused; an architecture without a kvplan family is sized only from the
standard keys (``exact`` False with typed reasons), and a key that changes sizing beyond them is
refused naming the key. Known families keep reading those keys as before."""

from __future__ import annotations

import pytest

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

# An architecture kvplan has no family for, with only standard keys: 16 layers of GQA (16 heads,
# 4 KV heads of 128), a gated MLP of 8192, 100,000 tokens.
FOO = {
    "architectures": ["FooForCausalLM"],
    "model_type": "foo",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 8192,
    "vocab_size": 100000,
    "max_position_embeddings": 8192,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "bos_token_id": 1,
    "torch_dtype": "bfloat16",
}


def _refused(config: dict) -> str:
    with pytest.raises(KvplanError) as exc:
        parse_config(config, "m")
    return exc.value.message


def test_unknown_dense_architecture_is_sized_but_not_exact():
    from kvplan.model.spec import ApproximationKind

    spec = parse_config(FOO, "m")
    assert spec.layer_kinds == (LayerKind.FULL,) * 16
    assert spec.attention.num_key_value_heads == 4 and spec.attention.head_dim == 2048 // 16
    assert spec.exact is False
    kinds = [a.kind for a in spec.approximations]
    assert kinds == [ApproximationKind.UNKNOWN_FAMILY, ApproximationKind.ASSUMED_MLP]
    assert "model_type 'foo' (FooForCausalLM) has no kvplan family" in spec.approximations[0].reason
    assert "8,192" in spec.approximations[1].reason  # the intermediate size it assumed gated


def test_unknown_architecture_with_sliding_layer_types_of_known_values_is_sized():
    cfg = {**FOO, "num_hidden_layers": 4, "sliding_window": 1024,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}
    spec = parse_config(cfg, "m")
    S, F = LayerKind.SLIDING, LayerKind.FULL
    assert spec.layer_kinds == (S, F, S, F) and spec.sliding_window == 1024
    assert not spec.exact


def test_known_family_is_exact():
    cfg = {**FOO, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    assert parse_config(cfg, "m").exact is True


def test_hook_config_unknown_moe_keys_exit_2_naming_moe_num_experts():
    # The before-stop hook's config (Ernie-4.5-style spelling): weights would be 70-90 % low as dense.
    cfg = {**FOO, "architectures": ["FooMoeForCausalLM"], "model_type": "foo_moe",
           "moe_intermediate_size": 1024, "moe_num_experts": 64, "moe_k": 8}
    msg = _refused(cfg)
    assert "model_type 'foo_moe' (FooMoeForCausalLM) has no kvplan family" in msg
    assert "'moe_num_experts'" in msg and "'moe_intermediate_size'" in msg and "'moe_k'" in msg
    assert "mixture-of-experts" in msg


@pytest.mark.parametrize("extra, key", [
    ({"num_local_experts": 16, "num_experts_per_tok": 2}, "num_local_experts"),  # Phi-3.5-MoE spelling
    ({"num_experts": 64, "num_experts_per_tok": 8}, "num_experts"),  # OLMoE spelling
    ({"n_routed_experts": 64, "first_k_dense_replace": 1}, "n_routed_experts"),  # DeepSeek spelling
    ({"mlp_only_layers": [0, 1]}, "mlp_only_layers"),
])
def test_unknown_expert_keys_exit_2_naming_the_key(extra, key):
    assert f"'{key}'" in _refused({**FOO, **extra})


def test_unknown_mla_keys_exit_2():
    # GLM-4.7-Flash / DeepSeek-V3.2 under a new model_type: sized as MHA, KV 4-22x too large.
    msg = _refused({**FOO, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64})
    assert "'kv_lora_rank', 'q_lora_rank', 'qk_rope_head_dim'" in msg and "latent attention" in msg


@pytest.mark.parametrize("extra, key", [
    ({"ssm_state_size": 128, "mamba_num_heads": 64}, "ssm_state_size"),
    ({"mamba_d_state": 16, "mamba_expand": 2}, "mamba_d_state"),
    ({"hybrid_override_pattern": "M-M-M*-"}, "hybrid_override_pattern"),
    ({"layers_block_type": ["mamba", "attention"]}, "layers_block_type"),
    ({"conv_kernel": 4}, "conv_kernel"),
    ({"linear_num_value_heads": 32}, "linear_num_value_heads"),
])
def test_unknown_mamba_or_linear_attention_keys_exit_2(extra, key):
    msg = _refused({**FOO, **extra})
    assert f"'{key}'" in msg and "Mamba / SSM / linear-attention state" in msg


@pytest.mark.parametrize("value", ["linear_attention", "mamba", "chunked_attention", "moe_attention"])
def test_unknown_layer_types_value_exit_2_naming_the_entry(value):
    cfg = {**FOO, "num_hidden_layers": 2, "layer_types": ["full_attention", value]}
    assert f"'layer_types[1]' (layer type {value!r})" in _refused(cfg)


@pytest.mark.parametrize("extra, key, what", [
    ({"num_key_value_heads": [4] * 16}, "num_key_value_heads", "per-layer list"),  # Gemma-4, MiMo-V2
    ({"head_dim": [128] * 16}, "head_dim", "per-layer list"),
    ({"sliding_window": 4096, "sliding_window_pattern": 4}, "sliding_window_pattern", "per-layer attention"),  # EXAONE-4
    ({"num_kv_heads": 8}, "num_kv_heads", "per-layer attention"),  # Falcon's spelling (KV 16x as MHA)
])
def test_unknown_per_layer_shapes_exit_2(extra, key, what):
    msg = _refused({**FOO, **extra})
    assert f"'{key}' ({what}" in msg and "has no kvplan family" in msg


def test_keys_that_say_nothing_do_not_refuse():
    # a dense model's num_experts: 0 or mlp_only_layers: [] changes no size
    assert parse_config({**FOO, "num_experts": 0, "mlp_only_layers": [], "use_mla": False}, "m").approximations


def test_text_config_keys_are_named_as_written():
    cfg = {"architectures": ["FooVLForConditionalGeneration"], "model_type": "foo_vl",
           "text_config": {**FOO, "model_type": "foo_text", "num_local_experts": 8}}
    assert "'text_config.num_local_experts'" in _refused(cfg)


def test_known_families_still_read_these_keys():
    # Qwen3-MoE reads num_experts / moe_intermediate_size in its own hook: no refusal, exact.
    cfg = {**FOO, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 8,
           "num_experts_per_tok": 2, "moe_intermediate_size": 256}
    spec = parse_config(cfg, "m")
    assert spec.exact and spec.moe is not None and spec.moe.num_experts == 8


@pytest.mark.parametrize("arch, model_type, words", [
    ("BertForMaskedLM", "bert", "an encoder-only model"),
    ("BertModel", "bert", "an encoder-only model"),
    ("RobertaForSequenceClassification", "roberta", "an encoder-only model"),
    ("XLMRobertaModel", "xlm-roberta", "an encoder-only model"),
    ("Qwen2ForRewardModel", "qwen2", "not a generative model"),  # vLLM's pooling table
    ("Qwen3ForSequenceClassification", "qwen3", "not a generative model"),  # suffix rule
    ("FooModel", "foo", "not a generative model"),  # a *Model without a generative head
])
def test_pooling_only_architectures_exit_2(arch, model_type, words):
    msg = _refused({**FOO, "architectures": [arch], "model_type": model_type})
    assert f"architecture {arch!r} (model_type {model_type!r}) is {words}" in msg
    assert "runs it only as a pooling/encoder model" in msg


@pytest.mark.parametrize("arch, model_type, flag", [
    ("T5ForConditionalGeneration", "t5", True),
    ("BartForConditionalGeneration", "bart", False),
    ("FooForConditionalGeneration", "foo", True),  # any is_encoder_decoder config
])
def test_encoder_decoder_exit_2(arch, model_type, flag):
    cfg = {**FOO, "architectures": [arch], "model_type": model_type, **({"is_encoder_decoder": True} if flag else {})}
    # parse_config's notes name the newest supported version by default
    assert "is an encoder-decoder model: vLLM 0.34.0 does not serve it as a generative model" in _refused(cfg)


def test_generative_names_the_suffix_rule_would_miss_are_not_refused():
    # ChatGLM's published config names ChatGLMModel, which vLLM's text-generation table lists: it is
    # sized (by its family, kvplan/model/families/chatglm.py), not refused as a pooling model
    spec = parse_config({**FOO, "architectures": ["ChatGLMModel"], "model_type": "chatglm"}, "m")
    assert spec.architecture == "ChatGLMModel" and spec.exact


def test_one_place_for_the_key_sets():
    # every key the issue lists is in kvplan.model.sizing_keys
    from kvplan.model import sizing_keys

    for key in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "moe_intermediate_size",
                "num_experts_per_tok", "moe_k", "first_k_dense_replace", "moe_layer_freq", "mlp_only_layers",
                "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "ssm_state_size", "mamba_d_state", "conv_kernel",
                "linear_key_head_dim", "hybrid_override_pattern", "layers_block_type", "sliding_window_pattern"):
        assert sizing_keys.unread_sizing_keys({key: 1}), key
