"""`kvplan plan` input checks (fresh-eyes review 1, items 1, 23 and 30).

Bad input is ONE line on stderr naming the flag, exit 2, nothing on stdout, no traceback - and it
is caught before the model is loaded or the sweep runs. Exit 1 stays "checked, nothing meets
the target".
"""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

from helpers import run_cli

LLAMA8B = "meta-llama/Meta-Llama-3-8B"
BASE = ["plan", LLAMA8B, "--max-model-len", "8192"]


def _bad_input(args, flag, also=None):
    code, out, err = run_cli(*args)
    assert code == 2, (code, out, err)
    assert out == "", out  # nothing half-way
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and flag in lines[0], err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].lstrip().startswith("hint:")), err
    if also:
        assert also in lines[0], err
    return lines[0]


# ---------------------------------------------------------------- item 1: every numeric flag


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-inf", "NaN", "Infinity"])
def test_concurrency_must_be_finite(value):
    # The review's traceback: dp = max(1, math.ceil(concurrency / per_engine)) with nan/inf.
    _bad_input([*BASE, "--concurrency", value], "--concurrency", "finite")


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "-3"], "--concurrency"),
        (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
        (["--gpu-memory-utilization", "inf"], "--gpu-memory-utilization"),
        (["--gpu-memory-utilization", "1e400"], "--gpu-memory-utilization"),
        (["--gpu-memory-utilization", "0"], "--gpu-memory-utilization"),
        (["--gpu-memory-utilization", "-0.5"], "--gpu-memory-utilization"),
        (["--gpu-memory-utilization", "1.01"], "--gpu-memory-utilization"),
        (["--max-gpus", "0"], "--max-gpus"),
        (["--max-gpus", "-8"], "--max-gpus"),
        (["--gpus-per-node", "0"], "--gpus-per-node"),
        (["--top", "0"], "--top"),
        (["--n", "0", "--workload", "prompt=100 output=10"], "--n"),
        (["--n", "0"], "--n"),
        (["--shared-prefix-tokens", "-1", "--workload", "prompt=100 output=10"], "--shared-prefix-tokens"),
        (["--block-size", "0"], "--block-size"),
        (["--block-size", "-16"], "--block-size"),
        (["--block-size", "7"], "--block-size"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--max-num-batched-tokens", "-1"], "--max-num-batched-tokens"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size"),
        (["--tensor-parallel-size", "2048", "--gpus-per-node", "4096", "--max-gpus", "8192"], "--tensor-parallel-size"),
        (["--pipeline-parallel-size", "-1"], "--pipeline-parallel-size"),
        (["--pipeline-parallel-size", "4096", "--max-gpus", "8192"], "--pipeline-parallel-size"),
        (["--price", "H200=nan"], "--price"),
        (["--price", "H200=inf"], "--price"),
        (["--price", "H200=1e400"], "--price"),
        (["--price", "H200=-1"], "--price"),
        (["--max-model-len", "0"], "--max-model-len"),
        (["--max-model-len", "-5"], "--max-model-len"),
        (["--max-model-len", "1e400"], "--max-model-len"),
        (["--max-model-len", "nan"], "--max-model-len"),
        (["--max-model-len", "99999999999999999999999"], "--max-model-len"),
    ],
)
def test_every_numeric_flag_is_checked(args, flag):
    _bad_input([*BASE, *args], flag)


def test_numeric_flags_are_checked_before_the_model_is_loaded():
    # A model that does not exist (offline): the flag error comes first, with no lookup.
    _bad_input(["plan", "no-such-org/no-such-model", "--concurrency", "nan"], "--concurrency")
    _bad_input(["plan", "no-such-org/no-such-model", "--gpu-memory-utilization", "inf"], "--gpu-memory-utilization")


