"""Pure state-space models: Mamba (MambaForCausalLM), Falcon-Mamba (FalconMambaForCausalLM) and
Mamba-2 (Mamba2ForCausalLM). Every decoder layer is one RMSNorm and one mixer -- no attention, no
feed-forward -- so no layer keeps a KV cache; each keeps one recurrent state per sequence.

Mamba / Falcon-Mamba (vLLM model_executor/models/mamba.py, one file for both: MambaDecoderLayer
builds a MambaMixer): d_inner = ``intermediate_size`` (transformers' MambaConfig /
FalconMambaConfig set it to ``expand`` x hidden, a value config.json gives replaces it),
``state_size``, ``conv_kernel``, ``time_step_rank`` ("auto" = ceil(hidden / 16)). Falcon-Mamba
(``model_type`` falcon_mamba) also normalises dt, B and C, with RMSNorms that have no weight
(``rms_norm_has_weight=not is_falcon_mamba``), so no parameter. Tied embeddings by default.

Mamba-2 (vLLM mamba2.py Mamba2DecoderLayer, a MambaMixer2): ``num_heads`` heads of ``head_dim``,
``n_groups`` groups of ``state_size``, d_inner = ``intermediate_size`` when config.json gives it,
else ``expand`` x hidden (vLLM reads it with getattr, transformers' Mamba2Config has none);
untied embeddings by default.

State shapes: vLLM model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
mamba1_state_shape / mamba2_state_shape (kvplan.engines.vllm.v0_26.kv_spec.mamba_state_bytes).
These configs name no position limit; vLLM config/model.py _get_and_verify_max_len then takes an
explicit ``--max-model-len`` as given (2048 is only the default), so no limit is set here.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.model.config import _POSITION_KEYS, _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import LayerKind, MambaShape

# no position key: any explicit --max-model-len is taken (vLLM config/model.py, see above)
_NO_POSITION_LIMIT = 2**32


class _StateSpace(Family):
    """Shared by the three: all layers Mamba, one norm each, no feed-forward, no RoPE."""

    attention_free = True
    norms_per_layer = 1
    linear_attention_kind = LayerKind.MAMBA

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        return [LayerKind.MAMBA] * n_layers, "num_hidden_layers"

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        """No dense MLP (``intermediate_size`` is the mixer's d_inner here)."""
        return 0

    def sliding_window(self, c: _Cfg) -> int | None:
        return None

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        out: dict[str, Any] = {"ffn_layers": (False,) * n_layers, "rotary_dim": None, "attention_free": True}
        if not any(c.has(k) for k in _POSITION_KEYS):
            out["max_model_len_limit"] = _NO_POSITION_LIMIT
        return out


class Mamba(_StateSpace):
    model_types = ("mamba", "falcon_mamba")
    transformers_class = "MambaConfig"
    tie_word_embeddings_default = True

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """Mamba-1: d_inner = ``intermediate_size`` (default ``expand`` x hidden)."""
        d_inner = c.int("intermediate_size", default=None)
        if d_inner is None:
            d_inner = c.int("expand", default=2) * hidden
        dt_rank = c.raw("time_step_rank", "auto")
        dt_rank = math.ceil(hidden / 16) if dt_rank == "auto" else c.int("time_step_rank")
        return MambaShape(
            version=1,
            intermediate_size=d_inner,
            state_size=c.int("state_size", default=16),
            conv_kernel=c.int("conv_kernel", default=4),
            dt_rank=dt_rank,
            use_conv_bias=c.flag("use_conv_bias", True),
            use_bias=c.flag("use_bias", False),
            # falcon_mamba's dt/B/C RMSNorms have no weight: nothing to count
            use_rms_norm=False,
        )


class Mamba2(_StateSpace):
    model_types = ("mamba2",)
    transformers_class = "Mamba2Config"
    hybrid_keys = {"num_heads": 128, "head_dim": 64, "n_groups": 8, "state_size": 128, "conv_kernel": 4,
                   "expand": 2, "chunk_size": 256}

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        heads = c.int("num_heads", default=128)
        head_dim = c.int("head_dim", default=64)
        d_inner = c.int("intermediate_size", default=None)
        if d_inner is None:
            d_inner = c.int("expand", default=2) * hidden
        if heads * head_dim != c.int("expand", default=2) * hidden:
            # transformers Mamba2Config.validate_architecture refuses the config (vLLM loads it
            # through that class), and the mixer's state would not match its heads
            raise c.error("num_heads", f"x head_dim ({heads} x {head_dim}) must equal expand x hidden_size "
                                       f"({c.int('expand', default=2)} x {hidden}), as transformers' Mamba2Config requires")
        return MambaShape(
            version=2,
            intermediate_size=d_inner,
            state_size=c.int("state_size", default=128),
            conv_kernel=c.int("conv_kernel", default=4),
            n_groups=c.int("n_groups", default=8),
            num_heads=heads,
            head_dim=head_dim,
            chunk_size=c.int("chunk_size", default=256),
            use_conv_bias=c.flag("use_conv_bias", True),
            use_bias=c.flag("use_bias", False),
        )


MAMBA = Mamba()
MAMBA2 = Mamba2()
