"""Byte quantities as people write them ("80GiB", "81920MiB", "85899345920") and as vLLM prints them.

Inside kvplan bytes are always ``int``; GiB only appear in messages and rendering.
"""

from __future__ import annotations

import re
from decimal import Decimal

from kvplan.errors import KvplanError

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10

_UNITS = {
    "": 1,
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": KiB,
    "m": MiB,
    "g": GiB,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
from kvplan.io.limits import MAX_BYTES  # noqa: E402 - int64: larger is a typo, not a size


def parse_bytes(text: str | int, *, what: str = "size") -> int:
    """Parse a byte size such as ``80GiB``, ``81920MiB``, ``80GB`` or ``85899345920``.

    Binary suffixes (KiB/MiB/GiB/TiB, and bare K/M/G as vLLM's ``--kv-cache-memory`` accepts)
    are powers of 1024; decimal ones (kB/MB/GB/TB) powers of 1000.

    Returns:
        the size in bytes (int, > 0, at most 2**63 - 1), computed exactly (no float rounding, so
        a 400-digit number is refused rather than overflowing).
    Raises:
        KvplanError: the text is not a positive size, or exceeds 2**63 - 1 bytes; the message
            names ``what``.
    """
    if isinstance(text, bool):
        raise KvplanError(f"{what}: expected a size such as 80GiB, got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m or m.group(2).lower() not in _UNITS:
            raise KvplanError(
                f"{what}: cannot read {text!r} as a size",
                hint="write bytes (85899345920) or a unit: 80GiB, 81920MiB, 80GB",
            )
        value = int((Decimal(m.group(1)) * _UNITS[m.group(2).lower()]).to_integral_value())  # half-even, as round()
    if value <= 0:
        raise KvplanError(f"{what}: must be a positive size, got {text!r}")
    if value > MAX_BYTES:
        raise KvplanError(f"{what}: {_short(text)} is larger than any memory (limit 2**63 - 1 bytes)")
    return value


def _short(text) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def gib(n_bytes: int | float) -> float:
    """Bytes as GiB (float), for messages and tables only."""
    return n_bytes / GiB


def format_gib(n_bytes: int | float) -> str:
    """Bytes as vLLM prints them: GiB rounded to 2 decimals (vllm/utils/mem_utils.py format_gib)."""
    return f"{round(n_bytes / GiB, 2)}"


_K8S_QUANTITY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
                 "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "": 1}


def k8s_quantity_bytes(value) -> int | None:
    """A Kubernetes memory quantity ("64Gi", "68719476736", "64G", "1.5Gi") in bytes, None when
    absent or not a quantity (k8s.io/apimachinery resource.Quantity suffixes)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)([KMGTPE]i|[kKMGTPE])?\s*", str(value))
    if not m:
        return None
    return int(float(m.group(1)) * _K8S_QUANTITY[m.group(2) or ""])
