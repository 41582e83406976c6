"""The local-directory source: config.json, hand-written safetensors files, malformed inputs.

Safetensors files are built byte by byte here (8-byte little-endian header length, JSON header,
zero bytes for the data); expected parameter counts are hand arithmetic.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from helpers import TINY_LLAMA, run_cli

from kvplan.errors import KvplanError
from kvplan.sources import resolve_model
from kvplan.sources.local import load_local, params_vllm_loads

TINY = dict(TINY_LLAMA)

ELEMENT_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "F8_E4M3": 1, "U8": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """8-byte little-endian header length + JSON header + zero-filled tensor data."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n * ELEMENT_BYTES[dtype]]}
        offset += n * ELEMENT_BYTES[dtype]
    raw = json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def model_dir(tmp_path: Path, config: dict | None = None) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config or TINY), encoding="utf-8")
    return d


def _one_error(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2, err
    return err


# -- directories that work ----------------------------------------------------------------------


def test_config_only_directory(tmp_path):
    d = model_dir(tmp_path)
    src = load_local(d)
    assert src.origin == "local" and src.config == TINY
    assert src.checkpoint_params is None and src.checkpoint_bytes is None
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert json.loads(out)["model"]["num_hidden_layers"] == 2


def test_config_json_path_directly(tmp_path):
    d = model_dir(tmp_path)
    src = resolve_model(str(d / "config.json"))
    assert src.config == TINY and src.origin == "local"


def test_single_safetensors_file(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(
        d / "model.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [1000, 256]),
            "model.layers.0.self_attn.k_proj.weight": ("BF16", [128, 256]),
            "model.layers.1.self_attn.k_proj.weight": ("BF16", [128, 256]),
            "model.layers.1.post_attention_layernorm.weight": ("F32", [256]),
            "model.layers.2.enorm.weight": ("BF16", [256]),  # MTP layer (index 2 >= 2 layers): not loaded
            "lm_head.weight": ("BF16", [1000, 256]),
        },
    )
    src = load_local(d)
    bf16 = 1000 * 256 + 128 * 256 + 128 * 256 + 1000 * 256  # 577_536
    f32 = 256
    assert src.checkpoint_params == {"BF16": bf16, "F32": f32}
    assert src.checkpoint_bytes == bf16 * 2 + f32 * 4  # 1_156_096
    assert src.provenance["weights_from"] == "safetensors headers (1 file)"


def test_sharded_with_index(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(
        d / "model-00001-of-00002.safetensors",
        {"model.embed_tokens.weight": ("BF16", [1000, 256]), "model.layers.0.mlp.down_proj.weight": ("BF16", [256, 512])},
    )
    write_safetensors(
        d / "model-00002-of-00002.safetensors",
        {
            "model.layers.1.mlp.down_proj.weight": ("F8_E4M3", [256, 512]),
            "model.layers.1.mlp.down_proj.weight_scale": ("F32", [1]),
            "model.norm.weight": ("BF16", [256]),
        },
    )
    # A stray file the index does not name (say a leftover consolidated checkpoint): not counted.
    write_safetensors(d / "consolidated.safetensors", {"tok_embeddings.weight": ("BF16", [1000, 256])})
    weight_map = {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.mlp.down_proj.weight": "model-00001-of-00002.safetensors",
        "model.layers.1.mlp.down_proj.weight": "model-00002-of-00002.safetensors",
        "model.layers.1.mlp.down_proj.weight_scale": "model-00002-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
    }
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    src = load_local(d)
    bf16 = 1000 * 256 + 256 * 512 + 256  # 387_328
    f8 = 256 * 512  # 131_072
    f32 = 1
    assert src.checkpoint_params == {"BF16": bf16, "F8_E4M3": f8, "F32": f32}
    assert src.checkpoint_bytes == bf16 * 2 + f8 * 1 + f32 * 4  # 905_732
    assert src.provenance["weights_from"] == "safetensors headers (2 files)"


def test_shards_without_index_are_all_counted(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "part-a.safetensors", {"model.embed_tokens.weight": ("BF16", [1000, 256])})
    write_safetensors(d / "part-b.safetensors", {"lm_head.weight": ("BF16", [1000, 256])})
    src = load_local(d)
    assert src.checkpoint_params == {"BF16": 1000 * 256 * 2}
    assert src.checkpoint_bytes == 1000 * 256 * 2 * 2


def test_multimodal_keeps_vision_layers_and_drops_extra_text_layers(tmp_path):
    cfg = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "torch_dtype": "bfloat16",
        "text_config": {k: v for k, v in TINY.items() if k not in ("architectures", "torch_dtype")},
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 64, "num_hidden_layers": 8},
    }
    d = model_dir(tmp_path, cfg)
    write_safetensors(
        d / "model.safetensors",
        {
            "language_model.model.layers.0.mlp.up_proj.weight": ("BF16", [512, 256]),
            "language_model.model.layers.1.mlp.up_proj.weight": ("BF16", [512, 256]),
            "language_model.model.layers.5.mlp.up_proj.weight": ("BF16", [512, 256]),  # beyond 2 text layers
            "vision_tower.vision_model.encoder.layers.5.mlp.fc1.weight": ("F32", [64, 256]),  # vision: kept
        },
    )
    src = load_local(d)
    assert src.checkpoint_params == {"BF16": 2 * 512 * 256, "F32": 64 * 256}
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err


