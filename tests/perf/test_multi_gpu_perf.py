"""Multi-GPU communication in the step model and vLLM's DP balancer, against hand arithmetic.

Sources of the expected numbers (written out below, never read from kvplan):
  * link bandwidth: the H200 profile's NVLink 4, 450 GB/s per direction (900 GB/s total, NVIDIA
    H200 datasheet); the all-reduce latency is the coefficient given here (8 us, or 0).
  * collective volumes: ring all-reduce 2 (n - 1) / n x bytes; all-gather / reduce-scatter
    (n - 1) x each rank's bytes (vLLM 0.33.0's default MoE backend allgather_reducescatter).
  * sizes: the models' config.json (Qwen3-30B-A3B: hidden 2048, 48 layers all MoE, 128 experts,
    top-8, moe_intermediate 768; Mixtral-8x7B: hidden 4096, 32 layers, 8 experts, top-2,
    intermediate 14336; DeepSeek-V3: hidden 7168, 61 layers of which the first 3 dense, 256
    routed experts).
  * the balancer: vLLM 0.33.0 v1/engine/core_client.py get_core_engine_for_request, traced by hand.
"""

from __future__ import annotations

import json

import pytest
from helpers import error_line, run_cli, unwrapped

from kvplan.engines.vllm.args import EngineArgs
from kvplan.gpus import bundled_profiles
from kvplan.perf.comm import (
    MULTI_GPU_UNCALIBRATED,
    allgather_seconds,
    balance,
    moe_dp_dispatch_combine_seconds,
    ring_allreduce_seconds,
)
from kvplan.perf.coefficients import Efficiency
from kvplan.perf.step_time import MOE_DP_UNCALIBRATED, TP_UNCALIBRATED, step_model
from kvplan.sources import load_spec

V = "0.26.0"
NVLINK4 = 450e9  # bytes/s per direction
IDEAL = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0,
                   allreduce_latency_us=0.0)
LAT8 = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0,
                  allreduce_latency_us=8.0)
DECODES = dict(num_decodes=64, decode_context_tokens=64 * 1000, max_decode_context=1000)


@pytest.fixture(scope="module")
def h200():
    return bundled_profiles()["h200"]


@pytest.fixture(scope="module")
def qwen_moe():
    return load_spec("Qwen/Qwen3-30B-A3B")[0]


# --- collectives ---------------------------------------------------------------------------

def test_ring_allreduce_of_a_bf16_activation_over_8_gpus():
    # [512 tokens, 8192 hidden] bf16 = 8,388,608 bytes; 2 x 7/8 of it = 14,680,064 bytes per GPU
    # over 450 GB/s = 32.6224 us, + 8 us latency
    assert ring_allreduce_seconds(512 * 8192 * 2, 8, NVLINK4, 8e-6) == pytest.approx(14_680_064 / 450e9 + 8e-6, rel=1e-12)
    assert ring_allreduce_seconds(512 * 8192 * 2, 8, NVLINK4, 8e-6) == pytest.approx(40.6224e-6, rel=1e-5)
    assert ring_allreduce_seconds(1 << 20, 1, NVLINK4, 8e-6) == 0.0  # one GPU: nothing to reduce


def test_allgather_and_moe_dispatch_combine_volumes():
    # 4 DP ranks of 64 tokens x 2048 hidden bf16 (262,144 bytes each): a rank receives 3 shares
    assert allgather_seconds(262_144, 4, NVLINK4, 0.0) == pytest.approx(786_432 / 450e9, rel=1e-12)
    # dispatch (all-gather) + combine (reduce-scatter), each + 8 us
    assert moe_dp_dispatch_combine_seconds(64, 4096, 4, NVLINK4, 8e-6) == pytest.approx(2 * (786_432 / 450e9 + 8e-6), rel=1e-12)
    assert moe_dp_dispatch_combine_seconds(64, 4096, 1, NVLINK4, 8e-6) == 0.0


# --- the balancer --------------------------------------------------------------------------

