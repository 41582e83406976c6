"""Hostile and incomplete model inputs: bad config keys, implausible headers, missing shapes.

Every bad config/header must end in ONE line naming the file or key (exit 2, no traceback);
every incomplete one must still be planned but carry a note in ``ModelSpec.notes``. Expected
values are written by hand; nothing here touches the network.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from helpers import TINY_LLAMA, run_cli

from kvplan.errors import KvplanError
from kvplan.sources import load_spec, resolve_model
from kvplan.model.parse import parse_config

LLAMA = {**TINY_LLAMA, "tie_word_embeddings": False}

# Every tensor vLLM loads for LLAMA (hand-written from the Llama layout; 2 layers, hidden 256,
# head_dim 64, 2 KV heads -> k/v 128 rows, intermediate 512, vocab 1000).
def _llama_layer(i: int) -> dict[str, tuple[str, list[int]]]:
    p = f"model.layers.{i}."
    return {
        p + "self_attn.q_proj.weight": ("BF16", [256, 256]),
        p + "self_attn.k_proj.weight": ("BF16", [128, 256]),
        p + "self_attn.v_proj.weight": ("BF16", [128, 256]),
        p + "self_attn.o_proj.weight": ("BF16", [256, 256]),
        p + "mlp.gate_proj.weight": ("BF16", [512, 256]),
        p + "mlp.up_proj.weight": ("BF16", [512, 256]),
        p + "mlp.down_proj.weight": ("BF16", [256, 512]),
        p + "input_layernorm.weight": ("BF16", [256]),
        p + "post_attention_layernorm.weight": ("BF16", [256]),
    }


EMBED = {"model.embed_tokens.weight": ("BF16", [1000, 256])}
HEAD = {"model.norm.weight": ("BF16", [256]), "lm_head.weight": ("BF16", [1000, 256])}
# 2 x (256*256*2 + 128*256*2 + 512*256*3 + 256*2) + 1000*256*2 + 256 = 1,631,488 elements
FULL_LLAMA_ELEMENTS = 2 * (131072 + 65536 + 393216 + 512) + 512000 + 256

BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1}


def header_bytes(header: dict) -> bytes:
    raw = json.dumps(header).encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n * BYTES[dtype]]}
        offset += n * BYTES[dtype]
    path.write_bytes(header_bytes(header) + bytes(offset))


def model_dir(tmp_path: Path, config: dict | None = None, name: str = "model") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(LLAMA if config is None else config), encoding="utf-8")
    return d


def one_error(code: int, out: str, err: str) -> str:
    """The single error line of a failed command (exit 2, nothing on stdout, no traceback)."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and out == "", (out, err)
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2, err  # the message (+ a hint line)
    return lines[0]


def parse_error(config: dict) -> str:
    with pytest.raises(KvplanError) as exc:
        parse_config(config, "m")
    msg = exc.value.message
    assert "\n" not in msg
    return msg


# -- item 2: deeply nested JSON ------------------------------------------------------------------


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


def test_deeply_nested_safetensors_header_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    raw = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in line


def test_deeply_nested_index_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors.index.json").write_text("[" * 100_000 + "]" * 100_000)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors.index.json") in line


# -- item 3: counts and sizes are bounded --------------------------------------------------------


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


# -- item 4: every numeric key fails closed ------------------------------------------------------


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


# -- item 16: position limits and rope factors -----------------------------------------------


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


# -- item 9: partial specs carry notes -----------------------------------------------------------


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


# -- item 17: unknown quant_method / architecture ------------------------------------------------


def test_unknown_quant_method_is_not_silently_unquantized():
    spec = parse_config({**LLAMA, "quantization_config": {"quant_method": "magic", "bits": 4}}, "m")
    assert spec.quantization is not None and spec.quantization.method == "magic"
    note = " ".join(spec.notes)
    assert "'magic'" in note and "unquantized" in note


def test_known_quant_method_has_no_note():
    spec = parse_config({**LLAMA, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, "m")
    assert spec.notes == ()


def test_unknown_architecture_is_estimated_with_a_note():
    cfg = {**LLAMA, "architectures": ["FooForCausalLM"], "model_type": "foo"}
    spec = parse_config(cfg, "m")
    assert spec.num_hidden_layers == 2  # generic shape still read
    note = " ".join(spec.notes)
    assert "FooForCausalLM" in note and "'foo'" in note


def test_unknown_architecture_of_a_known_model_type_is_noted():
    spec = parse_config({**LLAMA, "architectures": ["LlamaForSequenceClassification"]}, "m")
    assert any("LlamaForSequenceClassification" in n for n in spec.notes)


def test_unknown_architecture_through_cli_still_estimates(tmp_path):
    d = model_dir(tmp_path, {**LLAMA, "architectures": ["FooForCausalLM"], "model_type": "foo"})
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert json.loads(out)["model"]["num_hidden_layers"] == 2


# -- item 5 / 18: safetensors headers ------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, why",
    [
        ({"dtype": "BF16", "shape": "x", "data_offsets": [0, 2]}, "shape"),
        ({"dtype": "BF16", "shape": [-1, 4], "data_offsets": [0, 8]}, "shape"),
        ({"dtype": "BF16", "shape": [2.5], "data_offsets": [0, 4]}, "shape"),
        ({"dtype": "BF16", "shape": [True], "data_offsets": [0, 2]}, "shape"),
        ({"dtype": "BF16", "shape": [4], "data_offsets": [0, 2]}, "data_offsets"),
        ({"dtype": "BF16", "shape": [4], "data_offsets": "x"}, "data_offsets"),
        ({"dtype": 7, "shape": [4], "data_offsets": [0, 8]}, "dtype"),
        ({"shape": [4], "data_offsets": [0, 8]}, "dtype"),
        ("not-a-mapping", "w"),
    ],
)
def test_malformed_safetensors_header_is_one_line_naming_the_file(tmp_path, entry, why):
    d = model_dir(tmp_path)
    (d / "model.safetensors").write_bytes(header_bytes({"w": entry}) + bytes(16))
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in line and why in line


