"""Gemma-4 (Gemma4ForConditionalGeneration): registered so that kvplan refuses it with the reason
instead of sizing it as something else.

What kvplan does not model yet (keys of the published config): per-layer attention shapes --
``head_dim`` for sliding layers but ``global_head_dim`` for full ones, ``num_global_key_value_heads``
beside ``num_key_value_heads``, ``attention_k_eq_v`` (full layers keep one tensor for K and V) --
and the block that runs a dense MLP and a MoE (``enable_moe_block``, ``num_experts``,
``top_k_experts``, ``moe_intermediate_size``) side by side, plus per-layer input embeddings
(``hidden_size_per_layer_input``) and KV-shared layers (``num_kv_shared_layers``). Sizing any of
these by the generic rules would be a silent guess (issue 12), so the parse stops with exit 2.
Whether a vLLM version can start it at all is the version's (engines/vllm/v0_XX/family_quirks.py
``start_failure``): the message says so first.
"""

from __future__ import annotations

from kvplan.model.family import Family


class Gemma4(Family):
    model_types = ("gemma4", "gemma4_text")
    transformers_class = "Gemma4TextConfig"
    unsupported = (
        "kvplan has no rules yet for Gemma-4's per-layer attention (head_dim / global_head_dim, "
        "num_key_value_heads / num_global_key_value_heads, attention_k_eq_v) and its dense + MoE block "
        "(enable_moe_block), so it cannot size it without guessing"
    )


GEMMA4 = Gemma4()
