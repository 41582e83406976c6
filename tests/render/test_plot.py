"""Pictures: --plot FILE (matplotlib, optional) and the terminal curves (--curves)."""

from __future__ import annotations

import sys

import pytest

from helpers import run_cli

GiB = 1 << 30
ARGS = ["plan", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--concurrency", "16", "--gpus", "H200",
        "--kv-cache-dtype", "auto", "--quantization", "none"]


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG"), ("svg", b"<svg")])
def test_plot_file_is_written_and_not_empty(tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    out = tmp_path / f"plan.{suffix}"
    code, stdout, err = run_cli(*ARGS, "--plot", str(out), "--workload", "prompt=500,1500 output=200,600")
    assert code == 0, err
    data = out.read_bytes()
    assert len(data) > 1000
    assert magic in data[:400]
    assert f"plot written to {out}" in stdout


def test_plot_with_another_extension_is_bad_input(tmp_path):
    code, _, err = run_cli(*ARGS, "--plot", str(tmp_path / "plan.txt"))
    assert code == 2
    assert "--plot" in err and ".png or .svg" in err


def test_plot_without_matplotlib_exits_3(tmp_path, monkeypatch):
    # A None entry in sys.modules makes `import matplotlib` raise ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run_cli(*ARGS, "--plot", str(tmp_path / "plan.png"))
    assert code == 3
    assert "matplotlib" in err and "pip install 'kvplan-vllm[plot]'" in err
    assert not (tmp_path / "plan.png").exists()


def test_terminal_curves_and_memory_breakdown():
    code, out, _ = run_cli(*ARGS, "--curves")
    assert code == 0
    assert "concurrency vs --max-model-len" in out
    assert "concurrency vs --gpu-memory-utilization" in out
    assert "memory per GPU" in out and "KV cache" in out and "weights" in out
    assert "<- this plan" in out


def test_curve_data_is_monotonic_where_vllm_is():
    # Longer contexts cannot raise max-length concurrency; more memory cannot lower it.
    from kvplan.cli.plan import load_spec
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan
    from kvplan.render.plots import memory_parts, pictures

    p = plan(load_spec("meta-llama/Meta-Llama-3-8B", None), find_gpu("H200", load_profiles()), EngineArgs(max_model_len=8192))
    pics = pictures(p)
    by_len = [pt.max_concurrency for pt in pics.by_max_model_len]
    assert by_len == sorted(by_len, reverse=True)
    by_util = [pt.max_concurrency for pt in pics.by_utilization]
    assert by_util == sorted(by_util)
    # the breakdown adds up to the GPU's CUDA-visible memory
    assert sum(n for _, n in memory_parts(p)) == p.gpu.memory_bytes


def test_plot_of_a_plan_that_does_not_fit():
    pytest.importorskip("matplotlib")
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan
    from kvplan.render.plots import figure, pictures
    from kvplan.sources import load_spec

    spec, _ = load_spec("meta-llama/Llama-3.1-70B-Instruct", None)
    gpu = find_gpu("H100", load_profiles(None))
    p = plan(spec, gpu, EngineArgs(max_model_len=8192, vllm_version="0.33.0"))  # its 0.92 default below
    assert not p.fits
    fig = figure(pictures(p))
    try:
        ax_len, ax_util, ax_mem = fig.axes[:3]
        total_gib = gpu.memory_bytes / GiB  # the profile's CUDA total (input data)
        requested_gib = total_gib * 0.92  # vLLM's default utilization
        levels = [line.get_ydata()[0] for line in ax_mem.get_lines()]
        assert any(abs(y - total_gib) < 1e-6 for y in levels), levels
        assert any(abs(y - requested_gib) < 1e-6 for y in levels), levels
        assert ax_mem.get_ylim()[1] >= total_gib
        for ax in (ax_len, ax_util):
            texts = " ".join(t.get_text() for t in ax.texts)
            assert "does not start" in texts, texts
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
