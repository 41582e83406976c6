"""Moved to kvplan.model.overrides (issue 11); this alias goes when every importer is updated."""
import sys
from kvplan.model import overrides as _moved
sys.modules[__name__] = _moved
