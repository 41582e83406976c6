"""Moved to kvplan.render.schema (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.render import schema as _moved

sys.modules[__name__] = _moved
