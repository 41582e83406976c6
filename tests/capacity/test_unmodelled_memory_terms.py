"""An estimate that warns a memory term of vLLM's start is not modelled is not exact: the reason
is in the JSON ``approximate`` list, the table's "approximate, not exact" line, plan's options,
and `kvplan check` (a warning, so --strict fails). The multimodal encoder profile is the case
here (Qwen3-VL-8B, the config of the real start families/qwen3-vl-8b_eager); with every modality
limited to 0 vLLM runs the model text-only and skips the profile, so the estimate stays exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from family_starts import start
from tests.check.common import check, diag, write
from tests.helpers import run_cli, unwrapped

TEXT_ONLY = '{"image":0,"video":0}'
ENCODER = "is multimodal: vLLM also profiles its vision encoder"


@pytest.fixture
def vl_dir(tmp_path: Path) -> Path:
    d = tmp_path / "qwen3-vl-8b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(start("qwen3-vl-8b_eager").config), encoding="utf-8")
    return d


def _estimate(d: Path, *args: str) -> dict:
    code, out, err = run_cli("estimate", str(d), "--gpu", "H200", "--enforce-eager", "--vllm-version", "0.26.0",
                             *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_the_encoder_profile_warning_makes_the_estimate_approximate(vl_dir):
    doc = _estimate(vl_dir)
    assert any(ENCODER in w for w in doc["warnings"])
    assert doc["exact"] is False
    assert [a for a in doc["approximate"] if ENCODER in a] == [
        "Qwen3VLForConditionalGeneration is multimodal: vLLM also profiles its vision encoder on the largest image "
        "batch, which kvplan does not model; the activation peak may be higher and the KV cache smaller"
    ]
    code, out, _ = run_cli("estimate", str(vl_dir), "--gpu", "H200", "--enforce-eager", "--vllm-version", "0.26.0")
    assert "approximate, not exact: Qwen3VLForConditionalGeneration is multimodal" in unwrapped(out)


def test_text_only_skips_the_profile_and_stays_exact(vl_dir):
    doc = _estimate(vl_dir, "--limit-mm-per-prompt", TEXT_ONLY)
    assert doc["exact"] is True and "approximate" not in doc
    assert not any(ENCODER in w for w in doc["warnings"])
    # one modality left on: the encoder is profiled again
    assert _estimate(vl_dir, "--limit-mm-per-prompt", '{"image":1,"video":0}')["exact"] is False


def test_plan_options_carry_the_reason(vl_dir):
    # (plan takes no --limit-mm-per-prompt: its options are always the full multimodal start)
    def plan(*extra: str) -> dict:
        code, out, err = run_cli("plan", str(vl_dir), "--max-model-len", "8192", "--concurrency", "4", "--gpus", "H200",
                                 "--enforce-eager", "--vllm-version", "0.26.0", *extra, "--format", "json")
        assert code == 0, err
        return json.loads(out)

    doc = plan()
    assert doc["exact"] is False and any(ENCODER in a for a in doc["approximate"])
    assert doc["options"] and all(o["exact"] is False for o in doc["options"])


def test_check_warns_and_strict_fails(vl_dir, tmp_path):
    def deployment(extra: str) -> str:
        return write(tmp_path, "Dockerfile", f"""
            FROM vllm/vllm-openai:v0.26.0
            # kvplan: gpu=H200
            CMD ["--model", "{vl_dir}", "--max-model-len", "8192", "--enforce-eager"{extra}]
            """)

    path = deployment("")
    code, doc, _ = check(path)
    d = diag(doc, "approximate")
    assert d["severity"] == "warning" and ENCODER in d["message"]
    assert check(path, "--strict")[0] == 1
    path = deployment(f', "--limit-mm-per-prompt", {json.dumps(TEXT_ONLY)}')
    code, doc, _ = check(path)
    assert not [x for x in doc["diagnostics"] if x["check_id"] == "approximate"]
