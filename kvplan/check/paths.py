"""Which files `kvplan check` may read and how it names them: the repository boundary (a
referenced file outside it, or a symbolic link out of it, is not read, so a pull request cannot
make CI print files elsewhere on the runner), display paths, standard input's names."""

from __future__ import annotations

import os
from pathlib import Path


def _real(path_text: str) -> str:
    """A path with symbolic links and ``..`` resolved, to tell whether two names are one file."""
    try:
        return os.path.realpath(path_text)
    except (OSError, ValueError):
        return path_text


def _display_path(path_text: str) -> str:
    """The path as diagnostics show it: relative to the working directory when it lies below
    it (GitHub annotations need repository-relative paths), else as given."""
    try:
        rel = os.path.relpath(os.path.abspath(path_text))
    except ValueError:  # another drive (Windows)
        return path_text
    if rel.startswith(".."):
        return path_text
    return rel


def _lookup_ceiling(start: Path) -> Path:
    """The highest directory _node_map may read a kvplan.yaml from, for a file in ``start``
    (resolved): the repository root (nearest ``.git``), else the working directory when
    ``start`` is at or below it, else ``start`` itself."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    cwd = Path.cwd().resolve()
    return cwd if start == cwd or cwd in start.parents else start


def link_out_of_repository(path: Path) -> str | None:
    """Why ``path`` must not be read, or None: it lies in a git repository (nearest ``.git``
    above its own directory, as written) but resolves through a symbolic link to a file outside
    that repository. A link committed in a pull request could otherwise make CI print the values
    of any YAML file on the runner; a file named outside any repository is the
    user's own choice and is read."""
    lexical = Path(os.path.abspath(path))
    repo = next((d for d in lexical.parents if (d / ".git").exists()), None)
    if repo is None:
        return None
    real = Path(os.path.realpath(lexical))
    real_repo = Path(os.path.realpath(repo))
    if real == real_repo or real_repo in real.parents:
        return None
    return (
        f"is a symbolic link to {real}, outside the repository ({real_repo}); kvplan does not follow "
        "links out of a repository, so a pull request cannot make CI print files elsewhere on the runner"
    )


def outside_boundary(target: Path, base_dir: Path, raw: str) -> tuple[str, str] | None:
    """(message, hint) when a file that a checked file refers to (a script's ``--config FILE``,
    a kvplan.yaml ``config: FILE``) lies outside the checked file's boundary, else None.

    The boundary is _lookup_ceiling's, the one the node_selectors search stops at: the
    repository root (nearest ``.git`` at or above ``base_dir``, the checked file's directory),
    else the working directory (else ``base_dir`` itself when it is not below the working
    directory). ``target`` is resolved (``..`` and symbolic links) but never opened: the caller
    reports the message and does not read the file, so its values cannot reach CI logs (a pull
    request naming /home/runner/secrets.yaml cannot have CI echo it). ``raw``: the path as the file wrote it (named in the message).
    """
    start = Path(os.path.realpath(base_dir))
    ceiling = _lookup_ceiling(start)
    real = Path(os.path.realpath(target))
    if real == ceiling or ceiling in real.parents:
        return None
    if (ceiling / ".git").exists():
        where = f"the repository ({ceiling})"
    elif ceiling == Path.cwd().resolve():
        where = f"the working directory ({ceiling}; no .git above the checked file)"
    else:
        where = f"the checked file's directory ({ceiling}; no .git above it, and it is not under the working directory)"
    via = "" if str(real) == os.path.normpath(os.path.join(os.path.abspath(target.parent), target.name)) else f" resolves to {real}, which"
    return (
        f"{raw}{via} is outside {where}; kvplan reads referenced files only inside it and did not read this one",
        "keep the config file inside the repository, or check it directly: kvplan check FILE",
    )


STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def is_stdin(path_text: str) -> bool:
    """Whether a file argument means standard input (``-``, ``/dev/stdin``, ``/dev/fd/0``)."""
    return path_text in STDIN_NAMES
