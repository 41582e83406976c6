"""Pure state-space models (kvplan/model/families/mamba.py): Mamba (state-spaces/mamba-2.8b-hf),
Falcon-Mamba (tiiuae/falcon-mamba-7b) and Mamba-2 (mistralai/Mamba-Codestral-7B-v0.1), each on its
published config.json (tests/data/model_configs/, with the source of each). Every expected
number below is hand arithmetic from the config and vLLM 0.26.0's mamba.py / mamba2.py and
mamba_utils.py MambaStateShapeCalculator, or the meta-device oracle count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.kv_spec import layer_cache_specs, mamba_state_bytes
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

DATA = Path(__file__).parents[2] / "data"
ORACLE = json.loads((DATA / "meta_param_counts.json").read_text())["models"]


def _config(name: str) -> dict:
    return json.loads((DATA / "model_configs" / f"{name}.json").read_text())["config"]


MAMBA = "state-spaces__mamba-2.8b-hf"
FALCON_MAMBA = "tiiuae__falcon-mamba-7b"
CODESTRAL = "mistralai__Mamba-Codestral-7B-v0.1"


@pytest.mark.parametrize("name", [MAMBA, FALCON_MAMBA, CODESTRAL])
def test_every_layer_is_mamba_and_attention_free(name):
    spec = parse_config(_config(name), name, vllm_version="0.26.0")
    assert spec.layer_kinds == (LayerKind.MAMBA,) * 64
    assert spec.attention_free and spec.exact
    assert spec.ffn_layers == (False,) * 64 and spec.norms_per_layer == 1 and spec.rotary_dim is None


def test_mamba1_shape_and_weights_by_hand():
    spec = parse_config(_config(MAMBA), MAMBA, vllm_version="0.26.0")
    m = spec.mamba
    assert (m.version, m.intermediate_size, m.state_size, m.conv_kernel, m.dt_rank) == (1, 5120, 16, 4, 160)
    assert spec.tie_word_embeddings  # MambaConfig default True (the config does not say)
    # per layer: in_proj 2560 x 2 x 5120, conv 5120 x 4 + bias 5120, x_proj 5120 x (160 + 2 x 16),
    # dt_proj 160 x 5120 + bias 5120, A 5120 x 16, D 5120, out_proj 5120 x 2560, norm 2560
    per_layer = 2560 * 10240 + 5120 * 4 + 5120 + 5120 * 192 + 160 * 5120 + 5120 + 5120 * 16 + 5120 + 5120 * 2560 + 2560
    assert per_layer == 41_244_160
    total = 64 * per_layer + 50280 * 2560 + 2560  # + tied embedding + final norm
    assert total == 2_768_345_600 == ORACLE[f"model_configs/{MAMBA}.json"]["text_total"]


def test_falcon_mamba_norms_have_no_weight_and_intermediate_size_wins():
    spec = parse_config(_config(FALCON_MAMBA), FALCON_MAMBA, vllm_version="0.26.0")
    # config.json: expand 16 but intermediate_size 8192 (the value given replaces expand x hidden)
    assert spec.mamba.intermediate_size == 8192 and spec.mamba.dt_rank == 256
    assert not spec.mamba.use_rms_norm  # falcon_mamba's dt/B/C RMSNorms: rms_norm_has_weight False
    assert not spec.tie_word_embeddings
    assert ORACLE[f"model_configs/{FALCON_MAMBA}.json"]["text_total"] == 7_272_665_088


def test_state_bytes_by_hand():
    # Mamba-1: conv d_inner x (kernel - 1), SSM d_inner x state, both bf16
    m1 = parse_config(_config(MAMBA), MAMBA, vllm_version="0.26.0")
    assert mamba_state_bytes(m1, 1, 2) == 5120 * 3 * 2 + 5120 * 16 * 2 == 194_560
    fm = parse_config(_config(FALCON_MAMBA), FALCON_MAMBA, vllm_version="0.26.0")
    assert mamba_state_bytes(fm, 1, 2) == 8192 * 3 * 2 + 8192 * 16 * 2 == 311_296
    # Mamba-2: conv (8192 + 2 x 8 groups x 128) x 3, SSM 128 heads x 64 x 128, bf16
    m2 = parse_config(_config(CODESTRAL), CODESTRAL, vllm_version="0.26.0")
    assert mamba_state_bytes(m2, 1, 2) == 10240 * 3 * 2 + 128 * 64 * 128 * 2 == 2_158_592
    # TP 2: 8 groups split evenly; conv 5120 x 3, SSM 64 heads
    assert mamba_state_bytes(m2, 2, 2) == 5120 * 3 * 2 + 64 * 64 * 128 * 2 == 1_079_296


def test_no_hybrid_block_alignment():
    """vLLM aligns the block size only for IsHybrid models (platforms/interface.py); Mamba,
    Mamba-2 are IsAttentionFree: the state page is the state itself, the block size stays."""
    m2 = parse_config(_config(CODESTRAL), CODESTRAL, vllm_version="0.26.0")
    specs, block = layer_cache_specs(m2, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    assert block == 16 and len(specs) == 64 and {s.page_size_bytes for s in specs} == {2_158_592}


@pytest.mark.parametrize(("name", "page"), [(MAMBA, 194_560), (FALCON_MAMBA, 311_296), (CODESTRAL, 2_158_592)])
def test_estimate_end_to_end(tmp_path, name, page):
    (tmp_path / "config.json").write_text(json.dumps(_config(name)))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "4096",
                             "--vllm-version", "0.26.0", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is True
    kv = d["kv_cache"]
    # the state group's block size is vLLM's mamba_block_size = max_model_len (prefix caching off
    # in 0.26.0 for these models; the real start families/mamba-2.8b_eager logged block_size=4096)
    assert kv["bytes_per_token"] == 0 and kv["page_size_bytes"] == page and kv["block_size"] == 4096
    # one state block per request per layer: blocks = KV budget / (64 layers x page)
    assert kv["num_gpu_blocks"] == d["memory"]["kv_cache_bytes"] // (64 * page)
    assert kv["max_concurrency"] == kv["num_gpu_blocks"]
    # vLLM reports capacity as concurrency x max_model_len (kv_cache_utils get_kv_cache_capacity)
    assert kv["gpu_kv_cache_tokens"] == kv["num_gpu_blocks"] * 4096


def test_mamba2_heads_must_cover_the_inner_width(tmp_path):
    cfg = dict(_config(CODESTRAL), num_heads=100)
    with pytest.raises(KvplanError) as exc:
        parse_config(cfg, "codestral")
    assert "'num_heads'" in exc.value.message and "100 x 64" in exc.value.message
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    line = error_line(*run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0"))
    assert "num_heads" in line
