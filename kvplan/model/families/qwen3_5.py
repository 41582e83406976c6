"""Qwen3.5 and Qwen3.5-MoE (Qwen3_5[Moe]ForConditionalGeneration / ForCausalLM): the Qwen3-Next
text model under ``text_config`` -- Gated DeltaNet linear attention on the ``layer_types`` marked
``linear_attention``, full gated attention (q_proj doubled by ``attn_output_gate``, qk-norm) on the
rest -- with a dense gated MLP (``qwen3_5_text``) or the Qwen MoE layout with a gated shared
expert (``qwen3_5_moe_text``), partial rotary from ``rope_parameters.partial_rotary_factor``, and
the Qwen3 vision transformer (kvplan.model.families.qwen3_vl).

The config's ``mamba_ssm_dtype`` is the dtype of the recurrent (temporal) state; how a vLLM
version uses it is the engine's (v0_26 family_quirks ``ssm_state_dtype_from_config``).

Rule source: vLLM model_executor/models/qwen3_5.py (Qwen3_5DecoderLayer, Qwen3_5Model),
qwen3_next.py (Qwen3NextAttention, Qwen3NextSparseMoeBlock), transformers_utils/configs/qwen3_5*.py.
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.families.qwen3_next import Qwen3Next
from kvplan.model.families.qwen3_vl import qwen3_vision_params
from kvplan.model.spec import MoESpec


class Qwen3_5(Qwen3Next):
    model_types = ("qwen3_5_text", "qwen3_5")
    transformers_class = "Qwen3_5TextConfig"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """Dense: every layer a gated MLP of ``intermediate_size`` (Qwen3NextMLP)."""
        return None, (False,) * n_layers

    def vision_tower_params(self, vc: _Cfg) -> int | None:
        return qwen3_vision_params(vc)

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """Partial rotary (``rope_parameters.partial_rotary_factor``, else top-level, default
        0.25 as Qwen3_5TextConfig) and the config's SSM-state dtype."""
        head_dim = c.int("head_dim", default=hidden // c.int("num_attention_heads"))
        rope = c.sub("rope_parameters") if isinstance(c.raw("rope_parameters"), dict) else None
        factor = None
        if rope is not None:
            factor = rope.num("partial_rotary_factor", None, gt=0.0, le=1.0)
        if factor is None:
            factor = c.num("partial_rotary_factor", 0.25, gt=0.0, le=1.0)
        out: dict[str, Any] = {"rotary_dim": int(head_dim * float(factor))}
        dtype = c.text("mamba_ssm_dtype", None)
        if dtype is not None:
            out["ssm_state_dtype"] = _ssm_dtype(c, "mamba_ssm_dtype", dtype)
        return out


class Qwen3_5Moe(Qwen3_5):
    model_types = ("qwen3_5_moe_text", "qwen3_5_moe")
    transformers_class = "Qwen3_5MoeTextConfig"

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        return Qwen3Next.moe(self, c, n_layers)


_SSM_DTYPES = ("float32", "float16", "bfloat16")


def _ssm_dtype(c: _Cfg, key: str, value: str) -> str:
    """A config's SSM-state dtype key, checked (vLLM's MambaDType values besides "auto").

    Raises:
        KvplanError: a value vLLM does not take (names the key)."""
    if value not in _SSM_DTYPES:
        raise c.error(key, f"must be one of {', '.join(_SSM_DTYPES)}, got {value!r}")
    return value


QWEN3_5 = Qwen3_5()
QWEN3_5_MOE = Qwen3_5Moe()
