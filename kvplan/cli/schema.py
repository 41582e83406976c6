"""`kvplan schema`: the JSON Schema of the `vllm serve --config` format or of kvplan.yaml, for
editors (yaml-language-server). The schema is built by kvplan.check.schema from the version's flag
catalogue. Exit codes: 0, 2 unknown kind or --vllm-version.
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from kvplan.engines.vllm.versions import DEFAULT_HELP


def register(app: typer.Typer) -> None:
    """Add the ``schema`` command to kvplan's typer app."""
    app.command("schema")(schema)


def schema(
    kind: str = typer.Argument(
        "config", help="config (a `vllm serve --config` YAML file), manifest (kvplan.yaml) or perf (`kvplan perf --format json`)."
    ),
    vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="vLLM version whose flags to describe. " + DEFAULT_HELP),
) -> None:
    """Print the JSON Schema of the config format (for editors: yaml-language-server)."""
    from kvplan.check.schema import json_schema
    from kvplan.engines.vllm.versions import resolve
    from kvplan.errors import KvplanError

    try:
        choice = resolve(vllm_version)
        if kind == "perf":
            from kvplan.render.perf_schema import perf_json_schema

            doc = {"$comment": f"perf document; {choice.label()}", **perf_json_schema()}
        else:
            # which version's flags, and why, in the schema itself (JSON Schema's $comment)
            doc = {"$comment": f"flags of {choice.label()}", **json_schema(kind, choice.flag_release)}
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
