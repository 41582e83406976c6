"""benchmarks/device/cases/issue23-*.json (the serving-benchmark runs issue 23 needs, in the device
runner's case format) name a machine, a supported version, a grid and a distinct record each."""

import json
from pathlib import Path

from kvplan.engines.vllm import versions
from kvplan.verify.bench.workload import GRIDS

CASES = Path(__file__).resolve().parents[2] / "benchmarks" / "device" / "cases"


def test_every_case_names_a_machine_version_config_grid_and_record():
    files = {"nvidia-h100-x1": CASES / "issue23-h100.json", "nvidia-h200": CASES / "issue23-h200.json"}
    seen = set()
    for machine, path in files.items():
        cases = json.loads(path.read_text())["cases"]
        assert len(cases) == 3
        for c in cases:
            assert c["kind"] == "bench" and c["machine"] == machine
            assert c["vllm"] in versions.SUPPORTED
            assert c["grid"] in GRIDS
            assert c["model"].startswith("model_specs/") and c["purpose"]
            assert all(isinstance(x, str) for x in c["serve_flags"] + c.get("bench_flags", []))
            assert c["record_to"].startswith(f"tests/data/bench/vllm-{c['vllm']}-")
            assert c["record_to"] not in seen
            seen.add(c["record_to"])
    assert len(seen) == 6
