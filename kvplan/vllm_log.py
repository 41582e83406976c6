"""Moved to kvplan.verify.log (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.verify import log as _moved

sys.modules[__name__] = _moved
