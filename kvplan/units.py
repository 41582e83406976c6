"""Moved to kvplan.io.units (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.io import units as _moved

sys.modules[__name__] = _moved
