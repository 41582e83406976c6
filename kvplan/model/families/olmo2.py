"""OLMo-2 (Olmo2ForCausalLM, served by vLLM (the release kvplan/engines/vllm/v0_26 follows) through its Transformers backend) and OLMo-3
(Olmo3ForCausalLM, vLLM's olmo3.py): Llama-shaped attention and gated MLP without biases, q/k
RMSNorms that span all heads (q over num_heads x head_dim, k over num_kv_heads x head_dim, as
OLMoE), and two RMSNorms per layer placed after attention and after the MLP (no input norm);
``head_dim`` is hidden_size / num_attention_heads; embeddings untied by default.

OLMo-3 adds sliding-window layers: each layer follows ``layer_types``; transformers' Olmo3Config
derives it, when absent, as every 4th layer full attention and the rest sliding with
``sliding_window`` (default 4096). OLMo-2 has no window.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/olmo3.py (Olmo3Attention: QKV bias=False, k_norm of
total_num_kv_heads x head_dim, q_norm of hidden_size, per-layer sliding window from layer_types;
Olmo3DecoderLayer: post_attention_layernorm, post_feedforward_layernorm) and transformers 5.x
Olmo2Attention / Olmo3Config (the layout the Transformers backend loads for OLMo-2)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family


class Olmo2(Family):
    model_types = ("olmo2",)
    transformers_class = "Olmo2Config"
    transformers_defaults = {"vocab_size": 50304, "max_position_embeddings": 2048}
    reads_mlp_bias = False

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def qk_norm(self, c: _Cfg) -> bool:
        return True

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        return {"qk_norm_across_heads": True}


class Olmo3(Olmo2):
    model_types = ("olmo3",)
    transformers_class = "Olmo3Config"
    transformers_defaults = {"vocab_size": 50304, "max_position_embeddings": 2048, "sliding_window": 4096}
    normally_omitted = frozenset({"sliding_window"})
    reads_attention_bias = False

    def sliding_window(self, c: _Cfg) -> int | None:
        return Family.sliding_window(self, c)

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given, key = super().layer_types(c, n_layers, sliding_window, chunk, notes)
        if given:
            return given, key
        return ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n_layers)], key


OLMO2 = Olmo2()
OLMO3 = Olmo3()
