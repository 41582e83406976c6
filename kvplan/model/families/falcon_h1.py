"""Falcon-H1 (FalconH1ForCausalLM): every decoder layer runs attention and a Mamba-2 mixer in
parallel on the same normed input, sums both into the residual, then a gated MLP
(``intermediate_size``) behind a second RMSNorm (input_layernorm, pre_ff_layernorm).

Attention: ``num_attention_heads`` / ``num_key_value_heads`` of ``head_dim`` (hidden / heads when
absent), RoPE, no biases (vLLM builds qkv_proj, o_proj and the MLP with bias=False whatever
``attention_bias`` / ``mlp_bias`` say). Mamba-2: d_ssm = ``mamba_d_ssm`` (transformers'
FalconH1Config default 1024 when config.json omits it; an explicit null means
``mamba_expand`` x hidden), ``mamba_n_heads`` heads of ``mamba_d_head`` ("auto" = d_ssm / heads),
``mamba_n_groups`` groups of ``mamba_d_state``, ``mamba_d_conv``; its gated RMSNorm has a weight
only with ``mamba_rms_norm``. The muP multipliers scale activations, not shapes.

Cache: each layer is two cache layers in vLLM -- the attention's KV (a FullAttentionSpec) and the
mixer's state (a MambaSpec, named layer num_hidden_layers + i) -- so 2 x num_hidden_layers cache
layers, and the hybrid block-size alignment applies (FalconH1 is IsHybrid).

Rule source: vLLM model_executor/models/falcon_h1.py (FalconH1ParallelHybrid,
FalconH1SSMDecoderLayer, FalconH1AttentionDecoderLayer, FalconH1MLP,
get_mamba_state_shape_from_config); transformers 5.x configuration_falcon_h1.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import Approximation, ApproximationKind, LayerKind, MambaShape


class FalconH1(Family):
    model_types = ("falcon_h1",)
    transformers_class = "FalconH1Config"
    transformers_defaults = {"max_position_embeddings": 8192, "intermediate_size": 14336, "vocab_size": 128000}
    hybrid_keys = {
        "mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1,
        "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_chunk_size": 256, "mamba_rms_norm": False,
    }
    reads_attention_bias = False
    reads_mlp_bias = False

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """Every layer attends (FalconH1Config.layers_block_type is all "hybrid"); the Mamba-2
        mixer beside it is ``parallel_mamba``."""
        return [LayerKind.FULL] * n_layers, "num_hidden_layers"

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """The parallel Mamba-2 mixer's shape.

        Raises:
            KvplanError: mamba_n_heads x mamba_d_head is not the mixer width (transformers'
                FalconH1Config.validate_architecture refuses such a config)."""
        if "mamba_d_ssm" in c.data and c.data["mamba_d_ssm"] is None:
            d_ssm = c.int("mamba_expand", default=2) * hidden
        else:
            d_ssm = c.int("mamba_d_ssm", default=1024)
        heads = c.int("mamba_n_heads", default=128)
        d_head = c.raw("mamba_d_head", "auto")
        d_head = d_ssm // heads if d_head == "auto" else c.int("mamba_d_head")
        if heads * d_head != d_ssm:
            raise c.error("mamba_n_heads", f"x mamba_d_head ({heads} x {d_head}) must equal the Mamba width "
                                           f"mamba_d_ssm ({d_ssm}), as transformers' FalconH1Config requires")
        return MambaShape(
            version=2,
            intermediate_size=d_ssm,
            state_size=c.int("mamba_d_state", default=256),
            conv_kernel=c.int("mamba_d_conv", default=4),
            n_groups=c.int("mamba_n_groups", default=1),
            num_heads=heads,
            head_dim=d_head,
            chunk_size=c.int("mamba_chunk_size", default=256),
            use_conv_bias=c.flag("mamba_conv_bias", True),
            use_bias=c.flag("mamba_proj_bias", False),
            gated_norm_weight=c.flag("mamba_rms_norm", False),
        )

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        out: dict[str, Any] = {"parallel_mamba": True, "approximations": (Approximation(
            kind=ApproximationKind.PARTIAL_RULES,
            reason="Falcon-H1's parallel attention + Mamba-2 layer: the activation peak follows the "
                   "attention branch's rule; the Mamba-2 branch's transient tensors beside it are not "
                   "modelled (no real start recorded yet)",
        ),)}
        rotary = c.int("attn_rotary_emb", default=None)
        if rotary is not None:
            out["rotary_dim"] = rotary
        return out


FALCON_H1 = FalconH1()