def test_search_refuses_a_non_finite_target():
    from kvplan.cli.plan import load_spec
    from kvplan.errors import KvplanError
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.search import SearchSpace, Target, search

    spec = load_spec(LLAMA8B, None)
    space = SearchSpace(gpus=(find_gpu("H200", load_profiles()),))
    for bad in (math.nan, math.inf, -math.inf, 0.0):
        with pytest.raises(KvplanError, match="concurrency"):
            search(spec, Target(8192, bad), space)
    for bad in (0, -1):
        with pytest.raises(KvplanError, match="max-model-len"):
            search(spec, Target(bad, 1.0), space)


def test_search_skips_a_parallel_size_the_engine_model_refuses():
    # EngineArgs caps TP/PP at 1024; a library caller asking for more gets a skip with the
    # reason (never a pydantic traceback), and the CLI refuses it up front (test above).
    from kvplan.cli.plan import load_spec
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.search import SearchSpace, Target, search

    spec = load_spec(LLAMA8B, None)
    space = SearchSpace(gpus=(find_gpu("H200", load_profiles()),), tensor_parallel_sizes=(1, 2048), pipeline_parallel_sizes=(1,),
                        kv_cache_dtypes=("auto",), quantizations=(None,), max_gpus=4096, gpus_per_node=4096)
    r = search(spec, Target(8192, 1.0), space)
    assert r.options and r.options[0].tensor_parallel_size == 1
    bad = [s for s in r.skipped if s.tensor_parallel_size == 2048]
    assert bad and bad[0].reason.startswith("--tensor-parallel-size")


