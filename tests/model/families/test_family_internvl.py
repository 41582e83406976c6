"""InternVL (kvplan/model/families/internvl.py: the ``llm_config`` decoder's family + the InternViT
tower and mlp1 projector as vLLM 0.26.0 internvl.py / intern_vit.py build them) on the real
InternVL3-1B config (tests/data/model_configs/, source recorded there).

InternVLChatModel is remote code (transformers has no ``internvl_chat`` model type; the oracle
records the error), so weights are checked by hand arithmetic from vLLM's model files, written
below; the stored config's source also prints the module tree (layer widths) the count follows.
KV bytes per token by hand; ``--limit-mm-per-prompt`` image and video 0 drops the tower as vLLM does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from family_starts import estimate_json

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind
from model.test_meta_oracle import MODELS, kvplan_text_params

NAME = "OpenGVLab__InternVL3-1B"
CONFIG = json.loads((Path(__file__).parents[2] / "data" / "model_configs" / f"{NAME}.json").read_text())["config"]
V26 = ("--vllm-version", "0.26.0")

# InternViT-300M by hand (intern_vit.py): class embedding 1024, patch conv 3 x 14 x 14 -> 1024 with
# bias, positions (448 / 14)^2 + 1 = 1025 rows of 1024; 24 layers of two LayerNorms (weight + bias),
# ls1 + ls2, qkv 1024 -> 3072 with bias, proj 1024 -> 1024 with bias, fc1 1024 -> 4096 and fc2
# 4096 -> 1024 with biases
EMBEDDINGS = 1024 + (3 * 14 * 14 * 1024 + 1024) + 1025 * 1024
LAYER = 2 * 2 * 1024 + 2 * 1024 + (1024 * 3072 + 3072) + (1024 * 1024 + 1024) + (1024 * 4096 + 4096) + (4096 * 1024 + 1024)
# mlp1: LayerNorm over 1024 x 2^2 (downsample_ratio 0.5), 4096 -> 896 and 896 -> 896 with biases
PROJECTOR = 2 * 4096 + (4096 * 896 + 896) + (896 * 896 + 896)


def test_text_backbone_is_the_llm_config_qwen2():
    spec = parse_config(CONFIG, "ivl", vllm_version="0.26.0")
    assert spec.exact and spec.architecture == "InternVLChatModel" and spec.model_type == "qwen2"
    assert spec.layer_kinds == (LayerKind.FULL,) * 24 and spec.qkv_bias and not spec.tie_word_embeddings
    # by hand (Qwen2): untied 151674 x 896 twice; 24 layers of q, o 896 x 896, k, v 128 x 896, q/k/v
    # biases 896 + 2 x 128, MLP 3 x 896 x 4864, 2 RMSNorms; final norm
    layer = 2 * 896 * 896 + 2 * 128 * 896 + 896 + 256 + 3 * 896 * 4864 + 2 * 896
    assert kvplan_text_params(spec) == 2 * 151674 * 896 + 24 * layer + 896 == 629_697_920
    # rope_scaling dynamic x 2 on 32768 positions (vLLM _get_and_verify_max_len)
    assert spec.derived_max_model_len == 65536
    assert "error" in MODELS[f"model_configs/{NAME}.json"]  # remote code: no meta-device count


def test_vision_tower_and_projector_by_hand():
    spec = parse_config(CONFIG, "ivl", vllm_version="0.26.0")
    assert spec.is_multimodal and spec.mm_modalities == ("image", "video")
    assert spec.vision_params == EMBEDDINGS + 24 * LAYER + PROJECTOR == 308_495_104
    # text + vision = 938 M: InternVL3-1B's published size (0.9 B)
    assert kvplan_text_params(spec) + spec.vision_params == 938_193_024


def test_select_layer_qk_norm_and_rms_norm_change_the_tower():
    base = parse_config(CONFIG, "ivl", vllm_version="0.26.0").vision_params
    cut = parse_config({**CONFIG, "select_layer": -4}, "ivl", vllm_version="0.26.0").vision_params
    assert base - cut == 3 * LAYER  # 24 - 4 + 1 = 21 layers built
    vc = {**CONFIG["vision_config"], "qk_normalization": True, "norm_type": "rms_norm", "qkv_bias": False}
    other = parse_config({**CONFIG, "vision_config": vc}, "ivl", vllm_version="0.26.0").vision_params
    # per layer: + q_norm, k_norm RMSNorms (2 x 1024), - the two LayerNorm biases (2 x 1024), - qkv bias (3072)
    assert other - base == 24 * (2 * 1024 - 2 * 1024 - 3072)
    for key, value in (("select_layer", 24), ("select_layer", "-1"), ("downsample_ratio", 0.3)):
        with pytest.raises(KvplanError, match=f"'{key}'"):
            parse_config({**CONFIG, key: value}, "ivl", vllm_version="0.26.0")
    with pytest.raises(KvplanError, match="'vision_config.norm_type'"):
        parse_config({**CONFIG, "vision_config": {**CONFIG["vision_config"], "norm_type": "batch_norm"}}, "ivl")


def test_kv_and_text_only_start(tmp_path):
    out = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096", *V26)
    # 24 layers x 2 KV heads x 64 (896 / 14) x K and V x 2 B
    assert out["kv_cache"]["bytes_per_token"] == 24 * 2 * 64 * 2 * 2 == 12_288
    assert out["model"]["layer_kinds"] == {"full_attention": 24}
    assert out["exact"] is False and any("encoder" in a for a in out["approximate"]), out.get("approximate")
    assert out["memory"]["weights_breakdown"]["vision"] == 308_495_104 * 2
    # images only at 0 leaves videos: vLLM still builds the tower (both modalities must be 0)
    images_off = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096", "--limit-mm-per-prompt", '{"image": 0}', *V26)
    assert images_off["memory"]["weights_breakdown"]["vision"] == 308_495_104 * 2
    text_only = estimate_json(CONFIG, tmp_path, "--max-model-len", "4096",
                              "--limit-mm-per-prompt", '{"image": 0, "video": 0}', *V26)
    assert "vision" not in text_only["memory"]["weights_breakdown"] and text_only["exact"] is True


def test_llama_and_qwen3_backbones_and_an_unknown_one():
    llama = {**CONFIG["llm_config"], "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    spec = parse_config({**CONFIG, "llm_config": llama}, "ivl-llama", vllm_version="0.26.0")
    assert spec.exact and not spec.qkv_bias and spec.vision_params == 308_495_104
    qwen3 = {**CONFIG["llm_config"], "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128}
    spec = parse_config({**CONFIG, "llm_config": qwen3}, "ivl-qwen3", vllm_version="0.26.0")
    assert spec.exact and spec.qk_norm and spec.attention.head_dim == 128
    # InternLM2 (InternVL2.5-8B's backbone) has no kvplan family: never silently exact
    internlm2 = {**CONFIG["llm_config"], "architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2"}
    spec = parse_config({**CONFIG, "llm_config": internlm2}, "ivl-internlm2", vllm_version="0.26.0")
    assert not spec.exact
