"""Jamba: Mamba-1 layers with an attention layer every ``attn_layer_period`` (at
``attn_layer_offset``), MoE every ``expert_layer_period`` (at ``expert_layer_offset``), and
RMSNorms on the Mamba mixer's dt, B and C (vLLM jamba.py builds its MambaMixer with
``use_rms_norm=True``). transformers' JambaConfig defaults fill what a partial config omits."""

from __future__ import annotations

import math
from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import LayerKind, MambaShape, MoESpec


class Jamba(Family):
    model_types = ("jamba",)
    transformers_class = "JambaConfig"
    transformers_defaults = {"vocab_size": 65536, "tie_word_embeddings": False, "num_experts": 16, "num_experts_per_tok": 2}
    hybrid_keys = {
        "attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1,
        "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto",
        "num_experts": 16, "num_experts_per_tok": 2,
    }
    linear_attention_kind = LayerKind.MAMBA

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """Always derived (JambaConfig.layers_block_type), whatever ``layer_types`` says."""
        period = c.int("attn_layer_period", default=8)
        offset = c.int("attn_layer_offset", default=4, minimum=0)
        return ["full_attention" if i % period == offset else "mamba" for i in range(n_layers)], "layer_types"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_experts", default=16)
        period = c.int("expert_layer_period", default=2)
        offset = c.int("expert_layer_offset", default=1, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", default=2, maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
        )
        return spec, tuple(e > 1 and i % period == offset for i in range(n_layers))

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """Mamba-1: d_inner = mamba_expand x hidden; dt_rank "auto" = ceil(hidden / 16)."""
        expand = c.int("mamba_expand", default=2)
        dt_rank = c.raw("mamba_dt_rank", "auto")
        dt_rank = math.ceil(hidden / 16) if dt_rank == "auto" else c.int("mamba_dt_rank")
        return MambaShape(
            version=1,
            intermediate_size=expand * hidden,
            state_size=c.int("mamba_d_state", default=16),
            conv_kernel=c.int("mamba_d_conv", default=4),
            dt_rank=dt_rank,
            use_conv_bias=c.flag("mamba_conv_bias", True),
            use_bias=c.flag("mamba_proj_bias", False),
            use_rms_norm=True,
        )


JAMBA = Jamba()
