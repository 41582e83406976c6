"""Moved to kvplan.render.plots (issue 11); this alias goes when every importer is updated."""
import sys

from kvplan.render import plots as _moved

sys.modules[__name__] = _moved
