"""Gemma-4 (kvplan/model/families/gemma4.py): refused on vLLM 0.26.0, which cannot start it
(tests/data/vllm-0.26.0-h200/families/gemma4-26b-a4b_eager.log, rc=1, is the real config), sized
on 0.33.0 with its per-layer attention shapes. Expected numbers are hand arithmetic from the
config and vLLM 0.33.0's gemma4.py / gemma4_mm.py, or the meta-device oracle count."""

from __future__ import annotations

import json

import pytest
from family_starts import FAMILY_LOGS
from helpers import error_line, run_cli

from kvplan.engines.vllm.v0_26.kv_spec import attention_per_token_bytes
from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.engines.vllm.v0_33.kv_spec import layer_cache_specs
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

LOG = FAMILY_LOGS / "gemma4-26b-a4b_eager.log"
TEXT = LOG.read_text(encoding="utf-8", errors="replace")
CONFIG = json.loads(next(line for line in TEXT.splitlines() if line.startswith("KVPLAN_CONFIG ")).split(" ", 1)[1])
ORACLE = json.loads((FAMILY_LOGS.parents[1] / "meta_param_counts.json").read_text())["models"][
    "families/gemma4-26b-a4b_eager.log"]
FULL = (5, 11, 17, 23, 29)


def _dir(tmp_path, cfg=CONFIG):
    d = tmp_path / "gemma4"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _spec(cfg=CONFIG):
    return parse_config(cfg, "gemma4", vllm_version="0.33.0")


def _text(**kw):
    return dict(CONFIG, text_config=dict(CONFIG["text_config"], **kw))


def test_the_logged_start_failed_reading_the_config():
    assert "AmbiguousGlobalPerLayerAttributeError" in TEXT and "get_head_size" in TEXT
    assert "RESULT num_gpu_blocks" not in TEXT


def test_vllm_0_26_refusal_says_vllm_cannot_start_it(tmp_path):
    code, out, err = run_cli("estimate", _dir(tmp_path), "--gpu", "H200", "--vllm-version", "0.26.0")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "vLLM 0.26.0 does not start it" in err and "AmbiguousGlobalPerLayerAttributeError" in err


def test_check_reports_it_and_does_not_pass_on_0_26(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text(f"vllm serve {_dir(tmp_path)} --max-model-len 32768\n")
    code, out, err = run_cli("check", str(script), "--gpu", "H200", "--vllm-version", "0.26.0", "--format", "json")
    assert code != 0, (out, err)
    assert "does not start it" in out + err


def test_layer_kinds_and_per_layer_shapes_on_0_33():
    spec = _spec()
    assert spec.layer_kinds == tuple(LayerKind.FULL if i in FULL else LayerKind.SLIDING for i in range(30))
    assert spec.sliding_window == 1024
    s, f = spec.attention_of(0), spec.attention_of(5)
    assert (s.num_key_value_heads, s.head_dim, s.head_dim_v) == (8, 256, 256)
    # attention_k_eq_v: num_global_key_value_heads of global_head_dim on full layers
    assert (f.num_attention_heads, f.num_key_value_heads, f.head_dim, f.head_dim_v) == (16, 2, 512, 512)
    assert spec.moe.num_experts == 128 and spec.moe.top_k == 8 and spec.moe.moe_intermediate_size == 704
    assert spec.moe.shared_intermediate_size == 2112 and all(spec.moe_layers)
    assert spec.rope_cache_dims == (256, 512) and spec.norms_per_layer == 7 and spec.tie_word_embeddings
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_kv_bytes_per_token_by_hand():
    spec = _spec()
    # sliding: 8 KV heads x (256 + 256) x 2 B = 8,192 B; full (K = V, both slots kept): 2 x 1,024 x 2 = 4,096 B
    assert attention_per_token_bytes(spec, 1, 2, layer=0) == 8192
    assert attention_per_token_bytes(spec, 1, 2, layer=5) == 4096
    specs, _ = layer_cache_specs(spec, tensor_parallel_size=1, block_size=16, kv_dtype_bytes_=2, model_dtype_bytes=2)
    assert sum(s.per_token_bytes for s in specs) == 25 * 8192 + 5 * 4096 == 225_280


def test_weights_by_hand_and_vs_the_meta_device_count():
    spec = _spec()
    h, vocab, e = 2816, 262144, 128
    sliding = h * (16 + 2 * 8) * 256 + 16 * 256 * h + 2 * 256  # qkv, o, q/k norms
    full = h * (16 + 2 * 2) * 512 + 16 * 512 * h + 2 * 512  # K=V: vLLM still builds the V rows
    ffn = 3 * h * 2112 + e * 3 * h * 704 + e * h + h + e  # dense GeGLU, experts, router proj, scale, per-expert
    total = 25 * sliding + 5 * full + 30 * (ffn + 7 * h) + h + vocab * h  # tied embedding
    parts = weight_bytes_per_rank(spec, tensor_parallel_size=1, dtype_bytes=2).parts
    assert sum(v for k, v in parts.items() if k not in ("rotary_cache", "vision")) == 2 * total
    # the oracle (transformers) has no v_proj on the 5 K=V layers and keeps layer_scalar buffers (30)
    v_rows = 5 * 2 * 512 * h
    assert total - v_rows == ORACLE["text_total"] == 25_233_141_760
    assert spec.vision_params == ORACLE["components"]["vision"] == 572_792_112
    # RoPE caches: 262,144 positions x (256 + 512) wide x 2 B
    assert parts["rotary_cache"] == 262144 * 768 * 2


def test_estimate_end_to_end_on_0_33(tmp_path):
    code, out, err = run_cli("estimate", _dir(tmp_path), "--gpu", "H200", "--max-model-len", "32768",
                             "--vllm-version", "0.33.0", "--limit-mm-per-prompt", '{"image":0,"video":0}',
                             "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["exact"] is False and any("Gemma-4" in str(a) for a in d["approximate"])
    assert d["kv_cache"]["bytes_per_token"] == 225_280


@pytest.mark.parametrize("key,value", [("num_kv_shared_layers", 20), ("hidden_size_per_layer_input", 256)])
def test_unmodelled_text_keys_are_exit_2(tmp_path, key, value):
    line = error_line(*run_cli("estimate", _dir(tmp_path, _text(**{key: value})), "--gpu", "H200",
                               "--vllm-version", "0.33.0"))
    assert f"'text_config.{key}'" in line and "no rules yet" in line


def test_audio_tower_is_refused():
    with pytest.raises(KvplanError) as exc:
        _spec(dict(CONFIG, audio_config={"hidden_size": 1024}))
    assert "'audio_config'" in exc.value.message
