"""Moved to kvplan.cli.plan (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.cli import plan as _moved

sys.modules[__name__] = _moved
