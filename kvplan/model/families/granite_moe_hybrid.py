"""Granite-4.0-H (GraniteMoeHybridForCausalLM): Mamba-2 and attention layers as
``layer_types`` / ``layers_block_type`` list them (all Mamba without either, as transformers'
GraniteMoeHybridConfig makes them), MoE on every layer unless ``num_local_experts`` is null, a
shared expert, tied embeddings; GraniteMoeHybridConfig defaults fill what a partial config omits."""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import LayerKind, MambaShape, MoESpec


class GraniteMoeHybrid(Family):
    model_types = ("granitemoehybrid",)
    transformers_class = "GraniteMoeHybridConfig"
    transformers_defaults = {"vocab_size": 32000, "max_position_embeddings": 2048}
    hybrid_keys = {
        "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_chunk_size": 256,
        "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
    }
    linear_attention_kind = LayerKind.MAMBA
    tie_word_embeddings_default = True

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        types_key = "layer_types" if c.has("layer_types") else "layers_block_type"
        blocks = c.raw(types_key)
        if not blocks:
            # transformers GraniteMoeHybridConfig.layers_block_type: no layer_types -> all Mamba.
            blocks = ["mamba"] * n_layers
            notes.append(
                f"config.json has no 'layer_types': transformers' GraniteMoeHybridConfig then makes all "
                f"{n_layers} layers Mamba, so no layer keeps a KV cache; the published config.json lists "
                "which layers are attention"
            )
        if not isinstance(blocks, list):
            raise c.error(types_key, f"must be a list of 'attention'/'mamba', got {_show(blocks)}")
        for i, b in enumerate(blocks):
            if b not in ("attention", "mamba"):
                raise KvplanError(f"{c.where}: config key '{c.name(types_key)}[{i}]' has unknown value {_show(b)}")
        return ["full_attention" if b == "attention" else "mamba" for b in blocks], types_key

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        # An explicit null means no experts (a dense Granite-4.0-H); absent means the class default 8.
        e = 0 if "num_local_experts" in c.data and c.data["num_local_experts"] is None else c.int(
            "num_local_experts", default=8, minimum=0
        )
        if e <= 0:
            return None, (False,) * n_layers
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=2, maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            shared_intermediate_size=0 if "shared_intermediate_size" in c.data and c.data["shared_intermediate_size"] is None
            else c.int("shared_intermediate_size", default=1024, minimum=0),
        )
        return spec, (True,) * n_layers

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """Mamba-2: ``mamba_n_heads`` heads of ``mamba_d_head`` ("auto" = expand x hidden / heads)."""
        expand = c.int("mamba_expand", default=2)
        n_mheads = c.int("mamba_n_heads", default=128)
        d_head = c.raw("mamba_d_head", "auto")
        d_head = expand * hidden // n_mheads if d_head == "auto" else c.int("mamba_d_head")
        if d_head <= 0:
            raise c.error("mamba_n_heads", f"({n_mheads}) leaves no room for a head in mamba_expand x hidden_size ({expand * hidden})")
        return MambaShape(
            version=2,
            intermediate_size=expand * hidden,
            state_size=c.int("mamba_d_state", default=256),
            conv_kernel=c.int("mamba_d_conv", default=4),
            n_groups=c.int("mamba_n_groups", default=1),
            num_heads=n_mheads,
            head_dim=d_head,
            chunk_size=c.int("mamba_chunk_size", default=256),
            use_conv_bias=c.flag("mamba_conv_bias", True),
            use_bias=c.flag("mamba_proj_bias", False),
        )


GRANITE_MOE_HYBRID = GraniteMoeHybrid()
