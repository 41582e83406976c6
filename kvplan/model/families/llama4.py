"""Llama-4: chunked local attention on the RoPE layers (``no_rope_layers``, else every
``no_rope_layer_interval``-th layer global), MoE layers from ``moe_layers`` or
``interleave_moe_layer_step`` with a shared expert, ``intermediate_size_mlp`` for the dense
layers, and no qk-norm whatever ``use_qk_norm`` says (its L2 norm has no weights)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _LIMITS, _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class Llama4(Family):
    model_types = ("llama4", "llama4_text")

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        interval = c.int("no_rope_layer_interval", default=4)
        no_rope = c.int_list("no_rope_layers", minimum=0, maximum=1, length=n_layers)
        if not no_rope:
            no_rope = [int((i + 1) % interval != 0) for i in range(n_layers)]
        return ["chunked_attention" if (nr and chunk) else "full_attention" for nr in no_rope], "layer_types"

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        if c.has("intermediate_size_mlp"):
            return c.int("intermediate_size_mlp", minimum=0, maximum=_LIMITS["intermediate_size"])
        return super().intermediate_size(c, hidden)

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_local_experts")
        step = c.int("interleave_moe_layer_step", default=1, minimum=0) or 1
        moe_layers = c.int_list("moe_layers", minimum=0)
        if moe_layers is None:
            moe_layers = list(range(step - 1, n_layers, step))
        moe_set = set(moe_layers)
        inter = c.int("intermediate_size")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=inter,
        )
        return spec, tuple(i in moe_set for i in range(n_layers))

    def qk_norm(self, c: _Cfg) -> bool:
        c.flag("use_qk_norm", False)  # still read (and type-checked), but never a weighted norm
        return False


LLAMA4 = Llama4()
