"""Moved to kvplan.model.parse (issue 11); this alias goes when every importer is updated.

kvplan.model.parse re-exports the names importers use (parse_config, text_config_of,
MODELLED_QUANT_METHODS and the private readers from kvplan.model.config / kvplan.model.quant)."""
import sys
from kvplan.model import parse as _moved
sys.modules[__name__] = _moved
