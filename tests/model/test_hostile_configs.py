"""Hostile and incomplete model configs: nesting, bounded counts and sizes, numeric keys that
fail closed, position limits and rope factors, partial specs that carry notes, unknown quant
methods and architectures.

Every bad config/header must end in ONE line naming the file or key (exit 2, no traceback);
every incomplete one must still be planned but carry a note in ``ModelSpec.notes``. Expected
values are written by hand; nothing here touches the network.
"""

from __future__ import annotations

import json
import time

import pytest
from helpers import run_cli
from model_files import LLAMA, model_dir, one_error

from kvplan.errors import KvplanError
from kvplan.sources import load_spec, resolve_model
from kvplan.model.parse import parse_config

def parse_error(config: dict) -> str:
    with pytest.raises(KvplanError) as exc:
        parse_config(config, "m")
    msg = exc.value.message
    assert "\n" not in msg
    return msg


# -- deeply nested JSON ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_deeply_nested_config_json_is_one_line(tmp_path, command):
    d = tmp_path / "nested"
    d.mkdir()
    (d / "config.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    args = [command, str(d), "--gpu" if command == "estimate" else "--gpus", "H200"]
    line = one_error(*run_cli(*args))
    assert str(d / "config.json") in line and "nested" in line


def test_deeply_nested_config_json_through_check_is_model_unresolved(tmp_path):
    d = tmp_path / "nested"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"model: {d}\n# kvplan: gpu=H200\n", encoding="utf-8")
    code, out, err = run_cli("check", str(cfg))
    assert code == 2 and "Traceback" not in out + err, (code, out, err)
    assert "model-unresolved" in out and "nested" in out


def test_moderately_nested_config_value_is_refused(tmp_path):
    # 200 levels parse in Python's json, but no config.json nests like that: refused early.
    d = model_dir(tmp_path, {**LLAMA, "extra": json.loads("[" * 200 + "]" * 200)})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "config.json") in line and "nested" in line


# -- counts and sizes are bounded --------------------------------------------------------


@pytest.mark.parametrize(
    "key, value",
    [
        ("num_hidden_layers", 10**12),
        ("num_hidden_layers", 10**7),
        ("hidden_size", 10**9),
        ("intermediate_size", 10**12),
        ("vocab_size", 10**12),
        ("num_attention_heads", 10**9),
        ("num_key_value_heads", 10**9),
        ("head_dim", 10**9),
        ("max_position_embeddings", 10**15),
    ],
)
def test_absurd_sizes_are_refused_naming_the_key(key, value):
    start = time.monotonic()
    msg = parse_error({**LLAMA, key: value})
    assert time.monotonic() - start < 1.0
    assert f"'{key}'" in msg and "limit" in msg


@pytest.mark.parametrize(
    "config, key",
    [
        ({"model_type": "mixtral", "num_local_experts": 10**9, "num_experts_per_tok": 2}, "num_local_experts"),
        ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 10**9}, "num_experts_per_tok"),
        ({"model_type": "qwen3", "use_sliding_window": True, "sliding_window": 10**15}, "sliding_window"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 10**12}}, "rope_scaling.factor"),
        ({"quantization_config": {"quant_method": "gptq", "bits": 10**6}}, "quantization_config.bits"),
        ({"vision_config": {"hidden_size": 10**9, "num_hidden_layers": 2}}, "vision_config.hidden_size"),
    ],
)
def test_absurd_nested_and_family_sizes_are_refused(config, key):
    cfg = {k: v for k, v in LLAMA.items() if k != "architectures"}
    msg = parse_error({**cfg, **config})
    assert f"'{key}'" in msg


def test_huge_layer_count_through_cli_is_quick_and_one_line(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "num_hidden_layers": 10**12})
    start = time.monotonic()
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert time.monotonic() - start < 5.0
    assert "'num_hidden_layers'" in line


def test_largest_sane_layer_count_still_parses():
    spec = parse_config({**LLAMA, "num_hidden_layers": 4096}, "m")
    assert len(spec.layer_kinds) == 4096


