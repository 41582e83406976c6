"""Mistral-3 multimodal (kvplan/model/families/mistral3.py: the Mistral text model + the Pixtral
vision tower and projector as vLLM 0.26.0 mistral3.py / pixtral.py build them) on the real
Mistral-Small-3.2-24B config (tests/data/model_configs/, source recorded there): text and vision
weights equal the meta-device count (tests/data/meta_param_counts.json) and hand arithmetic, KV
bytes per token by hand, ``--limit-mm-per-prompt '{"image": 0}'`` drops the tower as vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params, oracle_text_params

NAME = "mistralai__Mistral-Small-3.2-24B-Instruct-2506"
CONFIG = json.loads((Path(__file__).parents[2] / "data" / "model_configs" / f"{NAME}.json").read_text())["config"]
ORACLE = MODELS[f"model_configs/{NAME}.json"]
V26 = ("--vllm-version", "0.26.0")

# Pixtral, by hand: patch conv 3 x 14 x 14 -> 1024 (no bias), ln_pre 1024; 24 layers of two
# RMSNorms, q/k/v/o 1024 x 1024, gated MLP 3 x 1024 x 4096; projector: RMSNorm 1024, patch merger
# 1024 x 4 -> 1024, linear_1 1024 -> 5120, linear_2 5120 -> 5120 (no biases)
TOWER = 3 * 14 * 14 * 1024 + 1024 + 24 * (2 * 1024 + 4 * 1024 * 1024 + 3 * 1024 * 4096)
PROJECTOR = 1024 + 4096 * 1024 + 1024 * 5120 + 5120 * 5120


def test_layers_and_text_weights():
    spec = parse_config(CONFIG, "m3", vllm_version="0.26.0")
    assert spec.exact and spec.architecture == "Mistral3ForConditionalGeneration" and spec.model_type == "mistral"
    assert spec.layer_kinds == (LayerKind.FULL,) * 40 and not spec.tie_word_embeddings
    # by hand: q, o 32 x 128 = 4096 x 5120, k, v 1024 x 5120, MLP 3 x 5120 x 32768, 2 norms; untied
    # 131072 x 5120 twice; final norm
    layer = 2 * 4096 * 5120 + 2 * 1024 * 5120 + 3 * 5120 * 32768 + 2 * 5120
    assert kvplan_text_params(spec) == 2 * 131072 * 5120 + 40 * layer + 5120 == oracle_text_params(ORACLE)


def test_vision_tower_and_projector():
    spec = parse_config(CONFIG, "m3", vllm_version="0.26.0")
    assert spec.is_multimodal and spec.mm_modalities == ("image",)
    assert spec.vision_params == TOWER + PROJECTOR == ORACLE["components"]["vision"] == 438_958_080


def test_vision_feature_layer_cuts_the_tower():
    # mistral3.py builds the tower only up to the deepest feature layer: -2 keeps 23 of 24
    spec = parse_config({**CONFIG, "vision_feature_layer": -2}, "m3", vllm_version="0.26.0")
    assert spec.vision_params == TOWER + PROJECTOR - (2 * 1024 + 4 * 1024 * 1024 + 3 * 1024 * 4096)
    spec = parse_config({**CONFIG, "vision_feature_layer": [3, -1]}, "m3", vllm_version="0.26.0")
    assert spec.vision_params == TOWER + PROJECTOR
    with pytest.raises(KvplanError, match="'vision_feature_layer'"):
        parse_config({**CONFIG, "vision_feature_layer": 30}, "m3", vllm_version="0.26.0")


def test_kv_and_text_only_start(tmp_path):
    out = estimate_json(CONFIG, tmp_path, "--max-model-len", "32768", *V26)
    # 40 layers x 8 KV heads x 128 x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 40 * 8 * 128 * 2 * 2 == 163_840
    assert out["model"]["layer_kinds"] == {"full_attention": 40}
    assert out["exact"] is False  # the image encoder's profile is not modelled (approximate)
    assert any("encoder" in a for a in out["approximate"]), out["approximate"]
    assert out["memory"]["weights_breakdown"]["vision"] == (TOWER + PROJECTOR) * 2
    text_only = estimate_json(CONFIG, tmp_path, "--max-model-len", "32768", "--limit-mm-per-prompt", '{"image": 0}', *V26)
    assert "vision" not in text_only["memory"]["weights_breakdown"]
    assert text_only["exact"] is True  # text-only: vLLM skips the encoder profile
    assert out["memory"]["weights_bytes"] - text_only["memory"]["weights_bytes"] == (TOWER + PROJECTOR) * 2
