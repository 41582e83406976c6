"""Real vLLM 0.26.0 starts of model families new to kvplan (issue 12), for the per-family tests.

The logs in tests/data/vllm-0.26.0-h200/families/ (see that folder's README.md) each hold the
exact config.json started (KVPLAN_CONFIG), the engine arguments (KVPLAN_CASE), vLLM's RESULT
line and the worker's exact bytes (KVPLAN_EXACT: weights, peak activation, non-torch, KV-cache
groups). Nothing here is fitted to them: the tests compare kvplan's rules with what vLLM measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import run_cli

from kvplan.engines.vllm.v0_26.weights import weight_bytes_per_rank
from kvplan.model.parse import parse_config
from kvplan.model.spec import ModelSpec
from kvplan.sources.bundled import find_bundled

FAMILY_LOGS = Path(__file__).parent / "data" / "vllm-0.26.0-h200" / "families"


@dataclass(frozen=True)
class Start:
    """One recorded start: its config, engine arguments, num_gpu_blocks and exact bytes."""

    path: Path
    config: dict[str, Any]
    engine_args: dict[str, Any]
    num_gpu_blocks: int
    exact: dict[str, Any]

    def spec(self) -> ModelSpec:
        return parse_config(self.config, self.path.stem)

    def predicted_weights(self) -> int:
        spec = self.spec()
        return weight_bytes_per_rank(spec, tensor_parallel_size=1, quant=spec.quantization).total


def start(name: str) -> Start:
    path = FAMILY_LOGS / f"{name}.log"
    config = case = exact = None
    blocks = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("KVPLAN_CONFIG "):
            config = json.loads(line.split(" ", 1)[1])
        elif line.startswith("KVPLAN_CASE "):
            case = json.loads(line.split(" ", 1)[1])
        elif line.startswith("KVPLAN_EXACT "):
            exact = json.loads(line.split(" ", 1)[1])
        elif line.startswith("RESULT "):
            blocks = int(line.split("num_gpu_blocks=")[1].split()[0])
    assert config and case and exact and blocks, f"{path.name}: not a complete start log"
    return Start(path, config, case["engine_args"], blocks, exact)


def bundled_config(repo_id: str) -> dict[str, Any]:
    source = find_bundled(repo_id)
    assert source is not None, f"{repo_id} is not bundled in model_specs/"
    return source.config


def replay(s: Start) -> dict[str, Any]:
    """`kvplan verify --from-log` on the start, as JSON (exit 0 = within 1 % of num_gpu_blocks)."""
    code, out, err = run_cli("verify", "--from-log", str(s.path), "--format", "json")
    assert code == 0, (code, err, out[-2000:])
    return json.loads(out)


def replay_at(s: Start, vllm_version: str) -> dict[str, Any]:
    """replay() under the rules of ``vllm_version`` named explicitly (the start's own version),
    so the expectation holds whatever kvplan's default version is."""
    code, out, err = run_cli("verify", "--from-log", str(s.path), "--format", "json", "--vllm-version", vllm_version)
    assert code == 0, (code, err, out[-2000:])
    return json.loads(out)


def pct(predicted: int, measured: int) -> float:
    return 100.0 * (predicted - measured) / measured


def estimate_json(config: dict[str, Any], tmp_path: Path, *args: str) -> dict[str, Any]:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)