def test_tied_embeddings_skip_lm_head(tmp_path):
    d = model_dir(tmp_path, {**TINY, "tie_word_embeddings": True})
    write_safetensors(
        d / "model.safetensors",
        {"model.embed_tokens.weight": ("BF16", [1000, 256]), "lm_head.weight": ("BF16", [1000, 256])},
    )
    assert load_local(d).checkpoint_params == {"BF16": 1000 * 256}


# -- params_vllm_loads on its own ----------------------------------------------------------------


def test_params_vllm_loads_rules():
    tensors = {
        "model.layers.0.w": ("BF16", 10),
        "model.layers.3.w": ("BF16", 100),  # >= 3 layers: MTP layer, dropped
        "mtp.layers.0.w": ("BF16", 1000),  # Qwen3-Next MTP head, dropped
        "model.mtp_layers.0.w": ("BF16", 1000),  # MiMo MTP, dropped
        "vision_model.encoder.layers.30.w": ("F32", 7),  # not a decoder layer: kept
        "packed.w": ("F4", 9),  # 9 four-bit values: 36 bits -> 5 bytes (rounded up)
        "given.w": ("U8", 8, 3),  # explicit bytes win
    }
    params, total = params_vllm_loads(tensors, 3)
    assert params == {"BF16": 10, "F32": 7, "F4": 9, "U8": 8}
    assert total == 10 * 2 + 7 * 4 + 5 + 3  # 56


def test_params_vllm_loads_unknown_dtype_without_bytes():
    with pytest.raises(KvplanError, match="unknown safetensors dtype"):
        params_vllm_loads({"x": ("Q9", 4)}, None)


# -- errors: exit 2 naming the file ---------------------------------------------------------------


@pytest.mark.parametrize(
    "content, expected",
    [
        (b'{"model_type": "llama",\n  "hidden_size": 256,,}', "config.json:2: not valid JSON"),
        (b'{"model_type": "ll\xffama"}', "not UTF-8 text"),
        (b'[{"model_type": "llama"}]', "must hold a JSON object, got a JSON list"),
        (b"", "config.json:1: not valid JSON"),
    ],
    ids=["bad-json", "not-utf8", "json-list", "empty"],
)
def test_malformed_config_json(tmp_path, content, expected):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_bytes(content)
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert expected in err
    assert str(d / "config.json") in err


def test_directory_without_config_json(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "no config.json" in err and str(d) in err


def test_unreadable_safetensors_header_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 12) + b"{not json!!}")
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in err and "unreadable safetensors header" in err


def test_truncated_safetensors_file_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors").write_bytes(b"\x01\x02")
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors") in err


def test_malformed_index_names_the_file(tmp_path):
    d = model_dir(tmp_path)
    (d / "model.safetensors.index.json").write_text('{"weight_map": {')
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(d / "model.safetensors.index.json") in err and "not valid JSON" in err


def test_index_naming_a_missing_shard(tmp_path):
    d = model_dir(tmp_path)
    write_safetensors(d / "model-00001-of-00002.safetensors", {"model.embed_tokens.weight": ("BF16", [1000, 256])})
    weight_map = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    err = _one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "model-00002-of-00002.safetensors" in err and "hint:" in err


# --- odd checkpoints: a dtype safetensors does not have, empty headers, PyTorch .bin files ------


def _raw_safetensors(path: Path, header: dict, data: bytes = b"") -> None:
    raw = json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_safetensors_dtype_that_safetensors_does_not_have_is_refused(tmp_path):
    # "Q4_K" is a GGUF quantization type; safetensors' Dtype enum has no such name, so its
    # loader (and vLLM through it) refuses the header
    d = model_dir(tmp_path)
    _raw_safetensors(d / "model.safetensors", {"w": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}}, b"xx")
    line = _one_error(*run_cli("estimate", str(d), "--gpu", "H100"))
    assert "model.safetensors" in line and "'Q4_K' is not a safetensors dtype" in line


def test_empty_safetensors_header_is_not_reported_as_the_weights_source(tmp_path):
    d = model_dir(tmp_path)
    _raw_safetensors(d / "model.safetensors", {})
    src = load_local(d)
    assert src.checkpoint_bytes is None
    assert "weights_from" not in src.provenance
    assert "no tensors" in src.provenance["weights_note"]


def test_directory_with_only_pytorch_bin_is_loaded_by_vllm_and_sized_from_config(tmp_path):
    # vLLM 0.26.0 default_loader._prepare_weights: *.safetensors, else *.bin, else *.pt
    d = model_dir(tmp_path)
    (d / "pytorch_model.bin").write_bytes(b"\0" * 1000)
    (d / "training_args.bin").write_bytes(b"\0" * 10)  # never a weight file for vLLM
    src = load_local(d)
    assert src.tensors_visible is True
    assert "would load no checkpoint tensors" not in json.dumps(src.provenance)
    assert "pytorch_model.bin: 1,000 bytes" in src.provenance["tensors"]
    assert "training_args.bin" not in src.provenance["tensors"]
    assert "sized from config.json" in src.provenance["weights_note"]
    assert src.checkpoint_bytes is None and src.notes
