"""A progress bar for the long emulations (``kvplan perf``, ``plan --slo``, ``estimate --perf``).

Shown on stderr only when stderr is a terminal, the output is not JSON, and no CI is detected
(the ``CI`` environment variable that GitHub Actions, GitLab CI and most runners set); silent
otherwise. The emulator asks ``tracker(...)`` at the start of every run; nothing is imported
(rich included) and nothing is called per step unless a bar is active, so the arithmetic and
its tests never see it.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, Optional

_ACTIVE: ContextVar[Optional[Callable[[str, int], Callable[[int], None]]]] = ContextVar("kvplan_progress", default=None)


def wanted(fmt: str = "table", stream=None) -> bool:
    """Whether a bar may be drawn: table output, ``stream`` (stderr) a terminal, no ``CI`` set."""
    stream = stream if stream is not None else sys.stderr
    if fmt != "table" or os.environ.get("CI"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def tracker(description: str, total: int) -> Optional[Callable[[int], None]]:
    """An updater ``done -> None`` for one emulation of ``total`` requests, or None when no bar
    is active (the caller then does nothing per step)."""
    start = _ACTIVE.get()
    return start(description, total) if start is not None else None


@contextmanager
def on_terminal(enabled: bool) -> Iterator[None]:
    """Inside the block, emulations report to one transient bar on stderr when ``enabled``
    (see ``wanted``); otherwise nothing happens."""
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("starting", total=None)

    def start(description: str, total: int) -> Callable[[int], None]:
        bar.update(task, description=description, total=total, completed=0)
        step = max(1, total // 200)
        last = [0]

        def update(done: int) -> None:
            if done - last[0] >= step or done >= total:
                last[0] = done
                bar.update(task, completed=done)

        return update

    token = _ACTIVE.set(start)
    try:
        with bar:
            yield
    finally:
        _ACTIVE.reset(token)
