"""The evidence label: what an estimate's numbers stand on. Each version's package lists the
real starts it was checked on (real_starts.STARTS, a committed table, since the package never
reads tests/); this table must name exactly the starts tests/data holds. An estimate that uses
a rule none of them checked says so, naming the rule, in every output format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.vllm import versions
from tests.helpers import run_cli, unwrapped

DATA = Path(__file__).parents[1] / "data"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # bundled
H200_ONLY = "the {} (every real start ran on the H200, not this GPU)"


def _starts_in(dirs: list[Path]) -> set[str]:
    """Real starts under ``dirs``: raw child logs (*.log, not install logs) and records (*.json
    with a log_excerpt), a record and its log being one start; as paths under tests/data."""
    out = set()
    for d in dirs:
        for p in d.rglob("*"):
            if p.suffix == ".log" and not p.name.startswith("install"):
                out.add(str(p.relative_to(DATA).with_suffix("")))
            elif p.suffix == ".json":
                rec = json.loads(p.read_text(encoding="utf-8"))
                if isinstance(rec, dict) and "log_excerpt" in rec:
                    out.add(str(p.relative_to(DATA).with_suffix("")))
    return out


def test_the_033_table_names_the_033_starts_in_tests_data():
    from kvplan.engines.vllm.v0_33 import real_starts

    assert set(real_starts.STARTS) == _starts_in([DATA / "vllm-0.33.0-h200"])
    assert len(real_starts.STARTS) == len(set(real_starts.STARTS))


def test_the_034_table_names_the_034_starts_in_tests_data():
    from kvplan.engines.vllm.v0_34 import real_starts

    # the starts the rules were checked on, and the logs left out with the reason
    assert set(real_starts.STARTS) | set(real_starts.NOT_USED) == _starts_in([DATA / "vllm-0.34.0-h100"])
    assert not set(real_starts.STARTS) & set(real_starts.NOT_USED)
    assert len(real_starts.STARTS) == len(set(real_starts.STARTS))
    # every start a rule names as its check is one of the table's
    assert {s for starts in real_starts.CHECKED.values() for s in starts} <= set(real_starts.STARTS)


def test_the_026_table_names_the_026_starts_in_tests_data():
    from kvplan.engines.vllm.v0_26 import real_starts

    dirs = [DATA / "vllm-0.26.0-h200", DATA / "vllm-0.26.0-h100", DATA / "calibration" / "vllm-0.26.0-h200",
            *sorted((DATA / "logs").glob("device-h200-*"))]
    assert set(real_starts.STARTS) | set(real_starts.NOT_USED) == _starts_in(dirs)
    assert not set(real_starts.STARTS) & set(real_starts.NOT_USED)
    assert len(real_starts.STARTS) == len(set(real_starts.STARTS))


def _doc(*args: str) -> dict:
    code, out, err = run_cli("estimate", MODEL, "--max-model-len", "8192", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_a_checked_033_estimate_says_calibrated_with_the_count():
    n = len(__import__("kvplan.engines.vllm.v0_33.real_starts", fromlist=["STARTS"]).STARTS)
    ev = _doc("--vllm-version", "0.33.0", "--enforce-eager", "--gpu", "H200")["evidence"]
    assert ev == {"checked": True, "real_starts": n, "unchecked": [], "label": f"calibrated on {n} real vLLM 0.33.0 starts"}


def test_026_is_calibrated_with_cuda_graphs_too():
    n = len(__import__("kvplan.engines.vllm.v0_26.real_starts", fromlist=["STARTS"]).STARTS)
    ev = _doc("--vllm-version", "0.26.0")["evidence"]
    assert ev["checked"] is True and ev["label"] == f"calibrated on {n} real vLLM 0.26.0 starts"


@pytest.mark.parametrize(
    ("args", "unchecked"),
    [
        (("--gpu", "H200"), ["CUDA-graph memory estimate"]),
        # B200: NVML total >= 160 GiB, batch defaults left to vLLM -> the new tier; and no start ran on a B200
        (("--gpu", "B200", "--enforce-eager"), ["the >= 160 GiB batch-default tier (max_num_batched_tokens 16384, max_num_seqs 1024)",
                                                H200_ONLY.format("NVIDIA B200 180GB")]),
        # both batch sizes given: the tier decides nothing; the GPU is still unchecked
        (("--gpu", "B200", "--enforce-eager", "--max-num-seqs", "256", "--max-num-batched-tokens", "8192"),
         [H200_ONLY.format("NVIDIA B200 180GB")]),
    ],
)
def test_an_033_estimate_names_the_unchecked_rules_it_uses(args, unchecked):
    ev = _doc("--vllm-version", "0.33.0", *args)["evidence"]
    assert ev["unchecked"] == unchecked
    assert ev["checked"] is (not unchecked)
    if unchecked:
        assert ev["label"].startswith("derived from the source, not yet checked on hardware: " + unchecked[0])


def test_a_mamba_hybrid_on_033_is_checked_by_the_granite_start(tmp_path):
    # granite4h-small_eager (tests/data/vllm-0.33.0-h200) checked the Mamba align pages; its own
    # config (the start's KVPLAN_CONFIG line) is complete, the bundled snapshot is partial
    log = DATA / "vllm-0.33.0-h200" / "granite4h-small_eager.log"
    line = next(x for x in log.read_text(encoding="utf-8").splitlines() if x.startswith("KVPLAN_CONFIG "))
    (tmp_path / "config.json").write_text(line.split(" ", 1)[1], encoding="utf-8")
    for model, unchecked in ((str(tmp_path), []), ("ibm-granite/granite-4.0-h-small", [PARTIAL])):
        code, out, err = run_cli("estimate", model, "--vllm-version", "0.33.0", "--enforce-eager", "--gpu", "H200",
                                 "--max-model-len", "8192", "--format", "json")
        assert code in (0, 1), err
        assert json.loads(out)["evidence"]["unchecked"] == unchecked


def test_the_label_shows_in_the_table_and_serve_and_yaml_formats():
    code, out, _ = run_cli("estimate", MODEL, "--max-model-len", "8192", "--vllm-version", "0.33.0")
    assert code == 0
    assert ("evidence: vLLM 0.33.0 (--vllm-version): derived from the source, not yet checked on hardware: "
            "CUDA-graph memory estimate") in unwrapped(out)
    for fmt in ("serve", "yaml"):
        code, out, err = run_cli("estimate", MODEL, "--max-model-len", "8192", "--vllm-version", "0.26.0", "--format", fmt)
        assert code == 0
        n = len(versions.SUPPORTED["0.26.0"].real_starts.STARTS)
        assert err.splitlines()[0] == f"kvplan: vLLM 0.26.0 (--vllm-version): calibrated on {n} real vLLM 0.26.0 starts"
        assert "calibrated" not in out  # stdout stays the line / the file


def test_plan_labels_each_option():
    def options(gpus: str) -> list[dict]:
        code, out, _ = run_cli("plan", MODEL, "--max-model-len", "8192", "--concurrency", "4", "--gpus", gpus,
                               "--vllm-version", "0.33.0", "--enforce-eager", "--format", "json")
        assert code == 0
        doc = json.loads(out)
        assert doc["vllm"] == {"version": "0.33.0", "reason": "--vllm-version"}
        return doc["options"]

    assert all(o["evidence"]["checked"] for o in options("H200"))
    assert all(o["evidence"]["unchecked"][0].startswith("the >= 160 GiB batch-default tier") for o in options("B200"))
    code, out, _ = run_cli("plan", MODEL, "--max-model-len", "8192", "--concurrency", "4", "--gpus", "H200",
                           "--vllm-version", "0.33.0")
    text = unwrapped(out)
    assert "vllm: vLLM 0.33.0 (--vllm-version)" in text
    assert "evidence: derived from the source, not yet checked on hardware: CUDA-graph memory estimate" in text


def test_the_json_schema_describes_the_labels():
    from kvplan.render.schema import EstimateDocument

    doc = _doc("--vllm-version", "0.33.0")
    EstimateDocument.model_validate(doc)  # strict: vllm and evidence are part of the contract


# The GPU each real start ran on is the version's table (real_starts.STARTS: path -> profile id).
# 0.33.0: every start on an H200; 0.26.0: H200s and one H100 SXM (vllm-0.26.0-h100/gptoss20b_graphs).
PARALLEL = "tensor/pipeline parallel > 1 (NCCL and custom all-reduce memory; every real start ran on one GPU)"
PARTIAL = ("a partial bundled config snapshot (keys it lacks take transformers' defaults; for exact figures "
           "give the model's own config.json)")
BOTH = "the {} (the real starts ran on the H100-SXM and H200, not this GPU)"
OTHER_GPU = {"0.33.0": H200_ONLY, "0.26.0": BOTH}
USER_MEMORY = {
    "0.33.0": "a GPU of 80.00 GiB given by --gpu-memory (every real start ran on the H200, with its own memory)",
    "0.26.0": "a GPU of 80.00 GiB given by --gpu-memory (the real starts ran on the H100-SXM and H200, each with its own memory)",
}


@pytest.mark.parametrize(("version", "gpus"), [("0.26.0", {"h200", "h100-sxm"}), ("0.33.0", {"h200"}), ("0.34.0", {"h100-sxm"})])
def test_each_start_names_the_gpu_profile_it_ran_on(version, gpus):
    from kvplan.engines.vllm.rules import start_gpus
    from kvplan.gpus import bundled_profiles, find_gpu

    starts = versions.SUPPORTED[version].real_starts.STARTS
    assert start_gpus(starts) == gpus
    profiles = bundled_profiles()
    for path, gpu_id in starts.items():
        # the folder names the GPU by an alias ("vllm-0.34.0-h100", "device-h200-<date>"): the
        # profile it resolves to is the table's
        folder = next(part for part in path.split("/") if part.startswith(("vllm-", "device-")))
        alias = folder.split("-", 2)[2] if folder.startswith("vllm-") else folder.split("-")[1]
        assert find_gpu(alias, profiles).id == gpu_id, path
        log = DATA / (path + ".log")
        if log.exists():  # the device name kvplan's child logged, where it logged one
            text = log.read_text(encoding="utf-8", errors="replace")
            names = {p.reported_name for p in profiles.values() if p.reported_name and p.reported_name in text}
            assert not names or profiles[gpu_id].reported_name in names, (path, names)


@pytest.mark.parametrize(
    ("args", "unchecked"),
    [
        (("--gpu", "H200"), []),
        (("--gpu", "H200", "-tp", "2"), [PARALLEL]),
        (("--gpu", "H200", "--pipeline-parallel-size", "2"), [PARALLEL]),
        (("--gpu", "A100-80GB"), ["OTHER:NVIDIA A100 80GB SXM4"]),
        (("--gpu", "L40S", "-tp", "2"), [PARALLEL, "OTHER:NVIDIA L40S"]),
        (("--gpu", "H200", "--gpu-memory", "80GiB"), ["USER"]),
    ],
)
@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
def test_parallel_and_other_gpus_are_labelled_unchecked(version, args, unchecked):
    unchecked = [USER_MEMORY[version] if u == "USER" else OTHER_GPU[version].format(u[6:]) if u.startswith("OTHER:") else u
                 for u in unchecked]
    ev = _doc("--vllm-version", version, "--enforce-eager", *args)["evidence"]
    assert ev["unchecked"] == unchecked
    assert ev["checked"] is (not unchecked)
    if unchecked:
        assert ev["label"].startswith("derived from the source, not yet checked on hardware: " + "; ".join(unchecked))
        code, out, _ = run_cli("estimate", MODEL, "--max-model-len", "8192", "--vllm-version", version,
                               "--enforce-eager", *args)
        assert "not yet checked on hardware: " + unchecked[0] in unwrapped(out)
    else:
        assert ev["label"].startswith("calibrated on")


@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
def test_a_partial_bundled_spec_is_unchecked_and_not_exact(version):
    code, out, err = run_cli("estimate", "ai21labs/Jamba-v0.1", "--gpu", "H200", "--enforce-eager", "--max-model-len",
                             "8192", "--vllm-version", version, "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["evidence"]["unchecked"] == [PARTIAL]
    assert doc["exact"] is False
    assert any(a.startswith("bundled spec model_specs/ai21labs__Jamba-v0.1.json is partial") and
               "for exact figures give the model's own config.json" in a for a in doc["approximate"])
    code, out, _ = run_cli("estimate", "ai21labs/Jamba-v0.1", "--gpu", "H200", "--enforce-eager", "--max-model-len",
                           "8192", "--vllm-version", version)
    text = unwrapped(out)
    assert "approximate, not exact: bundled spec model_specs/ai21labs__Jamba-v0.1.json is partial" in text
    assert "not yet checked on hardware: a partial bundled config snapshot" in text


# The 0.34.0 starts ran on an H100 SXM (tests/data/vllm-0.34.0-h100, the log's device name "NVIDIA
# H100 80GB HBM3"); the 0.26.0 starts on H200s and one H100 SXM (vllm-0.26.0-h100/gptoss20b_graphs).
@pytest.mark.parametrize("version", ["0.34.0", "0.26.0"])
@pytest.mark.parametrize("name", ["H100", "NVIDIA H100 80GB HBM3", "h100-sxm"])
def test_every_alias_of_a_start_gpu_is_that_gpu(version, name):
    ev = _doc("--vllm-version", version, "--enforce-eager", "--gpu", name)["evidence"]
    assert not [u for u in ev["unchecked"] if "H100" in u or "start ran" in u], ev


def test_another_h100_is_not_the_starts_h100():
    ev = _doc("--vllm-version", "0.34.0", "--enforce-eager", "--gpu", "h100-pcie")["evidence"]
    assert ("the NVIDIA H100 PCIe 80GB (every real start ran on the H100-SXM, not this GPU)"
            in ev["unchecked"])


def test_a_log_from_the_starts_gpu_is_calibrated():
    # the GPU a log measured is a one-profile file of its own (id "measured-gpu") whose reported
    # name resolves to the h100-sxm profile: the starts' GPU, not "another GPU"
    code, out, err = run_cli("verify", "--from-log", str(DATA / "vllm-0.34.0-h100" / "llama3-8b_serve_graphs.log"))
    assert code == 0, err
    text = unwrapped(out)
    assert "predicted with: vLLM 0.34.0 (named by the log): calibrated on 8 real vLLM 0.34.0 starts" in text
    assert "not this GPU" not in text and "not yet checked" not in text


def test_fully_modelled_is_no_hardware_claim_and_exact_is_its_deprecated_twin():
    # B200: kvplan has every rule for a Llama (fully modelled), yet no real start ran on a B200
    doc = _doc("--vllm-version", "0.34.0", "--gpu", "B200")
    assert doc["fully_modelled"] is True and doc["exact"] is True
    assert doc["evidence"]["checked"] is False
    assert any(u.startswith("the NVIDIA B200 180GB (") for u in doc["evidence"]["unchecked"])
    from kvplan.render.schema import estimate_json_schema

    props = estimate_json_schema()["properties"]
    assert props["exact"]["deprecated"] is True and "never meant 'checked on hardware'" in props["exact"]["description"]
    assert "no claim that real starts checked" in props["fully_modelled"]["description"]
