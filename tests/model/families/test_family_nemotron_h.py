"""Nemotron-3-Nano (kvplan/model/families/nemotron_h.py: Mamba-2 + attention + MoE blocks from
``hybrid_override_pattern``) on its real config and its real vLLM 0.26.0 start
(tests/data/vllm-0.26.0-h200/families/nemotron3-nano-30b-a3b_eager.log)."""

from __future__ import annotations

import json

import pytest
from family_starts import pct, replay_at, start

from kvplan.engines.vllm.v0_26.kv_spec import layer_cache_specs, mamba_state_bytes, ssm_state_dtype_bytes
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

START = start("nemotron3-nano-30b-a3b_eager")
PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"


def test_blocks_from_the_pattern():
    spec = START.spec()
    assert START.config["hybrid_override_pattern"] == PATTERN and spec.exact
    assert spec.count(LayerKind.MAMBA) == 23 and spec.count(LayerKind.FULL) == 6 and spec.count(LayerKind.NONE) == 23
    assert spec.layer_kinds[5] == LayerKind.FULL and spec.layer_kinds[1] == LayerKind.NONE
    # only the E blocks have a feed-forward (a MoE); M and * blocks have none
    assert spec.moe_layers == tuple(ch == "E" for ch in PATTERN)
    assert spec.ffn_layers == tuple(ch == "E" for ch in PATTERN)
    assert spec.moe.num_experts == 128 and spec.moe.top_k == 6 and not spec.moe.gated
    assert spec.moe.shared_intermediate_size == 3712 and spec.moe.router_bias
    # Mamba-2 width is heads x head_dim (64 x 64), not expand x hidden (5376)
    assert spec.mamba.intermediate_size == 4096 and spec.mamba.n_groups == 8 and spec.mamba.state_size == 128
    assert spec.rotary_dim is None  # NemotronH attention has no RoPE
    assert spec.norms_per_layer == 1


def test_state_page_and_block_by_hand():
    spec = START.spec()
    # conv: (d_inner 4096 + 2 x 8 groups x 128) x (kernel 4 - 1) x 2 B; SSM: 64 heads x 64 x 128 x 4 B
    # (float32: the config's mamba_ssm_cache_dtype, also vLLM 0.26's NemotronH default)
    assert ssm_state_dtype_bytes(spec, 2) == 4
    assert mamba_state_bytes(spec, 1, 2, ssm_dtype_bytes=4) == 6144 * 3 * 2 + 64 * 64 * 128 * 4 == 2_134_016
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    # attention: 2 KV heads x 128 x K and V x 2 B = 1,024 B/token; 16 x ceil(2,134,016 / 16,384) = 2,096
    assert block == 2096 and {s.page_size_bytes for s in specs} == {2096 * 1024} == {2_146_304}
    groups = START.exact["kv_cache_layout"]["groups"]
    assert {g["page_size_bytes"] for g in groups} == {2_146_304} and groups[-1]["block_size"] == 2096


def test_ssm_dtype_defaults_to_float32_without_the_key():
    cfg = {k: v for k, v in START.config.items() if k != "mamba_ssm_cache_dtype"}
    spec = parse_config(cfg, "nemotron")
    assert spec.ssm_state_dtype is None and ssm_state_dtype_bytes(spec, 2) == 4


@pytest.mark.parametrize(("pattern", "what"), [("MEX" + PATTERN[3:], "unknown layer type 'X' at layer 2"),
                                               (PATTERN[:-1], "one character per layer (52), got 51")])
def test_bad_pattern_names_the_key(pattern, what):
    cfg = json.loads(json.dumps(START.config))
    cfg["hybrid_override_pattern"] = pattern
    with pytest.raises(KvplanError) as exc:
        parse_config(cfg, "nemotron")
    assert "hybrid_override_pattern" in exc.value.message and what in exc.value.message


def test_real_start_replays_within_a_fifth_of_a_percent():
    out = replay_at(START, "0.26.0")
    assert START.num_gpu_blocks == 5_548
    # +0.16 %: weights 107,806,976 B (0.17 %) under vLLM's 63,263,696,384 B, not traced to a source line
    assert abs(pct(out["predicted"]["num_gpu_blocks"], START.num_gpu_blocks)) < 0.2
    assert out["predicted"]["block_size"] == 2096 and out["predicted"]["padding_layers"] == 1
    assert abs(pct(out["predicted"]["activation_peak_bytes"], START.exact["peak_activation"])) < 0.05
