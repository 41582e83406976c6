"""kvplan/perf/serving.py: the emulator driven from kvplan's plan, by hand arithmetic with a
constant step time, and the labels every prediction carries."""

from __future__ import annotations

import pytest

from kvplan.capacity.options import plan_from_options
from kvplan.errors import KvplanError
from kvplan.perf.batch import constant_step_time
from kvplan.perf.coefficients import Efficiency
from kvplan.perf.serving import UNCALIBRATED_LABEL, Load, calibration_of, engine_config, predict
from kvplan.perf.step_time import TP_UNCALIBRATED, step_model
from kvplan.perf.workload import Lengths

TINY = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"  # bundled; a pool far larger than these runs need


def _plan(**kw):
    return plan_from_options(model=TINY, gpu="H200", gpu_memory=None, gpu_profiles=None, revision=None,
                             vllm_version="0.26.0", **kw)[0]


def test_engine_config_takes_the_plans_resolved_values():
    p = _plan(max_num_seqs=32, max_num_batched_tokens=1024, enable_prefix_caching=False)
    cfg = engine_config(p)
    assert (cfg.num_gpu_blocks, cfg.block_size) == (p.num_gpu_blocks, p.block_size)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.max_model_len) == (32, 1024, 2048)
    assert cfg.enable_prefix_caching is False and cfg.async_scheduling is True and cfg.vllm_version == "0.26.0"


def test_constant_step_closed_loop_by_hand():
    # 10 ms per step, one request at a time, 128 in / 16 out: the prompt fits one step's budget,
    # so TTFT = 1 step = 10 ms, E2E = 16 steps = 160 ms, TPOT = (160 - 10) / 15 = 10 ms; the next
    # request is sent when the last finishes: 4 requests take 640 ms -> 6.25 req/s,
    # 64 output tokens / 0.64 s = 100 tok/s, (128 + 16) x 4 / 0.64 = 900 tok/s.
    r = predict(_plan(), None, Lengths.fixed(128, 16), Load("closed", 1), num_requests=4,
                step_time=constant_step_time(0.010), saturation=False)
    s = r.summary
    assert s.ttft.p50 == pytest.approx(0.010) and s.ttft.p99 == pytest.approx(0.010)
    assert s.e2e.p50 == pytest.approx(0.160)
    assert s.tpot.p50 == pytest.approx(0.010) and s.itl.p99 == pytest.approx(0.010)
    assert s.request_throughput == pytest.approx(6.25)
    assert s.output_throughput == pytest.approx(100.0)
    assert s.total_token_throughput == pytest.approx(900.0)
    assert s.preemptions == 0


def test_saturation_is_the_closed_loop_capacity_and_said():
    r = predict(_plan(max_num_seqs=4), None, Lengths.fixed(128, 16), Load("closed", 4), num_requests=200,
                step_time=constant_step_time(0.010))
    sat = r.saturation
    # 4 seats, 16 steps of 10 ms per request (plus a step of lag per finish under async
    # scheduling): at most 4 / 0.16 = 25 req/s, at least 4 / 0.17
    assert 4 / 0.17 - 1e-9 <= sat.rate <= 25.0 + 1e-9 and sat.concurrency == 4
    assert all(st for rate, st, _ in sat.points if rate < sat.rate)
    assert all(not st for rate, st, _ in sat.points if rate > sat.rate)
    assert any("saturation rate: the emulated engine's highest sustained throughput" in a for a in r.approximate)


def test_the_product_applies_the_request_path_of_its_coefficients():
    p = _plan()
    eff = Efficiency(request_latency_ms=7.0, request_serial_ms=0.5)
    cfg = engine_config(p, efficiency=eff)
    assert (cfg.arrival_latency_s, cfg.arrival_service_s) == (pytest.approx(0.007), pytest.approx(0.0005))
    assert (engine_config(p).arrival_latency_s, engine_config(p).arrival_service_s) == (0.0, 0.0)


def test_calibration_labels():
    assert calibration_of(Efficiency()).label == UNCALIBRATED_LABEL
    fitted = Efficiency(status="fitted", source="fit", fit={"fitted_on": ["a.json", "b.json"]})
    assert calibration_of(fitted).label == "fitted on 2 records (a.json, b.json)"


def test_tp_and_priors_are_said():
    p = _plan(tensor_parallel_size=2)
    sm = step_model(p.spec, p.gpu, p.args, vllm_version="0.26.0")
    r = predict(p, sm, Lengths.fixed(64, 4), Load("closed", 2), num_requests=8, saturation=False)
    assert r.calibration.label.startswith("fitted on")  # the H200 / 0.26.0 fit ...
    assert TP_UNCALIBRATED in r.approximate  # ... does not cover the all-reduce term


def test_request_longer_than_max_model_len_is_refused():
    with pytest.raises(KvplanError, match="exceeds --max-model-len 2048"):
        predict(_plan(), None, Lengths.fixed(2000, 100), Load("closed", 1), num_requests=2,
                step_time=constant_step_time(0.01), saturation=False)


def test_a_plan_that_does_not_start_exits_1():
    p = _plan(gpu_memory_utilization=0.01)
    assert not p.fits
    with pytest.raises(KvplanError) as e:
        engine_config(p)
    assert e.value.exit_code == 1 and e.value.message.startswith("vLLM would not start:")
