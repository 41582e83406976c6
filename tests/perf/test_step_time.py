"""The step-time model against hand arithmetic from the models' config.json (Llama-3-8B,
Qwen3-30B-A3B) and the H200 datasheet (4.8 TB/s, 989 dense bf16 TFLOPS, NVLink 450 GB/s per
direction). Sizes follow vLLM 0.26.0's weight rules, so every model is built with that version."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest

from kvplan.engines.vllm.args import EngineArgs
from kvplan.errors import KvplanError
from kvplan.gpus import bundled_profiles
from kvplan.perf.coefficients import PRIORS, Efficiency, parse_entries
from kvplan.perf.step_time import TP_UNCALIBRATED, UNCALIBRATED, Chunk, causal_pairs, expected_experts, step_model
from kvplan.sources import load_spec

V = "0.26.0"
IDEAL = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0, allreduce_latency_us=0.0)
H200_BW = 4.8e12
H200_BF16 = 989e12

# Llama-3-8B (config.json: hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads,
# head_dim 128, vocab 128256 = 2004 x 64, untied), parameters per layer at TP=1:
#   qkv 4096 x (4096 + 2 x 1024) = 25,165,824; o 4096 x 4096 = 16,777,216;
#   gate_up 4096 x 2 x 14336 = 117,440,512; down 14336 x 4096 = 58,720,256; 2 norms = 8,192
LLAMA_LAYER = 25_165_824 + 16_777_216 + 117_440_512 + 58_720_256 + 8_192  # 218,112,000
LLAMA_LM_HEAD = 128_256 * 4096  # 525,336,576
LLAMA_DENSE = 32 * LLAMA_LAYER + 4096  # + final norm = 6,979,588,096
LLAMA_BYTES = 2 * (LLAMA_DENSE + LLAMA_LM_HEAD)  # 15,009,849,344 bf16 bytes read per step
LLAMA_KV_PER_TOKEN = 32 * 8 * (128 + 128) * 2  # all layers, bytes: 131,072


@pytest.fixture(scope="module")
def h200():
    return bundled_profiles()["h200"]


@pytest.fixture(scope="module")
def llama(h200):
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    return step_model(spec, h200, vllm_version=V, efficiency=IDEAL)


def test_weights_read_once_at_batch_one_is_weight_bytes_over_bandwidth(llama):
    assert llama.dense_weight_bytes == LLAMA_BYTES == 15_009_849_344
    # one token after no context: 1 token of K/V read and 1 written in each layer
    t = llama.request_terms([(1, 0)])
    expected_ms = (LLAMA_BYTES + 2 * LLAMA_KV_PER_TOKEN) / H200_BW * 1e3
    assert t.total_ms == pytest.approx(expected_ms, rel=1e-12)
    assert 3.12 < t.total_ms < 3.13  # 15.01 GB / 4.8 TB/s
    assert t.linear_compute_ms < t.weights_ms  # decode is bandwidth-bound


def test_decode_time_grows_linearly_with_total_context(llama):
    times = [llama.step_ms((), 8, ctx, ctx // 8) for ctx in (8_000, 16_000, 24_000, 32_000)]
    steps = [b - a for a, b in zip(times, times[1:])]
    assert steps[0] == pytest.approx(steps[1], rel=1e-9) == pytest.approx(steps[2], rel=1e-9)
    # 8,000 more context tokens: 8,000 x 131,072 B of K/V more to read
    assert steps[0] == pytest.approx(8_000 * LLAMA_KV_PER_TOKEN / H200_BW * 1e3, rel=1e-9)


def test_prefill_is_flop_bound_at_large_token_counts(llama):
    n = 8192
    t = llama.request_terms([(n, 0)])
    assert t.linear_compute_ms > t.weights_ms
    linear = 2 * LLAMA_DENSE * n + 2 * LLAMA_LM_HEAD  # logits for the one sampled position
    pairs = n * (n + 1) // 2  # causal
    attention = pairs * 32 * 2 * 32 * (128 + 128)  # layers x 2 x heads x (d_qk + d_v)
    assert t.linear_flops == linear
    assert t.attention_flops == attention
    assert t.attention_compute_ms > t.kv_ms
    assert t.total_ms == pytest.approx((linear + attention) / H200_BF16 * 1e3, rel=1e-12)


def test_moe_expected_experts_from_one_token_to_a_thousand(h200):
    # uniform routing, top-8 of 128 (Qwen3-30B-A3B): E (1 - (1 - k/E)^n)
    assert expected_experts(1, 128, 8) == pytest.approx(8.0)
    assert expected_experts(10, 128, 8) == pytest.approx(128 * (1 - (120 / 128) ** 10))  # 60.87
    assert expected_experts(1000, 128, 8) == pytest.approx(128.0, abs=1e-20)
    spec, _ = load_spec("Qwen/Qwen3-30B-A3B")
    m = step_model(spec, h200, vllm_version=V, efficiency=IDEAL)
    # one expert: gate, up, down of hidden 2048 x moe_intermediate 768, bf16, in each of 48 layers
    one_expert = 48 * 3 * 2048 * 768 * 2
    assert (m.num_experts, m.top_k, m.expert_bytes) == (128, 8, one_expert)
    small = m.request_terms([(1, 100)])
    large = m.request_terms([(1, 100)] * 1000)
    assert small.experts_touched == pytest.approx(8.0)
    assert small.weight_bytes == pytest.approx(m.dense_weight_bytes + 8 * one_expert)
    assert large.weight_bytes == pytest.approx(m.dense_weight_bytes + 128 * one_expert)


def test_tensor_parallel_halves_weights_and_adds_an_all_reduce(h200):
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    eff = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0, allreduce_latency_us=8.0)
    m1 = step_model(spec, h200, EngineArgs(tensor_parallel_size=1), vllm_version=V, efficiency=eff)
    m2 = step_model(spec, h200, EngineArgs(tensor_parallel_size=2), vllm_version=V, efficiency=eff)
    # per rank at TP=2: qkv 4096 x (2048 + 2 x 512), o 2048 x 4096, gate_up 4096 x 2 x 7168,
    # down 7168 x 4096; norms replicated; lm_head 64,128 x 4096 rows
    layer = 4096 * 3072 + 2048 * 4096 + 4096 * 2 * 7168 + 7168 * 4096 + 8192
    assert m2.dense_weight_bytes == 2 * (32 * layer + 4096 + 64_128 * 4096)
    assert m2.dense_weight_bytes == pytest.approx(m1.dense_weight_bytes / 2, rel=1e-4)
    t1, t2 = m1.request_terms([(1, 0)]), m2.request_terms([(1, 0)])
    assert t1.allreduce_ms == 0
    # 2 all-reduces per layer, one token of 4096 bf16 values: ring 2(2-1)/2 x 8192 B / 450 GB/s + 8 us
    assert t2.allreduce_ms == pytest.approx(64 * (8192 / 450e9 * 1e3 + 0.008), rel=1e-12)
    assert TP_UNCALIBRATED in m2.labels and TP_UNCALIBRATED not in m1.labels


def test_priors_are_labelled_uncalibrated_and_overheads_add(h200):
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    m = step_model(spec, h200, vllm_version=V, efficiency=PRIORS)
    assert UNCALIBRATED in m.labels and not PRIORS.calibrated
    ideal = step_model(spec, h200, vllm_version=V, efficiency=IDEAL)
    t = m.request_terms([(1, 0)] * 4)
    base = ideal.request_terms([(1, 0)] * 4)
    # weights and KV over 0.8 x bandwidth, plus the fixed step and 4 requests' overhead
    assert t.overhead_ms == pytest.approx(PRIORS.step_overhead_ms + 4 * PRIORS.per_request_us / 1e3)
    assert t.weights_ms == pytest.approx(base.weights_ms / PRIORS.bandwidth_fraction)


def test_causal_pairs_with_a_window_by_hand():
    assert causal_pairs(3, 0, 0) == 1 + 2 + 3
    assert causal_pairs(2, 10, 0) == 11 + 12
    assert causal_pairs(5, 2, 4) == 3 + 4 + 4 + 4 + 4
    assert causal_pairs(3, 100, 4) == 12
    assert causal_pairs(0, 5, 4) == 0


def test_the_schedulers_batch_plugs_in(llama):
    @dataclass(frozen=True)
    class Batch:  # the shape of kvplan/perf/batch.py StepBatch
        prefills: tuple
        num_decodes: int
        decode_context_tokens: int
        max_decode_context: int

    b = Batch((Chunk(100, 0),), 3, 3 * 501, 501)
    per_request = llama.request_terms([(100, 0), (1, 500), (1, 500), (1, 500)]).total_ms
    assert llama.seconds(b) == pytest.approx(per_request / 1e3, rel=1e-12)
    assert llama.step_ms() == 0.0


def test_a_gpu_without_a_tensor_rate_is_refused_naming_the_key():
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    with pytest.raises(KvplanError, match=r"--gpu a10g: .*perf\.dense_tflops\.bf16"):
        step_model(spec, bundled_profiles()["a10g"], vllm_version=V)


def test_fp8_checkpoint_runs_fp8_gemms_on_hopper(h200):
    spec, _ = load_spec("nvidia/Llama-3.1-70B-Instruct-FP8")
    m = step_model(spec, h200, vllm_version=V)
    assert m.matmul_dtype == "fp8" and m.matmul_flops == 1979e12


def test_fitted_coefficients_file_is_read_and_checked():
    text = """
