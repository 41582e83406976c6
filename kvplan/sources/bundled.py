"""Bundled config snapshots in ``model_specs/`` (shipped as the ``kvplan.model_specs`` package).

Lookup is by exact repo id or alias, case-insensitive; no network, no huggingface_hub import.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kvplan.sources.base import ModelSource


def _spec_dir():
    try:
        return resources.files("kvplan.model_specs")
    except ModuleNotFoundError:  # running from a source tree without installing
        return Path(__file__).resolve().parents[2] / "model_specs"


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    """lower-cased repo id / alias -> file name."""
    out: dict[str, str] = {}
    for entry in _spec_dir().iterdir():
        if not entry.name.endswith(".json"):
            continue
        data = json.loads(entry.read_text(encoding="utf-8"))
        out.setdefault(data["repo_id"].lower(), entry.name)
        for alias in data.get("aliases", []):
            out.setdefault(alias.lower(), entry.name)
    return out


def bundled_ids() -> list[str]:
    """Repo ids of every bundled spec, sorted."""
    ids = set()
    for name in set(_index().values()):
        data = json.loads(_spec_dir().joinpath(name).read_text(encoding="utf-8"))
        ids.add(data["repo_id"])
    return sorted(ids)


def find_bundled(name: str) -> ModelSource | None:
    """The bundled spec for a repo id or alias, or None.

    A snapshot whose ``status`` is not "complete..." (partial, near-complete) carries a note
    saying so in ``ModelSource.notes``."""
    fname = _index().get(name.strip().lower())
    if fname is None:
        return None
    data = json.loads(_spec_dir().joinpath(fname).read_text(encoding="utf-8"))
    total = data.get("checkpoint_total_bytes")
    status = str(data.get("status") or "")
    notes = ()
    if not status.startswith("complete"):
        notes = (
            f"bundled spec model_specs/{fname} is {status or 'of unknown completeness'}: keys the snapshot "
            "lacks take transformers' defaults; for exact figures give the model's own config.json "
            f"(a local directory, or the Hub: {data['repo_id']} --revision main)",
        )
    return ModelSource(
        name=data["repo_id"],
        config=data["config"],
        origin="bundled",
        checkpoint_bytes=total,
        provenance={
            "bundled_file": f"model_specs/{fname}",
            "source": data.get("source"),
            "status": data.get("status"),
            "checkpoint_total_bytes_source": data.get("checkpoint_total_bytes_source"),
            "tensors": "not read: a bundled config snapshot (the published checkpoint's tensors are assumed)",
        },
        tensors_visible=None,
        notes=notes,
    )
