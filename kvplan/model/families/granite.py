"""Granite (GraniteForCausalLM), Granite-MoE (GraniteMoeForCausalLM) and Granite-MoE-Shared
(GraniteMoeSharedForCausalLM): Llama-shaped decoders whose multipliers (``embedding_multiplier``,
``attention_multiplier``, ``residual_multiplier``, ``logits_scaling``) scale activations and change
no size.

- Granite: q/k/v and o_proj biases with ``attention_bias``, gate/up/down biases with ``mlp_bias``
  (the generic reading).
- Granite-MoE: no attention biases whatever the config says; every layer a MoE of
  ``num_local_experts`` experts of ``intermediate_size`` (top ``num_experts_per_tok``), a router
  without bias, no shared expert.
- Granite-MoE-Shared: Granite-MoE plus one always-on gated MLP of ``shared_intermediate_size``
  (none when 0), without a gate of its own.
transformers' GraniteConfig / GraniteMoeConfig / GraniteMoeSharedConfig default
``tie_word_embeddings`` to False.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/granite.py (GraniteAttention, GraniteMLP bias
arguments), granitemoe.py (GraniteMoeMoE: ReplicatedLinear gate bias=False, FusedMoE of
num_local_experts; GraniteMoeAttention qkv/o bias=False) and granitemoeshared.py (shared_mlp).
"""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class Granite(Family):
    model_types = ("granite",)
    transformers_class = "GraniteConfig"
    transformers_defaults = {"vocab_size": 32000, "max_position_embeddings": 2048}


class GraniteMoe(Family):
    model_types = ("granitemoe",)
    transformers_class = "GraniteMoeConfig"
    transformers_defaults = {"vocab_size": 32000, "max_position_embeddings": 2048,
                             "num_local_experts": 8, "num_experts_per_tok": 2}

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """Every layer routes to ``num_local_experts`` experts of ``intermediate_size``."""
        e = c.int("num_local_experts")
        shared = c.int("shared_intermediate_size", default=0, minimum=0) if self.shared_mlp else 0
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("intermediate_size"),
            shared_intermediate_size=shared,
        )
        return spec, (True,) * n_layers

    shared_mlp = False
    reads_attention_bias = False


class GraniteMoeShared(GraniteMoe):
    model_types = ("granitemoeshared",)
    transformers_class = "GraniteMoeSharedConfig"
    shared_mlp = True


GRANITE = Granite()
GRANITE_MOE = GraniteMoe()
GRANITE_MOE_SHARED = GraniteMoeShared()
