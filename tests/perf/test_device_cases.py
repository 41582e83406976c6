"""benchmarks/device/cases_issue23.yaml is a well-formed list of runnable cases (the runs issue 23
needs; the lead's runner reads it)."""

from pathlib import Path

import yaml

from kvplan.engines.vllm import versions
from kvplan.verify.bench.workload import GRIDS

CASES = Path(__file__).resolve().parents[2] / "benchmarks" / "device" / "cases_issue23.yaml"


def test_every_case_names_a_machine_version_config_grid_and_record():
    cases = yaml.safe_load(CASES.read_text())["cases"]
    assert len(cases) == 6
    seen = set()
    for c in cases:
        assert c["machine"] in ("nvidia-h100-x1", "nvidia-h200")
        assert c["vllm_version"] in versions.SUPPORTED
        assert c["grid"] in GRIDS
        assert c["model_config"].endswith(".json") and c["purpose"]
        assert all(isinstance(x, str) for x in c["serve_flags"] + c["bench_flags"])
        assert c["record_to"].startswith(f"tests/data/bench/vllm-{c['vllm_version']}-")
        assert c["record_to"] not in seen
        seen.add(c["record_to"])
