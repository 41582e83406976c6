"""Bailing / Ling MoE (BailingMoeForCausalLM: Ling-lite / Ling-plus; BailingMoeV2ForCausalLM:
Ling-2.0 / Ring-2.0), model type ``bailing_moe``: one vLLM implementation for both.

- Attention: grouped-query, head size ``head_dim`` (else hidden / heads), one fused
  query_key_value projection biased with ``use_bias`` or ``use_qkv_bias``, the output projection
  (``dense``) biased with ``use_bias``; per-head q/k norms with ``use_qk_norm`` (RMSNorm with
  ``use_rmsnorm``, else a LayerNorm with bias: refused, no published config uses it); RoPE over
  ``rotary_dim`` (else ``partial_rotary_factor`` of the head).
- Feed-forward: layers below ``first_k_dense_replace`` a gated MLP of ``intermediate_size``, the
  rest a MoE of ``num_experts`` experts of ``moe_intermediate_size`` (top ``num_experts_per_tok``)
  with ``num_shared_experts`` shared experts fused into one gated MLP of ``num_shared_experts x
  moe_shared_expert_intermediate_size`` (else ``moe_intermediate_size``); an unbiased router (in
  fp32 when ``router_dtype`` is "fp32": kvplan counts it in the model dtype and says so, an
  approximation), with an fp32 expert bias when ``moe_router_enable_expert_bias``. ``use_bias`` true (biases on every
  MLP) is refused: no published config has it.
- Embeddings ``word_embeddings``, LM head tied with ``tie_word_embeddings`` (default False).

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/bailing_moe.py
(BailingAttention, BailingMLP, BailingMoE, BailingMoeBlock, BailingMoeModel,
BailingMoeForCausalLM; BailingMoeV2ForCausalLM is the same class). transformers has no
bailing_moe model, so there is no meta-device count: the weight tests are hand arithmetic."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, MoESpec


class Bailing(Family):
    model_types = ("bailing_moe",)
    transformers_class = "BailingMoeConfig"
    reads_attention_bias = False  # use_bias / use_qkv_bias are the keys
    reads_mlp_bias = False

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("num_experts")
        inter = c.int("moe_intermediate_size")
        shared = c.int("num_shared_experts", default=0, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=shared * c.int("moe_shared_expert_intermediate_size", default=inter),
            router_bias=c.flag("moe_router_enable_expert_bias", False),
        )
        first_dense = c.int("first_k_dense_replace", default=0, minimum=0)
        return spec, tuple(i >= first_dense for i in range(n_layers))

    def qk_norm(self, c: _Cfg) -> bool:
        return c.flag("use_qk_norm", False)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        if c.flag("use_bias", False):
            raise c.error("use_bias", "is true: kvplan's Bailing rules (kvplan/model/families/bailing.py) know only "
                          "the unbiased layout every published Ling config uses")
        if c.flag("use_qk_norm", False) and not c.flag("use_rmsnorm", False):
            raise c.error("use_qk_norm", "is true without use_rmsnorm: vLLM's bailing_moe.py then builds LayerNorm "
                          "q/k norms with biases, which kvplan's rules do not lay out")
        out: dict[str, Any] = {"qkv_bias": c.flag("use_qkv_bias", False), "o_bias": False, "mlp_bias": False}
        if c.has("rotary_dim"):
            out["rotary_dim"] = c.int("rotary_dim")
        if c.raw("router_dtype") == "fp32":
            out["approximations"] = (Approximation(
                kind=ApproximationKind.PARTIAL_RULES,
                reason="router_dtype 'fp32': vLLM's bailing_moe.py keeps this router's weight in fp32, kvplan counts "
                "it in the model dtype (num_experts x hidden_size x 2 bytes per MoE layer too few)"),)
        return out


BAILING = Bailing()
