"""Models from the Hugging Face Hub (placeholder until the Hub source lands)."""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource


def load_from_hub(repo_id: str, revision: str | None = None) -> ModelSource:
    raise KvplanError(f"{repo_id}: not a bundled model and the Hub source is not available yet")
