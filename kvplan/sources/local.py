"""A model from a local directory: config.json, and safetensors headers when present.

Safetensors headers are read here (8-byte little-endian length, then the JSON header; never the
tensors) and every entry is checked: dtype a string, shape non-negative integers, data offsets
that match shape x dtype size (the rules safetensors itself enforces when vLLM loads the file).
A malformed header is one KvplanError naming the file. ``params_vllm_loads`` (shared with the Hub
source) keeps the tensors vLLM loads; ``coverage_gap`` says when the headers do not
cover the model (one shard of several, missing decoder layers, an index naming absent tensors),
in which case load_local keeps no checkpoint figures and says why in ``ModelSource.notes``.

Every JSON file (config.json, the index, hf_quant_config.json) goes through ``read_json``: at most
16 MiB, UTF-8, valid JSON, nested at most ``MAX_JSON_DEPTH`` levels.
"""

from __future__ import annotations

import errno
import json
import math
import operator
import os
import re
import struct
from collections.abc import Mapping
from itertools import accumulate, repeat
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.sources.base import ModelSource

# Size caps (why each: kvplan.io.limits).
from kvplan.io.limits import (  # noqa: E402
    CONFIG_MAX_BYTES,
    MAX_JSON_DEPTH,
    SAFETENSORS_MAX_HEADER_BYTES,
    SAFETENSORS_MAX_TENSOR_BYTES,
)

INDEX_NAME = "model.safetensors.index.json"
HF_QUANT_CONFIG_NAME = "hf_quant_config.json"

