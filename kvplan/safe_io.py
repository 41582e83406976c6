"""Moved to kvplan.io.files (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.io import files as _moved

sys.modules[__name__] = _moved
