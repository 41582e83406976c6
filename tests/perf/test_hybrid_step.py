"""Hybrid models in the step-time model (kvplan/perf/recurrent.py) and the scheduler emulator
(a recurrent-state group: a fixed number of pages per request). Expected numbers by hand from
the model configs (bundled snapshots) and the formulas written in recurrent.py's docstring."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.args import EngineArgs
from kvplan.gpus import bundled_profiles
from kvplan.perf import ClosedLoop, EngineConfig, GroupSpec, Lengths, constant_step_time, make_requests, simulate
from kvplan.perf.coefficients import Efficiency
from kvplan.perf.step_time import HYBRID_UNCALIBRATED, step_model
from kvplan.sources import load_spec

IDEAL = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0,
                   request_latency_ms=0.0)


@pytest.fixture(scope="module")
def qwen3_next():
    spec, _ = load_spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    return step_model(spec, bundled_profiles()["h200"], EngineArgs(max_model_len=32768), vllm_version="0.26.0", efficiency=IDEAL)


def test_gdn_state_and_scan_by_hand(qwen3_next):
    m = qwen3_next
    # Qwen3-Next: 48 layers, 36 Gated DeltaNet (every 4th is full attention); 16 key heads and
    # 32 value heads of 128; conv kernel 4; bf16 state.
    # one layer's state: conv (128 x 16 x 2 + 128 x 32) x (4 - 1) = 24,576 elements, the
    # delta-rule state 32 x 128 x 128 = 524,288 elements; x 2 bytes = 1,097,728 B; read + write
    # x 36 layers = 79,036,416 B per request per step
    assert m.state_bytes_per_request == 2 * 36 * (24_576 + 524_288) * 2 == 79_036_416
    # scan per token per layer: prefill 2 x 32 x (64 x (128 + 128) + 2 x 128 x 128) = 3,145,728;
    # decode 2 x 32 x 3 x 128 x 128 = 3,145,728; x 36 layers
    assert m.scan_prefill_flops_per_token == 36 * 2 * 32 * (64 * 256 + 2 * 128 * 128)
    assert m.scan_decode_flops_per_token == 36 * 2 * 32 * 3 * 128 * 128
    assert m.hybrid and any(x == HYBRID_UNCALIBRATED.format(kind="Gated DeltaNet (linear-attention)") for x in m.labels)


def test_a_decode_reads_and_writes_its_state_once_and_a_prompt_chunk_too(qwen3_next):
    m = qwen3_next
    one = m.request_terms([(1, 1000)])
    two = m.request_terms([(1, 1000), (1, 1000)])
    # a second decode at the same context adds what the first costs: its attention KV (1001
    # tokens read, 1 written, in the 12 full-attention layers) and one state read + write
    assert two.kv_bytes - one.kv_bytes == pytest.approx(one.kv_bytes)
    chunk = m.request_terms([(512, 0)])
    chunk2 = m.request_terms([(1024, 0)])
    # the state traffic does not grow with the chunk; the scan FLOPs do, linearly
    state = m.state_bytes_per_request
    assert chunk.kv_bytes - state > 0 and chunk2.kv_bytes - state > chunk.kv_bytes - state
    scan = m.scan_prefill_flops_per_token
    # attention FLOPs = causal pairs x per-pair FLOPs (12 full layers) + the scan: the scan part of
    # a 1024-token chunk is exactly twice a 512-token one's
    pairs = lambda n: n * (n + 1) // 2  # noqa: E731
    per_pair = (chunk2.attention_flops - 1024 * scan) / pairs(1024)
    assert chunk.attention_flops == pytest.approx(512 * scan + per_pair * pairs(512))


def test_a_dense_model_has_no_recurrent_terms():
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    m = step_model(spec, bundled_profiles()["h200"], vllm_version="0.26.0")
    assert not m.hybrid and m.state_bytes_per_request == 0 and m.scan_prefill_flops_per_token == 0


def test_a_state_group_holds_its_pages_from_admission_to_finish():
    # one attention group of 16-token blocks and a state group of 2 pages per request; 21 usable
    # blocks. A request of 40 + 8 tokens needs cdiv(48, 16) = 3 attention blocks at its end and
    # 2 state pages: 5 blocks, so 4 requests fit at once (20 blocks), never 5 (25 > 21).
    cfg = EngineConfig(num_gpu_blocks=22, block_size=16, max_model_len=64, max_num_batched_tokens=2048,
                       max_num_seqs=64, groups=(GroupSpec("full", 16), GroupSpec("state", 16, None, 2)),
                       async_scheduling=False, vllm_version="0.26.0")
    reqs = tuple(make_requests(16, Lengths.fixed(40, 8), seed=0))
    res = simulate(cfg, constant_step_time(0.01), ClosedLoop(reqs, 8))
    assert max(st.num_running for st in res.steps) <= 4
    # at admission a request holds cdiv(40, 16) = 3 attention blocks (its prompt plus the
    # first sampled slot: cdiv(41, 16) = 3) + 2 state pages: the first step admits 4 (20 blocks)
    assert res.steps[0].num_seqs == 4 and res.steps[0].kv_blocks_used == 20
    assert any("prefix-cache hits are not emulated" in a for a in res.approximate)
