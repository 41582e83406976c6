"""Where a model comes from: a local directory, a bundled snapshot, or the Hugging Face Hub.

``resolve_model`` tries, in order: an existing local directory (or a config.json file path; any
other path that exists, or that ends in ``config.json``, is refused as local, never looked up);
a bundled spec by repo id/alias (unless ``--revision`` asks for a specific Hub revision);
the Hub (kvplan.sources.hub, imported only then).
"""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource
from kvplan.sources.bundled import bundled_ids, find_bundled
from kvplan.sources.local import link_problem, load_local, read_config

__all__ = ["ModelSource", "resolve_model", "bundled_ids", "load_spec"]


def resolve_model(model: str, revision: str | None = None) -> ModelSource:
    """Find ``model`` and return its config and checkpoint facts.

    Args:
        model: a local directory, a path to a config.json, a bundled repo id/alias, or a Hub repo id.
        revision: Hub revision (branch, tag or commit); forces the Hub for non-local models.
    Raises:
        KvplanError: not found / unreadable / Hub failures (one line saying what to do); an empty
            ``revision`` ("--revision: empty"); ``model`` a broken symbolic link or loop, a FIFO
            or device (names which), or a missing ``.../config.json`` path.
    """
    if not model or not model.strip():
        raise KvplanError("MODEL: empty model name")
    if revision is not None and not revision.strip():
        # before any Hub or cache lookup: huggingface_hub would take '' as the default branch
        raise KvplanError("--revision: empty", hint="give a branch, tag or commit hash, or leave --revision out for main")
    path = Path(model).expanduser()
    from kvplan.io.files import InputError, probe_path, shown_name

    try:
        # a name the file system cannot even look up (ENAMETOOLONG, a parent that may not be
        # searched) is one line, not a traceback; it cannot be a Hub id either (at most 96 chars)
        probe_path(path)
        return _resolve_path(model, path, revision)
    except InputError as exc:
        raise KvplanError(
            f"{shown_name(model)}: {exc.message}",
            hint="give a directory holding config.json, the path of a config.json, or a Hub repo id",
        ) from None
    except OSError as exc:  # the target of a link, or a file replaced meanwhile
        raise KvplanError(f"{shown_name(model)}: cannot read: {exc.strerror or exc}") from None


# Set (to any value) by `kvplan web` for itself and the commands it runs, unless it was started
# with --allow-local-paths: a model that would be read from the server's disk is refused.
DENY_LOCAL_ENV = "KVPLAN_DENY_LOCAL_PATHS"


def _resolve_path(model: str, path: Path, revision: str | None) -> ModelSource:
    """resolve_model past its argument checks (``path``: ``model`` with ~ expanded)."""
    import os

    if os.environ.get(DENY_LOCAL_ENV) and (path.exists() or path.is_symlink() or model.startswith((".", "/", "~"))):
        raise KvplanError(
            f"{model}: local model paths are not readable through kvplan web",
            hint="use a bundled or Hub model id, or start the server with `kvplan web --allow-local-paths`",
        )
    problem = link_problem(path)
    if problem:
        raise KvplanError(f"{model}: {problem}", hint="give a directory holding config.json, or the path of a config.json")
    if path.is_dir():
        return load_local(path, name=model)
    if path.is_file():
        if path.name.endswith(".json"):
            return ModelSource(
                name=model,
                config=read_config(path),
                origin="local",
                provenance={
                    "path": str(path),
                    "tensors": "a config.json given alone: no safetensors read, as for a config-only directory",
                },
                tensors_visible=False,
            )
        raise KvplanError(f"{model}: expected a model directory or a config.json, got another file")
    if path.exists():
        # a FIFO, socket or device (or a link to one): refused by the regular-file reader, which
        # names what it is, as the directory form does; never looked up on the Hub
        read_config(path)
        raise KvplanError(f"{model}: expected a model directory or a config.json, got another file")
    if path.name == "config.json":
        raise KvplanError(f"{model}: no such file", hint="give a directory holding config.json, or the path of a config.json")
    if revision is None:
        found = find_bundled(model)
        if found is not None:
            return found
    looks_local = model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local:
        raise KvplanError(f"{model}: no such directory", hint="give a directory holding config.json, or a Hub repo id")
    from kvplan.sources.hub import load_from_hub

    return load_from_hub(model, revision=revision)