def test_balancer_is_round_robin_from_empty_engines():
    assert balance(8, 3) == [0, 1, 2, 0, 1, 2, 0, 1]
    counts = balance(12, 4)
    assert [counts.count(e) for e in range(4)] == [3, 3, 3, 3]  # a closed loop of 12: 12 / 4 each


def test_balancer_sends_new_requests_to_the_least_loaded_engine():
    # in flight [2, 0, 0], scan from 0: engine 1 (0 < 2); scan from 1: 1 has 1, 2 has 0 -> 2;
    # scan from 2: 2 has 1, 0 has 2, 1 has 1 -> 2 (first of the lowest in scan order);
    # scan from 0: 0 has 2, 1 has 1, 2 has 2 -> 1; now [2, 2, 2]
    assert balance(4, 3, in_flight=[2, 0, 0]) == [1, 2, 2, 1]
    with pytest.raises(ValueError):
        balance(1, 2, in_flight=[0])


# --- the step model ------------------------------------------------------------------------

def test_moe_dp_step_pays_dispatch_and_combine_per_moe_layer(h200, qwen_moe):
    m1 = step_model(qwen_moe, h200, EngineArgs(), vllm_version=V, efficiency=LAT8)
    m4 = step_model(qwen_moe, h200, EngineArgs(data_parallel_size=4, enable_expert_parallel=True), vllm_version=V,
                    efficiency=LAT8)
    assert m1.terms(**DECODES).allreduce_ms == 0.0 and MOE_DP_UNCALIBRATED not in m1.labels
    # 48 MoE layers x (all-gather + reduce-scatter) of 3 x 64 tokens x 4096 bytes over 450 GB/s, 8 us each
    expected_ms = 48 * 2 * (3 * 64 * 4096 / 450e9 + 8e-6) * 1e3
    assert m4.terms(**DECODES).allreduce_ms == pytest.approx(expected_ms, rel=1e-12)  # 0.9358 ms
    assert MOE_DP_UNCALIBRATED in m4.labels and MULTI_GPU_UNCALIBRATED in MOE_DP_UNCALIBRATED


def test_ep_rank_reads_and_computes_only_its_whole_experts(h200, qwen_moe):
    # one expert, all 48 layers: 3 x 2048 x 768 = 4,718,592 parameters a layer, 226,492,416 in all, bf16
    full = 3 * 2048 * 768 * 48
    ep = step_model(qwen_moe, h200, EngineArgs(data_parallel_size=4, enable_expert_parallel=True), vllm_version=V,
                    efficiency=IDEAL)
    assert ep.expert_bytes == 2 * full and ep.expert_params == full
    assert ep.expert_share == 32 / 128  # 128 experts over 4 EP ranks
    t = ep.terms(**DECODES)
    # the experts run on the 4 DP ranks' 256 tokens, top-8: 2 x 8 x params x 256 x 32/128 FLOPs
    assert t.expert_compute_ms == pytest.approx(2 * 8 * full * 256 * 0.25 / 989e12 * 1e3, rel=1e-9)
    # 256 tokens x top-8 of 128 touch every expert (1 - (120/128)^256 ~ 1 - 6.8e-8): 32 whole experts read
    assert t.expert_weights_ms == pytest.approx(32 * 2 * full / 4.8e12 * 1e3, rel=1e-6)
    # without EP each GPU holds a quarter of every expert: the same bytes and FLOPs
    slices = step_model(qwen_moe, h200, EngineArgs(data_parallel_size=4), vllm_version=V, efficiency=IDEAL)
    assert slices.expert_bytes == 2 * full / 4 and slices.expert_share == 1.0
    assert slices.terms(**DECODES).expert_compute_ms == pytest.approx(t.expert_compute_ms, rel=1e-12)


