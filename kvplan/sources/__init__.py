"""Where a model comes from: a local directory, a bundled snapshot, or the Hugging Face Hub.

``resolve_model`` tries, in order: an existing local directory (or a config.json file path);
a bundled spec by repo id/alias (unless ``--revision`` asks for a specific Hub revision);
the Hub (kvplan.sources.hub, imported only then).
"""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource
from kvplan.sources.bundled import bundled_ids, find_bundled
from kvplan.sources.local import load_local, read_config

__all__ = ["ModelSource", "resolve_model", "bundled_ids", "load_spec"]


def resolve_model(model: str, revision: str | None = None) -> ModelSource:
    """Find ``model`` and return its config and checkpoint facts.

    Args:
        model: a local directory, a path to a config.json, a bundled repo id/alias, or a Hub repo id.
        revision: Hub revision (branch, tag or commit); forces the Hub for non-local models.
    Raises:
        KvplanError: not found / unreadable / Hub failures (one line saying what to do).
    """
    if not model or not model.strip():
        raise KvplanError("MODEL: empty model name")
    path = Path(model).expanduser()
    if path.is_dir():
        return load_local(path, name=model)
    if path.is_file():
        if path.name.endswith(".json"):
            return ModelSource(name=model, config=read_config(path), origin="local", provenance={"path": str(path)})
        raise KvplanError(f"{model}: expected a model directory or a config.json, got another file")
    if revision is None:
        found = find_bundled(model)
        if found is not None:
            return found
    looks_local = model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local:
        raise KvplanError(f"{model}: no such directory", hint="give a directory holding config.json, or a Hub repo id")
    from kvplan.sources.hub import load_from_hub

    return load_from_hub(model, revision=revision)


def load_spec(model: str, revision: str | None = None):
    """Resolve ``model`` and parse its config into a ModelSpec carrying the checkpoint facts.

    Returns:
        (ModelSpec, ModelSource).
    Raises:
        KvplanError: not found, unreadable, or a config kvplan cannot parse (names the key).
    """
    from kvplan.specs.parse import parse_config

    source = resolve_model(model, revision=revision)
    spec = parse_config(source.config, source.name)
    if source.origin == "local" and not source.checkpoint_params:
        spec = spec.model_copy(update={"checkpoint_tensors_visible": False})
    if source.checkpoint_params or source.checkpoint_bytes:
        spec = spec.model_copy(
            update={
                "checkpoint_params": tuple(sorted(source.checkpoint_params.items())) if source.checkpoint_params else None,
                "checkpoint_bytes": source.checkpoint_bytes,
            }
        )
    return spec, source
