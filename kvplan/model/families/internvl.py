"""InternVL (InternVLChatModel: InternVL2 / 2.5 / 3 / 3.5 remote-code checkpoints), vLLM's internvl.py.

The language model is whatever decoder ``llm_config`` names (vLLM init_vllm_registered_model on
the text config): kvplan sizes it with that decoder's family (Qwen2 for InternVL2.5/3, Qwen3 and
Qwen3-MoE for InternVL3.5, Llama), so ``InternVL.for_model_type`` returns the variant for the
config's text ``model_type``; a backbone kvplan has no family for (InternLM2) is sized as an
unknown architecture (``exact: false``) or refused, as any unknown decoder.

Vision tower as vLLM model_executor/models/intern_vit.py builds it (InternVisionModel), up to the
``select_layer`` feature layer (-1 = all ``num_hidden_layers``, a negative i keeps
num_hidden_layers + i + 1, a non-negative i keeps i + 1; internvl.py _init_vision_model):
a class embedding (hidden), a Conv2d patch embedding with bias (3 x patch_size^2 -> hidden), a
position embedding of (image_size / patch_size)^2 + 1 rows; per layer two norms (``norm_type``
layer_norm: weight + bias, rms_norm: weight), the layer scales ls1 and ls2 (hidden each), a fused
qkv (hidden -> 3 hidden, biased with ``qkv_bias``), q_norm and k_norm RMSNorms over hidden with
``qk_normalization``, proj (hidden -> hidden, bias), and an MLP fc1/fc2 with biases; no final norm.
The projector mlp1 (internvl.py _init_mlp1): a LayerNorm over hidden x r^2 and two linears with
biases (hidden x r^2 -> text hidden -> text hidden), r = int(1 / ``downsample_ratio``).
It takes images and videos (internvl.py _mark_tower_model(..., {"image", "video"})): with
``--limit-mm-per-prompt`` 0 for both vLLM builds none of it (engines/vllm weights.text_only).
"""

from __future__ import annotations

from kvplan.model.config import _LIMITS, _Cfg, _show
from kvplan.model.families.llama import Llama
from kvplan.model.families.qwen2 import Qwen2
from kvplan.model.families.qwen3 import Qwen3, Qwen3Moe
from kvplan.model.family import Family


def intern_vit_layers(top: _Cfg, vc: _Cfg) -> int:
    """Vision layers vLLM builds (internvl.py _init_vision_model from ``select_layer``).

    Raises:
        KvplanError: ``select_layer`` is not a layer index within the vision layers."""
    n = vc.int("num_hidden_layers", maximum=_LIMITS["num_hidden_layers"])
    select = top.raw("select_layer", -1)
    if isinstance(select, bool) or not isinstance(select, int) or not -n <= select < n:
        raise top.error("select_layer", f"must be a layer index within the {n} vision layers, got {_show(select)}")
    return n + select + 1 if select < 0 else select + 1


def intern_vision_params(top: _Cfg, vc: _Cfg, text_hidden: int) -> int:
    """Parameters (elements) of the InternViT tower and the mlp1 projector (module docstring).

    Raises:
        KvplanError: a size key that is not a sane positive integer, a ``norm_type`` other than
            layer_norm / rms_norm, a ``downsample_ratio`` that is not 1 / an integer (names the key)."""
    h = vc.int("hidden_size", maximum=_LIMITS["hidden_size"])
    inter = vc.int("intermediate_size", maximum=_LIMITS["intermediate_size"])
    patch = vc.int("patch_size", maximum=1 << 12)
    image = vc.int("image_size", maximum=1 << 16)
    norm_type = vc.text("norm_type", "rms_norm")
    if norm_type not in ("layer_norm", "rms_norm"):
        raise vc.error("norm_type", f"is {_show(norm_type)}: vLLM's InternViT builds layer_norm or rms_norm only")
    norm = 2 * h if norm_type == "layer_norm" else h
    ratio = top.num("downsample_ratio", 0.5, gt=0.0, le=1.0)
    r = int(1 / ratio)
    if abs(r * ratio - 1.0) > 1e-9:
        raise top.error("downsample_ratio", f"is {ratio:g}: kvplan reads only 1 / an integer (vLLM's pixel shuffle)")
    qkv_bias = vc.flag("qkv_bias", True)
    qk_norm = vc.flag("qk_normalization", False)
    embeddings = h + (3 * patch * patch * h + h) + ((image // patch) ** 2 + 1) * h
    layer = (2 * norm + 2 * h + h * 3 * h + (3 * h if qkv_bias else 0) + (2 * h if qk_norm else 0)
             + h * h + h + h * inter + inter + inter * h + h)
    wide = h * r * r
    projector = 2 * wide + wide * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    return embeddings + intern_vit_layers(top, vc) * layer + projector


class _InternVLVision:
    """The InternViT tower and projector beside a text family's rules (mixed in first)."""

    def vision_params(self, top: _Cfg, vc: _Cfg, text_hidden: int) -> int | None:
        return intern_vision_params(top, vc, text_hidden)


class InternVLQwen2(_InternVLVision, Qwen2):
    pass


class InternVLQwen3(_InternVLVision, Qwen3):
    pass


class InternVLQwen3Moe(_InternVLVision, Qwen3Moe):
    pass


class InternVLLlama(_InternVLVision, Llama):
    pass


_BY_TEXT_TYPE: dict[str, Family] = {
    f.model_types[0]: f for f in (InternVLQwen2(), InternVLQwen3(), InternVLQwen3Moe(), InternVLLlama())
}


class InternVL(Family):
    """The registry's entry for InternVLChatModel: picks the text decoder's variant."""

    model_types = tuple(_BY_TEXT_TYPE)

    def for_model_type(self, model_type: str) -> Family | None:
        return _BY_TEXT_TYPE.get(model_type)


INTERNVL = InternVL()
