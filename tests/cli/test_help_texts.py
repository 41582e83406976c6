"""Every option of `kvplan estimate` / `perf` / `plan` has a help line in --help (the multi-GPU
engine flags had none: engine_option passed help=None)."""

from __future__ import annotations

import pytest
import typer.main

from helpers import run_cli, unwrapped


@pytest.mark.parametrize("command", ["estimate", "perf", "plan"])
def test_every_option_has_help(command):
    from kvplan.cli import app, register_commands

    register_commands([command])
    group = typer.main.get_command(app)
    cmd = group.get_command(None, command)
    missing = [p.opts[0] for p in cmd.params if p.param_type_name == "option" and not (p.help or "").strip()
               and p.opts[0] != "--help"]
    assert missing == []


def test_estimate_help_describes_the_multi_gpu_flags():
    code, out, err = run_cli("estimate", "--help")
    assert code == 0, err
    text = unwrapped(out)
    for words in ("Nodes the deployment spans.", "This node's index.", "A worker node: no API server.",
                  "Expert-parallel load balancing."):
        assert words in text, words
