"""Console-script entry point (``kvplan``, ``python -m kvplan``): the start-up work that must
happen before the CLI is imported, then kvplan.cli.main.

- ``kvplan --version`` is answered here, without importing typer or the CLI (3x faster).
- pydantic's plugin loader is replaced by one that finds no plugins (see _no_pydantic_plugins):
  kvplan's command has no pydantic plugin to run, and looking for one imports importlib.metadata
  and reads every installed distribution's entry points on each run.
- The CLI is imported inside a guard, so Ctrl-C during start-up exits 130 with one line instead
  of a KeyboardInterrupt traceback.

Nothing here is used when kvplan is imported as a library.
"""

import sys

from kvplan import __version__

# The module pydantic imports its plugin loader from (pydantic 2.x plugin/_schema_validator.py:
# ``from ._loader import get_plugins``, called when a model's validator is built).
_PYDANTIC_PLUGIN_LOADER = "pydantic.plugin._loader"


def main() -> None:
    if sys.argv[1:] == ["--version"] and sys.stdout is not None:
        try:
            print(f"kvplan {__version__}")
            sys.stdout.flush()
        except OSError:
            pass  # the full CLI reports a closed pipe or a full disk as it always does
        else:
            sys.exit(0)
    _no_pydantic_plugins()
    _quiet_on_closed_pipe()
    try:
        from kvplan.cli import main as cli_main
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    cli_main()


def _quiet_on_closed_pipe() -> None:
    """`kvplan ... | head`: die quietly like other Unix tools instead of exiting 1. Set here, in
    the command's own process only, not in kvplan.cli.main, which tests and the web server run
    in-process (there a later write to a closed socket must raise BrokenPipeError, not kill the
    process)."""
    import signal

    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def _no_pydantic_plugins() -> None:
    """Make pydantic's plugin lookup (``get_plugins``) return no plugins in this process.

    pydantic 2 looks for plugins when it builds a model's validator: its loader imports
    importlib.metadata (email, zipfile, csv: ~10 ms) and scans the entry points of every installed
    distribution. Pydantic plugins are observability hooks an application opts into; the kvplan
    command uses none. Done only before pydantic has loaded its own loader. Any other name read
    from the loader is taken from the real module, loaded then, so a pydantic release that reads
    more than ``get_plugins`` from it keeps working.
    """
    if _PYDANTIC_PLUGIN_LOADER in sys.modules:
        return
    import types

    stub = types.ModuleType(_PYDANTIC_PLUGIN_LOADER, "kvplan: no pydantic plugins in the kvplan command")
    stub.get_plugins = lambda: ()

    def __getattr__(name: str):
        if name.startswith("__"):  # the import system's probes (__path__ ...): a plain module has none
            raise AttributeError(name)
        return getattr(_real_plugin_loader(), name)

    stub.__getattr__ = __getattr__
    sys.modules[_PYDANTIC_PLUGIN_LOADER] = stub


_real: list = []


def _real_plugin_loader():
    """pydantic's own plugin loader module, loaded once from its file (the stub holds its name)."""
    if _real:
        return _real[0]
    import importlib.machinery
    import importlib.util

    import pydantic.plugin

    found = importlib.machinery.PathFinder.find_spec("_loader", list(pydantic.plugin.__path__))
    if found is None or not found.origin:
        raise AttributeError(f"{_PYDANTIC_PLUGIN_LOADER} not found")
    spec = importlib.util.spec_from_file_location(_PYDANTIC_PLUGIN_LOADER, found.origin)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _real.append(module)
    return module
