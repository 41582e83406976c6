"""SmolLM3 (SmolLM3ForCausalLM), which vLLM (the release kvplan/engines/vllm/v0_26 follows) serves through its Transformers backend: a
Llama-shaped decoder (biases with ``attention_bias`` / ``mlp_bias``, embeddings tied by default)
in which the layers ``no_rope_layers`` marks 0 apply no rotary embedding (that changes no size).
``layer_types``, when absent, is derived as transformers' SmolLM3Config does: a NoPE layer is
sliding (``sliding_window``) only with ``use_sliding_window``; every other layer full attention.
``no_rope_layers`` defaults to a NoPE layer every ``no_rope_layer_interval`` (4) layers.

Read from transformers 5.x SmolLM3Config / SmolLM3Attention and vLLM (the release kvplan/engines/vllm/v0_26 follows) registry.py
(_TRANSFORMERS_SUPPORTED_MODELS) with model_executor/models/transformers/ (padded vocabulary)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class SmolLM3(Family):
    model_types = ("smollm3",)
    transformers_class = "SmolLM3Config"
    transformers_defaults = {"vocab_size": 128256, "max_position_embeddings": 32768}
    tie_word_embeddings_default = True
    qwen_style_sliding_window = True  # sliding_window counts only with use_sliding_window

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        interval = c.int("no_rope_layer_interval", default=4, minimum=1)
        has_rope = c.int_list("no_rope_layers", minimum=0) or [int((i + 1) % interval != 0) for i in range(n_layers)]
        if len(has_rope) != n_layers:
            raise c.error("no_rope_layers", f"must list one entry per layer ({n_layers}), got {len(has_rope)}")
        return ["sliding_attention" if sliding_window is not None and not has_rope[i] else "full_attention"
                for i in range(n_layers)], key


SMOLLM3 = SmolLM3()
