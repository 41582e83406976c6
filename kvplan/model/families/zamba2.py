"""Zamba2 (Zamba2ForCausalLM): a Mamba-2 backbone whose "hybrid" layers also run one of
``num_mem_blocks`` shared transformer blocks.

Layers: ``layers_block_type`` ("hybrid", or "mamba" / "linear_attention" -- transformers 5.x
remaps the legacy "mamba"; without the key transformers' Zamba2Config default pattern of 54
layers). Every layer has a Mamba-2 mixer behind an RMSNorm: d_inner = ``mamba_expand`` x hidden,
``n_mamba_heads`` heads of d_inner / heads (transformers derives ``mamba_headdim`` so, whatever
the config says), ``mamba_ngroups`` groups of ``mamba_d_state``, ``mamba_d_conv`` taps, biases
with ``add_bias_linear``. A hybrid layer first runs its shared block -- multi-head attention over
the hidden state concatenated with the embeddings (``attention_hidden_size`` = 2 x hidden;
``num_attention_heads`` heads of 2 x hidden / heads, every head its own K/V whatever
``num_key_value_heads`` says; RoPE with ``use_mem_rope``) and a GeLU-gated MLP of
``intermediate_size`` (4 x hidden when absent) -- with its own LoRA adapters of ``adapter_rank``
(the MLP's always, q/k/v's with ``use_shared_attention_adapter``), then a hidden x hidden
``linear`` into its mixer. Shared block j serves the hybrid layers j, j + num_mem_blocks, ...

Cache: each hybrid layer keeps its own KV (vLLM builds one Attention per use) and every layer a
Mamba-2 state, so the hybrid layers are LayerKind.FULL with ``parallel_mamba`` (as Falcon-H1) and
the others LayerKind.MAMBA; IsHybrid, so the block-size alignment applies.

Rule source: vLLM model_executor/models/zamba2.py (Zamba2Attention, Zamba2MLP, Zamba2LoRA,
Zamba2HybridLayer, Zamba2MambaDecoderLayer, get_mamba_state_shape_from_config); transformers 5.x
configuration_zamba2.py (derived head sizes, legacy layer-type names).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import (
    Approximation,
    ApproximationKind,
    AttentionShape,
    LayerKind,
    MambaShape,
    SharedBlocksShape,
)

_DEFAULT_TYPES = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"]
                  + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2)


class Zamba2(Family):
    model_types = ("zamba2",)
    transformers_class = "Zamba2Config"
    transformers_defaults = {"vocab_size": 32000, "max_position_embeddings": 4096}
    tie_word_embeddings_default = True
    norms_per_layer = 1  # the mixer's input_layernorm; the shared blocks' norms are counted with them
    reads_attention_bias = False
    reads_mlp_bias = False

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        given = c.raw("layers_block_type")
        if given is None:
            given = list(_DEFAULT_TYPES)
            if n_layers != len(given):
                raise KvplanError(f"{c.where}: config.json has no 'layers_block_type' and transformers' Zamba2Config "
                                  f"default pattern has {len(given)} layers, not num_hidden_layers {n_layers}")
        if not isinstance(given, list):
            raise c.error("layers_block_type", f"must be a list of 'hybrid'/'mamba', got {_show(given)}")
        out = []
        for i, t in enumerate(given):
            if t == "hybrid":
                out.append(LayerKind.FULL)
            elif t in ("mamba", "linear_attention"):
                out.append(LayerKind.MAMBA)
            else:
                raise KvplanError(f"{c.where}: config key '{c.name('layers_block_type')}[{i}]' has unknown value "
                                  f"{_show(t)} (vLLM's Zamba2 takes 'hybrid' and 'mamba')")
        return out, "layers_block_type"

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def num_key_value_heads(self, c: _Cfg, n_heads: int) -> int:
        return n_heads  # zamba2.py: multi-head attention, num_key_value_heads is not read

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        inter = c.int("intermediate_size", default=None)
        return 4 * hidden if inter is None else inter

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        d_in = c.int("mamba_expand", default=2) * hidden
        heads = c.int("n_mamba_heads", default=8)
        if d_in % heads:
            raise c.error("n_mamba_heads", f"({heads}) must divide mamba_expand x hidden_size ({d_in})")
        return MambaShape(
            version=2,
            intermediate_size=d_in,
            state_size=c.int("mamba_d_state", default=64),
            conv_kernel=c.int("mamba_d_conv", default=4),
            n_groups=c.int("mamba_ngroups", default=1),
            num_heads=heads,
            head_dim=d_in // heads,
            chunk_size=c.int("chunk_size", default=256),
            use_conv_bias=c.flag("use_conv_bias", True),
            use_bias=c.flag("add_bias_linear", False),
        )

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        heads = c.int("num_attention_heads", default=32)
        if (2 * hidden) % heads:
            raise c.error("num_attention_heads", f"({heads}) must divide 2 x hidden_size ({2 * hidden})")
        d = 2 * hidden // heads
        out: dict[str, Any] = {
            "attention": AttentionShape(num_attention_heads=heads, num_key_value_heads=heads, head_dim=d, head_dim_v=d),
            "parallel_mamba": True,
            "ffn_layers": (False,) * n_layers,  # the MLP is the shared block's
            "shared_blocks": SharedBlocksShape(
                num_blocks=c.int("num_mem_blocks", default=1),
                input_size=2 * hidden,
                adapter_rank=c.int("adapter_rank", default=128),
                attention_adapters=c.flag("use_shared_attention_adapter", False),
                bias=c.flag("add_bias_linear", False),
            ),
            "approximations": (Approximation(
                kind=ApproximationKind.PARTIAL_RULES,
                reason="Zamba2: the activation peak of its shared attention blocks and Mamba-2 mixers is not "
                       "modelled as such (the generic rule is used; no real start recorded yet)",
            ),),
        }
        if not c.flag("use_mem_rope", False):
            out["rotary_dim"] = None  # no rotary embedding, no cos/sin cache
        else:
            out["rotary_dim"] = d
        return out


ZAMBA2 = Zamba2()
