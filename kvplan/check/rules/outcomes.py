"""The two places where check reads the estimate's outcomes, kept together. Both read the typed
outcomes of kvplan/capacity/outcomes.py (EstimateRefusal.flag, Plan.remarks of Note(kind,
message)), not the message text.
"""

from __future__ import annotations

import re

from kvplan.capacity.outcomes import EstimateRefusal, NoteKind
from kvplan.errors import KvplanError

# Fallback for refusals raised as a plain KvplanError inside a version's rules (--dtype in
# v0_26/defaults.py resolve_dtype, --quantization in v0_26/quantization.py effective_quant,
# --kv-cache-dtype in v0_26/kv_spec.py kv_dtype_bytes): those messages start with the flag.
_LEADING_FLAG = re.compile(r"(--[a-z0-9-]+)")

# Notes check reports as findings of its own (fp8-kv-unsupported-gpu, kv-head-replication).
_OWN_FINDINGS = frozenset({NoteKind.FP8_KV_UNSUPPORTED_GPU, NoteKind.KV_HEAD_REPLICATION})
# Notes on estimates kvplan has not verified: figures, not findings about the deployment. (A
# partial bundled snapshot, also about kvplan, is shown as an info: the user can fix it by
# giving the model's own config.json.)
_UNVERIFIED_ESTIMATES = frozenset({NoteKind.PARALLEL_UNVERIFIED, NoteKind.V1_CUDAGRAPH_UNVERIFIED})


def refused_flag(exc: KvplanError) -> str | None:
    """The `vllm serve` flag an estimate refusal names ("--max-model-len"), or None."""
    if isinstance(exc, EstimateRefusal):
        return exc.flag
    m = _LEADING_FLAG.match(exc.message)
    return m.group(1) if m else None


def deployment_notes(plan) -> tuple[list[str], list[str]]:
    """The estimate's notes (those of ``plan.warnings``, then of ``plan.notes``, in order) as
    (notes about the deployment, notes about kvplan's own unverified estimates). Notes check
    reports as its own findings (fp8-kv-unsupported-gpu, kv-head-replication) are left out."""
    shown: list[str] = []
    about_kvplan: list[str] = []
    ordered = [n for n in plan.remarks if not n.about_kvplan] + [n for n in plan.remarks if n.about_kvplan]
    for note in ordered:
        if note.kind in _OWN_FINDINGS:
            continue
        (about_kvplan if note.kind in _UNVERIFIED_ESTIMATES else shown).append(note.message)
    return shown, about_kvplan