def test_safetensors_header_that_is_a_list_is_one_line(tmp_path):
    d = model_dir(tmp_path)
    raw = b"[1, 2, 3]"
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in line


def test_huge_declared_header_length_is_refused(tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 2**62) + b"{}")
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in line


def _full_checkpoint() -> dict:
    return {**EMBED, **_llama_layer(0), **_llama_layer(1), **HEAD}


def test_complete_checkpoint_is_trusted(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model.safetensors", _full_checkpoint())
    spec, src = load_spec(str(d))
    assert spec.checkpoint_params == (("BF16", FULL_LLAMA_ELEMENTS),)
    assert spec.checkpoint_bytes == FULL_LLAMA_ELEMENTS * 2
    assert spec.notes == () and spec.checkpoint_tensors_visible


def test_one_shard_without_index_is_ignored_with_a_note(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model-00002-of-00002.safetensors", {**_llama_layer(1), **HEAD})
    spec, src = load_spec(str(d))
    assert spec.checkpoint_params is None and spec.checkpoint_bytes is None
    note = " ".join(spec.notes)
    assert "model-00001-of-00002.safetensors" in note and "formula" in note
    assert spec.checkpoint_tensors_visible  # the tensors vLLM would see are there, just not all


def test_missing_decoder_layers_are_ignored_with_a_note(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model.safetensors", {**EMBED, **_llama_layer(0), **HEAD})  # layer 1 missing
    spec, _ = load_spec(str(d))
    assert spec.checkpoint_params is None
    assert any("1 of 2 decoder layers" in n for n in spec.notes), spec.notes


def test_index_naming_tensors_the_shards_lack_is_ignored_with_a_note(tmp_path):
    d = model_dir(tmp_path)
    tensors = _full_checkpoint()
    write_safetensors(d / "model-00001-of-00001.safetensors", {k: v for k, v in tensors.items() if k != "lm_head.weight"})
    weight_map = {name: "model-00001-of-00001.safetensors" for name in tensors}
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    spec, _ = load_spec(str(d))
    assert spec.checkpoint_params is None
    assert any("lm_head.weight" in n for n in spec.notes), spec.notes


def test_checkpoint_far_below_the_formula_is_ignored_with_a_note(tmp_path):
    # Every layer is present by name, but the tensors are stubs: 2 x 9 + 3 one-element tensors.
    d = model_dir(tmp_path)
    write_safetensors(d / "model.safetensors", {name: ("BF16", [1]) for name in _full_checkpoint()})
    spec, _ = load_spec(str(d))
    assert spec.checkpoint_params is None and spec.checkpoint_bytes is None
    assert any("formula" in n for n in spec.notes), spec.notes


def test_incomplete_checkpoint_through_cli_uses_the_formula(tmp_path):
    full = model_dir(tmp_path, name="full")
    write_safetensors(full / "model.safetensors", _full_checkpoint())
    cfg_only = model_dir(tmp_path, name="cfg")
    part = model_dir(tmp_path, name="part")
    write_safetensors(part / "model-00002-of-00002.safetensors", {**_llama_layer(1), **HEAD})

    def weights(d: Path) -> int:
        code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json")
        assert code in (0, 1), err
        return json.loads(out)["memory"]["weights_bytes"]

    assert weights(part) == weights(cfg_only)


# -- item 8: whether tensors were visible is recorded --------------------------------------------


def test_tensor_visibility_is_recorded_per_source(tmp_path):
    cfg_only = model_dir(tmp_path, name="cfg")
    src = resolve_model(str(cfg_only))
    assert src.tensors_visible is False and "no safetensors" in src.provenance["tensors"]
    assert load_spec(str(cfg_only))[0].checkpoint_tensors_visible is False

    src = resolve_model(str(cfg_only / "config.json"))
    assert src.tensors_visible is False

    with_st = model_dir(tmp_path, name="st")
    write_safetensors(with_st / "model.safetensors", _full_checkpoint())
    src = resolve_model(str(with_st))
    assert src.tensors_visible is True

    bundled = resolve_model("TheBloke/Llama-2-7B-GPTQ")
    assert bundled.tensors_visible is None and "bundled" in bundled.provenance["tensors"]
    assert load_spec("TheBloke/Llama-2-7B-GPTQ")[0].checkpoint_tensors_visible is True


# -- local hf_quant_config.json (ModelOpt): read beside config.json as vLLM does -----------------


def test_local_hf_quant_config_is_read(tmp_path):
    d = model_dir(tmp_path)
    (d / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}))
    spec, _ = load_spec(str(d))
    assert spec.quantization is not None and spec.quantization.method == "fp8" and spec.quantization.kv_cache_fp8


def test_nested_hf_quant_config_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    (d / "hf_quant_config.json").write_text("[" * 100_000 + "]" * 100_000)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "hf_quant_config.json") in line


def test_keys_inside_text_config_are_named_with_their_prefix():
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {**{k: v for k, v in LLAMA.items() if k != "architectures"}, "model_type": "gemma3_text",
                        "num_hidden_layers": "x"},
    }
    assert "'text_config.num_hidden_layers'" in parse_error(cfg)
