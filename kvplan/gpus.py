"""GPU profiles: CUDA-visible memory, dtype support and price, from bundled and user YAML.

The bundled profiles are ``kvplan/data/gpus.yaml`` (its header says where every number came from
and how good it is). Users add or override profiles with a YAML file of the same shape, given by
``--gpu-profiles FILE`` (repeatable) or ``KVPLAN_GPU_PROFILES`` (a path, or several separated by
``os.pathsep``). Files are applied in order: bundled, then the environment variable's files, then
``--gpu-profiles``. An entry whose ``id`` already exists is merged over the existing profile (keys
it gives replace, keys it omits are kept), so ``- {id: h200, price_per_hour_usd: 3.5}`` only sets
a price; an entry with a new ``id`` must give ``memory_bytes``.

Why CUDA bytes: vLLM sizes the KV cache from ``torch.cuda.mem_get_info()`` total
(v1/worker/utils.py request_memory), which is a few hundred MiB below the nvidia-smi total.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kvplan.errors import KvplanError

# compute capability as CUDA prints it: MAJOR.MINOR, two non-negative integers
_CC = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}")
MiB = 1 << 20
GiB = 1 << 30
from kvplan.io.limits import MAX_MEMORY_BYTES  # noqa: E402 - 64 TiB: no GPU comes near it

ENV_VAR = "KVPLAN_GPU_PROFILES"
BUNDLED_ORIGIN = "kvplan/data/gpus.yaml"

MemoryQuality = Literal["measured", "cuda-exact", "torch-mib-floor", "vllm-log-gib", "estimate", "user"]


class DenseTflops(BaseModel):
    """Vendor peak dense (no sparsity) tensor-core throughput of one GPU, in TFLOPS (int8: TOPS).
    A dtype left unset is not known (or has no tensor cores); nothing is inferred for it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bf16: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    fp16: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    fp8: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    int8: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    fp4: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class GPUPerf(BaseModel):
    """Performance numbers of one GPU for the step-time model (kvplan/perf/step_time.py).

    Attributes:
        memory_bandwidth_bytes_per_s: vendor peak DRAM bandwidth, bytes/s.
        dense_tflops: peak dense tensor throughput per dtype (DenseTflops).
        link_bandwidth_bytes_per_s: GPU-to-GPU bandwidth per direction (NVLink, else PCIe), bytes/s.
        link: the link's name.
        source: the datasheet the numbers come from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_bandwidth_bytes_per_s: int | None = Field(default=None, gt=0)
    dense_tflops: DenseTflops = Field(default_factory=DenseTflops)
    link_bandwidth_bytes_per_s: int | None = Field(default=None, gt=0)
    link: str | None = None
    source: str | None = None


class GPUProfile(BaseModel):
    """One GPU model as vLLM sees it (one device; multiply by the GPU count yourself).

    Attributes:
        id: kvplan's key, e.g. ``h200`` (matched case- and punctuation-insensitively).
        name: human name.
        reported_name: the device name the driver reports (nvidia-smi / NVML /
            torch.cuda.get_device_name), e.g. ``NVIDIA A100-SXM4-80GB``; vLLM looks for
            "a100" in it when choosing batch defaults (engine/arg_utils.py).
        memory_bytes: CUDA-visible total memory in bytes (``torch.cuda.mem_get_info()[1]``),
            > 0 and at most 64 TiB. A YAML file may also write a size string such as ``80GiB``.
        memory_quality: how memory_bytes was obtained: ``measured`` (on this project's machine),
            ``cuda-exact`` (exact bytes from a public CUDA query), ``torch-mib-floor`` (a torch
            repr's floored MiB), ``vllm-log-gib`` (a vLLM log's 2-decimal GiB), ``estimate``, or
            ``user`` (set by a user file or --gpu-memory).
        memory_source: where memory_bytes came from (URL, repository file, or "a public GitHub file" whose repository is unknown).
        nvidia_smi_total_mib: the NVML / nvidia-smi total in MiB (larger than the CUDA total).
        fp8_supported: FP8 tensor cores (compute capability >= 8.9); fp8 KV cache and fp8
            weights run natively only there.
        bf16_supported: bfloat16 support (False on Volta/Turing).
        compute_capability: ``MAJOR.MINOR``, two non-negative integers ("9.0", "12.1"); vLLM
            picks attention backends from it (the version's defaults.default_block_size). A YAML float such as
            ``8.9`` is read as its text.
        sm_count: streaming multiprocessors (vLLM's V1 sampler keeps one scratch row of the
            vocabulary per SM; None = the H200's 132, a few MB off elsewhere).
        price_per_hour_usd: hourly price of one GPU in USD (None = unknown), >= 0.
        price_source: where the price came from, and when.
        aliases: other accepted names.
        base_id: for a GPU a verified start measured, the id of the bundled profile its reported
            name matches (None otherwise).
        notes: free text.
        perf: bandwidth and matrix throughput for the step-time model (GPUPerf), None = unknown.
        warnings: one-line warnings kvplan found while loading the profile files (an alias that
            shadows another profile's name or alias, or that an id makes unreachable, a name
            listed twice); not settable from YAML. For the plan's warnings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    name: str | None = None
    reported_name: str | None = None
    memory_bytes: int = Field(gt=0, le=MAX_MEMORY_BYTES)
    memory_quality: MemoryQuality = "user"
    memory_source: str | None = None
    nvidia_smi_total_mib: int | None = Field(default=None, gt=0, le=MAX_MEMORY_BYTES // MiB)
    fp8_supported: bool = False
    bf16_supported: bool = True
    compute_capability: str | None = None
    sm_count: int | None = Field(default=None, gt=0, le=4096)
    price_per_hour_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    price_source: str | None = None
    aliases: tuple[str, ...] = ()
    notes: str | None = None
    perf: GPUPerf | None = None
    warnings: tuple[str, ...] = ()
    # a measured GPU (kvplan verify's one-profile file): the bundled profile its reported name is
    base_id: str | None = None

    @field_validator("memory_bytes", mode="before")
    @classmethod
    def _memory(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("expected a number of bytes or a size such as 80GiB")
        if isinstance(v, str):
            from kvplan.io.units import parse_bytes

            try:
                v = parse_bytes(v, what="memory_bytes")
            except KvplanError as exc:
                raise ValueError(f"cannot read {v!r} as a size (write bytes or e.g. 80GiB)") from exc
        if isinstance(v, float):
            # YAML reads 1e28 or 8.5e10 as floats: only whole, finite byte counts are bytes.
            if not v.is_integer():
                raise ValueError("expected a whole number of bytes")
            v = int(v)
        if isinstance(v, int) and v > MAX_MEMORY_BYTES:
            raise ValueError(f"{v:,} bytes is more than any GPU has (limit 64 TiB = {MAX_MEMORY_BYTES:,})")
        return v

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _compute_capability(cls, v: Any) -> Any:
        if v is None:
            return v
        if isinstance(v, float) and not isinstance(v, bool) and math.isfinite(v):
            v = str(v)  # YAML reads 8.9 as a float; minors are one digit (CUDA's sm_XY)
        if not isinstance(v, str) or not _CC.fullmatch(v):
            raise ValueError("expected MAJOR.MINOR, two whole numbers such as '9.0'")
        return v

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases(cls, v: Any) -> Any:
        if v is None:
            return ()
        if isinstance(v, (str, int)):
            return (str(v),)
        if isinstance(v, (list, tuple)):
            return tuple(str(a) for a in v)
        return v

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _norm(v):
            raise ValueError("must contain a letter or digit")
        return v

    @property
    def display_name(self) -> str:
        """Human name, falling back to the id."""
        return self.name or self.id

    @property
    def vllm_device_name(self) -> str:
        """The name vLLM's get_device_name() would return (used for its "a100" default rule)."""
        return self.reported_name or self.name or self.id

    @property
    def nvml_total_bytes(self) -> int:
        """NVML total memory in bytes (nvidia-smi MiB x 2^20); memory_bytes when unknown.

        vLLM compares this, not the CUDA total, with 70 GiB when it picks default batch
        sizes (platforms/cuda.py get_device_total_memory uses nvmlDeviceGetMemoryInfo)."""
        if self.nvidia_smi_total_mib is None:
            return self.memory_bytes
        return self.nvidia_smi_total_mib * MiB

    @property
    def is_estimate(self) -> bool:
        """True when memory_bytes is not a CUDA reading (see memory_quality)."""
        return self.memory_quality == "estimate"

    def with_memory(self, memory_bytes: int, source: str = "--gpu-memory") -> "GPUProfile":
        """A copy with memory_bytes replaced by a user-given CUDA total.

        Raises:
            KvplanError: memory_bytes is not a positive int (names ``source``).
        """
        if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
            raise KvplanError(f"{source}: must be a positive number of bytes, got {memory_bytes!r}")
        if memory_bytes > MAX_MEMORY_BYTES:
            raise KvplanError(f"{source}: {memory_bytes:,} bytes is more than any GPU has (limit 64 TiB)")
        # The profile's NVML total belongs to the device whose memory was replaced: vLLM picks its
        # batch defaults from the device's own total (engine/arg_utils.py get_batch_defaults), so a
        # user-given total stands for that too (None -> nvml_total_bytes = memory_bytes).
        return self.model_copy(
            update={
                "memory_bytes": memory_bytes,
                "memory_quality": "user",
                "memory_source": source,
                "nvidia_smi_total_mib": None,
            }
        )


GPUS_PER_NODE = 8  # GPU profiles do not record a node size; kvplan assumes the common 8-GPU node


def check_gpu_memory_flag(memory_bytes: int, text: str, flag: str = "--gpu-memory", vllm_version: str | None = None) -> int:
    """A user-given CUDA total (``--gpu-memory``), checked for plausibility: below 1 GiB is bad
    input - a bare number is read as bytes, so ``80`` is probably ``80GiB``; and a GPU below the
    CUDA context vLLM creates (the version's memory.CUDA_CONTEXT_BYTES; ``vllm_version``, default
    the newest supported) cannot start anything.

    Returns:
        memory_bytes unchanged.
    Raises:
        KvplanError: naming ``flag`` (exit 2), with a hint about units.
    """
    from kvplan.engines.vllm import versions

    rules = versions.select(vllm_version) if vllm_version else versions.default()
    CUDA_CONTEXT_BYTES = rules.memory.CUDA_CONTEXT_BYTES

    if memory_bytes >= GiB:
        return memory_bytes
    shown = str(text).strip()
    if shown.isdigit():
        raise KvplanError(
            f"{flag}: {shown} is read as {memory_bytes:,} bytes, less than 1 GiB: no GPU is that small "
            "(a number without a unit means bytes)",
            hint=f"did you mean {shown}GiB?",
        )
    if memory_bytes <= CUDA_CONTEXT_BYTES:
        raise KvplanError(
            f"{flag}: {shown} ({memory_bytes:,} bytes) is not more than the "
            f"{CUDA_CONTEXT_BYTES / MiB:.0f} MiB the CUDA context alone takes; vLLM cannot start on it",
            hint="give the GPU's CUDA-visible total with a unit, e.g. 80GiB (torch.cuda.mem_get_info()[1])",
        )
    raise KvplanError(
        f"{flag}: {shown} ({memory_bytes:,} bytes) is less than 1 GiB: no GPU is that small",
        hint="give the GPU's CUDA-visible total with a unit, e.g. 80GiB (torch.cuda.mem_get_info()[1])",
    )


def _norm(name: str) -> str:
    """Lookup key: lower case, letters and digits only ("H100-80GB" -> "h10080gb")."""
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


# pydantic error types -> plain words ("must be greater than 0", not "Input should be ...").
_PLAIN = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "finite_number": "expected a finite number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "string_too_short": "must not be empty",
    "literal_error": "expected one of {expected}",
}


def _entry_error(origin: str, i: int, entry: dict, exc: ValidationError) -> KvplanError:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "entry"
    msg = _PLAIN.get(err["type"], "").format(**(err.get("ctx") or {})) or err["msg"].removeprefix("Value error, ")
    if err["type"] == "missing":
        msg = "required for a new GPU id"
    elif err["type"] == "extra_forbidden":
        msg = "unknown key (see kvplan/data/gpus.yaml for the accepted keys)"
    elif "input" in err and err["type"] not in ("missing",):
        msg = f"{msg} (got {err['input']!r})"
    gid = entry.get("id")
    where = f"gpus[{i}].{key}" + (f" (id {gid!r})" if gid is not None and key != "id" else "")
    return KvplanError(_one_line(f"{origin}: {where}: {msg}"))


def _parse_entries(text: str, origin: str) -> list[dict]:
    """The raw ``gpus:`` entries of one YAML document (the bundled file: trusted, not size-capped).

    Raises:
        KvplanError: not YAML, or not a mapping with a ``gpus`` list of mappings (names origin).
    """
    try:
        # libyaml's C loader when PyYAML has it (10x faster on the bundled file); same safe subset.
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{origin}:{mark.line + 1}" if mark is not None else origin
        problem = getattr(exc, "problem", None) or exc
        raise KvplanError(_one_line(f"{where}: not valid YAML ({problem})")) from None
    return _entries_of(data, origin)


def _read_user_file(flag: str, f: str) -> list[dict]:
    """The ``gpus:`` entries of one user file (``--gpu-profiles`` / KVPLAN_GPU_PROFILES).

    Read with ``kvplan check``'s guarded reader (kvplan.io.files.read_text and load_yaml): at most
    2 MiB, UTF-8 without NUL bytes, and a YAML document whose aliases expand past 100,000 nodes
    (a "billion laughs" bomb: 60 s and 2.8 GB before this guard) is refused before it is built.
    Raises:
        KvplanError: missing, a directory, too large, binary, not UTF-8, not YAML, an alias bomb,
            several documents, or not a ``gpus`` list (one line naming the flag and the file).
    """
    from kvplan.io.files import InputError, load_yaml, probe_path, read_text, shown_name

    if not str(f).strip():
        raise KvplanError(f"{flag}: empty file name", hint="give a YAML file with a 'gpus' list, e.g. my-gpus.yaml")
    path = Path(f).expanduser()
    origin = f"{flag} {shown_name(f)}"
    try:
        probe_path(path)  # a name the file system refuses (too long): one line, not a traceback
    except InputError as exc:
        raise KvplanError(f"{origin}: {exc.message}") from None
    if not os.path.exists(path):
        raise KvplanError(f"{flag}: file not found: {f}")
    if os.path.isdir(path):
        raise KvplanError(f"{flag}: {f} is a directory, expected a YAML file")
    try:
        docs = load_yaml(read_text(path))
    except InputError as exc:
        where = f"{origin}:{exc.line}" if exc.line else origin
        raise KvplanError(_one_line(f"{where}: {exc.message}")) from None
    if len(docs) > 1:
        raise KvplanError(f"{origin}:{docs[1].line}: a second YAML document; expected one mapping with a 'gpus' list")
    return _entries_of(docs[0].data if docs else None, origin)


def _entries_of(data: Any, origin: str) -> list[dict]:
    """The ``gpus:`` entries of one parsed YAML document.

    Raises:
        KvplanError: not a mapping with a ``gpus`` list of mappings with an ``id`` (names origin).
    """
    if not isinstance(data, dict) or "gpus" not in data:
        raise KvplanError(f"{origin}: expected a top-level mapping with a 'gpus' list")
    if not isinstance(data["gpus"], list):
        raise KvplanError(f"{origin}: gpus: expected a list of GPU entries")
    unknown = sorted(str(k) for k in data if k != "gpus")
    if unknown:
        raise KvplanError(f"{origin}: {unknown[0]}: unknown top-level key (only 'gpus' is read)")
    entries = []
    for i, entry in enumerate(data["gpus"]):
        if not isinstance(entry, dict):
            raise KvplanError(f"{origin}: gpus[{i}]: expected a mapping with id, memory_bytes, ...")
        if "id" not in entry:
            raise KvplanError(f"{origin}: gpus[{i}].id: required")
        if "warnings" in entry:  # kvplan's own field: a file cannot set it
            raise KvplanError(f"{origin}: gpus[{i}].warnings: unknown key (see kvplan/data/gpus.yaml for the accepted keys)")
        entries.append(entry)
    return entries


def _apply(profiles: dict[str, GPUProfile], entries: list[dict], origin: str, *, user: bool) -> None:
    """Add or merge ``entries`` into ``profiles`` (in place).

    A user entry for an existing id is merged over it; if it sets memory_bytes without a
    memory_quality/memory_source, those become "user" / the file name.
    Raises:
        KvplanError: an invalid entry or a duplicate id within one file (names origin and key).
    """
    seen: set[str] = set()
    by_norm = {_norm(pid): pid for pid in profiles}
    for i, entry in enumerate(entries):
        key = _norm(str(entry["id"]))
        if key in seen:
            raise KvplanError(f"{origin}: gpus[{i}].id: duplicate id {entry['id']!r} in this file")
        seen.add(key)
        base_id = by_norm.get(key)
        data = dict(entry)
        data["id"] = str(entry["id"])
        if user and "memory_bytes" in data:
            data.setdefault("memory_quality", "user")
            data.setdefault("memory_source", f"user profile file {origin}")
        if base_id is not None:
            merged = profiles[base_id].model_dump()
            merged.update(data)
            merged["id"] = base_id
            data = merged
        try:
            profile = GPUProfile(**data)
        except ValidationError as exc:
            raise _entry_error(origin, i, entry, exc) from None
        profiles[profile.id] = _with_clash_warnings(profiles, profile, origin, i) if user else profile
        by_norm[key] = profile.id


def _name_owners(profiles: dict[str, GPUProfile], skip: str) -> tuple[dict[str, str], dict[str, str]]:
    """(normalized id -> id, normalized name/alias -> id) over ``profiles`` except ``skip``."""
    ids: dict[str, str] = {}
    names: dict[str, str] = {}
    for p in profiles.values():
        if p.id == skip:
            continue
        ids[_norm(p.id)] = p.id
        for n in (p.name, p.reported_name, *p.aliases):
            if n and _norm(n):
                names[_norm(n)] = p.id
    return ids, names


def _with_clash_warnings(profiles: dict[str, GPUProfile], profile: GPUProfile, origin: str, i: int) -> GPUProfile:
    """``profile`` (from a user file) with warnings for names that clash with other profiles.

    Lookup rule (_lookup_table): ids beat names and aliases; among names and aliases the later
    profile wins. So a user name equal to another profile's id is unreachable (the other profile
    is also told, since `--gpu NAME` picks it), one equal to another's name or alias takes
    `--gpu NAME` away from it, and one listed twice is a slip. Mutates ``profiles`` only to add
    the warning to an id owner.
    """
    ids, names = _name_owners(profiles, profile.id)
    warnings: list[str] = []
    alias_keys: set[str] = set()
    checked: set[str] = set()
    for n in (profile.name, profile.reported_name, *profile.aliases):
        key = _norm(n) if n else ""
        if not key:
            continue
        if n in profile.aliases and key in alias_keys:
            warnings.append(f"GPU profile {profile.id!r} ({origin}, gpus[{i}]) lists the alias {n!r} twice")
            continue
        if n in profile.aliases:
            alias_keys.add(key)
        if key in checked:
            continue
        checked.add(key)
        if key in ids:
            owner = ids[key]
            msg = (
                f"GPU profile {profile.id!r} ({origin}, gpus[{i}]) names itself {n!r}, which is profile "
                f"{owner!r}'s id: `--gpu {n}` still picks {owner!r}"
            )
            warnings.append(msg)
            if msg not in profiles[owner].warnings:
                profiles[owner] = profiles[owner].model_copy(update={"warnings": profiles[owner].warnings + (msg,)})
        elif key in names:
            owner = names[key]
            warnings.append(
                f"GPU profile {profile.id!r} ({origin}, gpus[{i}]) takes the name {n!r} from profile "
                f"{owner!r}: `--gpu {n}` now picks {profile.id!r}"
            )
    new = tuple(w for w in dict.fromkeys(warnings) if w not in profile.warnings)
    if not new:
        return profile
    return profile.model_copy(update={"warnings": profile.warnings + new})


@lru_cache(maxsize=1)
def _bundled() -> tuple[GPUProfile, ...]:
    # beside this module (kvplan/data/, a plain folder in a wheel): no importlib.resources, whose
    # import (zipfile, tempfile) every `kvplan estimate` would pay for
    text = (Path(__file__).parent / "data" / "gpus.yaml").read_text(encoding="utf-8")
    profiles: dict[str, GPUProfile] = {}
    _apply(profiles, _parse_entries(text, BUNDLED_ORIGIN), BUNDLED_ORIGIN, user=False)
    return tuple(profiles.values())


def bundled_profiles() -> dict[str, GPUProfile]:
    """The bundled profiles only, by id (no user files)."""
    return {p.id: p for p in _bundled()}


def _user_files(extra_files: list[str] | None) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    env = os.environ.get(ENV_VAR)
    if env:
        files += [(ENV_VAR, f) for f in env.split(os.pathsep) if f.strip()]
    files += [("--gpu-profiles", f) for f in (extra_files or [])]
    return files


def load_profiles(extra_files: list[str] | None = None) -> dict[str, GPUProfile]:
    """All profiles by id: bundled, then ``KVPLAN_GPU_PROFILES`` files, then ``extra_files``.

    Args:
        extra_files: paths given with ``--gpu-profiles`` (applied last, so they win).
    Returns:
        {id: GPUProfile}, bundled order first, new user ids appended. A user name or alias that
        clashes with another profile's id, name or alias (or is listed twice) is kept as the
        lookup rule says and recorded in ``GPUProfile.warnings``.
    Raises:
        KvplanError: a user file is missing, unreadable, over 2 MiB, not YAML, an alias bomb, or
            has an invalid entry (memory_bytes above 64 TiB included); the one-line message
            names the flag or variable, the file and the key.
    """
    profiles = bundled_profiles()
    for flag, f in _user_files(extra_files):
        _apply(profiles, _read_user_file(flag, f), f"{flag} {f}", user=True)
    return profiles


def _lookup_table(profiles: dict[str, GPUProfile]) -> dict[str, GPUProfile]:
    """Normalized name -> profile. Ids beat names and aliases; among names and aliases a later
    profile (a user file's) beats an earlier (bundled) one."""
    table: dict[str, GPUProfile] = {}
    for p in profiles.values():
        for n in (p.name, p.reported_name, *p.aliases):
            if n and _norm(n):
                table[_norm(n)] = p
    for p in profiles.values():
        table[_norm(p.id)] = p
    return table


def _fold(key: str) -> str:
    """Letters often typed for digits ("H2OO" for "H200"), folded for ranking suggestions only."""
    return key.replace("o", "0")


def suggest(name: str, profiles: dict[str, GPUProfile], n: int = 3) -> list[str]:
    """Up to ``n`` profile ids whose id, name or alias is closest to ``name`` (best first)."""
    key = _norm(name)
    table = _lookup_table(profiles)
    scored = []
    for k, p in table.items():
        r = max(
            difflib.SequenceMatcher(None, key, k).ratio(),
            difflib.SequenceMatcher(None, _fold(key), _fold(k)).ratio(),
        )
        if r >= 0.5:
            scored.append((-r, len(k), p.id))
    out: list[str] = []
    for _, _, pid in sorted(scored):
        if pid not in out:
            out.append(pid)
        if len(out) == n:
            break
    return out


def find_gpu(name: str, profiles: dict[str, GPUProfile]) -> GPUProfile:
    """Look a GPU up by id, name, reported name or alias, case- and punctuation-insensitively.

    Returns:
        the matching GPUProfile.
    Raises:
        KvplanError: no match; the one-line message names --gpu and suggests the closest ids.
    """
    key = _norm(name)
    table = _lookup_table(profiles)
    if key and key in table:
        return table[key]
    close = suggest(name, profiles) if key else []
    if close:
        tail = f"did you mean {', '.join(close)}?"
    else:
        tail = "run `kvplan gpus` to list profiles, or add one with --gpu-profiles"
    raise KvplanError(_one_line(f"--gpu: unknown GPU {name!r}; {tail}"))


# NVIDIA GPU feature discovery (the k8s-device-plugin's GFD, deployed by the GPU Operator) labels
# each GPU node nvidia.com/gpu.product=<the NVML device name, sanitised>: characters other than
# letters, digits, "-", "_", "." and space are dropped, runs of spaces become one "-" (source:
# github.com/NVIDIA/k8s-device-plugin internal/lm/resource.go, getProductName / sanitise). Real
# labels: NVIDIA-H100-80GB-HBM3, NVIDIA-H200, NVIDIA-A100-SXM4-80GB, NVIDIA-A100-80GB-PCIe,
# NVIDIA-L40S, NVIDIA-L4. A time-sliced GPU gets "-SHARED" appended and a MIG slice
# "-MIG-<profile>": neither is a whole GPU of the profile, so neither matches.
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
_GFD_DROP = re.compile(r"[^A-Za-z0-9._ -]")


def gfd_product(reported_name: str) -> str:
    """The nvidia.com/gpu.product value GFD gives a GPU whose driver reports ``reported_name``
    ("NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3"); rule: k8s-device-plugin
    internal/lm/resource.go sanitise."""
    return "-".join(_GFD_DROP.sub("", reported_name).split())


def find_gfd_product(value: str, profiles: dict[str, GPUProfile]) -> GPUProfile | None:
    """The profile whose reported device name GFD labels ``value`` (exact, case-sensitive: the
    label is what GFD writes), or None (an unknown GPU, a -SHARED or -MIG label). A later profile
    (a user file's) wins over an earlier bundled one with the same reported name."""
    hit = None
    for p in profiles.values():
        if p.reported_name and gfd_product(p.reported_name) == value:
            hit = p
    return hit
