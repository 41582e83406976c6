"""The lazy start-up of the `kvplan` command (issue 22 item 5) stays lazy, and lazy changes no
output: each check runs the console entry point (kvplan._entry.main) in a fresh interpreter and
reads which modules it imported. Timings are in benchmarks/startup.py, not here."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import typer

from kvplan import cli

SCRIPT = r"""
import io, json, sys
from contextlib import redirect_stdout, redirect_stderr
sys.argv = ["kvplan"] + json.loads(sys.argv[1])
from kvplan._entry import main
out, err = io.StringIO(), io.StringIO()
code = 0
try:
    with redirect_stdout(out), redirect_stderr(err):
        main()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "out": out.getvalue(), "mods": sorted(sys.modules)}))
"""


def _run(*args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | {"HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(list(args))], capture_output=True, text=True,
                          check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _loaded(res: dict, *prefixes: str) -> list[str]:
    return [m for m in res["mods"] if any(m == p or m.startswith(p + ".") for p in prefixes)]


COMMAND_MODULES = tuple(cli._COMMAND_MODULES.values())
RULES = ("kvplan.engines.vllm.v0_26", "kvplan.engines.vllm.v0_33", "kvplan.engines.vllm.args")


def test_version_is_answered_before_typer_is_imported():
    res = _run("--version")
    assert (res["code"], res["out"]) == (0, f"kvplan {__import__('kvplan').__version__}\n")
    assert _loaded(res, "typer", "pydantic", "kvplan.cli") == []


def test_the_root_help_imports_no_command_module_and_no_rules():
    res = _run("--help")
    assert res["code"] == 0
    assert _loaded(res, *COMMAND_MODULES, *RULES, "kvplan.cli.options", "rich", "yaml") == []
    for command in cli._COMMAND_MODULES:
        assert f"  {command} " in res["out"]


def test_a_command_help_imports_that_command_only():
    res = _run("check", "--help")
    assert res["code"] == 0 and "--vllm-version VERSION" in res["out"]
    assert _loaded(res, *COMMAND_MODULES) == ["kvplan.cli.check"]
    # check declares no engine option: neither EngineArgs nor any version's rules are built
    assert _loaded(res, *RULES, "kvplan.cli.options") == []
    # nor is pydantic imported: typer would build a TypeAdapter for the root's unset --help
    # (kvplan.cli.app's default_map gives it False)
    # (pydantic.plugin._loader is kvplan._entry's stub module, not pydantic's)
    assert [m for m in _loaded(res, "pydantic", "rich", "yaml") if m != "pydantic.plugin._loader"] == []


def test_the_estimate_path_reads_no_importlib_metadata():
    # pydantic's plugin lookup is stubbed (kvplan._entry) and the installed vllm's version is
    # read from its dist-info (kvplan.io.distributions): importlib.metadata is never imported
    res = _run("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--format", "json")
    assert res["code"] == 0
    assert _loaded(res, "importlib.metadata", "email") == []
    assert _loaded(res, "torch", "vllm", "transformers", "huggingface_hub") == []


def test_every_command_has_a_root_help_line_equal_to_its_docstring():
    # the placeholders of `kvplan --help` carry _SUMMARIES; the real command's help is the first
    # paragraph of its docstring (what typer lists): they must be the same text
    import importlib

    assert set(cli._SUMMARIES) == set(cli._COMMAND_MODULES)
    for command, module in cli._COMMAND_MODULES.items():
        app = typer.Typer()
        importlib.import_module(module).register(app)
        info = next(c for c in app.registered_commands if c.name == command)
        doc = info.help or inspect.getdoc(info.callback) or ""
        assert cli._SUMMARIES[command] == doc.split("\n\n")[0].strip(), command


def test_the_lazy_root_help_is_the_full_one():
    lazy = _run("--help")["out"]
    script = (
        "import sys; sys.argv = ['kvplan', '--help']\n"
        "from kvplan import cli\n"
        "cli.register_commands(None)\n"  # every command module, as before the placeholders
        "sys.argv = ['kvplan', '--help']\n"
        "cli.app(standalone_mode=False)\n"
    )
    full = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert lazy == full


def test_hand_written_metavars_agree_with_the_engine_table():
    from kvplan.cli.options import ALIASES, ENGINE_ARGS

    table = {f: a.metavar for a in ENGINE_ARGS if a.metavar for f in a.flags + ALIASES.get(a.name, ())}
    clash = {f: (m, table[f]) for f, m in cli._METAVARS.items() if f in table and table[f] != m}
    assert clash == {}


def test_a_placeholder_gives_way_to_the_real_command_in_one_process():
    from tests.helpers import run_cli

    code, out, _ = run_cli("--help")
    assert code == 0 and "estimate" in out
    code, out, _ = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--format", "serve")
    assert code == 0 and out.startswith("vllm serve meta-llama/Meta-Llama-3-8B")
    assert not any(c.callback is cli._placeholder for c in cli.app.registered_commands if c.name == "estimate")


def test_the_estimate_table_loads_no_emoji_table_nor_importlib_resources():
    # kvplan writes no emoji codes (Console(emoji=False)); the bundled data is read from the
    # package's folder (no importlib.resources: zipfile, tempfile)
    res = _run("estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200")
    assert res["code"] == 0 and "vllm serve meta-llama/Meta-Llama-3-8B" in res["out"]
    assert _loaded(res, "rich._emoji_codes", "importlib.resources", "zipfile") == []


def test_a_colon_name_colon_in_a_model_path_is_printed_as_written(tmp_path):
    # rich would print ":rocket:" as the emoji; the serve line must copy and paste as written
    from helpers import TINY_LLAMA
    from tests.helpers import run_cli

    d = tmp_path / ":rocket:"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY_LLAMA), encoding="utf-8")
    code, out, err = run_cli("estimate", str(d), "--gpu", "H100")
    assert code == 0, err
    assert f"vllm serve {d}" in out and "\U0001f680" not in out


def test_check_echoes_a_colon_name_colon_file_name_as_written(tmp_path):
    # rich would print "deploy/:fire:.yaml" as "deploy/🔥.yaml" (header and deployment line)
    from tests.helpers import run_cli

    src = os.path.join(os.path.dirname(__file__), "..", "data", "check", "pass", "chat-llama8b.yaml")
    f = tmp_path / ":fire:.yaml"
    f.write_bytes(open(src, "rb").read())
    code, out, err = run_cli("check", str(f), "--gpu", "H100")
    assert code == 0, err
    assert "\U0001f525" not in out and out.count(":fire:.yaml") == 2, out
    res = _run("check", src, "--gpu", "H100")
    assert res["code"] == 0 and _loaded(res, "rich._emoji_codes") == []
