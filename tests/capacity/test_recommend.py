"""kvplan.capacity.recommend: only flags that raise the binding limit or make vLLM start, each with the
number it gives; never a flag equal to vLLM 0.26.0's default; notes the user cannot act on only
with --verbose (and in JSON)."""

from __future__ import annotations

import json
import math

from tests.helpers import run_cli

M = "meta-llama/Meta-Llama-3-8B"  # bundled, 8192 positions; 32 layers x 8 KV heads x 128 dims, bf16


def _json(*args):
    code, out, err = run_cli("estimate", *args, "--format", "json", "--vllm-version", "0.26.0")  # 0.26.0's numbers
    return code, json.loads(out)


def test_max_num_seqs_binding_recommends_max_num_seqs_not_fp8():
    code, doc = _json(M, "--max-model-len", "512")
    assert code == 0 and doc["binding_limit"] == "max_num_seqs"
    recs = doc["recommendations"]
    assert "--kv-cache-dtype" not in recs
    # requests the KV cache holds at 512 tokens: whole 32-block requests out of num_gpu_blocks
    # (one token costs 32 x 8 x 128 x 2 x 2 = 131,072 B, a 16-token block 2 MiB)
    held = doc["kv_cache"]["num_gpu_blocks"] // (512 // 16)
    assert held > doc["engine"]["max_num_seqs"] == 1024  # H200 (>= 70 GiB) default
    r = recs["--max-num-seqs"]
    assert r["kind"] == "option" and abs(r["value"] - held) <= 2  # the sampler's larger batch may cost a block or two
    assert f"{r['value']:,} run at once instead of 1,024" in r["reason"]
    code2, doc2 = _json(M, "--max-model-len", "512", "--max-num-seqs", str(r["value"]))
    assert code2 == 0 and math.floor(doc2["kv_cache"]["max_concurrency"]) >= r["value"]


def test_kv_cache_binding_recommends_fp8_with_its_numbers():
    code, doc = _json(M, "--max-model-len", "8192")
    assert doc["binding_limit"] == "kv_cache"
    r = doc["recommendations"]["--kv-cache-dtype"]
    assert r["value"] == "fp8" and r["kind"] == "option"
    code, fp8 = _json(M, "--max-model-len", "8192", "--kv-cache-dtype", "fp8")
    assert f"fp8 gives {fp8['kv_cache']['gpu_kv_cache_tokens']:,} tokens" in r["reason"]


def test_no_recommendation_equal_to_vllms_default():
    code, doc = _json("meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "--tensor-parallel-size", "4", "--max-model-len", "8192")
    assert code == 0
    assert "--max-model-len" not in doc["recommendations"]  # 8192 is the model's own length


def test_failure_without_max_model_len_says_the_models_default():
    code, out, _ = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4")
    text = " ".join(out.split())
    assert code == 1
    assert "(the model's default 131072)" in text and "asked" not in text
    code, out, _ = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--max-model-len", "131072")
    assert "(asked 131072)" in " ".join(out.split())


def test_unactionable_notes_only_with_verbose():
    args = ("estimate", "meta-llama/Meta-Llama-3-70B", "--gpu", "A100-80GB", "--tensor-parallel-size", "4")
    code, out, _ = run_cli(*args)
    text = " ".join(out.split())
    assert code == 0
    assert "note: bundled spec" not in text and "unverified" not in text and "warning:" not in text
    # a partial snapshot also makes the estimate approximate: that line shows without --verbose
    assert "approximate, not exact: bundled spec model_specs/meta-llama__Meta-Llama-3-70B.json is partial" in text
    code, out, _ = run_cli(*args, "--verbose")
    text = " ".join(out.split())
    assert "note: bundled spec" in text and "unverified estimate" in text
    code, doc = _json(*args[1:])
    assert any("unverified" in n for n in doc["notes"]) and not any("unverified" in w for w in doc["warnings"])
