"""`kvplan schema`: the JSON Schema accepts what check accepts and rejects what check rejects."""

from __future__ import annotations

import json
import pytest
from tests.helpers import run_cli


def _schema_errors(instance: dict) -> list:
    jsonschema = pytest.importorskip("jsonschema")
    code, out, _ = run_cli("schema")
    assert code == 0
    validator = jsonschema.Draft202012Validator(json.loads(out))
    return list(validator.iter_errors(instance))


@pytest.mark.parametrize(
    "instance",
    [
        {"model": "m", "bogus-flag": 1},  # check: unknown-flag error
        {"model": "m", "max-model-len": "abc"},  # check: invalid-value
        {"model": "m", "gpu-memory-utilization": 1.5},  # check: outside (0, 1]
        {"model": "m", "gpu-memory-utilization": 0},
        {"model": "m", "tensor-parallel-size": -3},
        {"model": "m", "max-num-seqs": 0},
    ],
)
def test_schema_rejects_what_check_rejects(instance):
    assert _schema_errors(instance)


@pytest.mark.parametrize(
    "instance",
    [
        {"model": "m", "max-model-len": 8192, "gpu-memory-utilization": 1.0, "tensor-parallel-size": 2},
        {"model": "m", "max-model-len": "32k"},  # vLLM reads human-readable sizes
        {"model": "m", "max-model-len": -1},  # -1: fit the largest length (vLLM 0.26.0)
        {"model": "m", "max_model_len": 8192},  # vLLM turns underscores into dashes
        {"model": "m", "no-enable-prefix-caching": True, "kvplan": {"gpu": "H100"}},
    ],
)
def test_schema_accepts_valid_configs(instance):
    assert _schema_errors(instance) == []


def test_schema_manifest_requires_name():
    code, out, _ = run_cli("schema", "manifest")
    schema = json.loads(out)
    dep = schema["$defs"]["ManifestDeployment"]
    assert "name" in dep["required"] and code == 0
