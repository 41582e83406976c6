"""`kvplan schema`: the JSON Schema of the `vllm serve --config` format or of kvplan.yaml, for
editors (yaml-language-server). The schema is built by kvplan.check.schema from the version's flag
catalogue. Exit codes: 0, 2 unknown kind or --vllm-version.
"""

from __future__ import annotations

import json
import sys

import typer

from kvplan.engines.vllm.versions import DEFAULT_VERSION


def register(app: typer.Typer) -> None:
    """Add the ``schema`` command to kvplan's typer app."""
    app.command("schema")(schema)


def schema(
    kind: str = typer.Argument(
        "config", help="config (a `vllm serve --config` YAML file), manifest (kvplan.yaml) or perf (`kvplan perf --format json`)."
    ),
    vllm_version: str = typer.Option(DEFAULT_VERSION, "--vllm-version", help="vLLM version whose flags to describe."),
) -> None:
    """Print the JSON Schema of the config format (for editors: yaml-language-server)."""
    from kvplan.check.schema import json_schema
    from kvplan.errors import KvplanError

    try:
        if kind == "perf":
            from kvplan.engines.vllm import versions
            from kvplan.render.perf_schema import perf_json_schema

            versions.select(vllm_version)  # an unknown version is refused as for the other kinds
            doc = perf_json_schema()
        else:
            doc = json_schema(kind, vllm_version)
    except KvplanError as e:
        from kvplan.cli import fail

        fail(e.message, e.hint, e.exit_code)
        return
    try:
        print(json.dumps(doc, indent=2))
        sys.stdout.flush()
    except BrokenPipeError:  # `kvplan schema | head`: the schema was asked for; not a failure
        from kvplan.cli.check import _drop_stdout

        _drop_stdout()
