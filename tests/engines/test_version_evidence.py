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


def test_the_026_table_names_the_026_starts_in_tests_data():
    from kvplan.engines.vllm.v0_26 import real_starts

    dirs = [DATA / "vllm-0.26.0-h200", DATA / "calibration" / "vllm-0.26.0-h200", *sorted((DATA / "logs").glob("device-h200-*"))]
    assert set(real_starts.STARTS) == _starts_in(dirs)
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
        # B200: NVML total >= 160 GiB, batch defaults left to vLLM -> the new tier
        (("--gpu", "B200", "--enforce-eager"), ["the >= 160 GiB batch-default tier (max_num_batched_tokens 16384, max_num_seqs 1024)"]),
        # both batch sizes given: the tier decides nothing
        (("--gpu", "B200", "--enforce-eager", "--max-num-seqs", "256", "--max-num-batched-tokens", "8192"), []),
    ],
)
def test_an_033_estimate_names_the_unchecked_rules_it_uses(args, unchecked):
    ev = _doc("--vllm-version", "0.33.0", *args)["evidence"]
    assert ev["unchecked"] == unchecked
    assert ev["checked"] is (not unchecked)
    if unchecked:
        assert ev["label"].startswith("derived from the source, not yet checked on hardware: " + unchecked[0])


def test_a_mamba_hybrid_on_033_is_checked_by_the_granite_start():
    # granite4h-small_eager (tests/data/vllm-0.33.0-h200) checked the Mamba align pages
    code, out, err = run_cli("estimate", "ibm-granite/granite-4.0-h-small", "--vllm-version", "0.33.0", "--enforce-eager",
                             "--max-model-len", "8192", "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)["evidence"]["unchecked"] == []


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
