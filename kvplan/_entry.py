"""Console-script entry point: imports the CLI inside a guard so Ctrl-C during start-up exits
130 with one line instead of a KeyboardInterrupt traceback."""

import sys


def main() -> None:
    try:
        from kvplan.cli import main as cli_main
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    cli_main()
