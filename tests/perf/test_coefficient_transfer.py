"""Transfer of fitted step-time coefficients across GPUs of one architecture and to later vLLM
versions (kvplan/perf/coefficients.py resolve), and its labels.

Expected values: the bundled fit's numbers as written in kvplan/perf/coefficients.yaml, and the
datasheet peaks of kvplan/data/gpus.yaml (H200 4.8 TB/s, H100 SXM 3.35 TB/s) by hand arithmetic."""

from __future__ import annotations

import pytest

from kvplan.gpus import bundled_profiles
from kvplan.perf import coefficients as C
from kvplan.perf.serving import calibration_of
from kvplan.perf.step_time import UNCALIBRATED, step_model
from kvplan.sources import load_spec


@pytest.fixture(scope="module")
def gpus():
    return bundled_profiles()


def test_the_h200_fit_is_used_unchanged_on_its_own_gpu_and_version():
    e = C.resolve("h200", "9.0", "0.26.0")
    assert e.status == "fitted" and e.calibrated and e.transfer is None
    # coefficients.yaml's values, unchanged by the transfer machinery
    assert (e.bandwidth_fraction, e.matmul_fraction, e.eager_moe_layer_us) == (0.88391, 0.58984, 1170.07874)


def test_an_h100_takes_the_h200_fit_labelled_transferred_and_unmeasured():
    fit = C.resolve("h200", "9.0", "0.26.0")
    e = C.resolve("h100-sxm", "9.0", "0.26.0")
    assert e.status == "transferred" and not e.calibrated and e.from_fit
    for name in C.FITTED_NAMES + C.EMULATOR_NAMES:
        assert getattr(e, name) == getattr(fit, name)
    assert e.transfer.startswith("transferred from h200 (0.26.0)")
    assert "sm_90 (Hopper)" in e.transfer
    assert "cross-GPU error unmeasured (no h100-sxm records)" in e.transfer
    assert "cross-version" not in e.transfer
    assert C.HOST_TERMS_NOTE in e.transfer_notes
    cal = calibration_of(e)
    assert cal.status == "transferred" and cal.label == e.transfer


def test_another_architecture_keeps_the_priors():
    for gid, cc in (("a100-80gb-sxm", "8.0"), ("b200", "10.0"), ("l40s", "8.9")):
        assert C.resolve(gid, cc, "0.26.0") is C.PRIORS
    assert C.resolve("h100-sxm", None, "0.26.0") is C.PRIORS  # unknown compute capability: no transfer


def test_a_fit_is_never_carried_back_to_an_earlier_version():
    assert C.resolve("h200", "9.0", "0.20.0") is C.PRIORS


def test_a_later_version_takes_the_earlier_fit_with_the_runner_change_named(gpus):
    h200 = gpus["h200"]
    dense, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    moe, _ = load_spec("Qwen/Qwen3-30B-A3B")
    md = step_model(dense, h200, vllm_version="0.33.0")
    mm = step_model(moe, h200, vllm_version="0.33.0")
    assert md.efficiency.status == mm.efficiency.status == "transferred"
    assert md.labels[0] == ("transferred from h200 (0.26.0): cross-version error unmeasured (no vLLM 0.33.0 records)")
    # vLLM 0.26.0 config/vllm.py use_v2_model_runner: dense -> V2, Qwen3MoeForCausalLM -> V1; 0.33.0: V2 for all
    assert not any("model runner" in x for x in md.labels)
    assert any("runs vLLM 0.33.0's V2 model runner but ran 0.26.0's V1" in x for x in mm.labels)
    assert UNCALIBRATED not in md.labels


def test_the_transferred_step_differs_only_by_the_gpus_peaks(gpus):
    spec, _ = load_spec("meta-llama/Meta-Llama-3-8B")
    on_h200 = step_model(spec, gpus["h200"], vllm_version="0.26.0")
    on_h100 = step_model(spec, gpus["h100-sxm"], vllm_version="0.26.0")
    t200 = on_h200.request_terms([(1, 1000)])
    t100 = on_h100.request_terms([(1, 1000)])
    # the same bytes over 3.35 instead of 4.8 TB/s, at the same fitted fraction of each
    assert t100.weights_ms == pytest.approx(t200.weights_ms * 4.8 / 3.35, rel=1e-9)
    # same bf16 peak (989 TFLOPS dense on both datasheets): the same GEMM time
    assert t100.linear_compute_ms == pytest.approx(t200.linear_compute_ms, rel=1e-9)


