"""ERNIE-4.5 dense (Ernie4_5ForCausalLM) and MoE (Ernie4_5_MoeForCausalLM).

- Dense: vLLM runs it as its Llama model (ernie45.py subclasses LlamaForCausalLM and drops the
  o_proj bias): the generic decoder, embeddings tied by default (Ernie4_5Config).
- MoE: grouped-query attention with an explicit ``head_dim``, q/k/v biases with ``use_bias`` and
  never an o_proj bias; layer i is a MoE when ``moe_num_experts`` > 0 (``use_moe``), (i + 1) is a
  multiple of ``moe_layer_interval`` and ``moe_layer_start_index`` <= i <= ``moe_layer_end_index``
  (default the last layer); a MoE layer routes to ``moe_num_experts`` experts of
  ``moe_intermediate_size`` (top ``moe_k``) through an fp32 router with an fp32
  ``e_score_correction_bias``, plus ``moe_num_shared_experts`` shared experts fused into one gated
  MLP of ``moe_num_shared_experts x moe_intermediate_size`` (no gate of its own); the other layers
  a dense gated MLP of ``intermediate_size``. ``use_bias`` (q/k/v and MLP biases) is false in
  every published config; a config with it true is refused (exit 2) rather than sized without. Multi-token-prediction
  (``mtp``) weights in a checkpoint are skipped. Embeddings tied by default (Ernie4_5_MoeConfig).

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/ernie45.py and ernie45_moe.py (Ernie4_5_MoeMoE,
Ernie4_5_MoeAttention, Ernie4_5_MoeDecoderLayer, load_weights skip_substrs=["mtp"]); the fp32
router is the engine's quirk (kvplan/engines/vllm/v0_26/family_quirks.py)."""

from __future__ import annotations

from kvplan.model.config import _Cfg
from kvplan.model.family import Family
from kvplan.model.spec import MoESpec


class Ernie45(Family):
    model_types = ("ernie4_5",)
    transformers_class = "Ernie4_5Config"
    transformers_defaults = {"vocab_size": 103424, "max_position_embeddings": 131072}
    tie_word_embeddings_default = True


class Ernie45Moe(Family):
    model_types = ("ernie4_5_moe",)
    transformers_class = "Ernie4_5_MoeConfig"
    transformers_defaults = {"vocab_size": 103424, "max_position_embeddings": 131072}
    tie_word_embeddings_default = True
    reads_attention_bias = False  # use_bias is the key, read below for q/k/v only
    reads_mlp_bias = False

    def moe(self, c: _Cfg, n_layers: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
        e = c.int("moe_num_experts", default=0, minimum=0)
        use_moe = c.flag("use_moe", e > 0)
        if not use_moe or e == 0:
            return None, (False,) * n_layers
        start = c.int("moe_layer_start_index", default=0, minimum=0)
        end = c.int("moe_layer_end_index", default=n_layers - 1, minimum=-1)  # vLLM compares as given
        interval = c.int("moe_layer_interval", default=1, minimum=1)
        inter = c.int("moe_intermediate_size")
        shared = c.int("moe_num_shared_experts", default=0, minimum=0)
        spec = MoESpec(
            num_experts=e,
            top_k=c.int("moe_k", maximum=e),
            moe_intermediate_size=inter,
            shared_intermediate_size=shared * inter,
            router_bias=True,  # e_score_correction_bias
        )
        return spec, tuple((i + 1) % interval == 0 and start <= i <= end for i in range(n_layers))

    def spec_fields(self, c: _Cfg, hidden: int, n_layers: int) -> dict:
        if c.flag("use_bias", False):
            raise c.error("use_bias", "is true: kvplan's ERNIE-4.5-MoE rules (kvplan/model/families/ernie45.py) "
                          "know only the unbiased layout every published ERNIE-4.5 MoE config uses")
        return {}


ERNIE45 = Ernie45()
ERNIE45_MOE = Ernie45Moe()
