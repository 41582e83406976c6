"""DeepSeek-V2/V3: multi-head latent attention (when ``kv_lora_rank`` is set) and the DeepSeek
MoE layout (``n_routed_experts`` from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th
layer; ``n_shared_experts`` of ``moe_intermediate_size``; a router correction bias with
``topk_method: noaux_tc``)."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MLAShape, MoESpec


class DeepSeek(Family):
    model_types = ("deepseek_v2", "deepseek_v3")

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("n_routed_experts", default=0, minimum=0)
        if not e:
            return None, (False,) * n_layers
        first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
        freq = c.int("moe_layer_freq", default=1, minimum=0) or 1
        layers = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
        moe_inter = c.int("moe_intermediate_size")
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=moe_inter,
            shared_intermediate_size=c.int("n_shared_experts", default=0, minimum=0) * moe_inter,
            router_bias=c.raw("topk_method") == "noaux_tc",
        )
        return spec, layers

    def mla(self, c: _Cfg) -> MLAShape | None:
        """The MLA ranks and head dims; None (multi-head attention) without ``kv_lora_rank``."""
        if not c.raw("kv_lora_rank"):
            return None
        return MLAShape(
            kv_lora_rank=c.int("kv_lora_rank"),
            qk_rope_head_dim=c.int("qk_rope_head_dim", minimum=0),
            qk_nope_head_dim=c.int("qk_nope_head_dim", minimum=0),
            v_head_dim=c.int("v_head_dim"),
            q_lora_rank=c.int("q_lora_rank", default=None, minimum=0),
        )


DEEPSEEK = DeepSeek()