def test_a_measured_cross_gpu_error_goes_into_the_label(monkeypatch):
    text = """
fits:
- gpu: h200
  vllm_version: 0.26.0
  compute_capability: '9.0'
  coefficients: {bandwidth_fraction: 0.9, matmul_fraction: 0.6}
  fitted_on: [a]
  cross_gpu:
  - gpu: h100-sxm
    records: [llama3.1-8b-h100, qwen3-30b-a3b-h100]
    residuals: {tpot_p50_median_abs_pct: 6.4, ttft_p50_median_abs_pct: 11.0, output_tok_s_median_abs_pct: 4.2}
"""
    monkeypatch.setattr(C, "_bundled", lambda: C.parse_entries(text, "test"))
    e = C.resolve("h100-sxm", "9.0", "0.26.0")
    assert "cross-GPU error measured on 2 h100-sxm record(s): median |error| TPOT p50 6 %, TTFT p50 11 %, output tok/s 4 %" in e.transfer
    other = C.resolve("gh200", "9.0", "0.26.0")
    assert "cross-GPU error unmeasured (no gh200 records); measured h200 -> h100-sxm only" in other.transfer


def test_the_gpu_own_fit_of_an_earlier_version_comes_before_another_gpus(monkeypatch):
    text = """
fits:
- {gpu: h200, vllm_version: 0.26.0, compute_capability: '9.0', coefficients: {bandwidth_fraction: 0.9}}
- {gpu: h100-sxm, vllm_version: 0.26.0, compute_capability: '9.0', coefficients: {bandwidth_fraction: 0.7}}
- {gpu: h200, vllm_version: 0.33.0, compute_capability: '9.0', coefficients: {bandwidth_fraction: 0.8}}
"""
    monkeypatch.setattr(C, "_bundled", lambda: C.parse_entries(text, "test"))
    # this GPU's own fit first (its own board and host), even of an earlier version; then the same version
    e = C.resolve("h100-sxm", "9.0", "0.33.0")
    assert e.bandwidth_fraction == 0.7 and e.transfer.startswith("transferred from h100-sxm (0.26.0)")
    e = C.resolve("gh200", "9.0", "0.33.0")
    assert e.bandwidth_fraction == 0.8 and e.transfer.startswith("transferred from h200 (0.33.0)")


def test_calibrate_perf_writes_a_cross_gpu_check_that_the_label_then_names(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_perf.py"
    spec = importlib.util.spec_from_file_location("calibrate_perf", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = "# header kept\nfits:\n- {gpu: h200, vllm_version: 0.26.0, compute_capability: '9.0', coefficients: {bandwidth_fraction: 0.9}}\n"
    check = {"gpu": "h100-sxm", "vllm_version": "0.26.0", "records": ["r1"], "residuals": {"tpot_p50_median_abs_pct": 7.6}}
    out = mod.with_cross_gpu(text, "h200", "0.26.0", check)
    again = mod.with_cross_gpu(out, "h200", "0.26.0", {**check, "residuals": {"tpot_p50_median_abs_pct": 3.2}})
    assert again.startswith("# header kept\n")
    monkeypatch.setattr(C, "_bundled", lambda: C.parse_entries(again, "test"))
    e = C.resolve("h100-sxm", "9.0", "0.26.0")
    assert "cross-GPU error measured on 1 h100-sxm record(s): median |error| TPOT p50 3 %" in e.transfer  # replaced, not added
    with pytest.raises(SystemExit):
        mod.with_cross_gpu(text, "h100-sxm", "0.26.0", check)
    # a new fit replaces its own (gpu, version) entry and keeps the others
    merged = mod.merged_fits(again, {"gpu": "h100-sxm", "vllm_version": "0.26.0", "coefficients": {}})
    assert [(f["gpu"], f["vllm_version"]) for f in merged] == [("h200", "0.26.0"), ("h100-sxm", "0.26.0")]


def test_a_moe_model_moving_to_untuned_expert_tiles_says_so(gpus):
    # vLLM 0.26.0 fused_moe/configs/ holds E=128,N=768,device_name=NVIDIA_H200.json but no
    # NVIDIA_H100_80GB_HBM3 file for E=128,N=768 (it has E=128,N=384): Qwen3-30B-A3B's experts
    # (128 of intermediate 768) run the default Triton tiles on an H100 at TP 1, tuned ones at TP 2
    # (768 / 2 = 384) on both GPUs.
    from kvplan.engines.vllm.args import EngineArgs

    spec, _ = load_spec("Qwen/Qwen3-30B-A3B")
    tp1 = step_model(spec, gpus["h100-sxm"], vllm_version="0.26.0").labels
    tp2 = step_model(spec, gpus["h100-sxm"], EngineArgs(tensor_parallel_size=2), vllm_version="0.26.0").labels
    assert any(x.startswith("routed experts: vLLM 0.26.0 runs the default (untuned) Triton MoE tile config for "
                            "E=128,N=768 on h100-sxm, the fit ran a tuned one on h200") for x in tp1)
    assert not any(x.startswith("routed experts") for x in tp2)
    own = step_model(spec, gpus["h200"], vllm_version="0.26.0").labels
    assert not any(x.startswith("routed experts") for x in own)
