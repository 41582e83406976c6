"""Hunyuan dense and MoE (HunYuanDenseV1ForCausalLM / HunYuanMoEV1ForCausalLM, model types
``hunyuan_v1_dense`` / ``hunyuan_v1_moe``).

- Attention: grouped-query, head size ``head_dim`` (else ``attention_head_dim``, else hidden /
  heads); q/k/v and o_proj all biased with ``attention_bias`` (or ``bias``); per-head q/k RMSNorm
  with ``use_qk_norm``. Cross-layer attention (``use_cla`` with ``cla_share_factor`` > 1: layers
  that reuse the previous layer's K/V, built by vLLM as encoder-decoder attention layers) is
  refused (exit 2): kvplan has no rule for how vLLM caches those layers.
- Dense: a gated MLP of ``intermediate_size``, biased with ``mlp_bias``.
- MoE (``num_experts`` > 1): every layer routes to ``num_experts`` experts of
  ``moe_intermediate_size`` (else ``intermediate_size``), top ``moe_topk``, through an unbiased
  router; with ``use_mixed_mlp_moe`` a shared gated MLP of ``intermediate_size x
  num_shared_expert`` (no bias). ``moe_topk`` / ``moe_intermediate_size`` / ``num_shared_expert``
  may be per-layer lists; kvplan's MoE shape is one per model, so lists whose entries differ are
  refused (exit 2) rather than averaged; every published config repeats one value.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/hunyuan_v1.py (_is_moe, _get_cla_factor,
HunYuanAttention, HunYuanCrossAttention, HunYuanSparseMoeBlock, HunYuanMLP,
HunYuanDecoderLayer, HunyuanV1ModelBase: LM head tied with tie_word_embeddings)."""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg, _show
from kvplan.model.family import Family
from kvplan.model.spec import AttentionShape, MoESpec


def _uniform(c: _Cfg, key: str, n_layers: int, default: Any) -> Any:
    """One value of a key that may be an int or a per-layer list (exit 2 when entries differ)."""
    value = c.raw(key, default)
    if isinstance(value, list):
        if len(value) < n_layers or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            raise c.error(key, f"must be a positive integer or a list of {n_layers} of them, got {_show(value)}")
        if len(set(value[:n_layers])) != 1:
            raise c.error(key, "differs between layers: kvplan's Hunyuan rules (kvplan/model/families/hunyuan.py) "
                          "size one MoE shape for every layer")
        return value[0]
    return c.int(key, default=default)


class _Hunyuan(Family):
    """What the dense and MoE models share (attention, CLA refusal)."""

    attention_bias_on_o = True

    def qk_norm(self, c: _Cfg) -> bool:
        return c.flag("use_qk_norm", False)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        if c.flag("use_cla", False) and c.int("cla_share_factor", default=1) > 1:
            raise c.error("use_cla", "is true with cla_share_factor > 1: vLLM builds the sharing layers as "
                          "encoder-decoder attention, for which kvplan has no KV-cache rule")
        out: dict[str, Any] = {}
        if c.flag("bias", False):
            out.update(qkv_bias=True, o_bias=True)
        if not c.raw("head_dim") and c.has("attention_head_dim"):
            heads = c.int("num_attention_heads")
            head_dim = c.int("attention_head_dim")
            out["attention"] = AttentionShape(
                num_attention_heads=heads, num_key_value_heads=c.int("num_key_value_heads", default=heads),
                head_dim=head_dim, head_dim_v=head_dim)
            out["rotary_dim"] = head_dim
        return out


class HunyuanDense(_Hunyuan):
    model_types = ("hunyuan_v1_dense",)
    transformers_class = "HunYuanDenseV1Config"
    transformers_defaults = {"vocab_size": 290943, "max_position_embeddings": 2048}


class HunyuanMoe(_Hunyuan):
    model_types = ("hunyuan_v1_moe",)
    transformers_class = "HunYuanMoEV1Config"
    transformers_defaults = {"vocab_size": 290943, "max_position_embeddings": 2048}
    reads_mlp_bias = False  # the MoE model's MLPs (shared, experts) are built without biases

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.raw("num_experts", 1)
        if isinstance(e, list):
            raise c.error("num_experts", "is a list: vLLM's HunYuanSparseMoeBlock takes one expert count")
        e = c.int("num_experts", default=1)
        if e <= 1:
            return None, (False,) * n_layers
        inter = c.int("intermediate_size")
        moe_inter = _uniform(c, "moe_intermediate_size", n_layers, inter) if c.raw("moe_intermediate_size") is not None else inter
        shared = 0
        if c.flag("use_mixed_mlp_moe", False):
            shared = inter * _uniform(c, "num_shared_expert", n_layers, 1)
        spec = MoESpec(
            num_experts=e,
            top_k=min(_uniform(c, "moe_topk", n_layers, 1), e),
            moe_intermediate_size=moe_inter,
            shared_intermediate_size=shared,
        )
        return spec, (True,) * n_layers


HUNYUAN_DENSE = HunyuanDense()
HUNYUAN_MOE = HunyuanMoe()