fits:
- gpu: h200
  vllm_version: 9.9.9
  coefficients: {bandwidth_fraction: 0.9, matmul_fraction: 0.7, step_overhead_ms: 1.2, per_request_us: 5}
  fitted_on: [a.json]
  fitted_at: '2026-01-01'
"""
    fits = parse_entries(text, "x.yaml")
    e = fits[("h200", "9.9.9")]
    assert e.calibrated and (e.bandwidth_fraction, e.step_overhead_ms) == (0.9, 1.2) and "a.json" in e.source
    with pytest.raises(KvplanError, match=r"x.yaml: fits\[0\].coefficients.speed: unknown coefficient"):
        parse_entries(text.replace("per_request_us", "speed"), "x.yaml")
    with pytest.raises(KvplanError, match="bandwidth_fraction"):
        Efficiency(bandwidth_fraction=0.0)


def test_every_bundled_gpu_has_a_sourced_bandwidth():
    for g in bundled_profiles().values():
        assert g.perf is not None and g.perf.memory_bandwidth_bytes_per_s, g.id
        assert g.perf.source, g.id
        assert math.isfinite(g.perf.memory_bandwidth_bytes_per_s)


def test_a_step_outside_the_cuda_graphs_lasts_at_least_the_eager_launch_time(h200):
    # Llama-3-8B, 32 dense layers, eager_layer_us 1000: a step vLLM launches kernel by kernel
    # lasts at least 32 x 1000 us = 32 ms. With the defaults vLLM captures graphs up to 512
    # tokens (min(2 x max_num_seqs, 512, max_num_batched_tokens)): a 512-token prefill replays a
    # graph and is timed by its bytes and FLOPs alone (2 x 6.98e9 x 512 / 989e12 = 7.2 ms plus
    # the lm_head and attention), a 513-token one is launched eagerly and takes the 32 ms floor.
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    eff = replace(IDEAL, eager_layer_us=1000.0)
    m = step_model(spec, h200, vllm_version=V, efficiency=eff)
    assert m.cuda_graph_max_tokens == 512
    in_graph = m.request_terms([(512, 0)]).total_ms
    assert 7.2 < in_graph < 9.0
    assert m.request_terms([(513, 0)]).total_ms == pytest.approx(32.0)
    # --enforce-eager: no graphs, every step (a single decode too) has the floor
    eager = step_model(spec, h200, EngineArgs(enforce_eager=True), vllm_version=V, efficiency=eff)
    assert eager.cuda_graph_max_tokens == 0
    assert eager.request_terms([(1, 100)]).total_ms == pytest.approx(32.0)


def test_cuda_graph_capture_ceiling_follows_the_versions_rule():
    from kvplan.engines.vllm.v0_26 import runner as r26
    from kvplan.engines.vllm.v0_33 import runner as r33

    assert r26.cuda_graph_max_tokens(EngineArgs()) == 512
    assert r26.cuda_graph_max_tokens(EngineArgs(max_num_seqs=64)) == 128  # 2 x 64
    assert r26.cuda_graph_max_tokens(EngineArgs(max_num_batched_tokens=256)) == 256
    assert r26.cuda_graph_max_tokens(EngineArgs(enforce_eager=True)) == 0
    assert r33.cuda_graph_max_tokens(EngineArgs(), "9.0") == 512
    assert r33.cuda_graph_max_tokens(EngineArgs(), "10.0") == 1024  # data-centre Blackwell
    assert r33.cuda_graph_max_tokens(EngineArgs(max_num_seqs=300), "10.0") == 600


def test_enforce_eager_predictions_say_no_eager_run_was_fitted(h200):
    from kvplan.perf.step_time import EAGER_UNCHECKED

    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    assert EAGER_UNCHECKED in step_model(spec, h200, EngineArgs(enforce_eager=True), vllm_version=V).labels
    assert EAGER_UNCHECKED not in step_model(spec, h200, vllm_version=V).labels
