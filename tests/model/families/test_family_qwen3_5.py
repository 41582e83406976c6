"""Qwen3.5-MoE (kvplan/model/families/qwen3_5.py: Gated DeltaNet + gated full attention + MoE,
multimodal) on its real config and its real vLLM 0.26.0 start with --limit-mm-per-prompt
'{"image": 0, "video": 0}' (tests/data/vllm-0.26.0-h200/families/qwen3.5-35b-a3b_eager.log)."""

from __future__ import annotations

import json

from family_starts import pct, replay_at, start

from kvplan.engines.vllm.v0_26.kv_spec import layer_cache_specs, mamba_state_bytes, ssm_state_dtype_bytes
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

START = start("qwen3.5-35b-a3b_eager")


def test_layer_kinds_moe_and_state_dtype():
    spec = START.spec()
    assert spec.exact and spec.model_type == "qwen3_5_moe_text"
    # every 4th layer full attention, the rest Gated DeltaNet (the config's layer_types)
    assert spec.layer_kinds == ((LayerKind.LINEAR,) * 3 + (LayerKind.FULL,)) * 10
    assert spec.moe.num_experts == 256 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 512
    assert spec.moe.shared_intermediate_size == 512 and spec.moe.shared_expert_gate
    assert spec.moe_layers == (True,) * 40
    assert spec.attn_output_gate and spec.qk_norm
    assert spec.rotary_dim == 64  # head_dim 256 x rope_parameters.partial_rotary_factor 0.25
    assert spec.ssm_state_dtype == "float32"  # text_config.mamba_ssm_dtype


def test_recurrent_state_and_attention_page_by_hand():
    spec = START.spec()
    # conv state: (2 x 16 key heads x 128 + 32 value heads x 128) channels x (kernel 4 - 1) x 2 B (bf16)
    conv = (2 * 16 * 128 + 32 * 128) * 3 * 2
    # recurrent state: 32 value heads x 128 x 128 in float32 (mamba_ssm_dtype), 4 B
    temporal = 32 * 128 * 128 * 4
    assert ssm_state_dtype_bytes(spec, 2) == 4
    assert mamba_state_bytes(spec, 1, 2, ssm_dtype_bytes=4) == conv + temporal == 2_146_304
    # attention: 2 KV heads x head_dim 256 x K and V x 2 B = 2,048 B per token; the hybrid block
    # is the smallest multiple of 16 tokens whose page holds one state: 16 x ceil(2,146,304 / 32,768)
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2,
                                     model_dtype_bytes=2)
    assert block == 16 * 66 == 1056
    assert {s.page_size_bytes for s in specs} == {1056 * 2048} == {2_162_688}
    # vLLM's own groups (KVPLAN_EXACT): the same block and page
    groups = START.exact["kv_cache_layout"]["groups"]
    assert {g["page_size_bytes"] for g in groups} == {2_162_688} and groups[-1]["block_size"] == 1056


def test_without_the_config_dtype_the_state_is_bf16():
    cfg = json.loads(json.dumps(START.config))
    del cfg["text_config"]["mamba_ssm_dtype"]
    spec = parse_config(cfg, "no-ssm-dtype")
    assert spec.ssm_state_dtype is None and ssm_state_dtype_bytes(spec, 2) == 2


def test_bad_ssm_dtype_names_the_key():
    cfg = json.loads(json.dumps(START.config))
    cfg["text_config"]["mamba_ssm_dtype"] = "float64"
    try:
        parse_config(cfg, "bad")
    except Exception as exc:  # KvplanError
        assert "text_config.mamba_ssm_dtype" in str(exc)
    else:
        raise AssertionError("float64 accepted")


def test_real_start_replays_exactly():
    out = replay_at(START, "0.26.0")
    assert START.num_gpu_blocks == 2_937
    assert out["predicted"]["num_gpu_blocks"] == START.num_gpu_blocks
    assert out["predicted"]["block_size"] == 1056
    # weights: vLLM's 69,455,494,144 B within 51,200 B (MRoPE's 4x cos/sin cache included)
    assert abs(out["predicted"]["weights_bytes"] - START.exact["weights"]) < 100_000
    assert abs(pct(out["predicted"]["activation_peak_bytes"], START.exact["peak_activation"])) < 0.05
