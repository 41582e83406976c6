"""Model directories written by hand for tests: a two-layer Llama config.json and safetensors
files byte by byte (8-byte little-endian header length, JSON header, zero-filled data), and the
one-error-line check of a refused command. Shared by tests/model and tests/sources."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from helpers import TINY_LLAMA

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
