"""Zamba2 (kvplan/model/families/zamba2.py: a Mamba-2 backbone with shared transformer blocks)
on the Zamba2-7B config as first released (tests/data/model_configs/Zyphra__Zamba2-7B.json, with
its source; transformers 5.x reads it with its own defaults for the renamed keys). Expected numbers
are hand arithmetic from the config, transformers' Zamba2Config derivations and vLLM 0.26.0's
zamba2.py / mamba_utils.py mamba2_state_shape, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.allocator import build_layout
from kvplan.engines.vllm.v0_26.kv_spec import attention_per_token_bytes, layer_cache_specs, mamba_state_bytes
from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

DATA = Path(__file__).parents[2] / "data"
NAME = "Zyphra__Zamba2-7B"
CONFIG = json.loads((DATA / "model_configs" / f"{NAME}.json").read_text())["config"]
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"][f"model_configs/{NAME}.json"]
HYBRID = (6, 11, 17, 23, 29, 35, 41, 47, 53, 59, 65, 71, 77)


def _spec(cfg=CONFIG):
    return parse_config(cfg, NAME, vllm_version="0.26.0")


def test_layer_kinds_and_shapes():
    spec = _spec()
    assert spec.layer_kinds == tuple(LayerKind.FULL if i in HYBRID else LayerKind.MAMBA for i in range(81))
    assert spec.parallel_mamba and spec.shared_blocks.num_blocks == 2 and spec.shared_blocks.input_size == 7168
    a = spec.attention  # multi-head, head size 2 x 3584 / 32 = 224 (transformers derives it)
    assert (a.num_attention_heads, a.num_key_value_heads, a.head_dim) == (32, 32, 224)
    m = spec.mamba  # n_mamba_heads is not in this config: the default 8 heads of 7168 / 8
    assert (m.intermediate_size, m.num_heads, m.head_dim, m.n_groups, m.state_size, m.conv_kernel) == (
        7168, 8, 896, 2, 64, 4)
    assert spec.intermediate_size == 4 * 3584 and spec.tie_word_embeddings and spec.rotary_dim == 224
    assert [x.kind for x in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_kv_and_state_bytes_by_hand():
    spec = _spec()
    # each hybrid layer's own KV: 32 heads x (224 + 224) x 2 B = 28,672 B per token
    assert attention_per_token_bytes(spec, 1, 2) == 28672
    # conv (7168 + 2 x 2 x 64 channels) x 3 taps x 2 B + SSM 8 heads x 896 x 64 x 2 B
    assert mamba_state_bytes(spec, 1, 2) == 7424 * 3 * 2 + 8 * 896 * 64 * 2 == 962_048
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    # 81 states (one per layer: 68 Mamba layers + the 13 hybrid layers' mixers) and 13 KV layers;
    # a page must hold a state: 16 x ceil(962,048 / (16 x 28,672)) = 48 tokens
    assert block == 48 and len(specs) == 81 + 13
    layout = build_layout(specs)
    assert layout.group_size == 13 and layout.bytes_per_block == 13 * 48 * 28672


def test_weights_by_hand_and_vs_the_meta_device_count():
    h, vocab, inter, r, d_in = 3584, 32000, 14336, 128, 7168
    conv = d_in + 2 * 2 * 64
    mixer = h * (2 * d_in + 2 * 2 * 64 + 8) + conv * 4 + conv + 3 * 8 + d_in + d_in * h  # in/conv/A,D,dt/norm/out
    block = 7168 * 3 * 7168 + 7168 * h + 3 * h * inter + 7168 + h  # qkv, o, MLP, two norms
    use = h * h + h * r + r * 2 * inter  # the hybrid linear and the MLP's LoRA adapter
    total = 81 * (mixer + h) + 2 * block + 13 * use + vocab * h + h  # tied embedding, final norm
    assert total == ORACLE["text_total"] == 7_326_532_760
    parts = weight_bytes_per_rank(_spec(), tensor_parallel_size=1, dtype_bytes=2).parts
    assert parts["shared_blocks"] == 2 * block * 2 and parts["hybrid_linear"] == 13 * h * h * 2


def test_estimate_end_to_end(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "4096",
                             "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is False and any("Zamba2" in str(a) for a in d["approximate"])
    assert d["kv_cache"]["bytes_per_token"] == 13 * 28672 and d["kv_cache"]["block_size"] == 48


def test_unknown_block_type_and_missing_pattern_are_exit_2(tmp_path):
    types = list(CONFIG["layers_block_type"])
    types[0] = "attention"
    (tmp_path / "config.json").write_text(json.dumps(dict(CONFIG, layers_block_type=types)))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0"))
    assert "'layers_block_type[0]'" in line and "'attention'" in line
    cfg = {k: v for k, v in CONFIG.items() if k != "layers_block_type"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0"))
    assert "'layers_block_type'" in line and "54 layers" in line