# -- every numeric key fails closed ------------------------------------------------------


def _family(model_type: str, arch: str, **extra) -> dict:
    cfg = {k: v for k, v in LLAMA.items() if k != "architectures"}
    return {**cfg, "model_type": model_type, "architectures": [arch], **extra}


GEMMA3 = dict(model_type="gemma3_text", arch="Gemma3ForCausalLM", sliding_window=512, head_dim=64)
JAMBA = dict(model_type="jamba", arch="JambaForCausalLM", num_hidden_layers=8)
GRANITE = dict(model_type="granitemoehybrid", arch="GraniteMoeHybridForCausalLM", layer_types=["mamba", "attention"])
QNEXT = dict(
    model_type="qwen3_next", arch="Qwen3NextForCausalLM", num_hidden_layers=4, num_experts=4,
    num_experts_per_tok=2, moe_intermediate_size=64, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
)
QMOE = dict(model_type="qwen3_moe", arch="Qwen3MoeForCausalLM", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)
DSV3 = dict(
    model_type="deepseek_v3", arch="DeepseekV3ForCausalLM", n_routed_experts=4, num_experts_per_tok=2,
    moe_intermediate_size=64, kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32,
)
LLAMA4 = dict(
    model_type="llama4_text", arch="Llama4ForCausalLM", num_local_experts=4, num_experts_per_tok=1,
    attention_chunk_size=256,
)


def _with(base: dict, **changes) -> dict:
    fam = dict(base)
    model_type, arch = fam.pop("model_type"), fam.pop("arch")
    return _family(model_type, arch, **{**fam, **changes})


@pytest.mark.parametrize(
    "config, key",
    [
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), rope_scaling={"type": "linear", "factor": "abc"}), "rope_scaling.factor"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), head_dim="x"), "head_dim"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), intermediate_size="x"), "intermediate_size"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), num_key_value_heads=2.5), "num_key_value_heads"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), partial_rotary_factor="half"), "partial_rotary_factor"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), attention_bias="false"), "attention_bias"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), tie_word_embeddings="yes"), "tie_word_embeddings"),
        (_with(GEMMA3, sliding_window_pattern=0), "sliding_window_pattern"),
        (_with(GEMMA3, sliding_window_pattern="six"), "sliding_window_pattern"),
        (_with(JAMBA, attn_layer_period=0), "attn_layer_period"),
        (_with(JAMBA, expert_layer_period=0), "expert_layer_period"),
        (_with(JAMBA, mamba_d_state="x"), "mamba_d_state"),
        (_with(JAMBA, mamba_dt_rank=[1]), "mamba_dt_rank"),
        (_with(GRANITE, mamba_n_heads=0), "mamba_n_heads"),
        (_with(GRANITE, mamba_expand="two"), "mamba_expand"),
        (_with(GRANITE, mamba_d_head="x"), "mamba_d_head"),
        (_with(QNEXT, full_attention_interval=0), "full_attention_interval"),
        (_with(QMOE, decoder_sparse_step=-1), "decoder_sparse_step"),
        (_with(QMOE, mlp_only_layers=[{"a": 1}]), "mlp_only_layers"),
        (_with(QMOE, shared_expert_intermediate_size="x"), "shared_expert_intermediate_size"),
        (_with(DSV3, first_k_dense_replace="x"), "first_k_dense_replace"),
        (_with(DSV3, n_shared_experts=-1), "n_shared_experts"),
        (_with(DSV3, q_lora_rank="x"), "q_lora_rank"),
        (_with(LLAMA4, attention_chunk_size="x"), "attention_chunk_size"),
        (_with(LLAMA4, no_rope_layer_interval=0), "no_rope_layer_interval"),
        (_with(LLAMA4, moe_layers=["x"]), "moe_layers"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), quantization_config={"quant_method": "gptq", "bits": "four"}), "quantization_config.bits"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), quantization_config={"quant_method": "awq", "group_size": 1.5}), "quantization_config.group_size"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), quantization_config={"quant_method": "fp8", "weight_block_size": ["a", 1]}), "quantization_config.weight_block_size"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), quantization_config={"quant_method": "fp8", "modules_to_not_convert": 5}), "quantization_config.modules_to_not_convert"),
        (_with(dict(model_type="llama", arch="LlamaForCausalLM"), vision_config={"hidden_size": "big", "num_hidden_layers": 2}), "vision_config.hidden_size"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_non_numeric_or_zero_keys_fail_closed_naming_the_key(config, key):
    msg = parse_error(config)
    assert f"'{key}'" in msg, msg


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_rope_factor_abc_through_cli_is_one_line(tmp_path, command):
    d = model_dir(tmp_path, {**LLAMA, "rope_scaling": {"type": "linear", "factor": "abc"}})
    args = [command, str(d), "--gpu" if command == "estimate" else "--gpus", "H200"]
    line = one_error(*run_cli(*args))
    assert "'rope_scaling.factor'" in line and "'abc'" in line


def test_rope_factor_abc_through_check_is_model_unresolved(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "rope_scaling": {"type": "linear", "factor": "abc"}})
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"model: {d}\n# kvplan: gpu=H200\n", encoding="utf-8")
    code, out, err = run_cli("check", str(cfg))
    assert code == 2 and "Traceback" not in out + err, (code, out, err)
    assert "model-unresolved" in out and "rope_scaling.factor" in out


