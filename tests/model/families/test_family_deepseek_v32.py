"""DeepSeek-V3.2 (kvplan/model/families/deepseek.py DeepSeekV32: MLA + the sparse-attention
indexer's own key cache) on the 5-layer cut of its real config started on vLLM 0.26.0
(tests/data/vllm-0.26.0-h200/families/dsv32-5L_eager.log: the start timed out in DeepGEMM
warm-up after logging its KV sizing, so there is no num_gpu_blocks; the logged lines are used)."""

from __future__ import annotations

import json

from family_starts import FAMILY_LOGS
from helpers import run_cli

from kvplan.engines.vllm.v0_26.allocator import build_layout
from kvplan.engines.vllm.v0_26.kv_spec import MLAAttentionSpec, indexer_per_token_bytes, layer_cache_specs
from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.model.parse import parse_config
from kvplan.model.spec import ApproximationKind, LayerKind

LOG = FAMILY_LOGS / "dsv32-5L_eager.log"
TEXT = LOG.read_text(encoding="utf-8", errors="replace")
CONFIG = json.loads(next(line for line in TEXT.splitlines() if line.startswith("KVPLAN_CONFIG ")).split(" ", 1)[1])


def test_log_lines_used():
    assert "Available KV cache memory: 92.08 GiB" in TEXT
    assert "GPU KV cache size: 15,400,640 tokens" in TEXT
    assert "Model loading took 26.96 GiB" in TEXT
    assert "Setting kv cache block size to 64 for DEEPSEEK_V32_INDEXER backend" in TEXT


def test_layers_indexer_and_approximation():
    spec = parse_config(CONFIG, "dsv32")
    assert spec.layer_kinds == (LayerKind.MLA,) * 5
    assert spec.moe_layers == (False,) * 3 + (True,) * 2  # first_k_dense_replace 3
    assert (spec.indexer_head_dim, spec.indexer_heads, spec.indexer_topk) == (128, 64, 2048)
    assert spec.indexer_layers == (True,) * 5  # index_topk_freq absent: every layer has one
    assert not spec.exact
    assert [a.kind for a in spec.approximations] == [ApproximationKind.PARTIAL_RULES]


def test_kv_bytes_per_token_by_hand_and_against_the_log():
    spec = parse_config(CONFIG, "dsv32")
    # indexer key: 128 fp8 bytes + 128 / 128 fp32 scales x 4 B = 132 B (uint8), one head
    assert indexer_per_token_bytes(spec) == 128 + 4 == 132
    specs, block = layer_cache_specs(spec, tensor_parallel_size=1, block_size=64, kv_dtype_bytes_=2, model_dtype_bytes=2)
    assert block == 64 and len(specs) == 10 and all(isinstance(s, MLAAttentionSpec) for s in specs)
    layout = build_layout(specs)
    # per token: 5 x (MLA latent (512 + 64) x 2 B + indexer 132 B) in one group of differing pages
    per_token = 5 * ((512 + 64) * 2 + 132)
    assert per_token == 6420 and layout.bytes_per_block == 64 * per_token
    # vLLM: 92.08 GiB (+-0.005) for 15,400,640 tokens -> 6,419.6 .. 6,420.3 B per token
    lo, hi = 92.075 * 2**30 / 15_400_640, 92.085 * 2**30 / 15_400_640
    assert lo <= per_token <= hi


def test_skip_pattern_of_index_topk_freq():
    cfg = {**CONFIG, "index_topk_freq": 2}
    # vLLM: skip where max(i - 2 + 1, 0) % 2 != 0 -> layers 0 and 1 keep theirs, 2 skips, 3 keeps, 4 skips
    assert parse_config(cfg, "dsv32").indexer_layers == (True, True, False, True, False)
    cfg = {**CONFIG, "index_topk_pattern": "FSFFS"}
    assert parse_config(cfg, "dsv32").indexer_layers == (True, False, True, True, False)


def test_weights_against_the_logged_load():
    spec = parse_config(CONFIG, "dsv32")
    w = weight_bytes_per_rank(spec, tensor_parallel_size=1, quant=spec.quantization, max_num_batched_tokens=16384)
    # the top-k indices buffer: int32 [max_num_batched_tokens 16384, index_topk 2048]
    assert w.parts["indexer_topk_buffer"] == 16384 * 2048 * 4
    # 26.96 GiB logged (2 decimals); kvplan 26.90 GiB
    assert abs(w.total / 2**30 - 26.96) / 26.96 < 0.005


def test_estimate_says_approximate_and_uses_block_64(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--max-model-len", "32768", "--format", "json",
                             "--vllm-version", "0.26.0")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["exact"] is False and doc["kv_cache"]["bytes_per_token"] == 6420
    assert doc["engine"]["block_size"] == 64 if "block_size" in doc["engine"] else True
