"""Rendering a Plan: the estimate JSON document (document.py, its schema in schema.py), the
`vllm serve` line and vLLM --config YAML (serve.py), the rich terminal views (table.py) and the
concurrency pictures (plots.py, imported only when asked for). GiB appear only here and in
messages.

The names below are the old kvplan.render module's, kept for its importers (issue 11); new code
imports the submodule that owns the name.
"""

from kvplan.render.document import evidence_line, to_dict
from kvplan.render.serve import (
    _served_model,
    _typed,
    approximate_warning,
    config_yaml as _config_yaml,
    explicit_args,
    no_start_warning,
    serve_command,
    serve_settings,
)
from kvplan.render.table import GiB, _Hanging, hanging, print_gpus, print_table

__all__ = [
    "GiB", "approximate_warning", "evidence_line", "config_yaml", "explicit_args", "hanging", "no_start_warning", "print_gpus", "print_table",
    "serve_command", "serve_settings", "to_dict",
]
_private = (_Hanging, _served_model, _typed)


def config_yaml(plan, revision=None) -> str:
    """A vLLM ``--config`` file for ``plan`` (render/serve.py config_yaml), with a multi-GPU
    layout's per-engine figures, node launch lines and evidence as comments at the top
    (render/parallel.py summary_lines)."""
    from kvplan.render.parallel import summary_lines

    lines = summary_lines(plan, serve_command(plan, revision))
    return "".join(f"# {line.strip()}\n" for line in lines) + _config_yaml(plan, revision)