# -- position limits and rope factors -----------------------------------------------


@pytest.mark.parametrize("value", ["8192", 0, -1, True, 8192.5, None, [8192]])
def test_bad_max_position_embeddings_names_the_key(value):
    cfg = {**LLAMA, "max_position_embeddings": value}
    if value is None:  # explicit null: treated as absent (transformers' default 2048 applies)
        assert parse_config(cfg, "m").derived_max_model_len == 2048
        return
    assert "'max_position_embeddings'" in parse_error(cfg)


@pytest.mark.parametrize("factor", [-4, 0, 0.0, "abc", float("nan"), True])
def test_bad_rope_factor_names_the_key(factor):
    cfg = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 4096}}
    assert "'rope_scaling.factor'" in parse_error(cfg)


def test_bad_original_max_position_embeddings_names_the_key():
    cfg = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": "4k"}}
    assert "'rope_scaling.original_max_position_embeddings'" in parse_error(cfg)


@pytest.mark.parametrize("value, key", [(-1, "max_position_embeddings"), ("8192", "max_position_embeddings")])
def test_bad_position_limit_through_cli_never_mentions_unpassed_flags(tmp_path, value, key):
    d = model_dir(tmp_path, {**LLAMA, key: value})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert f"'{key}'" in line and "--max-num-batched-tokens" not in line


def test_negative_rope_factor_through_cli(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": -4}})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "'rope_scaling.factor'" in line and "-4" in line


def test_good_yarn_factor_still_scales():
    cfg = {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}}
    assert parse_config(cfg, "m").derived_max_model_len == 16384  # 4096 x 4


# -- partial specs carry notes -----------------------------------------------------------


def test_bundled_granite_spec_says_where_its_added_keys_come_from():
    # The partial snapshot was completed (layer_types, Mamba heads, positions) from
    # the config of the H200 run record, so the parser no longer falls back to all-Mamba / 2048;
    # the source's note still says the snapshot is not the live config.json
    spec, _ = load_spec("ibm-granite/granite-4.0-h-small")
    notes = " | ".join(spec.notes)
    assert "near-complete" in notes and "not from the live config.json" in notes
    assert "granite4h-small_eager.json" in notes
    assert "layer_types" not in notes and "2048" not in notes


def test_user_granite_without_layer_types_carries_a_note():
    cfg = _family("granitemoehybrid", "GraniteMoeHybridForCausalLM", mamba_n_heads=8, mamba_d_head=64)
    spec = parse_config(cfg, "m")
    assert all(k.value == "mamba" for k in spec.layer_kinds)
    assert any("layer_types" in n for n in spec.notes)


