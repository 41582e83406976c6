"""Kimi-Linear (KimiLinearForCausalLM): Kimi Delta Attention (KDA) linear-attention layers and
DeepSeek-style multi-head latent attention (MLA) layers, with the DeepSeek MoE layout.

Rules read from vLLM's model_executor/models/kimi_linear.py, its config class
transformers_utils/configs/kimi_linear.py (transformers has no kimi_linear: vLLM registers its own
KimiLinearConfig) and layers/mamba/gdn/kimi_gdn_linear_attn.py:

- ``linear_attn_config.kda_layers`` lists the KDA layers, **1-based** (``is_kda_layer``: layer
  index + 1 in the list); every other layer is MLA. vLLM never reads ``full_attn_layers``; a list
  that is not the complement of ``kda_layers`` is noted, the layers follow ``kda_layers``.
- MLA: ``kv_lora_rank`` latent + ``qk_rope_head_dim`` per token (one head, as DeepSeek's), no
  q LoRA and no rotary (vLLM asserts ``q_lora_rank`` None and ``mla_use_nope`` true).
- KDA state per sequence and layer: a short-conv state of 3 x heads x head_dim channels
  (q, k, v) x (kernel - 1) and a heads x head_dim x head_dim recurrent state (mamba_utils.py
  kda_state_shape) -- the Gated DeltaNet shapes with as many k as v heads; its dtypes are the
  engine's (family_quirks).
- MoE from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th layer, when ``num_experts``
  is set: ``num_experts`` of ``moe_intermediate_size``, top ``num_experts_per_token``,
  ``num_shared_experts`` x ``moe_intermediate_size`` shared, a router correction bias always.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import (
    Approximation,
    ApproximationKind,
    GatedDeltaNetShape,
    LayerKind,
    MLAShape,
    MoESpec,
)

# the keys of linear_attn_config vLLM reads (kimi_linear.py, kimi_gdn_linear_attn.py)
_LINEAR_KEYS = ("head_dim", "num_heads", "short_conv_kernel_size", "kda_layers", "full_attn_layers")


def _linear_cfg(c: _Cfg) -> _Cfg | None:
    """``linear_attn_config`` (None when absent). Raises KvplanError naming a key kvplan does
    not read: it may change the state or the weights."""
    sub = c.sub("linear_attn_config")
    if sub is None:
        return None
    for key in sub.data:
        if key not in _LINEAR_KEYS:
            raise sub.error(key, "is not a key kvplan reads (vLLM's kimi_linear.py reads "
                            f"{', '.join(_LINEAR_KEYS)}); it may change the KDA state or weights")
    return sub


def _layer_list(sub: _Cfg, key: str, n_layers: int, required: bool) -> list[int] | None:
    """A 1-based list of layer numbers in 1..n_layers."""
    raw = sub.raw(key)
    if raw is None and not required:
        return None
    if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
        raise sub.error(key, f"must be a list of 1-based layer numbers, got {_show(raw)}")
    bad = [x for x in raw if not 1 <= x <= n_layers]
    if bad:
        raise sub.error(key, f"has layer number {bad[0]} outside 1..{n_layers} (the list is 1-based)")
    return raw


class KimiLinear(Family):
    model_types = ("kimi_linear",)
    transformers_class = "KimiLinearConfig (vLLM transformers_utils/configs/kimi_linear.py)"
    # KimiLinearConfig's defaults for keys a config may omit (vLLM sees them)
    transformers_defaults = {"tie_word_embeddings": False, "num_shared_experts": 0,
                             "first_k_dense_replace": 0, "moe_layer_freq": 1}
    # KimiMLAAttention passes rotary_emb=None (NoPE) and KDA has no positions: no rotary cache
    rope_caches = 0

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """KDA (linear attention) where ``kda_layers`` (1-based) says, full attention (MLA) else."""
        sub = _linear_cfg(c)
        if sub is None:
            return [LayerKind.FULL] * n_layers, "linear_attn_config"
        kda = set(_layer_list(sub, "kda_layers", n_layers, required=True))
        full = _layer_list(sub, "full_attn_layers", n_layers, required=True)
        if set(full) != set(range(1, n_layers + 1)) - kda:
            notes.append(
                f"{sub.name('full_attn_layers')} is not the complement of {sub.name('kda_layers')}: vLLM reads only "
                "kda_layers (kimi_linear.py is_kda_layer), every other layer is MLA"
            )
        kinds = [LayerKind.LINEAR if i + 1 in kda else LayerKind.FULL for i in range(n_layers)]
        return kinds, "linear_attn_config"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_experts", default=None, minimum=1)
        if e is None:
            return None, (False,) * n_layers
        first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
        freq = c.int("moe_layer_freq", default=1, minimum=1)
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
        inter = c.int("moe_intermediate_size")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_token", maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=c.int("num_shared_experts", default=0, minimum=0) * inter,
            router_bias=True,  # KimiMoE: gate.e_score_correction_bias always
        )
        return spec, layers

    def mla(self, c: _Cfg) -> MLAShape:
        """The MLA shape. Raises KvplanError for what vLLM refuses (asserts in
        KimiMLAAttention): a q LoRA, or ``mla_use_nope`` not true."""
        if c.raw("q_lora_rank") is not None:
            raise c.error("q_lora_rank", "must be null: vLLM's kimi_linear.py KimiMLAAttention has no q LoRA")
        if c.raw("mla_use_nope") is not True:
            raise c.error("mla_use_nope", f"must be true (vLLM's kimi_linear.py asserts it), got {_show(c.raw('mla_use_nope'))}")
        return MLAShape(
            kv_lora_rank=c.int("kv_lora_rank"),
            qk_rope_head_dim=c.int("qk_rope_head_dim", minimum=0),
            qk_nope_head_dim=c.int("qk_nope_head_dim", minimum=0),
            v_head_dim=c.int("v_head_dim"),
            q_lora_rank=None,
        )

    def gdn(self, c: _Cfg) -> GatedDeltaNetShape | None:
        """The KDA shape from ``linear_attn_config`` (num_heads, head_dim, short_conv_kernel_size)."""
        sub = _linear_cfg(c)
        if sub is None:
            return None
        heads = sub.int("num_heads")
        head_dim = sub.int("head_dim")
        return GatedDeltaNetShape(
            num_k_heads=heads, num_v_heads=heads, head_k_dim=head_dim, head_v_dim=head_dim,
            conv_kernel=sub.int("short_conv_kernel_size"), kimi_delta=True,
        )

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        if _linear_cfg(c) is None:
            return {}
        return {
            "approximations": (
                Approximation(
                    kind=ApproximationKind.PARTIAL_RULES,
                    reason="Kimi Delta Attention layers' profiling activation is estimated with the Gated "
                    "DeltaNet rule (no vLLM start of Kimi-Linear recorded): the KV cache and state per token "
                    "and the weights are exact, the activation peak is approximate",
                ),
            ),
        }


KIMI_LINEAR = KimiLinear()
