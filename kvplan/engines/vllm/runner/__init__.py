"""Moved to kvplan.engines.vllm.v0_26.runner (issue 11); this alias goes when every importer is updated.

(A package rather than a file at the old path, so that the old file is deleted on this branch
and git's rename detection carries other branches' edits of it into the moved module.)"""
import sys

from kvplan.engines.vllm.v0_26 import runner as _moved

sys.modules[__name__] = _moved