def test_missing_max_position_embeddings_carries_a_note():
    cfg = {k: v for k, v in LLAMA.items() if k != "max_position_embeddings"}
    spec = parse_config(cfg, "m")
    assert spec.derived_max_model_len == 2048  # transformers' LlamaConfig default, as vLLM sees it
    assert any("max_position_embeddings" in n and "2048" in n for n in spec.notes)


def test_no_position_key_at_all_carries_a_note():
    cfg = _family("phi3", "Phi3ForCausalLM")
    del cfg["max_position_embeddings"]
    spec = parse_config(cfg, "m")
    assert spec.derived_max_model_len == 2048  # vLLM 0.26.0's fallback
    assert any("max_position_embeddings" in n for n in spec.notes)


def test_complete_config_has_no_notes():
    assert parse_config(LLAMA, "m").notes == ()


def test_gemma3_minimal_on_disk_form_is_not_flagged():
    # Gemma-3's real config.json omits max_position_embeddings; transformers' default is the rule.
    spec, _ = load_spec("google/gemma-3-27b-it")
    assert spec.notes == ()


def test_complete_bundled_specs_carry_no_notes():
    from kvplan.sources.bundled import bundled_ids, find_bundled

    noisy = {}
    for repo in bundled_ids():
        src = find_bundled(repo)
        if not str(src.provenance.get("status") or "").startswith("complete"):
            continue
        spec, _ = load_spec(repo)
        if spec.notes:
            noisy[repo] = spec.notes
    assert noisy == {}


# -- unknown quant_method / architecture ------------------------------------------------


def test_unknown_quant_method_is_not_silently_unquantized():
    spec = parse_config({**LLAMA, "quantization_config": {"quant_method": "magic", "bits": 4}}, "m")
    assert spec.quantization is not None and spec.quantization.method == "magic"
    note = " ".join(spec.notes)
    assert "'magic'" in note and "unquantized" in note


def test_known_quant_method_has_no_note():
    spec = parse_config({**LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, "m")
    assert spec.notes == ()


def test_unknown_architecture_is_estimated_approximately():
    cfg = {**LLAMA, "architectures": ["FooForCausalLM"], "model_type": "foo"}
    spec = parse_config(cfg, "m")
    assert spec.num_hidden_layers == 2  # generic shape still read
    assert not spec.exact
    reasons = " ".join(a.reason for a in spec.approximations)
    assert "FooForCausalLM" in reasons and "'foo'" in reasons


def test_unregistered_generative_architecture_of_a_known_model_type_is_approximate():
    # A generative name kvplan has no registry line for: the model type's rules, not exact.
    spec = parse_config({**LLAMA, "architectures": ["LlamaForCausalLMPlus"]}, "m")
    assert not spec.exact
    assert any("LlamaForCausalLMPlus" in a.reason for a in spec.approximations)


def test_classification_head_of_a_known_model_type_is_refused():
    # vLLM 0.26.0 config/model.py _SUFFIX_TO_DEFAULTS: *ForSequenceClassification runs as a pooling
    # model, which keeps no KV cache for generation (issue 12, "no silent guess").
    with pytest.raises(KvplanError, match="'LlamaForSequenceClassification'.*only as a pooling/encoder model"):
        parse_config({**LLAMA, "architectures": ["LlamaForSequenceClassification"]}, "m")


def test_unknown_architecture_through_cli_still_estimates(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "architectures": ["FooForCausalLM"], "model_type": "foo"})
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert json.loads(out)["model"]["num_hidden_layers"] == 2


# -- keys of a nested text_config -------------------------------------------------------------


def test_keys_inside_text_config_are_named_with_their_prefix():
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {**{k: v for k, v in LLAMA.items() if k != "architectures"}, "model_type": "gemma3_text",
                        "num_hidden_layers": "x"},
    }
    assert "'text_config.num_hidden_layers'" in parse_error(cfg)
