"""A model from a local directory: config.json, and safetensors headers when present.

Safetensors headers are read with huggingface_hub's ``parse_local_safetensors_file_metadata``
(only the JSON headers, never the tensors), imported only when the directory has safetensors
files. ``params_vllm_loads`` (shared with the Hub source) keeps the tensors vLLM 0.26.0 loads.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource

CONFIG_MAX_BYTES = 16 * 1024 * 1024
INDEX_NAME = "model.safetensors.index.json"

# Checkpoint tensors vLLM 0.26.0 does not load into the served (target) model:
# - multi-token-prediction heads stored under their own prefix, "mtp.*" (Qwen3-Next and later
#   Qwen/DeepSeek checkpoints) or "mtp_layers.*" (MiMo): only vLLM's MTP draft model reads them;
# - DeepSeek-V3 / GLM-4.5 style MTP layers stored as extra decoder layers numbered from
#   num_hidden_layers on (vllm/model_executor/models/deepseek_v2.py
#   get_spec_layer_idx_from_weight_name: "model.layers.{num_hidden_layers + i}."). Here: any
#   "[model.][language_model.][model.]layers.N." with N >= the text config's num_hidden_layers;
#   vision/audio towers ("vision_tower....layers.N") are not decoder layers and are kept;
# - "lm_head.*" when tie_word_embeddings is true (AutoWeightsLoader(skip_prefixes=["lm_head."])
#   in the load_weights of Llama-style models when the embeddings are tied).
_SKIPPED = re.compile(r"(^|\.)(mtp|mtp_layers)\.")
_DECODER_LAYER = re.compile(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?layers\.(\d+)\.")

# Bits per element of each safetensors dtype (safetensors/src/tensor.rs Dtype::bitsize); used only
# when a tensor's byte size is not given by its data offsets.
SAFETENSORS_DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64,
}
# Whole bytes per element, for byte-aligned dtypes (kept for callers that want bytes directly).
SAFETENSORS_DTYPE_BYTES = {k: v // 8 for k, v in SAFETENSORS_DTYPE_BITS.items() if v % 8 == 0}


def read_config(path: Path) -> dict:
    """Read and parse ``path`` (a config.json) into a dict.

    Raises:
        KvplanError: missing, unreadable, larger than 16 MiB, not UTF-8, not JSON, or not a JSON
            object; the message names the file (and the line for JSON syntax errors).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KvplanError(f"{path}: not found") from None
    except OSError as exc:
        raise KvplanError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise KvplanError(f"{path}: {len(raw)} bytes is too large for a config.json (limit 16 MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: config.json must hold a JSON object, got a JSON {_json_kind(data)}")
    return data


def _json_kind(value) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def num_text_layers(config: dict) -> int | None:
    """num_hidden_layers of the language model (``text_config`` for multimodal configs), or None."""
    from kvplan.specs.parse import text_config_of

    n = text_config_of(config).get("num_hidden_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def ties_word_embeddings(config: dict) -> bool:
    """True only when the (text) config says ``tie_word_embeddings: true`` (absent means we keep
    lm_head: transformers' default differs per model class, and tied checkpoints rarely store it)."""
    from kvplan.specs.parse import text_config_of

    return text_config_of(config).get("tie_word_embeddings") is True


def tensor_sizes(file_meta) -> dict[str, tuple[str, int, int]]:
    """name -> (safetensors dtype, elements, bytes) for one huggingface_hub SafetensorsFileMetadata.

    Bytes come from the tensor's data offsets (exact for packed dtypes too).

    Raises:
        ValueError: data offsets that are not [begin, end] integers with begin <= end.
    """
    out: dict[str, tuple[str, int, int]] = {}
    for name, info in file_meta.tensors.items():
        offsets = info.data_offsets
        if len(offsets) != 2 or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets) or offsets[1] < offsets[0]:
            raise ValueError(f"tensor {name}: bad data_offsets {list(offsets)!r}")
        out[name] = (str(info.dtype), int(info.parameter_count), offsets[1] - offsets[0])
    return out


