"""The two places where check reads the planner's outcomes, kept together.

INTEGRATOR: today both read the planner's prose (a message's leading flag, note prefixes).
Branch r-engine adds typed outcomes (capacity/outcomes.py: EstimateRefusal.flag, Plan.notes of
Note(kind, message) with NoteKind.FP8_KV_UNSUPPORTED_GPU / KV_HEAD_REPLICATION and
UNVERIFIED_NOTES). When it lands, answer both from those fields (same results: the flag the
refusal names; the notes other than those two kinds, split by Note.about_kvplan) and delete the
string tests below. Nothing else in kvplan.check parses planner text.
"""

from __future__ import annotations

import re

from kvplan.errors import KvplanError

_LEADING_FLAG = re.compile(r"(--[a-z0-9-]+)")


def refused_flag(exc: KvplanError) -> str | None:
    """The `vllm serve` flag a planner refusal names ("--max-model-len"), or None: the flag
    its message starts with."""
    m = _LEADING_FLAG.match(exc.message)
    return m.group(1) if m else None


def deployment_notes(plan) -> tuple[list[str], list[str]]:
    """The planner's notes (``plan.warnings`` then ``plan.notes``, in order) as (notes about
    the deployment, notes about kvplan's own unverified estimates). Notes check reports as
    their own findings (fp8-kv-unsupported-gpu, kv-head-replication) are left out."""
    shown: list[str] = []
    about_kvplan: list[str] = []
    for w in [*plan.warnings, *plan.notes]:
        if w.startswith(("--kv-cache-dtype", "tensor-parallel-size")):
            continue  # reported as fp8-kv-unsupported-gpu / kv-head-replication
        if "unverified" in w:
            about_kvplan.append(w)  # about kvplan's own confidence, not the deployment
            continue
        shown.append(w)
    return shown, about_kvplan
