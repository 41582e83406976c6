"""Moved to kvplan.cli.verify (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.cli import verify as _moved

sys.modules[__name__] = _moved
