"""docs/architectures.md is generated from the family registry (benchmarks/architectures_doc.py):
the committed file must be what the generator writes now, and it must name every architecture
vLLM 0.26.0 serves as a text generator."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kvplan.engines.vllm.v0_26.architectures import MULTIMODAL_BACKBONES, TEXT_GENERATION, TRANSFORMERS_BACKEND_TEXT
from kvplan.model.families import FAMILIES

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("architectures_doc", ROOT / "benchmarks" / "architectures_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_doc_is_the_generated_one():
    doc = (ROOT / "docs" / "architectures.md").read_text()
    assert doc == _generator().render(), "docs/architectures.md is stale: run python benchmarks/architectures_doc.py"


def test_doc_has_one_row_per_architecture():
    doc = (ROOT / "docs" / "architectures.md").read_text()
    rows = {line.split("|")[1].strip() for line in doc.splitlines() if line.startswith("| ") and "---" not in line}
    # vLLM 0.26.0 registry.py: 129 names in _TEXT_GENERATION_MODELS (issue 12 counts them too)
    assert len(TEXT_GENERATION) == 129
    for name in (*TEXT_GENERATION, *TRANSFORMERS_BACKEND_TEXT, *MULTIMODAL_BACKBONES, *FAMILIES):
        assert name in rows, name


def test_a_family_row_names_its_module_and_a_real_start_count():
    doc = (ROOT / "docs" / "architectures.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| OlmoeForCausalLM |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[2] == "`olmoe`"
    # one recorded start: tests/data/vllm-0.26.0-h200/families/olmoe-1b-7b_eager.log
    assert cells[5] == "1"
