"""LFM2 (kvplan/model/families/lfm2.py: short-convolution + attention layers) on the real
LFM2-1.2B config (tests/data/model_configs/LiquidAI__LFM2-1.2B.json, with its source). Expected
numbers are hand arithmetic from the config and vLLM 0.26.0's lfm2.py / short_conv.py /
mamba_utils.py short_conv_state_shape, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.kv_spec import attention_per_token_bytes, layer_cache_specs, mamba_state_bytes
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

DATA = Path(__file__).parents[2] / "data"
NAME = "LiquidAI__LFM2-1.2B"
CONFIG = json.loads((DATA / "model_configs" / f"{NAME}.json").read_text())["config"]
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"][f"model_configs/{NAME}.json"]
ATTN = (2, 5, 8, 10, 12, 14)


def _spec(cfg=CONFIG):
    return parse_config(cfg, NAME, vllm_version="0.26.0")


def test_layer_kinds_from_full_attn_idxs():
    spec = _spec()
    assert spec.layer_kinds == tuple(LayerKind.FULL if i in ATTN else LayerKind.MAMBA for i in range(16))
    assert spec.short_conv.conv_dim == 2048 and spec.short_conv.conv_kernel == 3 and not spec.short_conv.bias
    assert spec.mamba is None and spec.qk_norm and spec.tie_word_embeddings
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_layer_types_list_wins_and_unknown_values_are_refused():
    types = ["conv" if i not in ATTN else "full_attention" for i in range(16)]
    cfg = {k: v for k, v in CONFIG.items() if k != "full_attn_idxs"}
    assert _spec(dict(cfg, layer_types=types)).layer_kinds == _spec().layer_kinds
    with pytest.raises(KvplanError) as exc:
        _spec(dict(cfg, layer_types=["conv"] * 15 + ["mamba"]))
    assert "'layer_types[15]'" in exc.value.message and "'mamba'" in exc.value.message


def test_mlp_width_as_vllm_adjusts_it():
    # block_ff_dim 12288 (what Lfm2Config reads): int(2 x 12288 / 3) = 8192, x 1.0, already a multiple of 256
    assert _spec().intermediate_size == 8192
    assert _spec(dict(CONFIG, block_ff_dim=10000)).intermediate_size == 6912  # int(6666.67) = 6666 -> up to 27 x 256
    assert _spec(dict(CONFIG, block_auto_adjust_ff_dim=False)).intermediate_size == 12288


def test_state_and_kv_bytes_by_hand():
    spec = _spec()
    # K + V: 8 KV heads x 64 x 2 x 2 B = 2,048 B per token in each of the 6 attention layers
    assert attention_per_token_bytes(spec, 1, 2) == 2048
    # conv state: 2048 channels x (3 - 1) taps x 2 B; TP 2 halves the channels
    assert mamba_state_bytes(spec, 1, 2) == 2048 * 2 * 2 == 8192
    assert mamba_state_bytes(spec, 2, 2) == 1024 * 2 * 2
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    # one attention page of 16 tokens (32,768 B) already holds the 8,192 B state: no raise
    assert block == 16 and len(specs) == 16 and {s.page_size_bytes for s in specs} == {16 * 2048}


def test_weights_by_hand_and_vs_the_meta_device_count():
    h, vocab, inter = 2048, 65536, 8192
    attn = h * (32 * 64 + 2 * 8 * 64) + 32 * 64 * h + 2 * 64  # qkv, o, q/k per-head norms
    conv = h * 3 * h + 3 * h + h * h  # in_proj, depthwise conv (2048 x 3), out_proj
    common = 3 * h * inter + 2 * h  # SwiGLU (w1, w3, w2) and the two norms
    total = 6 * attn + 10 * conv + 16 * common + vocab * h + h  # tied embedding, embedding_norm
    assert total == ORACLE["text_total"] == 1_170_340_608


def test_estimate_end_to_end(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "32768",
                             "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is False and any("LFM2" in str(a) for a in d["approximate"])
    assert d["kv_cache"]["bytes_per_token"] == 6 * 2048 and d["kv_cache"]["block_size"] == 16


def test_conv_dim_other_than_hidden_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(CONFIG, conv_dim=1024)))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200"))
    assert "'conv_dim' (1024) must equal hidden_size (2048)" in line
