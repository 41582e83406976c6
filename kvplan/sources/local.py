"""A model from a local directory: config.json, and safetensors headers when present.

Safetensors headers are read with huggingface_hub's ``get_local_safetensors_metadata`` (only
the JSON headers, never the tensors), imported only when the directory has safetensors files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource

# Tensors in a checkpoint that vLLM 0.26.0 does not load (multi-token-prediction heads; DeepSeek's
# extra MTP layer beyond num_hidden_layers is handled in params_vllm_loads).
_SKIPPED = re.compile(r"(^|\.)mtp\.")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")

SAFETENSORS_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F4": 1, "U32": 4, "U16": 2,
}


def read_config(path: Path) -> dict:
    """Read and parse ``path`` (a config.json).

    Raises:
        KvplanError: missing, not UTF-8, not JSON, or not an object (names the file).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KvplanError(f"{path}: not found") from None
    except OSError as exc:
        raise KvplanError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > 16 * 1024 * 1024:
        raise KvplanError(f"{path}: {len(raw)} bytes is too large for a config.json (limit 16 MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: config.json must hold a JSON object")
    return data


def params_vllm_loads(tensors: dict[str, tuple[str, int]], num_hidden_layers: int | None) -> tuple[dict[str, int], int]:
    """Sum (dtype -> parameters, bytes) over tensors vLLM loads: drops MTP heads and layers
    numbered at or beyond num_hidden_layers.

    Args:
        tensors: name -> (safetensors dtype, element count).
    """
    by_dtype: dict[str, int] = {}
    total = 0
    for name, (dtype, n) in tensors.items():
        if _SKIPPED.search(name):
            continue
        m = _LAYER.search(name)
        if m and num_hidden_layers is not None and int(m.group(1)) >= num_hidden_layers and "vision" not in name:
            continue
        by_dtype[dtype] = by_dtype.get(dtype, 0) + n
        total += n * SAFETENSORS_DTYPE_BYTES.get(dtype, 2)
    return by_dtype, total


def _num_layers(config: dict) -> int | None:
    tc = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    n = tc.get("num_hidden_layers")
    return n if isinstance(n, int) else None


def load_local(directory: Path, name: str | None = None) -> ModelSource:
    """Read a model directory: config.json (required) and safetensors headers (optional).

    Raises:
        KvplanError: no config.json, or it or a safetensors header is unreadable.
    """
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise KvplanError(f"{directory}: no config.json in this directory")
    config = read_config(cfg_path)
    params = None
    total = None
    provenance = {"path": str(directory)}
    if any(directory.glob("*.safetensors")) or (directory / "model.safetensors.index.json").is_file():
        from huggingface_hub import get_local_safetensors_metadata
        from huggingface_hub.errors import NotASafetensorsRepoError, SafetensorsParsingError

        try:
            meta = get_local_safetensors_metadata(directory)
        except (NotASafetensorsRepoError, FileNotFoundError):
            meta = None
            files = sorted(directory.glob("*.safetensors"))
            if files:
                tensors: dict[str, tuple[str, int]] = {}
                for f in files:
                    try:
                        fm = get_local_safetensors_metadata(f)
                    except SafetensorsParsingError as exc:
                        raise KvplanError(f"{f}: unreadable safetensors header ({exc})") from None
                    for fmeta in fm.files_metadata.values():
                        for tname, info in fmeta.tensors.items():
                            tensors[tname] = (info.dtype, info.parameter_count)
                params, total = params_vllm_loads(tensors, _num_layers(config))
        except SafetensorsParsingError as exc:
            raise KvplanError(f"{directory}: unreadable safetensors header ({exc})") from None
        if meta is not None:
            tensors = {}
            for fmeta in meta.files_metadata.values():
                for tname, info in fmeta.tensors.items():
                    tensors[tname] = (info.dtype, info.parameter_count)
            params, total = params_vllm_loads(tensors, _num_layers(config))
        if params is not None:
            provenance["weights_from"] = "safetensors headers"
    return ModelSource(
        name=name or str(directory),
        config=config,
        origin="local",
        checkpoint_params=params,
        checkpoint_bytes=total,
        provenance=provenance,
    )