# Checkpoint tensors holding less than this share of the bytes kvplan's weight formula gives are
# taken as an incomplete download (a few shards of many whose names kvplan cannot judge) and
# ignored. Low enough to keep real checkpoints the formula over-states (an fp8 ModelOpt checkpoint
# read without its hf_quant_config.json is ~0.52 of the bf16 formula).
CHECKPOINT_COVERAGE_FLOOR = 0.4


def load_spec(model: str, revision: str | None = None, hf_overrides: dict | None = None, vllm_version: str | None = None):
    """Resolve ``model`` and parse its config into a ModelSpec carrying the checkpoint facts.

    ``vllm_version``: the version whose behaviour the parser's notes describe (default: the
    newest supported, versions.DEFAULT_VERSION). ``hf_overrides`` (``--hf-overrides``) is applied to the config before it is parsed, as
    vLLM does (kvplan.model.overrides.apply_hf_overrides).

    ``checkpoint_tensors_visible`` is False only when the source saw that vLLM would find no
    checkpoint tensors (a config-only directory or config.json, a Hub repo without safetensors):
    vLLM auto_gptq.maybe_update_config then finds no quantized layers. Checkpoint bytes
    below CHECKPOINT_COVERAGE_FLOOR x the architecture formula (vLLM weight rules in
    the version's weights rules, engines/vllm/v0_26/weights.py) are dropped as incomplete. ``notes`` gathers the parser's and
    the source's warnings (ModelSpec.notes, then ModelSource.notes, then the coverage note).

    Returns:
        (ModelSpec, ModelSource).
    Raises:
        KvplanError: not found, unreadable, or a config kvplan cannot parse (names the key).
    """
    from kvplan.model.parse import parse_config

    source = resolve_model(model, revision=revision)
    if hf_overrides:
        from dataclasses import replace

        from kvplan.model.overrides import apply_hf_overrides

        source = replace(source, config=apply_hf_overrides(source.config, hf_overrides)[0])
    # The notes name the vLLM version whose behaviour they describe: the engine's (its version table).
    from kvplan.engines.vllm.versions import DEFAULT_VERSION

    # A bundled snapshot keeps geometry keys only; the published config names its architecture.
    spec = parse_config(source.config, source.name, snapshot=source.origin == "bundled",
                        vllm_version=vllm_version or DEFAULT_VERSION)
    update: dict = {
        "checkpoint_tensors_visible": source.tensors_visible is not False,
        "notes": spec.notes + source.notes,
        # a bundled source's own notes say its snapshot is partial (sources/bundled.py)
        "snapshot_notes": source.notes if source.origin == "bundled" else (),
    }
    if hf_overrides:
        import json

        update["hf_overrides"] = json.dumps(hf_overrides)
    if source.checkpoint_params or source.checkpoint_bytes:
        update["checkpoint_params"] = tuple(sorted(source.checkpoint_params.items())) if source.checkpoint_params else None
        update["checkpoint_bytes"] = source.checkpoint_bytes
    spec = spec.model_copy(update=update)
    why = _below_formula(spec)
    if why:
        from kvplan.sources.local import incomplete_note

        spec = spec.model_copy(
            update={
                "checkpoint_params": None,
                "checkpoint_bytes": None,
                "notes": spec.notes + (incomplete_note(source.name, why),),
            }
        )
    return spec, source


def _below_formula(spec) -> str | None:
    """Why the checkpoint bytes look like an incomplete checkpoint, or None.

    Judged only where the formula is trusted: no quantization, or a method kvplan models."""
    from kvplan.model.quant import MODELLED_QUANT_METHODS

    if not spec.checkpoint_bytes or (spec.quantization is not None and spec.quantization.method not in MODELLED_QUANT_METHODS):
        return None
    from kvplan.engines.vllm import versions

    rules = versions.default()  # the checkpoint is judged against the default version's formula
    tally = rules.weights.weight_bytes_per_rank(
        spec, tensor_parallel_size=1, dtype_bytes=rules.kv_spec.DTYPE_BYTES.get(spec.dtype, 2), quant=spec.quantization
    )
    formula = tally.total - tally.parts.get("rotary_cache", 0) - tally.parts.get("mla_absorbed", 0)
    if formula <= 0 or spec.checkpoint_bytes >= CHECKPOINT_COVERAGE_FLOOR * formula:
        return None
    return (
        f"they hold {spec.checkpoint_bytes:,} bytes, {spec.checkpoint_bytes / formula:.0%} of the "
        f"{formula:,} bytes the architecture implies"
    )
