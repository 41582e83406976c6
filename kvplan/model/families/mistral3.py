"""Mistral-3 multimodal (Mistral3ForConditionalGeneration: Mistral-Small-3.1 / 3.2): the Mistral
text model under ``text_config`` (the generic decoder) and a Pixtral vision tower with its
projector; images are the only modality.

Vision tower as vLLM model_executor/models/pixtral.py builds it (PixtralHFVisionModel, built by
mistral3.py init_vision_tower_for_mistral3 only up to the deepest ``vision_feature_layer``: -1 =
all ``num_hidden_layers``, a negative index i keeps num_hidden_layers + i + 1, a positive one i):
a patch Conv2d without bias (``num_channels`` x ``patch_size``^2 -> hidden), an RMSNorm
(``ln_pre``), per layer two RMSNorms, q/k/v/o projections of hidden x hidden without biases
(head size hidden / heads) and a gated MLP of ``intermediate_size`` without biases; no post norm.
Projector (mistral3.py Mistral3MultiModalProjector): an RMSNorm over the vision hidden size, the
patch merger (vision hidden x ``spatial_merge_size``^2 -> vision hidden, no bias), linear_1
(vision hidden -> text hidden) and linear_2 (text hidden -> text hidden), biased with
``multimodal_projector_bias``. With ``--limit-mm-per-prompt`` image 0 vLLM builds none of it
(engines/vllm weights.text_only).
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _LIMITS, _Cfg, _show
from kvplan.model.families.mistral import Mistral


def pixtral_layers(top: _Cfg, vc: _Cfg) -> int:
    """Vision layers vLLM builds: up to the deepest ``vision_feature_layer`` (mistral3.py
    _get_num_hidden_layers with models/utils.py get_layer_index)."""
    n = vc.int("num_hidden_layers", maximum=_LIMITS["num_hidden_layers"])
    feature = top.raw("vision_feature_layer", -1)
    indexes = feature if isinstance(feature, list) else [feature]
    if not indexes or not all(isinstance(i, int) and not isinstance(i, bool) and -n - 1 <= i <= n for i in indexes):
        raise top.error("vision_feature_layer", f"must be a layer index (or a list of them) within the "
                        f"{n} vision layers, got {_show(feature)}")
    return max(n + i + 1 if i < 0 else i for i in indexes)


class Mistral3(Mistral):
    model_types = ("mistral",)
    transformers_class = "MistralConfig"

    def vision_params(self, top: _Cfg, vc: _Cfg, text_hidden: int) -> int | None:
        h = vc.int("hidden_size", maximum=_LIMITS["hidden_size"])
        inter = vc.int("intermediate_size", maximum=_LIMITS["intermediate_size"])
        patch = vc.int("patch_size", default=16, maximum=1 << 12)
        chans = vc.int("num_channels", default=3, maximum=1 << 10)
        merge = top.int("spatial_merge_size", default=2, maximum=1 << 6)
        bias = top.flag("multimodal_projector_bias", False)
        layer = 2 * h + 4 * h * h + 3 * h * inter
        tower = chans * patch * patch * h + h + pixtral_layers(top, vc) * layer
        projector = h + h * merge * merge * h + h * text_hidden + text_hidden * text_hidden
        if bias:
            projector += 2 * text_hidden
        return tower + projector

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        return {"mm_modalities": ("image",)}  # mistral3.py get_placeholder_str: image only


MISTRAL3 = Mistral3()
