"""The version of an installed distribution, read from its ``*.dist-info`` directory without
importing importlib.metadata (which pulls in email, zipfile and csv: ~10 ms of every start-up
of `kvplan estimate` and `kvplan check`, which ask which vllm is installed).

The search is importlib.metadata's (Python 3.10-3.13 ``importlib.metadata.version``): the
entries of ``sys.path`` in order, in each the ``NAME-*.dist-info`` / ``NAME-*.egg-info`` entries
whose name part normalises to NAME (PEP 503: runs of ``-_.`` are one ``_``, case ignored), the
first one found wins, its ``Version`` header is the answer. Whatever this reader does not handle
itself (a zip file or ``.egg`` on sys.path, an ``egg-info`` file, another meta-path finder that
lists distributions, a dist-info without its METADATA) is handed to importlib.metadata, so the
answer is the same in every case.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Optional

_NOT_FOUND = object()


def installed_version(name: str) -> Optional[str]:
    """The ``Version`` of distribution ``name`` as importlib.metadata.version gives it, or None
    when none is installed. Reads only directory listings and one METADATA file.

    Raises nothing for a missing distribution; an unreadable METADATA is handed to
    importlib.metadata, whose errors propagate.
    """
    found = _fast_version(name)
    if found is _NOT_FOUND:
        return None
    if found is not None:
        return found
    return _metadata_version(name)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _fast_version(name: str):
    """The version (str), _NOT_FOUND, or None when importlib.metadata must decide."""
    if any(hasattr(f, "find_distributions") and f is not _path_finder() for f in sys.meta_path):
        return None
    want = _normalize(name)
    for entry in sys.path:
        root = entry or "."
        if not isinstance(entry, str) or root.lower().endswith(".egg") or os.path.isfile(root):
            return None  # an egg or a zip archive on the path: importlib.metadata reads those
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            if _normalize(low.rpartition(".")[0].partition("-")[0]) != want:
                continue
            return _read_version(os.path.join(root, child), low.endswith(".dist-info"))
    return _NOT_FOUND


def _read_version(info: str, dist_info: bool) -> Optional[str]:
    """The Version header of a dist-info's METADATA (an egg-info directory's PKG-INFO); None
    when importlib.metadata must decide (no such file, no header, an egg-info file)."""
    path = os.path.join(info, "METADATA" if dist_info else "PKG-INFO")
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    break  # the end of the headers
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "version":
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _path_finder():
    import importlib.machinery

    return importlib.machinery.PathFinder


def _metadata_version(name: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
