"""`kvplan gpus`: list the GPU profiles (kvplan.gpus) as a table or JSON (kvplan.render.table)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from kvplan.errors import KvplanError


def register(app: typer.Typer) -> None:
    """Add the ``gpus`` command to ``app``."""
    app.command("gpus")(gpus)


def gpus(
    gpu_profiles: Optional[list[str]] = typer.Option(
        None, "--gpu-profiles", metavar="FILE", help="Extra GPU profile YAML file(s)."
    ),
    fmt: str = typer.Option("table", "--format", metavar="FORMAT", help="table or json."),
) -> None:
    """List GPU profiles (CUDA-visible memory, fp8 support, price)."""
    from kvplan.cli import fail

    try:
        from kvplan.gpus import load_profiles

        if fmt == "json":
            print(json.dumps(gpus_document(gpu_profiles), indent=2))
            return
        profiles = load_profiles(gpu_profiles)
        if fmt != "table":
            raise KvplanError(f"--format: unknown value {fmt!r}", hint="use table or json")
        from rich.console import Console

        from kvplan.render.table import print_gpus

        print_gpus(profiles.values(), Console())
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)


def gpus_document(gpu_profiles: Optional[list[str]]) -> list[dict]:
    """The ``kvplan gpus --format json`` document: every profile (bundled plus ``gpu_profiles``
    files) as a dict (kvplan.gpus.GPUProfile fields; memory in bytes).

    Raises:
        KvplanError: an unreadable or invalid --gpu-profiles file.
    """
    from kvplan.gpus import load_profiles

    return [p.model_dump() for p in load_profiles(gpu_profiles).values()]
