"""Nemotron-H / Nemotron-3 (NemotronHForCausalLM): one block per layer, its kind the layer's
character in ``hybrid_override_pattern`` -- ``M`` a Mamba-2 mixer, ``*`` attention (no RoPE, no
biases), ``-`` a plain ReLU^2 MLP (up/down, ``intermediate_size``), ``E`` a MoE (sigmoid router
with an fp32 correction bias; ``n_routed_experts`` plain up/down experts of
``moe_intermediate_size`` and ``n_shared_experts`` x ``moe_shared_expert_intermediate_size``
shared) -- each behind one RMSNorm. Mamba-2: ``mamba_num_heads`` heads of ``mamba_head_dim``
(d_inner = heads x head_dim, not expand x hidden), ``n_groups`` groups of ``ssm_state_size``.
The config's ``mamba_ssm_cache_dtype`` names the SSM-state dtype (how a vLLM version uses it:
engines/vllm/v0_XX/family_quirks.py).

Rule source: vLLM model_executor/models/nemotron_h.py (ALL_DECODER_LAYER_TYPES,
NemotronHMLP, NemotronHMoE, NemotronHAttention, NemotronHMambaDecoderLayer; the layer count is
len(hybrid_override_pattern)), transformers_utils/configs/nemotron_h.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.families.qwen3_5 import _ssm_dtype
from kvplan.model.family import Family
from kvplan.model.spec import LayerKind, MambaShape, MoESpec

_KINDS = {"M": LayerKind.MAMBA, "*": LayerKind.FULL, "-": LayerKind.NONE, "E": LayerKind.NONE}


class NemotronH(Family):
    model_types = ("nemotron_h",)
    transformers_class = "NemotronHConfig"
    norms_per_layer = 1
    gated_mlp = False

    def _pattern(self, c: _Cfg, n_layers: int) -> str:
        """``hybrid_override_pattern``, checked: one known character per layer.

        Raises:
            KvplanError: absent, not a string, the wrong length or an unknown character."""
        pattern = c.raw("hybrid_override_pattern")
        if not isinstance(pattern, str):
            raise c.error("hybrid_override_pattern", f"must be a string of M/*/-/E per layer, got {_show(pattern)}")
        if len(pattern) != n_layers:
            raise c.error("hybrid_override_pattern", f"must have one character per layer ({n_layers}), got {len(pattern)}")
        for i, ch in enumerate(pattern):
            if ch not in _KINDS:
                raise KvplanError(
                    f"{c.where}: config key '{c.name('hybrid_override_pattern')}' has unknown layer type {ch!r} at "
                    f"layer {i} (vLLM's NemotronH takes M, *, - and E)"
                )
        return pattern

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        return [_KINDS[ch] for ch in self._pattern(c, n_layers)], "hybrid_override_pattern"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        pattern = self._pattern(c, n_layers)
        layers = tuple(ch == "E" for ch in pattern)
        if not any(layers):
            return None, layers
        e = c.int("n_routed_experts")
        shared = c.int("n_shared_experts", default=0, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("num_experts_per_tok", maximum=e),
            moe_intermediate_size=c.int("moe_intermediate_size"),
            shared_intermediate_size=shared * c.int("moe_shared_expert_intermediate_size", default=0, minimum=0),
            router_bias=True,  # gate.e_score_correction_bias (fp32)
            gated=False,
        )
        return spec, layers

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """The Mamba-2 shape; None when no block is ``M`` (no Mamba key is read then)."""
        if "M" not in (c.raw("hybrid_override_pattern") or ""):
            return None
        heads = c.int("mamba_num_heads")
        head_dim = c.int("mamba_head_dim")
        return MambaShape(
            version=2,
            intermediate_size=heads * head_dim,
            state_size=c.int("ssm_state_size"),
            conv_kernel=c.int("conv_kernel"),
            n_groups=c.int("n_groups", default=1),
            num_heads=heads,
            head_dim=head_dim,
            chunk_size=c.int("chunk_size", default=None),
            use_conv_bias=c.flag("use_conv_bias", True),
            use_bias=c.flag("use_bias", False),
        )

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """Which layers have a feed-forward (``-`` and ``E``), no rotary cache (NemotronH
        attention has no RoPE), and the config's SSM-state dtype."""
        pattern = self._pattern(c, n_layers)
        out: dict[str, Any] = {"ffn_layers": tuple(ch in "-E" for ch in pattern), "rotary_dim": None}
        dtype = c.text("mamba_ssm_cache_dtype", None)
        if dtype is not None:
            out["ssm_state_dtype"] = _ssm_dtype(c, "mamba_ssm_cache_dtype", dtype)
        return out


NEMOTRON_H = NemotronH()
