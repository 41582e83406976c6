"""Qwen3-VL (Qwen3VLForConditionalGeneration): the Qwen3 dense text model (qk-norm, no o_proj
bias) under ``text_config``, and the Qwen3 vision transformer (shared with Qwen3.5).

Vision tower as vLLM model_executor/models/qwen3_vl.py builds it (Qwen3_VisionTransformer):
a Conv3d patch embedding with bias (in_channels x temporal_patch_size x patch_size^2 -> hidden),
a learned position embedding of ``num_position_embeddings`` rows, ``depth`` blocks of two
LayerNorms (weight + bias), qkv (hidden -> 3 hidden) and proj (hidden -> hidden) with biases, an
MLP fc1/fc2 with biases; a patch merger (LayerNorm over hidden, fc1 over hidden x merge^2 -> same,
fc2 -> out_hidden_size, biases) and one more merger per ``deepstack_visual_indexes`` entry whose
LayerNorm is over hidden x merge^2 (use_postshuffle_norm). With ``--limit-mm-per-prompt`` 0 for
image and video vLLM builds none of it (engines/vllm weights.text_only).
"""

from __future__ import annotations

from kvplan.model.config import _LIMITS, _Cfg
from kvplan.model.families.qwen3 import Qwen3


def qwen3_vision_params(vc: _Cfg) -> int:
    """Parameters of the Qwen3 vision transformer described by ``vision_config`` (elements).

    Raises:
        KvplanError: a size key that is not a sane positive integer (names the key)."""
    h = vc.int("hidden_size", maximum=_LIMITS["hidden_size"])
    inter = vc.int("intermediate_size", maximum=_LIMITS["intermediate_size"])
    depth = vc.int("depth", maximum=_LIMITS["num_hidden_layers"])
    patch = vc.int("patch_size", default=16, maximum=1 << 12)
    temporal = vc.int("temporal_patch_size", default=2, maximum=1 << 6)
    chans = vc.int("in_channels", default=3, maximum=1 << 10)
    positions = vc.int("num_position_embeddings", maximum=1 << 24)
    merge = vc.int("spatial_merge_size", default=2, maximum=1 << 6)
    out = vc.int("out_hidden_size", maximum=_LIMITS["hidden_size"])
    deepstack = len(vc.raw("deepstack_visual_indexes", []) or [])
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    merged = h * merge * merge

    def merger(norm_width: int) -> int:
        return 2 * norm_width + (merged * merged + merged) + (merged * out + out)

    patch_embed = chans * temporal * patch * patch * h + h
    return patch_embed + positions * h + depth * block + merger(h) + deepstack * merger(merged)


class Qwen3VL(Qwen3):
    model_types = ("qwen3_vl_text", "qwen3_vl")
    transformers_class = "Qwen3VLTextConfig"

    def vision_tower_params(self, vc: _Cfg) -> int | None:
        return qwen3_vision_params(vc)


QWEN3_VL = Qwen3VL()