def test_large_finite_values_still_plan():
    # In range and finite: a huge target is checked and missed (exit 1), not refused.
    code, out, err = run_cli(*BASE, "--concurrency", "1e12", "--gpus", "H200", "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["options"] == [] and doc["closest"] is not None


# ---------------------------------------------------------------- item 30: what no combination can satisfy


@pytest.mark.parametrize(
    "args, flag, why",
    [
        # Llama-3-8B: 32 attention heads, 8 KV heads - TP=3 divides neither (estimate -tp 3 exits 2 too).
        (["-tp", "3"], "--tensor-parallel-size 3", "divide"),
        (["-tp", "3,5"], "--tensor-parallel-size 3", "divide"),
        # the checkpoint is not AWQ
        (["-q", "awq"], "--quantization awq", "awq"),
        # PP=100: 100 GPUs per engine > --max-gpus 8 ...
        (["-pp", "100"], "--max-gpus 8", "100"),
        # ... and with the GPUs allowed, more stages than the model's 32 layers
        (["-pp", "100", "--max-gpus", "1000", "-tp", "1"], "--pipeline-parallel-size 100", "layers"),
        # TP stays within a node
        (["-tp", "16"], "--tensor-parallel-size 16", "--gpus-per-node 8"),
        # vLLM refuses a per-step token budget below max_num_seqs on every GPU
        (["--max-num-batched-tokens", "1"], "--max-num-batched-tokens 1", "--max-num-seqs"),
        # no fp8 KV cache on a T4 (kvplan does not propose it), and only fp8 was allowed
        (["--gpus", "T4", "--kv-cache-dtype", "fp8", "-q", "none"], "--kv-cache-dtype fp8", "fp8"),
    ],
)
def test_flags_no_combination_can_satisfy_exit_2_with_the_reason(args, flag, why):
    line = _bad_input([*BASE, *args], flag, why)
    assert "no combination could be evaluated" not in line
    # the same with --format json and --explain: still bad input, nothing on stdout
    _bad_input([*BASE, *args, "--format", "json", "--explain"], flag, why)


def test_one_valid_value_in_the_list_is_enough():
    # TP=3 is skipped (see --explain), TP=1 serves: not an input error.
    code, out, err = run_cli(*BASE, "-tp", "1,3", "--gpus", "H200", "--format", "json", "--explain")
    assert code == 0, err
    doc = json.loads(out)
    assert any(s["category"] == "invalid_parallel" and s["tensor_parallel_size"] == 3 for s in doc["skipped"])


def test_nothing_meets_the_target_stays_exit_1():
    # Engines are sized (they start, or fail to start for memory): that is a checked "no", exit 1.
    code, out, _ = run_cli("plan", "meta-llama/Llama-3.1-405B", "--max-model-len", "8192", "--gpus", "L40S")
    assert code == 1 and "closest:" in out
    code, out, _ = run_cli(*BASE, "--concurrency", "100000", "--gpus", "H200", "-tp", "1", "-pp", "1")
    assert code == 1 and "closest:" in out


# ---------------------------------------------------------------- item 23: --plot before any output


@pytest.mark.parametrize(
    "name, also",
    [("x.pdf", ".png or .svg"), ("x", ".png or .svg"), ("nodir/e.png", "directory"), ("", "empty")],
)
def test_bad_plot_path_fails_before_the_search(tmp_path, name, also):
    path = str(tmp_path / name) if name else ""
    # a model that does not exist: the --plot error comes first, before any lookup or sweep
    _bad_input(["plan", "no-such-org/no-such-model", "--plot", path], "--plot", also)
    _bad_input([*BASE, "--plot", path, "--format", "json"], "--plot", also)


def test_plot_onto_a_directory_is_bad_input(tmp_path):
    d = tmp_path / "pics.png"
    d.mkdir()
    _bad_input([*BASE, "--plot", str(d)], "--plot", "directory")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes anywhere")
def test_plot_into_a_read_only_directory_is_bad_input(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        _bad_input([*BASE, "--plot", str(d / "p.png")], "--plot", "writ")
    finally:
        d.chmod(0o700)


def test_plot_without_matplotlib_exits_3_before_any_output(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run_cli("plan", "no-such-org/no-such-model", "--plot", str(tmp_path / "p.png"))
    assert code == 3, err
    assert out == "" and "matplotlib" in err and "Traceback" not in err


def test_validate_plot_is_the_early_check_estimate_can_call(tmp_path, monkeypatch):
    from kvplan.cli.plan import validate_plot
    from kvplan.errors import EnvironmentMissing, KvplanError

    assert validate_plot(None) is None
    pytest.importorskip("matplotlib")
    assert validate_plot(str(tmp_path / "a.PNG")) == tmp_path / "a.PNG"
    assert validate_plot(str(tmp_path / "a.svg")) == tmp_path / "a.svg"
    for bad in ("a.pdf", "nodir/a.png", ""):
        with pytest.raises(KvplanError, match="--plot") as exc:
            validate_plot(str(tmp_path / bad) if bad else bad)
        assert exc.value.exit_code == 2
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(EnvironmentMissing, match="matplotlib"):
        validate_plot(str(tmp_path / "a.png"))
    assert not list(tmp_path.iterdir())  # checking writes nothing


def test_a_failed_plot_write_leaves_no_file(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from kvplan.cli.plan import load_spec
    from kvplan.errors import KvplanError
    from kvplan.gpus import find_gpu, load_profiles
    from kvplan.capacity.estimate import EngineArgs, plan
    from kvplan.render.plots import pictures, save_plot

    p = plan(load_spec(LLAMA8B, None), find_gpu("H200", load_profiles()), EngineArgs(max_model_len=8192))
    pics = pictures(p)

    def half_then_fail(self, fname, *a, **kw):
        with open(fname, "wb") as f:
            f.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half_then_fail)
    out = tmp_path / "p.png"
    with pytest.raises(KvplanError, match="--plot"):
        save_plot(pics, str(out))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["x.pdf", "nodir/x.png", ""])
def test_estimate_bad_plot_fails_before_the_report(tmp_path, name):
    path = str(tmp_path / name) if name else ""
    code, out, err = run_cli("estimate", LLAMA8B, "--max-model-len", "8192", "--plot", path)
    assert code == 2 and out == "" and "--plot" in err
