"""Falcon-H1 (kvplan/model/families/falcon_h1.py: attention and a Mamba-2 mixer in parallel in
every layer) on two real configs (tests/data/model_configs/, with their sources): Falcon-H1-7B
and Falcon-H1-Tiny-90M. Expected numbers are hand arithmetic from the config and vLLM 0.26.0's
falcon_h1.py / mamba_utils.py mamba2_state_shape, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.kv_spec import (
    FullAttentionSpec,
    MambaSpec,
    attention_per_token_bytes,
    layer_cache_specs,
    mamba_state_bytes,
)
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

DATA = Path(__file__).parents[2] / "data"
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"]
SEVEN = "tiiuae__Falcon-H1-7B-Instruct"
TINY = "tiiuae__Falcon-H1-Tiny-90M-Instruct"


def _config(name: str) -> dict:
    return json.loads((DATA / "model_configs" / f"{name}.json").read_text())["config"]


def _spec(name: str):
    return parse_config(_config(name), name, vllm_version="0.26.0")


def test_every_layer_attends_with_a_mamba_mixer_beside_it():
    spec = _spec(SEVEN)
    assert spec.layer_kinds == (LayerKind.FULL,) * 44 and spec.parallel_mamba and spec.is_hybrid
    m = spec.mamba
    assert (m.version, m.intermediate_size, m.num_heads, m.head_dim, m.n_groups, m.state_size, m.conv_kernel) == (
        2, 3072, 24, 128, 1, 256, 4)
    assert not m.gated_norm_weight  # mamba_rms_norm absent: FalconH1Config default False
    assert (spec.attention.num_key_value_heads, spec.attention.head_dim) == (2, 128)
    assert spec.norms_per_layer == 2 and spec.gated_mlp and not spec.qkv_bias


def test_approximate_only_for_the_parallel_activation():
    spec = _spec(SEVEN)
    assert not spec.exact
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]
    assert "activation" in spec.approximations[0].reason


def test_kv_and_state_bytes_by_hand():
    spec = _spec(SEVEN)
    # K + V: 2 KV heads x 128 x 2 x 2 B = 1,024 B per token per layer; 44 layers attend
    assert attention_per_token_bytes(spec, 1, 2) == 1024
    # conv (3072 + 2 x 1 group x 256) x (4 - 1) x 2 B + SSM 24 heads x 128 x 256 x 2 B
    assert mamba_state_bytes(spec, 1, 2) == 3584 * 3 * 2 + 24 * 128 * 256 * 2 == 1_594_368
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    # hybrid alignment: 16 x ceil(1,594,368 / (16 x 1,024)) = 16 x 98 = 1,568 tokens
    assert block == 1568
    # two cache layers per decoder layer: 44 attention + 44 Mamba, one page size 1,568 x 1,024
    assert sum(isinstance(s, FullAttentionSpec) for s in specs) == 44
    assert sum(isinstance(s, MambaSpec) for s in specs) == 44
    assert {s.page_size_bytes for s in specs} == {1568 * 1024}


def test_tp2_state_by_hand():
    spec = _spec(SEVEN)
    # TP 2: 1 group is replicated to 2 (mamba_utils extra_groups_for_head_shards);
    # conv (3072 + 2 x 2 x 256) / 2 x 3 x 2 B + SSM 12 heads x 128 x 256 x 2 B
    assert mamba_state_bytes(spec, 2, 2) == 2048 * 3 * 2 + 12 * 128 * 256 * 2 == 798_720


@pytest.mark.parametrize(("name", "params"), [(SEVEN, 7_585_513_568), (TINY, 91_131_072)])
def test_weights_match_the_meta_device_count(name, params):
    assert ORACLE[f"model_configs/{name}.json"]["text_total"] == params


def test_tiny_weights_by_hand():
    c = _config(TINY)
    h, n, inter, vocab = 512, 24, 768, 32768
    attn = h * (8 * 64 + 2 * 2 * 64) + 8 * 64 * h  # qkv, o (no biases)
    # Mamba-2: in_proj h -> 2 x 768 + 2 x 1 x 64 + 24 heads; conv (768 + 128) x 4 + bias; A, D, dt_bias;
    # out_proj; no gated-norm weight (mamba_rms_norm false)
    mamba = h * (2 * 768 + 2 * 64 + 24) + (768 + 128) * 4 + (768 + 128) + 3 * 24 + 768 * h
    mlp = h * 2 * inter + inter * h
    per_layer = attn + mamba + mlp + 2 * h
    total = n * per_layer + vocab * h + h  # tied embedding, final norm
    assert c["tie_word_embeddings"] and total == 91_131_072


def test_estimate_end_to_end(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(_config(SEVEN)))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "32768",
                             "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is False and any("Falcon-H1" in str(a) for a in d["approximate"])
    kv = d["kv_cache"]
    assert kv["bytes_per_token"] == 44 * 1024 and kv["block_size"] == 1568
    # one pool shared by the two groups: a block is 44 tensors of one page
    assert kv["num_gpu_blocks"] == d["memory"]["kv_cache_bytes"] // (44 * 1568 * 1024)
    # a 32,768-token request: ceil(32768 / 1568) = 21 attention blocks + 1 state block
    assert kv["max_concurrency"] == round(kv["num_gpu_blocks"] / 22, 2)  # reported to 2 decimals


def test_heads_must_cover_the_mamba_width(tmp_path):
    cfg = dict(_config(SEVEN), mamba_n_heads=20)
    with pytest.raises(KvplanError) as exc:
        parse_config(cfg, "falcon-h1")
    assert "'mamba_n_heads'" in exc.value.message and "20 x 128" in exc.value.message
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert "mamba_n_heads" in error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200"))
