"""GPU profiles: CUDA-visible memory, dtype support and price, from bundled and user YAML.

The bundled profiles are ``kvplan/data/gpus.yaml``. Users add or override profiles with a YAML
file of the same shape, given by ``--gpu-profiles FILE`` or ``KVPLAN_GPU_PROFILES`` (a path, or
several separated by ``os.pathsep``); a user profile with an existing id replaces it.
"""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kvplan.errors import KvplanError


class GPUProfile(BaseModel):
    """One GPU model as vLLM sees it.

    Attributes:
        id: kvplan's key, e.g. ``h200``.
        name: human name.
        memory_bytes: CUDA-visible total memory in bytes (torch.cuda.mem_get_info total).
        memory_source: where memory_bytes came from.
        fp8_supported / bf16_supported: hardware support (fp8 KV cache and fp8 weights need fp8).
        compute_capability: "9.0" etc.
        price_per_hour_usd: hourly price of one GPU (None = unknown).
        aliases: other accepted names (matched case-insensitively).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    name: str | None = None
    reported_name: str | None = None
    memory_bytes: int = Field(gt=0)
    memory_source: str | None = None
    nvidia_smi_total_mib: int | None = None
    fp8_supported: bool = False
    bf16_supported: bool = True
    compute_capability: str | None = None
    price_per_hour_usd: float | None = Field(default=None, ge=0)
    aliases: tuple[str, ...] = ()

    @property
    def display_name(self) -> str:
        return self.name or self.id

    @property
    def vllm_device_name(self) -> str:
        """The name vLLM's get_device_name() would print (used for its A100 default rule)."""
        return self.reported_name or self.name or self.id


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _load_yaml(text: str, origin: str) -> list[GPUProfile]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f"{origin}:{line + 1}" if line is not None else origin
        raise KvplanError(f"{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise KvplanError(f"{origin}: expected a mapping with a 'gpus' list")
    out = []
    for i, entry in enumerate(data["gpus"]):
        if not isinstance(entry, dict):
            raise KvplanError(f"{origin}: gpus[{i}] must be a mapping")
        try:
            out.append(GPUProfile(**entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            raise KvplanError(f"{origin}: gpus[{i}].{key}: {err['msg']}") from None
    return out


@lru_cache(maxsize=1)
def _bundled() -> tuple[GPUProfile, ...]:
    text = resources.files("kvplan.data").joinpath("gpus.yaml").read_text(encoding="utf-8")
    return tuple(_load_yaml(text, "kvplan/data/gpus.yaml"))


def load_profiles(extra_files: list[str] | None = None) -> dict[str, GPUProfile]:
    """All profiles: bundled, then ``KVPLAN_GPU_PROFILES`` files, then ``extra_files``.

    Raises:
        KvplanError: a user file is missing, unreadable or malformed (names the file and key).
    """
    profiles = {p.id: p for p in _bundled()}
    files: list[str] = []
    env = os.environ.get("KVPLAN_GPU_PROFILES")
    if env:
        files += [f for f in env.split(os.pathsep) if f]
    files += list(extra_files or [])
    for f in files:
        path = Path(f)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise KvplanError(f"--gpu-profiles: file not found: {f}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise KvplanError(f"--gpu-profiles: cannot read {f}: {exc}") from None
        for p in _load_yaml(text, f):
            profiles[p.id] = p
    return profiles


def find_gpu(name: str, profiles: dict[str, GPUProfile]) -> GPUProfile:
    """Look a GPU up by id, name or alias, case- and punctuation-insensitively.

    Raises:
        KvplanError: no match; the message suggests the closest names (names --gpu).
    """
    key = _norm(name)
    table: dict[str, GPUProfile] = {}
    for p in profiles.values():
        for n in (p.id, p.name, p.reported_name, *p.aliases):
            if n:
                table.setdefault(_norm(n), p)
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=3, cutoff=0.5)
    names = []
    for c in close:
        pid = table[c].id
        if pid not in names:
            names.append(pid)
    hint = f"did you mean {', '.join(names)}?" if names else "run `kvplan gpus` to list profiles"
    raise KvplanError(f"--gpu: unknown GPU {name!r}", hint=hint)
