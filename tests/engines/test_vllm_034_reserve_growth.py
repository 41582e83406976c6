"""vLLM 0.34.0's torch reservation growth G over the KV-cache sizing steps
(kvplan/engines/vllm/v0_34/reserve_growth.py) against hand arithmetic and the logged
"GiB of torch reservation growth" of the real starts (tests/data/vllm-0.34.0-h100)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_cli

from kvplan.engines.vllm.v0_34 import reserve_growth as rg
from kvplan.model.parse import parse_config

DATA = Path(__file__).parents[1] / "data" / "vllm-0.34.0-h100"
GiB, MiB = 1 << 30, 1 << 20


def _start(name: str):
    text = (DATA / f"{name}.log").read_text()
    cfg = json.loads(re.search(r"^KVPLAN_CONFIG (.*)$", text, re.M).group(1))
    exact = json.loads(re.search(r"^KVPLAN_EXACT (.*)$", text, re.M).group(1))
    logged = float(re.search(r"([\d.]+) GiB of torch reservation growth", text).group(1))
    return parse_config(cfg, name), exact, logged


def test_llama_layer_by_hand():
    # Llama-3-8B, T = 16384 (H 4096, qkv 6144, q 4096, I 14336), bf16: the first layer reserves
    # the embedding, the first norm's copy, qkv, the attention output, o_proj's output, gate_up
    # and the activation: (3 x 4096 + 6144 + 4096 + 3 x 14336) x 2 B = 131,072 B a token = 2 GiB;
    # --quantization fp8 adds one fp8 [T, 4096] input copy: 64 MiB
    spec, exact, logged = _start("llama3-8b_eager")
    assert rg.forward_growth_bytes(spec, 16384, 2, False) == 131_072 * 16384 == 2 * GiB
    assert rg.forward_growth_bytes(spec, 16384, 2, True) == 2 * GiB + 64 * MiB
    # max_model_len 8192 < T: the prompt-logprobs step runs on 8192 tokens (1 GiB of forward
    # segments; its 250.5 MiB logits chunk fits the freed 448 MiB gate_up block), the full step binds
    assert rg.prompt_logprob_step_growth_bytes(spec, 8192, 2, False) == GiB
    assert rg.reserve_growth_bytes(spec, tokens=16384, max_model_len=8192, act=2, fp8_act_quant=False) == 2 * GiB


@pytest.mark.parametrize("name,fp8", [("llama3-8b_eager", False), ("llama3-8b_fp8_eager", True),
                                      ("gemma2-9b_eager", False), ("llama31-8b_kvoffload16", False)])
def test_eager_dense_starts_match_the_logged_growth(name, fp8):
    # vLLM prints G to 0.01 GiB: the derived value rounds to the logged one
    spec, exact, logged = _start(name)
    g = rg.reserve_growth_bytes(spec, tokens=exact["max_num_batched_tokens"], max_model_len=exact["max_model_len"],
                                act=2, fp8_act_quant=fp8)
    assert abs(g / GiB - logged) <= 0.005, (g / GiB, logged)


def test_gemma2_native_norms_reserve_more_than_a_llama_layer_of_its_shape():
    # GemmaRMSNorm's fp32 temporaries: Gemma-2-9B logs 2.44 GiB where a Llama-style layer of its
    # shape (in-place norms) would reserve 2 x (3 x 3584 + 8192 + 4096 + 3 x 14336) B x 16384 tokens
    spec, exact, logged = _start("gemma2-9b_eager")
    llama_like = 2 * (3 * 3584 + 8192 + 4096 + 3 * 14336) * 16384
    assert llama_like / GiB < 2.1 < logged  # 2.016 GiB
    assert abs(rg.forward_growth_bytes(spec, 16384, 2, False) / GiB - 2.44) <= 0.005


def test_moe_start_states_its_gap():
    # Qwen3-30B-A3B (one step: max_model_len 32768 >= T): forward segments 622 MiB + one
    # 1024 x 151,936 bf16 logits chunk (296.75 -> 298 MiB) = 0.90 GiB; vLLM logs 1.05 GiB. The
    # 0.15 GiB gap is not in the source kvplan restates (README of the fit: docs/versions.md)
    spec, exact, logged = _start("qwen3-30b-a3b_eager")
    g = rg.reserve_growth_bytes(spec, tokens=16384, max_model_len=32768, act=2, fp8_act_quant=False)
    assert logged == 1.05 and 0.13 <= logged - g / GiB <= 0.17


def test_unmodelled_layer_kinds_fall_back():
    # MLA and hybrid layers have no restated sequence: None (activation.py keeps its fitted ratio)
    spec, _, _ = _start("llama3-8b_eager")
    assert rg.supported(spec)
    assert rg.reserve_growth_bytes(spec.model_copy(update={"architecture": "SomeOtherForCausalLM"}), tokens=16384,
                                   max_model_len=None, act=2, fp8_act_quant=False) is None


def test_prompt_logprob_chunk_by_the_source():
    from kvplan.engines.vllm.v0_34.activation import prompt_logprob_chunk_bytes

    # TP 1: 1024 rows x 128,256 bf16 logits, read in place (no fp32 log-softmax copy)
    assert prompt_logprob_chunk_bytes(128_256, 1024, 2, 1) == 1024 * 128_256 * 2
    # TP 2: the [1024, V/2] shard, the all-gather's [1024, V] output and its reordered copy
    assert prompt_logprob_chunk_bytes(128_256, 1024, 2, 2) == 1024 * 64_128 * 2 + 2 * 1024 * 128_256 * 2
    # Gemma-2's final softcapping keeps two [1024, V] tensors alive
    assert prompt_logprob_chunk_bytes(256_000, 1024, 2, 1, softcap=True) == 2 * 1024 * 256_000 * 2


def test_the_sizing_step_does_not_raise_a_sampler_bound_profile_peak():
    # Qwen3-30B-A3B: vLLM's profile peak 1,013,118,976 B is its sampler stage (KVPLAN_EXACT
    # peak_activation); the log prints P 0.94 GiB, that peak to 0.01 GiB, and kvplan's P is it
    code, out, err = run_cli("verify", "--from-log", str(DATA / "qwen3-30b-a3b_eager.log"), "--format", "json")
    sizing = json.loads(out)["kv_cache_sizing"]
    assert sizing["predicted"]["transient_peak_bytes"] == 1_013_118_976
    assert sizing["measured"]["transient_peak_bytes"] == round(0.94 * GiB)
