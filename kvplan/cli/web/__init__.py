"""`kvplan web`: a local page and a versioned JSON API beside the CLI.

The page (static/, shipped in the package: no CDN) and any other HTTP client read the same
documents the CLI prints (kvplan.cli.web.api); the server is the standard library's
(kvplan.cli.web.server). Nothing here is imported unless `kvplan web` runs.
Exit codes: 0 stopped with Ctrl-C, 2 bad flag or an address that cannot be bound.
"""

from __future__ import annotations


import typer


def register(app: typer.Typer) -> None:
    """Add the ``web`` command to ``app``."""
    app.command("web")(web)


def web(
    host: str = typer.Option(
        "127.0.0.1", "--host", metavar="ADDRESS",
        help="Address to bind. Anything but loopback (127.0.0.1, ::1, localhost) exposes the server to the network: "
        "say so on purpose (a warning is printed).",
    ),
    port: int = typer.Option(8765, "--port", metavar="PORT", help="Port to bind (0: any free port)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default browser."),
    allow_local_paths: bool = typer.Option(
        False, "--allow-local-paths",
        help="Let the page and API name files on this machine's disk (local model directories, --workload files, "
        "--gpu-profiles). Off by default: only bundled and Hub models.",
    ),
    timeout: float = typer.Option(30.0, "--timeout", metavar="SECONDS", help="Longest a plan/perf/check request may run."),
) -> None:
    """Serve a local web page and JSON API (/api/v1/...) over the CLI's documents."""
    from kvplan.cli import fail

    if not 0 <= port <= 65535:
        fail(f"--port: must be in 0..65535, got {port}")
    if not timeout > 0:
        fail(f"--timeout: must be > 0 seconds, got {timeout}")
    serve(host, port, open_browser, allow_local_paths, timeout)


def serve(host: str, port: int, open_browser: bool, allow_local_paths: bool, timeout: float) -> None:
    """Bind, print the URL, serve until Ctrl-C (then exit 0)."""
    import os
    import sys
    import threading

    from kvplan.cli import fail
    from kvplan.cli.web import api
    from kvplan.cli.web.server import LOOPBACK, make_server, warm_up

    if not allow_local_paths:
        os.environ[api.DENY_ENV] = "1"  # kvplan.sources refuses local model paths in this process and its children
    try:
        server = make_server(host, port, api.Policy(allow_local_paths=allow_local_paths, timeout_s=timeout))
    except OSError as e:
        fail(f"--host/--port: cannot listen on {host}:{port}: {e.strerror or e}")
        return
    if host not in LOOPBACK:
        print(f"warning: --host {host}: the server is reachable from other machines; it has no authentication, "
              "and anyone who reaches it can run estimates on this machine", file=sys.stderr)
    if allow_local_paths:
        print("warning: --allow-local-paths: the page and API may read files on this machine's disk", file=sys.stderr)
    print(f"kvplan web: serving on {server.url} (Ctrl-C to stop)", flush=True)
    threading.Thread(target=warm_up, daemon=True).start()
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("kvplan web: stopped", file=sys.stderr)
    finally:
        server.server_close()
