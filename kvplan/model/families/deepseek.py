"""DeepSeek-V2/V3: multi-head latent attention (when ``kv_lora_rank`` is set) and the DeepSeek
MoE layout (``n_routed_experts`` from ``first_k_dense_replace`` on, every ``moe_layer_freq``-th
layer; ``n_shared_experts`` of ``moe_intermediate_size``; a router correction bias with
``topk_method: noaux_tc``)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, MLAShape, MoESpec


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


class DeepSeekV32(DeepSeek):
    """DeepSeek-V3.2 (DeepseekV32ForCausalLM): DeepSeek-V3 plus the sparse-attention lightning
    indexer on every layer that computes its own top-k (``index_n_heads`` heads of
    ``index_head_dim``, choosing ``index_topk`` tokens). A layer skips it when
    ``index_topk_pattern`` marks it "S", else when ``max(i - index_skip_topk_offset + 1, 0) %
    index_topk_freq != 0`` (defaults 2 and 1: every layer has one).

    Rule source: vLLM model_executor/models/deepseek_v2.py (DeepseekV2MLAAttention
    ``is_v32``/``_skip_topk``, Indexer, DeepseekV32IndexerCache)."""

    model_types = ("deepseek_v32",)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        if not c.has("index_topk"):
            return {}
        freq = c.int("index_topk_freq", default=1)
        offset = c.int("index_skip_topk_offset", default=2, minimum=0)
        pattern = c.raw("index_topk_pattern")
        if pattern is not None and not isinstance(pattern, str):
            raise c.error("index_topk_pattern", f"must be a string of per-layer marks, got {_show(pattern)}")
        layers = []
        for i in range(n_layers):
            if pattern is not None:
                skip = i < len(pattern) and pattern[i] == "S"
            else:
                skip = max(i - offset + 1, 0) % freq != 0
            layers.append(not skip)
        return {
            "approximations": (
                Approximation(
                    kind=ApproximationKind.PARTIAL_RULES,
                    reason="DeepSeek-V3.2's sparse-attention profiling buffers (indexer logits, prefill and "
                    "sparse-MLA workspaces) are not modelled: the KV cache per token is exact, the activation "
                    "peak is low (the recorded vLLM start families/dsv32-5L_eager, 5 layers at 32768 tokens, had 3.85 GiB less KV "
                    "memory than kvplan predicts)",
                ),
            ),
            "indexer_head_dim": c.int("index_head_dim"),
            "indexer_heads": c.int("index_n_heads"),
            "indexer_topk": c.int("index_topk"),
            "indexer_layers": tuple(layers),
        }


DEEPSEEK = DeepSeek()
DEEPSEEK_V32 = DeepSeekV32()