# Checkpoint tensors vLLM does not load into the served (target) model (its model load_weights; a
# vLLM version that loads differently belongs in kvplan/engines/vllm/ version rules):
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
        KvplanError: missing, unreadable, larger than 16 MiB, not UTF-8, not JSON, nested deeper
            than MAX_JSON_DEPTH, or not a JSON object; the message names the file (and the line
            for JSON syntax errors).
    """
    data = read_json(path)
    if not isinstance(data, dict):
        raise KvplanError(f"{path}: config.json must hold a JSON object, got a JSON {_json_kind(data)}")
    return data


def read_json(path: Path, max_bytes: int = CONFIG_MAX_BYTES):
    """Read one JSON file of at most ``max_bytes`` bytes, nested at most MAX_JSON_DEPTH levels.

    Raises:
        KvplanError: missing, unreadable, too large, not UTF-8, not valid JSON, or nested too
            deeply (a "[[[[..." file that would otherwise end in a RecursionError); one line
            naming the file.
    """
    from kvplan.io.files import InputError, read_bytes

    try:
        # refused from its size before it is read, and never more than max_bytes + 1 read: a
        # pipe or device reports no size (and is refused anyway: only regular files are read)
        raw = read_bytes(path, max_bytes)
    except InputError as exc:
        problem = link_problem(path) if exc.kind in ("missing", "unreadable") else None
        if problem:
            raise KvplanError(f"{path}: {problem}") from None
        if exc.kind == "missing":
            raise KvplanError(f"{path}: not found") from None
        if exc.message.startswith("is a directory"):
            raise KvplanError(f"{path}: is a directory, not a JSON file") from None
        if exc.kind == "too-large":
            size = f"{exc.size:,}" if exc.size is not None else f"over {max_bytes:,}"
            raise KvplanError(f"{path}: {size} bytes is too large (limit {max_bytes // (1 << 20)} MiB)") from None
        raise KvplanError(f"{path}: {exc.message}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KvplanError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    return loads_bounded(text, str(path))


def loads_bounded(text: str, where: str):
    """``json.loads`` that refuses documents nested deeper than MAX_JSON_DEPTH levels.

    The depth is measured on the text before parsing (json_text_depth), so a "[[[[..." file never
    reaches the parser's recursion (a RecursionError traceback before this check).
    Raises:
        KvplanError: nested too deeply (``where``), or not valid JSON (``where:line``).
    """
    if json_text_depth(text) > MAX_JSON_DEPTH:
        raise KvplanError(f"{where}: JSON nested more than {MAX_JSON_DEPTH} levels deep; not a model file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvplanError(f"{where}:{exc.lineno}: not valid JSON ({_json_error_text(exc)})") from None
    except RecursionError:  # cannot happen below MAX_JSON_DEPTH; kept so it never becomes a traceback
        raise KvplanError(f"{where}: JSON nested too deeply; not a model file") from None


def _json_error_text(exc: json.JSONDecodeError) -> str:
    """json's message, with the position where the message itself points at one.

    json phrases some errors to be followed by the position ("Invalid control character at",
    "Unterminated string starting at"); ``exc.msg`` drops it, so it is put back (line and
    column, 1-based), and a NUL byte is named as such. Other messages stay as they are (the line
    is already in the ``FILE:LINE:`` prefix).
    """
    msg = exc.msg
    if not msg.endswith(" at"):
        return msg
    text = f"{msg} line {exc.lineno} column {exc.colno}"
    if 0 <= exc.pos < len(exc.doc) and exc.doc[exc.pos] == "\x00":
        text += ": a NUL byte"
    return text


def link_problem(path: Path | str) -> str | None:
    """Why ``path``, a symbolic link, cannot be followed ("is a broken symbolic link (-> TARGET)",
    "is a symbolic-link loop"), or None when it is not a link or can be followed."""
    if not os.path.islink(path):
        return None
    try:
        os.stat(path)
    except FileNotFoundError:
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"is a broken symbolic link (-> {target})"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic-link loop"
    return None


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # opening -> 2, closing -> 0


def json_text_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text, strings skipped (``[]`` is 1, ``{"a": [1]}`` is 2).

    Done with regular expressions and C-level iterators (about 0.1 s per MB of brackets), so
    measuring a hostile 16 MiB file costs less than parsing it.
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii").translate(_BRACKET_STEP)
    return max(accumulate(map(operator.sub, brackets, repeat(1))), default=0)


def _json_kind(value) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def num_text_layers(config: dict) -> int | None:
    """num_hidden_layers of the language model (``text_config`` for multimodal configs), or None."""
    from kvplan.model.config import text_config_of

    n = text_config_of(config).get("num_hidden_layers")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def ties_word_embeddings(config: dict) -> bool:
    """True only when the (text) config says ``tie_word_embeddings: true`` (absent means we keep
    lm_head: transformers' default differs per model class, and tied checkpoints rarely store it)."""
    from kvplan.model.config import text_config_of

    return text_config_of(config).get("tie_word_embeddings") is True


def tensor_entry(name: str, dtype, shape, offsets) -> tuple[str, int, int]:
    """(dtype, elements, bytes) of one safetensors header entry, checked as safetensors checks it.

    Rules (safetensors/src/tensor.rs, which vLLM loads through): ``dtype`` a string;
    ``shape`` a list of integers >= 0 (elements = their product, 1 for a scalar);
    ``data_offsets`` [begin, end] integers with 0 <= begin <= end; for a dtype kvplan knows,
    end - begin == elements x bits / 8 (rounded up). Bytes are end - begin. Plausibility (kvplan's,
    not safetensors'): no tensor's end offset or size above SAFETENSORS_MAX_TENSOR_BYTES (1 TiB).
    Raises:
        ValueError: naming the tensor and the field (dtype, shape, data_offsets).
    """
    if not isinstance(dtype, str) or not dtype:
        raise ValueError(f"tensor {name!r}: dtype must be a string, got {_short(dtype)}")
    if dtype not in SAFETENSORS_DTYPE_BITS:
        # safetensors' Dtype enum has no other names: its loader refuses the header, so vLLM
        # cannot open the file ("Q4_K" is a GGUF quantization type, not a safetensors dtype)
        raise ValueError(
            f"tensor {name!r}: dtype {_short(dtype)} is not a safetensors dtype "
            f"(safetensors knows {', '.join(SAFETENSORS_DTYPE_BITS)})"
        )
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"tensor {name!r}: shape must be a list of integers >= 0, got {_short(shape)}")
    if (
        not isinstance(offsets, (list, tuple))
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise ValueError(f"tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end, got {_short(offsets)}")
    if offsets[1] > SAFETENSORS_MAX_TENSOR_BYTES:
        raise ValueError(
            f"tensor {name!r}: data_offsets end at byte {offsets[1]:,}, beyond any real checkpoint "
            f"(kvplan's bound: {SAFETENSORS_MAX_TENSOR_BYTES:,} bytes)"
        )
    n = math.prod(shape)
    bits = SAFETENSORS_DTYPE_BITS.get(dtype)
    if n * (bits or 8) // 8 > SAFETENSORS_MAX_TENSOR_BYTES:
        raise ValueError(
            f"tensor {name!r}: shape {_short(list(shape))} holds {n:,} elements, beyond any real checkpoint "
            f"(over {SAFETENSORS_MAX_TENSOR_BYTES:,} bytes)"
        )
    nbytes = offsets[1] - offsets[0]
    if bits is not None and nbytes != -(-n * bits // 8):
        raise ValueError(
            f"tensor {name!r}: data_offsets span {nbytes:,} bytes but shape {list(shape)} of {dtype} needs {-(-n * bits // 8):,}"
        )
    return dtype, n, nbytes


def tensor_sizes(file_meta) -> dict[str, tuple[str, int, int]]:
    """name -> (safetensors dtype, elements, bytes) for one huggingface_hub SafetensorsFileMetadata
    (the Hub source), each entry checked by ``tensor_entry``.

    Raises:
        ValueError: a malformed entry (names the tensor and the field).
    """
    out: dict[str, tuple[str, int, int]] = {}
    for name, info in file_meta.tensors.items():
        out[name] = tensor_entry(name, info.dtype, info.shape, info.data_offsets)
    return out


def read_safetensors_header(path: Path) -> dict[str, tuple[str, int, int]]:
    """name -> (dtype, elements, bytes) from one local safetensors file's header (not its data).

    Format (safetensors docs): 8-byte little-endian header length N, then N bytes of UTF-8 JSON:
    an object of tensor name -> {dtype, shape, data_offsets}, plus an optional "__metadata__".
    Raises:
        KvplanError: unreadable file, a header length over 100,000,000 bytes or past the end of
            the file, a header that is not a JSON object, a malformed or implausible entry (see
            tensor_entry), or data_offsets past the end of the file; one line naming the file.
    """

    def bad(why: str) -> KvplanError:
        return KvplanError(f"{path}: unreadable safetensors header ({why})")

    from kvplan.io.files import InputError, open_regular

    try:
        f = open_regular(path)
    except InputError as exc:
        raise KvplanError(f"{path}: {exc.message}") from None
    try:
        with f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise bad(f"the file has {len(prefix)} bytes, fewer than the 8-byte header length")
            (size,) = struct.unpack("<Q", prefix)
            if size > SAFETENSORS_MAX_HEADER_BYTES:
                raise bad(f"declares a {size:,}-byte header; safetensors allows {SAFETENSORS_MAX_HEADER_BYTES:,}")
            raw = f.read(size)
            file_bytes = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise KvplanError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(raw) < size:
        raise bad(f"declares a {size:,}-byte header but the file ends after {len(raw):,}: truncated")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"not UTF-8 at byte {exc.start + 8}") from None
    try:
        header = loads_bounded(text, "header")
    except KvplanError as exc:
        raise bad(exc.message) from None
    if not isinstance(header, dict):
        raise bad(f"expected a JSON object, got a JSON {_json_kind(header)}")
    data_bytes = file_bytes - 8 - size
    out: dict[str, tuple[str, int, int]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise bad(f"tensor {name!r}: expected {{dtype, shape, data_offsets}}, got {_short(info)}")
        try:
            out[name] = tensor_entry(name, info.get("dtype"), info.get("shape"), info.get("data_offsets"))
        except ValueError as exc:
            raise bad(str(exc)) from None
        # The data section is the rest of the file (safetensors' MetadataIncompleteBuffer check).
        end = info["data_offsets"][1]
        if end > data_bytes:
            raise bad(f"tensor {name!r}: data_offsets end at byte {end:,} of the data, but the file holds {data_bytes:,} data bytes")
    return out


# Text decoder layers by name, for coverage: as _DECODER_LAYER plus OPT's "model.decoder.layers.N.".
_TEXT_LAYER = re.compile(r"^(?:model\.)?(?:language_model\.)?(?:model\.)?(?:decoder\.)?layers\.(\d+)\.")
_SHARD_NAME = re.compile(r"^(?P<stem>.+)-(?P<i>\d+)-of-(?P<n>\d+)\.safetensors$")


def coverage_gap(
    tensors: Mapping[str, tuple],
    num_hidden_layers: int | None,
    weight_map: Mapping[str, str] | None = None,
) -> str | None:
    """Why the checkpoint tensors do not cover the whole model, or None when nothing says so.

    Two signs, both read from names only: the index's weight_map names tensors no shard header
    holds; decoder layers ("[model.][language_model.][model.][decoder.]layers.N.") are present for
    some of 0..num_hidden_layers-1 but not all (a model whose names match no decoder layer is not
    judged by this). kvplan.sources.load_spec adds a third: bytes far below the formula.
    """
    if weight_map:
        missing = [n for n in weight_map if n not in tensors]
        if missing:
            return (
                f"{INDEX_NAME} names {len(missing):,} tensor{'s' if len(missing) != 1 else ''} "
                f"that no shard holds (e.g. {missing[0]})"
            )
    if num_hidden_layers:
        seen = set()
        for name in tensors:
            m = _TEXT_LAYER.match(name)
            if m and int(m.group(1)) < num_hidden_layers:
                seen.add(int(m.group(1)))
        if seen and len(seen) < num_hidden_layers:
            missing_layers = [i for i in range(num_hidden_layers) if i not in seen]
            return (
                f"the tensors hold {len(seen)} of {num_hidden_layers} decoder layers "
                f"(missing {_spans(missing_layers)})"
            )
    return None


def missing_shards(files: list[Path]) -> list[str]:
    """Shard names a "NAME-0000i-of-0000n.safetensors" series lacks (vLLM would load what is there)."""
    series: dict[tuple[str, str], set[int]] = {}
    widths: dict[tuple[str, str], int] = {}
    for f in files:
        m = _SHARD_NAME.match(f.name)
        if m:
            key = (m.group("stem"), m.group("n"))
            series.setdefault(key, set()).add(int(m.group("i")))
            widths[key] = len(m.group("i"))
    missing: list[str] = []
    for (stem, n_text), present in sorted(series.items()):
        for i in range(1, min(int(n_text), 100_000) + 1):
            if i not in present:
                missing.append(f"{stem}-{i:0{widths[(stem, n_text)]}d}-of-{n_text}.safetensors")
    return missing


def missing_shards_text(absent: list[str]) -> str:
    """Why a shard series is incomplete, in a sentence: "X, a shard of the series, is not
    there" or "X and 2 more shards of the series are not there" (``absent``: file names)."""
    if len(absent) == 1:
        return f"{absent[0]}, a shard of the series, is not there"
    more = len(absent) - 1
    return f"{absent[0]} and {more} more shard{'s' if more > 1 else ''} of the series are not there"


def _spans(indices: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7" (at most 4 spans shown)."""
    spans: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        spans.append(f"{start}-{prev}" if prev != start else f"{start}")
        if i is not None:
            start = prev = i
    return ", ".join(spans[:4]) + (", ..." if len(spans) > 4 else "")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def incomplete_note(where: str, why: str) -> str:
    """The note for checkpoint tensors kvplan ignores (shared by the local and Hub sources)."""
    return f"{where}: ignoring the safetensors headers, {why}; weights from kvplan's formula (config.json) instead"


def params_vllm_loads(
    tensors: Mapping[str, tuple],
    num_hidden_layers: int | None,
    *,
    tie_word_embeddings: bool = False,
) -> tuple[dict[str, int], int]:
    """Parameters by dtype and total bytes over the checkpoint tensors vLLM loads.

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

    Rule source: see the comment on _SKIPPED / _DECODER_LAYER (vLLM model load_weights).
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
    """Read a model directory: config.json (required), hf_quant_config.json and safetensors
    headers (optional).

    Which safetensors files count: the shards named in model.safetensors.index.json when it
    exists (vLLM model_loader/weight_utils.py filter_duplicate_safetensors_files keeps
    only those); else model.safetensors (huggingface_hub's get_local_safetensors_metadata rule);
    else every ``*.safetensors`` file in the directory (what vLLM globs without an index).
    hf_quant_config.json (ModelOpt) is read into the config as ``_hf_quant_config`` when
    config.json has no quantization_config, as vLLM transformers_utils/config.py does.

    Returns:
        ModelSource with origin "local"; ``tensors_visible`` True when safetensors files exist
        (vLLM would read them), False otherwise; checkpoint_params (elements by dtype) and
        checkpoint_bytes (bytes) over the tensors vLLM loads, only when the headers cover the
        model (see coverage_gap and missing_shards; else None, with the reason in ``notes``).
    Raises:
        KvplanError: no config.json, or config.json a broken symbolic link or loop;
            config.json or hf_quant_config.json unreadable (see read_json); the index is not
            valid JSON, names a missing shard, or a shard outside the directory (absolute, "..",
            a link leading out; see _safetensors_files); a safetensors file that is a FIFO,
            device or broken link; a safetensors header malformed or implausible (see
            read_safetensors_header). Each message names the file.
    """
    cfg_path = directory / "config.json"
    problem = link_problem(cfg_path)
    if problem:
        raise KvplanError(
            f"{directory}: config.json {problem}",
            hint="point the link at the model's config.json, or give the directory that holds it",
        )
    if cfg_path.exists() and not cfg_path.is_file():
        read_config(cfg_path)  # a FIFO, device or directory named config.json: says which
    if not cfg_path.is_file():
        raise KvplanError(
            f"{directory}: no config.json in this directory",
            hint="give the model directory that holds config.json, or the path of a config.json",
        )
    config = read_config(cfg_path)
    provenance: dict = {"path": str(directory)}
    quant_path = directory / HF_QUANT_CONFIG_NAME
    if quant_path.is_file() and not config.get("quantization_config"):
        quant = read_json(quant_path)
        if not isinstance(quant, dict):
            raise KvplanError(f"{quant_path}: must hold a JSON object, got a JSON {_json_kind(quant)}")
        config = {**config, "_hf_quant_config": quant}
        provenance["hf_quant_config"] = str(quant_path)
    files, weight_map = _safetensors_files(directory)
    params = total = None
    notes: list[str] = []
    if files:
        tensors: dict[str, tuple[str, int, int]] = {}
        for f in files:
            tensors.update(read_safetensors_header(f))
        n_layers = num_text_layers(config)
        absent = [] if weight_map is not None else missing_shards(files)
        why = None
        if absent:
            why = missing_shards_text(absent)
        else:
            why = coverage_gap(tensors, n_layers, weight_map)
        described = f"safetensors headers ({len(files)} file{'s' if len(files) != 1 else ''})"
        if not tensors:
            # a header "{}": the files hold no tensor, so they cannot give the weight bytes
            why = "they hold no tensors (empty headers)"
        if why:
            notes.append(incomplete_note(str(directory), why))
            provenance["weights_note"] = f"{described} ignored: {why}"
        else:
            params, total = params_vllm_loads(tensors, n_layers, tie_word_embeddings=ties_word_embeddings(config))
            provenance["weights_from"] = described
        provenance["tensors"] = f"{described} next to config.json"
    else:
        legacy = _legacy_weight_files(directory)
        if legacy:
            size = sum(f.stat().st_size for f in legacy)
            shown = ", ".join(f.name for f in legacy[:3]) + (f" and {len(legacy) - 3} more" if len(legacy) > 3 else "")
            provenance["tensors"] = (
                f"no safetensors files; vLLM loads the PyTorch weight files instead ({shown}: {size:,} bytes on disk)"
            )
            provenance["weights_note"] = (
                "PyTorch .bin/.pt files are pickles kvplan does not open (their dtype may differ from the one vLLM "
                "casts to), so the weights are sized from config.json, not from the files"
            )
            notes.append(f"{directory}: weights sized from config.json: the checkpoint is {shown}, which kvplan does not read")
            files = legacy  # vLLM reads checkpoint tensors from them
        else:
            provenance["tensors"] = "no safetensors, .bin or .pt files next to config.json: vLLM would load no checkpoint tensors"
    return ModelSource(
        name=name or str(directory),
        config=config,
        origin="local",
        checkpoint_params=params,
        checkpoint_bytes=total,
        provenance=provenance,
        tensors_visible=bool(files),
        notes=tuple(notes),
    )


# Files vLLM never loads as weights (model_loader/weight_utils.py
# filter_files_not_needed_for_inference, in the default version of engines/vllm/versions.py:
# trainer state saved next to a checkpoint).
_NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")


def _legacy_weight_files(directory: Path) -> list[Path]:
    """The PyTorch weight files vLLM (the default version) loads from a directory without
    safetensors: with the default load format ("auto" -> "hf"), model_loader/default_loader.py
    _prepare_weights tries
    ``*.safetensors``, then ``*.bin``, then ``*.pt``, taking the first pattern that matches,
    minus the trainer files of _NOT_WEIGHTS. Regular files only, sorted by name."""
    for pattern in ("*.bin", "*.pt"):
        found = sorted(
            f for f in directory.glob(pattern) if f.name not in _NOT_WEIGHTS and f.is_file() and not f.name.startswith(".")
        )
        if found:
            return found
    return []


def _safetensors_files(directory: Path) -> tuple[list[Path], dict[str, str] | None]:
    """The safetensors files vLLM would load from ``directory`` (see load_local), and the
    index's weight_map (tensor name -> file) when there is an index.

    The index's names must stay inside the model directory (see _bad_shard_name): an index
    naming "../../etc/passwd" or "/dev/zero" is refused before anything is opened.
    Raises:
        KvplanError: a malformed index; a shard name that is empty, absolute or has a ".."
            component; a shard that is missing, a broken
            symbolic link, or not a regular file (a FIFO, a device). Names the index and the shard.
    """
    index = directory / INDEX_NAME
    problem = link_problem(index)
    if problem:
        raise KvplanError(f"{directory}: {INDEX_NAME} {problem}")
    if index.is_file():
        data = read_json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise KvplanError(f"{index}: expected an object with a 'weight_map' of tensor name -> file name")
        names = sorted(set(weight_map.values()))
        hint = "shard names in the weight_map are file names inside the model directory"
        for s in names:
            why = _bad_shard_name(s)
            if why:
                raise KvplanError(f"{index}: shard {_short(s)} {why}", hint=hint)
        shards = [directory / s for s in names]
        missing = [s for s, p in zip(names, shards) if not os.path.lexists(p)]
        if missing:
            raise KvplanError(
                f"{index}: lists {missing[0]}, which is not in {directory}"
                + (f" (and {len(missing) - 1} more missing)" if len(missing) > 1 else ""),
                hint="finish the download, or pass the path of config.json alone to plan from the config",
            )
        for s, p in zip(names, shards):
            why = _shard_problem(directory, p)
            if why:
                raise KvplanError(f"{index}: shard {_short(s)} {why}", hint=hint)
        return shards, weight_map
    single = directory / "model.safetensors"
    if os.path.lexists(single):
        why = _shard_problem(directory, single)
        if why:
            raise KvplanError(f"{single}: {why}")
        return [single], None
    found = []
    for p in sorted(directory.glob("*.safetensors")):
        why = _shard_problem(directory, p)
        if why:
            raise KvplanError(f"{p}: {why}")
        found.append(p)
    return found, None


def _bad_shard_name(name: str) -> str | None:
    """Why an index's shard name is not a plain relative file name, or None.

    huggingface_hub and vLLM join the name to the model directory; an absolute name or a ".."
    component would make that join leave it, so such a name is refused before any file is
    looked at."""
    if not name.strip():
        return "is empty"
    if "\x00" in name:
        return "contains a NUL byte"
    if os.path.isabs(name) or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "is an absolute path; shard names are relative to the model directory"
    if ".." in re.split(r"[/\\]", name):
        return "has a '..' component; shard names must stay inside the model directory"
    return None


def _shard_problem(directory: Path, path: Path) -> str | None:
    """Why a safetensors file found in (or named for) ``directory`` cannot be read, or None.

    A broken symbolic link or loop says so; a FIFO, device or directory says what it is. A
    symbolic link the user placed in the directory is followed wherever it points (weights
    linked in from another disk, the Hugging Face cache's snapshots -> blobs), as vLLM follows
    it: only the *names* an index gives are confined to the directory (see _bad_shard_name)."""
    from kvplan.io.files import file_kind

    problem = link_problem(path)
    if problem:
        return problem
    try:
        kind = file_kind(os.stat(path).st_mode)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if kind is not None:
        return f"is {kind}, not a regular file; kvplan reads only regular files"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
