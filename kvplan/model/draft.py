"""The draft model a speculative-decoding deployment pairs with its target: the draft's own
ModelSpec plus the few facts of its config that vLLM's drafter classes read and a plain decoder
spec does not keep (EAGLE-3's draft vocabulary and auxiliary hidden states).

Built by sources/draft.py (which reads the draft's config like any model's) and attached to the
target's ModelSpec (``ModelSpec.speculative_draft``), so that every re-plan of a plan keeps it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DraftModel(BaseModel):
    """A speculative draft.

    Attributes:
        spec: the draft's decoder (its layers, heads, hidden size; for MTP the target's config
            cut to its num_nextn_predict_layers prediction layers).
        method: vLLM's normalized method ("eagle", "eagle3", "mtp", "draft_model").
        source: where the config came from (Hub id, directory, "bundled", or "target" for MTP).
        draft_vocab_size: EAGLE-3's ``draft_vocab_size`` (its own lm_head rows), None = the
            target's vocabulary.
        num_aux_hidden_states: EAGLE-3's auxiliary target hidden states (fc input = this x the
            target hidden size; vLLM llama_eagle3.py: eagle_aux_hidden_state_layer_ids or 3).
        target_hidden_size: EAGLE-3's ``target_hidden_size`` (None = the draft's hidden size).
        checkpoint_tensor_names: tensor names of the draft's checkpoint when the source listed
            them (decides whether it brings its own embed_tokens / lm_head), None = unknown.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    spec: "ModelSpec"
    method: str
    source: str
    draft_vocab_size: int | None = None
    num_aux_hidden_states: int = 3
    target_hidden_size: int | None = None
    checkpoint_tensor_names: tuple[str, ...] | None = None


from kvplan.model.spec import ModelSpec  # noqa: E402

DraftModel.model_rebuild()
