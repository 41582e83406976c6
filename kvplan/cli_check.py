"""Moved to kvplan.cli.check (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.cli import check as _moved

sys.modules[__name__] = _moved
