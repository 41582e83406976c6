"""LFM2-MoE (kvplan/model/families/lfm2.py Lfm2Moe: LFM2's short-conv / attention layers plus a
MoE) on the LFM2-8B-A1B config (tests/data/model_configs/LiquidAI__LFM2-8B-A1B.json, partial, with
its source). Expected numbers are hand arithmetic from the config and vLLM 0.26.0's lfm2_moe.py /
short_conv.py / mamba_utils.py short_conv_state_shape, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.kv_spec import attention_per_token_bytes, layer_cache_specs, mamba_state_bytes
from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

DATA = Path(__file__).parents[2] / "data"
NAME = "LiquidAI__LFM2-8B-A1B"
CONFIG = json.loads((DATA / "model_configs" / f"{NAME}.json").read_text())["config"]
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"][f"model_configs/{NAME}.json"]
ATTN = (2, 6, 10, 14, 18, 21)


def _spec(cfg=CONFIG):
    return parse_config(cfg, NAME, vllm_version="0.26.0")


def test_layer_kinds_and_moe_layout():
    spec = _spec()
    assert spec.layer_kinds == tuple(LayerKind.FULL if i in ATTN else LayerKind.MAMBA for i in range(24))
    assert spec.moe_layers == (False, False) + (True,) * 22  # num_dense_layers 2
    assert spec.intermediate_size == 7168  # as given: no LFM2 width adjustment
    assert spec.moe.num_experts == 32 and spec.moe.top_k == 4 and spec.moe.moe_intermediate_size == 1792
    assert spec.moe.router_bias and spec.tie_word_embeddings and spec.short_conv.conv_kernel == 3
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_vllm_ties_the_lm_head_whatever_the_config_says():
    assert _spec(dict(CONFIG, tie_word_embeddings=False)).tie_word_embeddings


def test_state_and_kv_bytes_by_hand():
    spec = _spec()
    # K + V: 8 KV heads x 64 x 2 x 2 B = 2,048 B per token in each of the 6 attention layers
    assert attention_per_token_bytes(spec, 1, 2) == 2048
    # conv state: 2048 channels x (3 - 1) taps x 2 B
    assert mamba_state_bytes(spec, 1, 2) == 8192
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    assert block == 16 and len(specs) == 24 and {s.page_size_bytes for s in specs} == {16 * 2048}


def test_weights_by_hand_and_vs_the_meta_device_count():
    h, vocab = 2048, 65536
    attn = h * (32 * 64 + 2 * 8 * 64) + 32 * 64 * h + 2 * 64  # qkv, out_proj, q/k per-head norms
    conv = h * 3 * h + 3 * h + h * h  # in_proj, depthwise conv (2048 x 3), out_proj
    dense = 3 * h * 7168
    moe = 32 * 3 * h * 1792 + 32 * h + 32  # experts, router, correction bias
    total = 6 * attn + 18 * conv + 2 * dense + 22 * moe + 24 * 2 * h + h + vocab * h  # tied; embedding_norm
    assert total == ORACLE["text_total"] + ORACLE["checkpoint_buffers"]["expert_bias"] == 8_339_930_560
    parts = weight_bytes_per_rank(_spec(), tensor_parallel_size=1, dtype_bytes=2).parts
    assert parts["router"] == 22 * (h * 32 * 2 + 32 * 4)  # the correction bias is fp32


def test_estimate_end_to_end(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "32768",
                             "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is False and any("LFM2-MoE" in str(a) for a in d["approximate"])
    assert d["kv_cache"]["bytes_per_token"] == 6 * 2048 and d["kv_cache"]["block_size"] == 16


@pytest.mark.parametrize("value", ["mamba", "sliding_attention"])
def test_unknown_layer_type_is_exit_2(tmp_path, value):
    types = list(CONFIG["layer_types"])
    types[3] = value
    (tmp_path / "config.json").write_text(json.dumps(dict(CONFIG, layer_types=types)))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0"))
    assert "'layer_types[3]'" in line and repr(value) in line