def params_vllm_loads(
    tensors: Mapping[str, tuple],
    num_hidden_layers: int | None,
    *,
    tie_word_embeddings: bool = False,
) -> tuple[dict[str, int], int]:
    """Parameters by dtype and total bytes over the checkpoint tensors vLLM 0.26.0 loads.

    Args:
        tensors: name -> (safetensors dtype, element count) or (dtype, element count, bytes);
            without bytes they are element count x dtype bits / 8, rounded up.
        num_hidden_layers: the text model's decoder layers; decoder layers numbered at or beyond
            it (DeepSeek-style MTP layers) are dropped. None keeps every layer.
        tie_word_embeddings: drop "lm_head.*" (vLLM reuses the input embedding).
    Returns:
        ({dtype: elements}, total bytes).
    Raises:
        KvplanError: a tensor without byte size has a dtype kvplan does not know.

    Rule source: see the comment on _SKIPPED / _DECODER_LAYER (vLLM 0.26.0 model load_weights).
    """
    by_dtype: dict[str, int] = {}
    total = 0
    for name, entry in tensors.items():
        dtype, n = entry[0], entry[1]
        if _SKIPPED.search(name):
            continue
        if tie_word_embeddings and name.startswith("lm_head."):
            continue
        m = _DECODER_LAYER.match(name)
        if m and num_hidden_layers is not None and int(m.group(1)) >= num_hidden_layers:
            continue
        if len(entry) > 2:
            nbytes = entry[2]
        elif dtype in SAFETENSORS_DTYPE_BITS:
            nbytes = math.ceil(n * SAFETENSORS_DTYPE_BITS[dtype] / 8)
        else:
            raise KvplanError(f"tensor {name}: unknown safetensors dtype {dtype!r}")
        by_dtype[dtype] = by_dtype.get(dtype, 0) + n
        total += nbytes
    return by_dtype, total


def load_local(directory: Path, name: str | None = None) -> ModelSource:
    """Read a model directory: config.json (required) and safetensors headers (optional).

    Which safetensors files count: the shards named in model.safetensors.index.json when it
    exists (vLLM 0.26.0 model_loader/weight_utils.py filter_duplicate_safetensors_files keeps
    only those); else model.safetensors (huggingface_hub's get_local_safetensors_metadata rule);
    else every ``*.safetensors`` file in the directory (what vLLM globs without an index).

    Returns:
        ModelSource with origin "local"; checkpoint_params (elements by dtype) and
        checkpoint_bytes (bytes) over the tensors vLLM loads, when safetensors files exist.
    Raises:
        KvplanError: no config.json; config.json unreadable (see read_config); the index is not
            valid JSON or names a missing shard; a safetensors header is unreadable. Each
            message names the file.
    """
    cfg_path = directory / "config.json"
    if not cfg_path.is_file():
        raise KvplanError(
            f"{directory}: no config.json in this directory",
            hint="give the model directory that holds config.json, or the path of a config.json",
        )
    config = read_config(cfg_path)
    provenance: dict = {"path": str(directory)}
    files = _safetensors_files(directory)
    params = total = None
    if files:
        from huggingface_hub import parse_local_safetensors_file_metadata
        from huggingface_hub.errors import SafetensorsParsingError

        tensors: dict[str, tuple[str, int, int]] = {}
        for f in files:
            try:
                tensors.update(tensor_sizes(parse_local_safetensors_file_metadata(f)))
            except (SafetensorsParsingError, ValueError) as exc:
                raise KvplanError(f"{f}: unreadable safetensors header ({_first_line(exc)})") from None
            except OSError as exc:
                raise KvplanError(f"{f}: cannot read ({exc.strerror or exc})") from None
        params, total = params_vllm_loads(tensors, num_text_layers(config), tie_word_embeddings=ties_word_embeddings(config))
        provenance["weights_from"] = f"safetensors headers ({len(files)} file{'s' if len(files) != 1 else ''})"
    return ModelSource(
        name=name or str(directory),
        config=config,
        origin="local",
        checkpoint_params=params,
        checkpoint_bytes=total,
        provenance=provenance,
    )


def _safetensors_files(directory: Path) -> list[Path]:
    """The safetensors files vLLM would load from ``directory`` (see load_local)."""
    index = directory / INDEX_NAME
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise KvplanError(f"{index}: not UTF-8 text (bad byte at offset {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise KvplanError(f"{index}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        except OSError as exc:
            raise KvplanError(f"{index}: cannot read ({exc.strerror or exc})") from None
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise KvplanError(f"{index}: expected an object with a 'weight_map' of tensor name -> file name")
        shards = [directory / s for s in sorted(set(weight_map.values()))]
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise KvplanError(
                f"{index}: lists {missing[0]}, which is not in {directory}"
                + (f" (and {len(missing) - 1} more missing)" if len(missing) > 1 else ""),
                hint="finish the download, or pass the path of config.json alone to plan from the config",
            )
        return shards
    single = directory / "model.safetensors"
    if single.is_file():
        return [single]
    return sorted(p for p in directory.glob("*.safetensors") if p.is_file())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
