"""What kvplan reads from a local checkpoint's safetensors files: malformed or hostile headers end
in ONE line naming the file (exit 2, no traceback); an incomplete checkpoint is ignored with a note
in ``ModelSpec.notes`` and the formula sizes the weights; hf_quant_config.json is read. Expected
values are written by hand; nothing here touches the network.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from helpers import run_cli
from model_files import EMBED, FULL_LLAMA_ELEMENTS, HEAD, _llama_layer, header_bytes, model_dir, one_error, write_safetensors

from kvplan.sources import load_spec, resolve_model


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
