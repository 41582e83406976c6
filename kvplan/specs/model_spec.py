"""Moved to kvplan.model.spec (issue 11); this alias goes when every importer is updated."""
import sys
from kvplan.model import spec as _moved
sys.modules[__name__] = _moved
