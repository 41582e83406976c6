"""Bundled config snapshots in ``model_specs/`` (shipped as the ``kvplan.model_specs`` package).

Lookup is by exact repo id or alias, case-insensitive; no network, no huggingface_hub import.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from kvplan.sources.base import ModelSource


@lru_cache(maxsize=1)
def _spec_dir() -> Path:
    """The folder of the snapshots: the ``kvplan.model_specs`` package's (installed, editable or
    not), else the source tree's ``model_specs/``. Read from the package's own path instead of
    importlib.resources, whose import (zipfile, tempfile: ~3 ms) every `kvplan estimate` paid; a
    wheel installs it as a plain folder."""
    try:
        import kvplan.model_specs as package
    except ModuleNotFoundError:  # running from a source tree without installing
        return Path(__file__).resolve().parents[2] / "model_specs"
    return Path(next(iter(package.__path__)))


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


def _by_file_name(key: str) -> tuple[str, dict] | None:
    """(file name, its data) when ``key`` (a lower-cased repo id) is the repo id of the snapshot
    named after it (``org__name.json``, as SOURCES.md names them), else None. Reads one file
    instead of every snapshot (_index): the answer is the index's, since a repo id is never
    another snapshot's alias (tests/test_bundled_specs.py checks it)."""
    if "/" not in key or key.count("/") > 1:
        return None
    wanted = key.replace("/", "__") + ".json"
    try:
        fname = next((e.name for e in _spec_dir().iterdir() if e.name.lower() == wanted), None)
    except OSError:
        return None
    if fname is None:
        return None
    data = json.loads(_spec_dir().joinpath(fname).read_text(encoding="utf-8"))
    return (fname, data) if str(data.get("repo_id", "")).lower() == key else None


def find_bundled(name: str) -> ModelSource | None:
    """The bundled spec for a repo id or alias, or None.

    A snapshot whose ``status`` is not "complete..." (partial, near-complete) carries a note
    saying so in ``ModelSource.notes``."""
    key = name.strip().lower()
    found = _by_file_name(key)
    if found is None:
        fname = _index().get(key)
        if fname is None:
            return None
        found = fname, json.loads(_spec_dir().joinpath(fname).read_text(encoding="utf-8"))
    fname, data = found
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