def test_ep_over_tp_alone_has_no_dispatch_and_the_tp_flops(h200, qwen_moe):
    tp = step_model(qwen_moe, h200, EngineArgs(tensor_parallel_size=4), vllm_version=V, efficiency=IDEAL)
    ep = step_model(qwen_moe, h200, EngineArgs(tensor_parallel_size=4, enable_expert_parallel=True), vllm_version=V,
                    efficiency=IDEAL)
    assert ep.expert_share == 0.25 and ep.moe_comm_bytes_per_token == 0 and tp.expert_share == 1.0
    # 2 x 8 x full params x 64 tokens / 4 (a quarter of the experts whole, or a quarter of each)
    full = 3 * 2048 * 768 * 48
    want = 2 * 8 * full * 64 / 4 / 989e12 * 1e3
    assert ep.terms(**DECODES).expert_compute_ms == pytest.approx(want, rel=1e-9)
    assert tp.terms(**DECODES).expert_compute_ms == pytest.approx(want, rel=1e-9)
    assert TP_UNCALIBRATED in ep.labels and MULTI_GPU_UNCALIBRATED in TP_UNCALIBRATED


def test_mixtral_dp3_ep_binding_rank_holds_three_experts(h200):
    spec = load_spec("mistralai/Mixtral-8x7B-v0.1")[0]
    m = step_model(spec, h200, EngineArgs(data_parallel_size=3, enable_expert_parallel=True), vllm_version=V,
                   efficiency=IDEAL)
    # 8 experts over 3 ranks: 3, 3, 2; the lockstep step is the 3-expert rank's
    assert m.expert_share == 3 / 8
    # one whole expert: w1, w3 4096 x 14336 and w2 14336 x 4096, 32 layers, bf16
    assert m.expert_bytes == 2 * 3 * 4096 * 14336 * 32
    assert m.moe_comm_bytes_per_token == 4096 * 2


def test_deepseek_v3_dp8_ep_one_decode_pays_58_moe_layers(h200):
    spec = load_spec("deepseek-ai/DeepSeek-V3")[0]
    m = step_model(spec, h200, EngineArgs(data_parallel_size=8, enable_expert_parallel=True), vllm_version=V,
                   efficiency=LAT8)
    assert m.expert_share == 32 / 256
    # one decode per rank: 58 MoE layers x 2 x (7 shares of 7168 bf16 values / 450 GB/s + 8 us)
    t = m.request_terms([(1, 100)])
    assert t.allreduce_ms == pytest.approx(58 * 2 * (7 * 7168 * 2 / 450e9 + 8e-6) * 1e3, rel=1e-12)


# --- the command ---------------------------------------------------------------------------

QWEN = ["perf", "Qwen/Qwen3-30B-A3B", "--gpu", "H200", "--vllm-version", "0.33.0", "--input-len", "512",
        "--output-len", "32", "--num-requests", "32", "--no-saturation", "--max-model-len", "2048"]


def test_perf_moe_dp_ep_runs_in_lockstep_with_the_label_in_json_and_table():
    code, out, err = run_cli(*QWEN, "-dp", "4", "-ep", "--concurrency", "16", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    from kvplan.render.perf_schema import PerfDocument

    PerfDocument.model_validate(doc)
    dp = doc["data_parallel"]
    assert dp["engines"] == 4 and dp["lockstep"] is True and dp["figures_are_per_engine"] is True
    assert doc["workload"]["load"] == {"kind": "closed", "concurrency": 4}  # 16 / 4 engines
    assert dp["request_throughput"] == pytest.approx(4 * doc["metrics"]["request_throughput"], abs=1e-3)
    assert MOE_DP_UNCALIBRATED in doc["approximate"]
    assert any("lockstep" in a and MULTI_GPU_UNCALIBRATED in a for a in doc["approximate"])
    code, out, err = run_cli(*QWEN, "-dp", "4", "-ep", "--concurrency", "16")
    assert code == 0, err
    text = unwrapped(out)
    assert MOE_DP_UNCALIBRATED in text and "all step in lockstep" in text


def test_perf_still_refuses_context_parallel_naming_the_flag():
    code, out, err = run_cli("perf", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "-dcp", "8",
                             "--input-len", "512", "--output-len", "32", "--concurrency", "8", "--no-saturation")
    assert code == 2
    assert "--decode-context-parallel-size: kvplan perf does not model" in error_line(code, out, err)
