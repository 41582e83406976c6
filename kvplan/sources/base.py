"""The result every model source returns: a config dict plus what is known of the checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelSource:
    """A model's config.json and checkpoint facts, with where they came from.

    Attributes:
        name: the repo id or path the user gave.
        config: the parsed config.json.
        origin: "bundled", "local" or "hub".
        revision: the Hub revision (commit or branch) when known.
        checkpoint_params: parameters by safetensors dtype ("BF16": n, ...) of the tensors vLLM
            loads, when known (safetensors headers); None otherwise.
        checkpoint_bytes: total bytes of those tensors, when known.
        provenance: human-readable source notes (for --format json "model.source"); "tensors"
            says what was seen of the checkpoint's tensors.
        tensors_visible: whether vLLM would find the checkpoint's tensors: True (safetensors
            headers were read), False (none next to config.json, or the repo has none), None
            (not looked at: a bundled snapshot, or the Hub's headers could not be fetched; the
            published checkpoint is assumed to have them).
        notes: one-line warnings about the source (a partial bundled snapshot, checkpoint
            tensors ignored as incomplete or malformed); load_spec adds them to ModelSpec.notes.
    """

    name: str
    config: dict
    origin: str
    revision: str | None = None
    checkpoint_params: dict[str, int] | None = None
    checkpoint_bytes: int | None = None
    provenance: dict = field(default_factory=dict)
    tensors_visible: bool | None = None
    notes: tuple[str, ...] = ()
