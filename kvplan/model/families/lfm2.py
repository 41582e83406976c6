"""LFM2 (Lfm2ForCausalLM): short-convolution layers and full-attention layers as ``layer_types``
lists them ("conv" / "full_attention"; without it, the layers in ``full_attn_idxs`` attend, and
with neither every layer attends, as transformers' Lfm2Config derives them).

Short conv (vLLM layers/mamba/short_conv.py ShortConv): in_proj hidden -> 3 x ``conv_dim``, a
depthwise conv of ``conv_L_cache`` taps, out_proj, biases with ``conv_bias``; its per-sequence
state is (conv_dim, conv_L_cache - 1) (mamba_utils.py short_conv_state_shape), a MambaSpec in
vLLM, so kvplan gives these layers LayerKind.MAMBA with a ShortConvShape. Attention: GQA with a
per-head RMSNorm on q and k, RoPE, no biases. Every layer: operator_norm and ffn_norm, then a
SwiGLU MLP whose width vLLM derives from ``intermediate_size`` (transformers moves
``block_ff_dim`` there): with ``block_auto_adjust_ff_dim`` int(2 I / 3), times
``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of``. The final norm is
``embedding_norm``; embeddings tied unless ``tie_embedding`` / ``tie_word_embeddings`` say not.

Rule source: vLLM model_executor/models/lfm2.py (Lfm2MLP, Lfm2Attention,
Lfm2ShortConvDecoderLayer, get_mamba_state_shape_from_config); transformers 5.x
configuration_lfm2.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, LayerKind, MoESpec, ShortConvShape


class Lfm2(Family):
    model_types = ("lfm2",)
    transformers_class = "Lfm2Config"
    transformers_defaults = {"vocab_size": 65536, "max_position_embeddings": 128000}
    hybrid_keys = {"conv_L_cache": 3, "block_multiple_of": 256, "block_auto_adjust_ff_dim": True}
    tie_word_embeddings_default = True
    reads_attention_bias = False
    reads_mlp_bias = False

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given = c.raw("layer_types")
        if given is None:
            idxs = c.raw("full_attn_idxs")
            if idxs is None:
                idxs = list(range(n_layers))
            if not isinstance(idxs, list) or not all(isinstance(i, int) and 0 <= i < n_layers for i in idxs):
                raise c.error("full_attn_idxs", f"must list layer indices below {n_layers}, got {_show(idxs)}")
            return [LayerKind.FULL if i in idxs else LayerKind.MAMBA for i in range(n_layers)], "full_attn_idxs"
        if not isinstance(given, list):
            raise c.error("layer_types", f"must be a list of 'conv'/'full_attention', got {_show(given)}")
        out = []
        for i, t in enumerate(given):
            if t == "conv":
                out.append(LayerKind.MAMBA)
            elif t == "full_attention":
                out.append(LayerKind.FULL)
            else:
                raise KvplanError(f"{c.where}: config key '{c.name('layer_types')}[{i}]' has unknown value {_show(t)} "
                                  "(vLLM's LFM2 takes 'conv' and 'full_attention')")
        return out, "layer_types"

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        """The SwiGLU width vLLM's Lfm2MLP builds (module docstring)."""
        inter = c.int("block_ff_dim", default=None)
        if inter is None:
            inter = c.int("intermediate_size", default=12288)
        if c.flag("block_auto_adjust_ff_dim", True):
            inter = int(2 * inter / 3)
            mult = c.num("block_ffn_dim_multiplier", None, gt=0.0)
            if mult is not None:
                inter = int(mult * inter)
            step = c.int("block_multiple_of", default=256)
            inter = step * ((inter + step - 1) // step)
        return inter

    def qk_norm(self, c: _Cfg) -> bool:
        return True

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """The short-conv shape (conv_dim must be the hidden size: vLLM's ShortConv projects
        conv_dim -> 3 x conv_dim from the hidden state), tie_embedding, the approximation."""
        conv_dim = c.int("conv_dim", default=hidden)
        if conv_dim != hidden:
            raise c.error("conv_dim", f"({conv_dim}) must equal hidden_size ({hidden}): vLLM's LFM2 short conv "
                                      "projects the hidden state with conv_dim inputs")
        block_dim = c.int("block_dim", default=hidden)
        if block_dim != hidden:
            raise c.error("block_dim", f"({block_dim}) must equal hidden_size ({hidden}): vLLM's LFM2 MLP "
                                       "takes the hidden state with block_dim inputs")
        out: dict[str, Any] = {
            "short_conv": ShortConvShape(conv_dim=conv_dim, conv_kernel=c.int("conv_L_cache", default=3),
                                         bias=c.flag("conv_bias", False)),
            "approximations": (Approximation(
                kind=ApproximationKind.PARTIAL_RULES,
                reason="LFM2 short-conv layers: their transient activation tensors are not modelled (the "
                       "MLP's peak is used; no real start recorded yet)",
            ),),
        }
        if c.has("tie_embedding") and not c.has("tie_word_embeddings"):
            out["tie_word_embeddings"] = c.flag("tie_embedding")
        return out


LFM2 = Lfm2()


class Lfm2Moe(Lfm2):
    """LFM2-MoE (Lfm2MoeForCausalLM): LFM2's short-conv / attention layers (``layer_types``) with
    a SwiGLU MLP of ``intermediate_size`` as given (no LFM2 width adjustment) on the first
    ``num_dense_layers`` layers and a MoE on the rest: ``num_experts`` gated experts of
    ``moe_intermediate_size``, top ``num_experts_per_tok``, a router in the model dtype and,
    with ``use_expert_bias``, an fp32 correction bias (the engine's quirk). vLLM ties the LM
    head to the embedding whatever ``tie_word_embeddings`` says.

    Rule source: vLLM model_executor/models/lfm2_moe.py (Lfm2MoeMlp, Lfm2MoeSparseMoeBlock,
    Lfm2MoeAttention, Lfm2MoeForCausalLM.lm_head.tie_weights); transformers 5.x
    configuration_lfm2_moe.py."""

    model_types = ("lfm2_moe",)
    transformers_class = "Lfm2MoeConfig"
    transformers_defaults = {"vocab_size": 65536, "max_position_embeddings": 128000}
    hybrid_keys = {"conv_L_cache": 3, "num_dense_layers": 2}

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        return c.int("intermediate_size", default=7168)

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        dense = c.int("num_dense_layers", default=2, minimum=0)
        layers = tuple(i >= dense for i in range(n_layers))
        if not any(layers):
            return None, layers
        e = c.int("num_experts", default=32)
        return MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=4, maximum=e),
            moe_intermediate_size=c.int("moe_intermediate_size", default=1792),
            router_bias=c.flag("use_expert_bias", True),
        ), layers

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        out = super().spec_fields(c, hidden, n_layers)
        out["tie_word_embeddings"] = True  # lfm2_moe.py: lm_head.tie_weights(embed_tokens), always
        out["approximations"] = (Approximation(
            kind=ApproximationKind.PARTIAL_RULES,
            reason="LFM2-MoE short-conv layers: their transient activation tensors are not modelled (the "
                   "MoE rule's peak is used; no real start recorded yet)",
        ),)
        return out


LFM2_MOE = Lfm2Moe()
