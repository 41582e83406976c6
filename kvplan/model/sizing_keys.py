"""Config keys that change how vLLM sizes a model, which only a family module knows how to read.

The generic decoder (kvplan.model.family.Family) understands the standard keys: hidden_size,
num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
vocab_size, tie_word_embeddings, max_position_embeddings (and the other position keys), the rope
keys, ``sliding_window`` and ``layer_types`` entries of the values in ``STANDARD_LAYER_TYPES``.
A config whose architecture has no family module (``Family.known`` False) is sized from those
keys alone, and only when it has none of the keys below: each one changes the weights, the KV
cache or the recurrent state (routed experts, a compressed latent, a Mamba state, a per-layer
pattern), so a generic "dense decoder" reading would be silently wrong (issue 12: OLMoE, Ernie-4.5
and Phi-3.5-MoE weights 74-92 % low; MLA under a new model_type sized as multi-head attention,
KV 4-22x too large; Mamba-2 blocks counted as attention layers). Such a config is exit 2 naming
the key (kvplan.model.parse). Known families read these keys in their own hooks; this module is
consulted only for the unknown ones.

The one place these sets live: add a spelling here when a new one is seen in a published config.
"""

from __future__ import annotations

from typing import Any

# What each group of keys shapes (the words the exit-2 message uses), then the keys: exact names,
# and name prefixes that only such keys use.
_GROUPS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    (
        "mixture-of-experts layout (routed/shared experts, dense-layer pattern)",
        frozenset({
            "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts",
            "moe_intermediate_size", "expert_intermediate_size", "num_experts_per_tok", "moe_k", "moe_topk",
            "top_k_experts", "experts_per_token", "num_selected_experts", "n_shared_experts",
            "num_shared_experts", "moe_num_shared_experts", "shared_expert_intermediate_size",
            "shared_intermediate_size", "first_k_dense_replace", "moe_layer_freq", "mlp_only_layers",
            "decoder_sparse_step", "moe_layers", "moe_layer_start_index", "moe_layer_end_index",
            "moe_layer_interval", "interleave_moe_layer_step", "expert_layer_period",
            "expert_layer_offset", "intermediate_size_mlp", "num_dense_layers", "n_group", "topk_group",
        }),
        ("moe_", "n_routed_", "num_experts_", "expert_", "shared_expert"),
    ),
    (
        "multi-head latent attention (compressed KV latent, sparse indexer)",
        frozenset({
            "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "use_mla",
            "index_head_dim", "index_n_heads", "index_topk",
        }),
        ("kv_lora_", "q_lora_"),
    ),
    (
        "Mamba / SSM / linear-attention state",
        frozenset({
            "ssm_state_size", "state_size", "conv_kernel", "d_state", "d_conv", "time_step_rank",
            "hybrid_override_pattern", "layers_block_type", "layer_block_types", "block_types",
            "attn_layer_period", "attn_layer_offset", "attn_layer_indices", "full_attn_idxs",
            "full_attention_interval", "linear_attn_config", "attn_type_list", "conv_L_cache",
            "mamba_expand", "n_mamba_heads", "lru_width", "rwkv_version", "attention_hidden_size",
        }),
        ("mamba_", "ssm_", "linear_", "lightning_", "conv_"),
    ),
    (
        "per-layer attention shape or pattern (KV heads, head dims, window pattern, shared KV)",
        frozenset({
            "sliding_window_pattern", "no_rope_layers", "no_rope_layer_interval", "attention_chunk_size",
            "global_attn_every_n_layers", "v_head_dim", "global_head_dim", "num_global_key_value_heads",
            "attention_k_eq_v", "num_kv_shared_layers", "kv_shared_layers", "cross_attention_layers",
            "hybrid_layer_pattern", "num_kv_heads", "n_head_kv", "multi_query", "multi_query_group_num",
            "kv_channels", "new_decoder_architecture", "layer_head_dims",
        }),
        ("swa_",),
    ),
)

# The ``layer_types`` values the generic decoder reads (full and sliding attention); any other value
# (linear_attention, mamba, chunked_attention, ...) needs a family's reader for its shape.
STANDARD_LAYER_TYPES = frozenset({"full_attention", "attention", "global", "full", "sliding_attention", "local", "sliding"})

# Standard keys that must be one number for the whole model; a per-layer list needs a family.
SCALAR_KEYS = ("num_key_value_heads", "num_attention_heads", "head_dim", "intermediate_size", "sliding_window")


def _present(value: Any) -> bool:
    """A key counts when it says something: 0, false, "" and [] (a dense model's
    ``num_experts: 0``, ``mlp_only_layers: []``, ``use_mla: false``) change no size."""
    return value is not None and value is not False and value != 0 and value != "" and value != [] and value != {}


def unread_sizing_keys(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The keys of one config mapping that change sizing and that the generic decoder does not
    read, with what each shapes, in the file's order: (key, description) pairs.

    Also a per-layer list given for a standard scalar key (``num_key_value_heads: [8, 2, ...]``)
    and a ``layer_types`` entry outside ``STANDARD_LAYER_TYPES`` (reported as
    ``layer_types[i]``)."""
    found: list[tuple[str, str]] = []
    for key, value in data.items():
        if not isinstance(key, str) or not _present(value):
            continue
        if key in SCALAR_KEYS and isinstance(value, list):
            found.append((key, "per-layer list (one value per layer)"))
            continue
        if key == "layer_types" and isinstance(value, list):
            for i, t in enumerate(value):
                if t not in STANDARD_LAYER_TYPES:
                    found.append((f"layer_types[{i}]", f"layer type {t!r}"))
                    break
            continue
        for what, names, prefixes in _GROUPS:
            if key in names or key.startswith(prefixes):
                found.append((key, what))
                break
    return found


MOE_LAYOUT = _GROUPS[0][0]


def unread_moe_keys(data: dict[str, Any]) -> list[str]:
    """The keys of one config mapping that shape a mixture-of-experts layout (the first group
    above), in the file's order: for a known family whose rules read no experts (its ``moe``
    hook is the dense default), any of them means the config is not the model the family is for."""
    return [k for k, what in unread_sizing_keys(data) if what == MOE_LAYOUT]
