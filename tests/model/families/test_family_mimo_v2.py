"""MiMo-V2-Flash (kvplan/model/families/mimo_v2.py: full and sliding layers with their own KV
heads and K/V head sizes) on the real config (tests/data/model_configs/XiaomiMiMo__MiMo-V2-Flash.json,
with its source). Expected numbers are hand arithmetic from the config and vLLM 0.26.0's
mimo_v2.py / kv_cache_interface.py, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.allocator import build_layout
from kvplan.engines.vllm.v0_26.kv_spec import attention_per_token_bytes, layer_cache_specs
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

DATA = Path(__file__).parents[2] / "data"
NAME = "XiaomiMiMo__MiMo-V2-Flash"
CONFIG = json.loads((DATA / "model_configs" / f"{NAME}.json").read_text())["config"]
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"][f"model_configs/{NAME}.json"]
FULL = (0, 5, 11, 17, 23, 29, 35, 41, 47)  # the 0 entries of hybrid_layer_pattern


def _spec(cfg=CONFIG):
    return parse_config(cfg, NAME, vllm_version="0.26.0")


def test_layer_kinds_and_per_layer_shapes():
    spec = _spec()
    assert spec.layer_kinds == tuple(LayerKind.FULL if i in FULL else LayerKind.SLIDING for i in range(48))
    assert spec.sliding_window == 128  # sliding_window_size, not transformers' sliding_window + 1
    full, swa = spec.attention_of(0), spec.attention_of(1)
    assert (full.num_attention_heads, full.num_key_value_heads, full.head_dim, full.head_dim_v) == (64, 4, 192, 128)
    assert (swa.num_attention_heads, swa.num_key_value_heads, swa.head_dim, swa.head_dim_v) == (64, 8, 192, 128)
    assert spec.attention == full and spec.per_layer_attention
    assert spec.moe_layers == (False,) + (True,) * 47 and spec.moe.num_experts == 256 and spec.moe.top_k == 8
    assert spec.moe.shared_intermediate_size == 0 and spec.moe.router_bias
    assert spec.rope_caches == 2 and spec.rotary_dim == 64  # thetas 5e6 / 1e4; int(192 x 0.334)
    assert spec.sink_layers == tuple(i not in FULL for i in range(48))
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_kv_bytes_per_token_and_pages_by_hand():
    spec = _spec()
    # full: 4 KV heads x (192 + 128) x 2 B = 2,560 B; sliding: 8 x 320 x 2 = 5,120 B
    assert attention_per_token_bytes(spec, 1, 2, layer=0) == 2560
    assert attention_per_token_bytes(spec, 1, 2, layer=1) == 5120
    # TP 8: 4 heads -> 1 per rank (replicated past 4), 8 -> 1
    assert attention_per_token_bytes(spec, 8, 2, layer=0) == attention_per_token_bytes(spec, 8, 2, layer=1) == 640
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    assert block == 16 and len(specs) == 48
    assert {s.page_size_bytes for s, i in zip(specs, range(48)) if i in FULL} == {16 * 2560}
    assert {s.page_size_bytes for s, i in zip(specs, range(48)) if i not in FULL} == {16 * 5120}
    layout = build_layout(specs)
    # pages unified to the sliding page (81,920 B): full blocks grow to 32 tokens; groups of 9
    # layers (39 sliding -> 5 groups, 9 full -> 1); a block id costs 9 x 81,920 B
    assert layout.group_size == 9 and layout.bytes_per_block == 9 * 81920
    assert sorted((g.kind, g.block_size, g.num_layers) for g in layout.groups) == (
        [("full", 32, 9)] + [("sliding", 16, 7)] + [("sliding", 16, 8)] * 4)


def test_weights_by_hand_and_vs_the_meta_device_count():
    h, vocab = 4096, 152576
    full = h * (64 * 192 + 4 * 192 + 4 * 128) + 64 * 128 * h  # qkv (V rows of 128), o
    swa = h * (64 * 192 + 8 * 192 + 8 * 128) + 64 * 128 * h + 64  # + one sink per query head
    dense = 3 * h * 16384
    moe = 256 * 3 * h * 2048 + 256 * h + 256  # experts, router, correction bias
    total = 9 * full + 39 * swa + dense + 47 * moe + 97 * h + 2 * vocab * h  # 2 norms/layer + final; untied
    assert total == ORACLE["text_total"] + ORACLE["checkpoint_buffers"]["e_score_correction_bias"] == 308_778_780_864


def test_missing_pattern_and_bad_lists_are_refused():
    cfg = {k: v for k, v in CONFIG.items() if k != "hybrid_layer_pattern"}
    with pytest.raises(KvplanError) as exc:
        _spec(cfg)
    assert "'hybrid_layer_pattern'" in exc.value.message
    with pytest.raises(KvplanError) as exc:
        _spec(dict(CONFIG, moe_layer_freq=[1] * 47))
    assert "'moe_layer_freq'" in exc.value.message and "48" in exc.value.message
    assert not _spec(dict(CONFIG, moe_layer_freq=1)).is_moe  # an int: vLLM's is_moe_layer is False


def _estimate(tmp_path, *extra):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "4096",
                             "--tensor-parallel-size", "4", "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_estimate_end_to_end(tmp_path):
    d = _estimate(tmp_path, "--vllm-version", "0.26.0")
    assert d["exact"] is False and any("MiMo-V2-Flash" in str(a) for a in d["approximate"])
    # TP 4: full 1 KV head x 320 x 2 = 640 B, sliding 2 x 640 = 1,280 B per token
    assert d["kv_cache"]["bytes_per_token"] == 9 * 640 + 39 * 1280
    assert d["kv_cache"]["bytes_per_block"] == 9 * 16 * 1280


def test_kv_cache_dtype_ignored_on_0_26_but_not_0_33(tmp_path):
    d = _estimate(tmp_path, "--vllm-version", "0.26.0", "--kv-cache-dtype", "fp8")
    assert d["kv_cache"]["bytes_per_token"] == 9 * 640 + 39 * 1280  # still bf16: no cache_config in 0.26.0
    assert any("keeps the model dtype" in w for w in d["warnings"])
    d = _estimate(tmp_path, "--vllm-version", "0.33.0", "--kv-cache-dtype", "fp8")
    assert d["kv_cache"]["bytes_per_token"] == (9 * 640 + 39 * 1280) // 2


def test_unknown_key_value_is_exit_2(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(CONFIG, hybrid_layer_pattern=[2] * 48)))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0"))
    assert "'hybrid_layer_pattern'" in line
