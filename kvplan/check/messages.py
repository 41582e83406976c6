"""How check writes values and numbers into its messages (YAML values, pydantic errors, GiB,
concurrencies cut to 2 decimals)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def _yaml_shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str, separators=(", ", ": "))
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


_PLAIN = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "finite_number": "expected a finite number",
}


def plain_validation_message(err: dict) -> str:
    """A pydantic error as one plain line: "must be at least 1 (got 0)" rather than "Input
    should be greater than or equal to 1"; value errors keep their own text."""
    template = _PLAIN.get(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if template is not None:
        try:
            text = template.format(**ctx)
        except (KeyError, IndexError):
            text = err["msg"]
    else:
        text = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"{text} (got {_yaml_shown(err.get('input'))})" if "input" in err else text


def _pydantic_message(err: dict, model: type[BaseModel]) -> str:
    import difflib

    if err.get("type") == "extra_forbidden":
        name = str(err["loc"][-1])
        close = difflib.get_close_matches(name, list(model.model_fields), n=1)
        return "not a kvplan key" + (f"; did you mean {close[0]}?" if close else "")
    return plain_validation_message(err)


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _round2(x: float) -> float:
    """``x`` rounded to 2 decimals, the figure vLLM logs ('Maximum concurrency for N tokens per
    request: %.2fx', every supported vLLM's v1/core/kv_cache_utils.py) and `kvplan estimate`
    prints: 96.789 -> 96.79."""
    return round(x, 2)


def _concurrency_text(x: float, below: float | None = None) -> str:
    """How check prints a concurrency (requests of max-model-len tokens at once): 2 decimals,
    rounded as vLLM's ``%.2f`` does. ``below``: a target the value falls short of; more decimals
    are shown when 2 would round up to it (3.999 below 4 is "3.999", not "4.00")."""
    text = f"{x:.2f}"
    digits = 2
    while below is not None and x < below and float(text) >= below and digits < 9:
        digits += 1
        text = f"{x:.{digits}f}"
    return text
