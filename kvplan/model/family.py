"""What one architecture family says about its config: the hooks kvplan.model.parse asks.

``Family`` is the generic decoder (Llama-shaped: full attention unless ``layer_types`` /
``sliding_window`` say otherwise, a dense gated MLP, RMSNorm, RoPE, no biases unless
``attention_bias`` / ``mlp_bias``). A family module under ``kvplan.model.families`` subclasses
it and overrides only the hooks where its config (as transformers' config class reads it, which
is what vLLM sees) differs; kvplan.model.families registers one instance per Hugging Face
``architectures`` name.

Hooks take the guarded config reader (``_Cfg``) and return element counts or shape objects; none
reads a file or knows a vLLM version (how a vLLM version implements a family is the engine's:
kvplan/engines/vllm).
"""

from __future__ import annotations

from typing import Any

from kvplan.model.config import _Cfg
from kvplan.model.spec import GatedDeltaNetShape, LayerKind, MambaShape, MLAShape, MoESpec


class Family:
    """The generic decoder: every hook's default. Subclass and override what differs.

    Class attributes (data a family declares rather than computes):
        model_types: the config ``model_type`` values this family's rules are for.
        known: kvplan has rules for it (False only for the fallbacks of unregistered model types,
            which keep the "no kvplan rules" note).
        transformers_class: the transformers config class named in notes on filled defaults.
        transformers_defaults: values that class fills in for keys config.json may omit (vLLM
            sees them), filled before any read.
        attribute_map: standard key -> the key this config class stores it under (transformers'
            ``attribute_map``: MPT's ``n_layers`` is ``num_hidden_layers``); read under the
            standard name, and messages name the key as the file spells it; a standard key the
            config gives wins (it sets the own key).
        derived_keys: standard key -> the key whose value the config class copies into it when
            the config omits it (ChatGLMConfig: vocab_size = padded_vocab_size), read the same way.
        normally_omitted: of those, keys the published config.json itself leaves out (no note).
        hybrid_keys: keys shaping the cache/state/weights of a hybrid model, with the class
            default used when absent (a note lists the ones missing).
        qwen_style_sliding_window: ``sliding_window`` counts only with ``use_sliding_window``
            (transformers' Qwen config classes set it to None otherwise).
        rope_scaling_sets_max_len: rope scaling multiplies the derived max length (not Gemma-3).
        linear_attention_kind: what a ``linear_attention`` layer_types entry means.
        norms_per_layer: RMSNorm/LayerNorm weight vectors per decoder layer.
        norm_has_bias: a norm holds weight and bias (LayerNorm), not weight alone (RMSNorm).
        gated_mlp: gate and up projections (SwiGLU/GeGLU), not a plain fc1/fc2 MLP.
        tie_word_embeddings_default: the config class's default for an absent
            ``tie_word_embeddings`` (PretrainedConfig's is True; most families set False).
        rope_caches: distinct rotary caches (Gemma-3 keeps a local and a global one).
        attention_sinks: per-head learned sink logits (gpt-oss).
        attn_output_gate: q_proj also produces a sigmoid gate on the attention output, doubling
            its rows (Qwen3-Next).
        qkv_bias / o_bias / mlp_bias: the family always has these biases, whatever
            ``attention_bias`` / ``mlp_bias`` say.
        attention_bias_on_o: ``attention_bias`` also puts a bias on o_proj.
        attention_free: no layer attends and none has a feed-forward (Mamba, Mamba-2: each
            layer is one norm and a mixer); the attention keys are not read (a Mamba-2 config's
            ``num_heads`` / ``head_dim`` are its mixer's) and a 0 MLP width is no error.
        unsupported: why kvplan refuses to size this family at all (exit 2), or None.
        reads_attention_bias / reads_mlp_bias: vLLM's model file honours the config's
            ``attention_bias`` / ``mlp_bias``; False where it builds the projections with fixed
            biases whatever the config says (Granite-MoE, Seed-OSS), so the flag changes nothing.
    """

    model_types: tuple[str, ...] = ()
    known: bool = True
    transformers_class: str = "PretrainedConfig"
    transformers_defaults: dict[str, Any] = {}
    attribute_map: dict[str, str] = {}
    derived_keys: dict[str, str] = {}
    normally_omitted: frozenset[str] = frozenset()
    hybrid_keys: dict[str, Any] = {}
    qwen_style_sliding_window: bool = False
    rope_scaling_sets_max_len: bool = True
    linear_attention_kind: LayerKind = LayerKind.LINEAR
    norms_per_layer: int = 2
    norm_has_bias: bool = False
    gated_mlp: bool = True
    tie_word_embeddings_default: bool = False
    rope_caches: int = 1
    attention_sinks: bool = False
    attn_output_gate: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    attention_bias_on_o: bool = True
    attention_free: bool = False
    unsupported: str | None = None
    reads_attention_bias: bool = True
    reads_mlp_bias: bool = True

    def sliding_window(self, c: _Cfg) -> int | None:
        """The model-wide ``sliding_window`` in tokens (None = none; 0 and below are made None
        by the caller, as vLLM config/model.py treats a window of 0 as disabled)."""
        window = c.int("sliding_window", default=None, minimum=0)
        if self.qwen_style_sliding_window and not c.flag("use_sliding_window", False):
            return None
        return window

    def layer_types(self, c: _Cfg, n_layers: int, sliding_window: int | None, chunk: int | None,
                    notes: list[str]) -> tuple[Any, str]:
        """(the per-layer type strings, the key they are reported under); ``layer_types`` as
        given by default. Families whose config class derives the list override this."""
        return c.raw("layer_types"), "layer_types"

    def num_key_value_heads(self, c: _Cfg, n_heads: int) -> int:
        """KV heads of the attention layers (``num_key_value_heads``, default: multi-head)."""
        return c.int("num_key_value_heads", default=n_heads)

    def intermediate_size(self, c: _Cfg, hidden: int) -> int:
        """Dense MLP intermediate size (4 x hidden when no key gives it, as GPT-style configs do)."""
        intermediate = c.int("intermediate_size", "ffn_dim", "n_inner", default=None, minimum=0)
        return 4 * hidden if intermediate is None else intermediate

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        """The MoE shape and, per layer, whether its feed-forward is a MoE; dense by default."""
        return None, (False,) * n_layers

    def mla(self, c: _Cfg) -> MLAShape | None:
        """Multi-head latent attention shape, if the family's attention layers use MLA."""
        return None

    def gdn(self, c: _Cfg) -> GatedDeltaNetShape | None:
        """Gated DeltaNet shape of the linear-attention layers, if any."""
        return None

    def mamba(self, c: _Cfg, hidden: int) -> MambaShape | None:
        """Mamba mixer shape of the Mamba layers, if any."""
        return None

    def qk_norm(self, c: _Cfg) -> bool:
        """RMSNorm on q and k per head (``use_qk_norm``)."""
        return c.flag("use_qk_norm", False)

    def learned_positions(self, c: _Cfg) -> int:
        """Rows of a learned position embedding; 0 for rotary positions."""
        return 0

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict[str, Any]:
        """Extra ModelSpec fields this family sets from its config (per-layer shapes, norm
        layouts, biases, a vision tower's size, ...), by field name; none by default. They
        replace the generic reading of the same field. Lets a family carry a fact the generic
        parse does not read, without a parse change per family."""
        return {}

    def vision_tower_params(self, vc: _Cfg) -> int | None:
        """Parameters of the vision tower ``vision_config`` describes, when the family knows
        how vLLM builds it; None = the generic ViT-style count (kvplan.model.parse)."""
        return None

    def vision_params(self, top: _Cfg, vc: _Cfg, text_hidden: int) -> int | None:
        """Parameters of the vision tower and its projector, when they need keys beside
        ``vision_config`` (the top-level config ``top``, the text model's ``text_hidden``); by
        default ``vision_tower_params(vc)``."""
        return self.vision_tower_params(vc)

    def for_model_type(self, model_type: str) -> "Family | None":
        """The family that sizes a config of this architecture whose (text) ``model_type`` is
        ``model_type``: this one when it claims the type, else None (the registry then uses the
        type's default architecture). A multimodal wrapper whose text model can be any of several
        decoders (InternVL's ``llm_config``) returns the variant for that decoder."""
        return self if model_type in self.model_types else None

    def has_o_bias(self, attention_bias: bool) -> bool:
        """o_proj has a bias: always for some families, else with ``attention_bias``."""
        return self.o_bias or (attention_bias and self.attention_bias_on_o)
