"""One line of a vLLM version's start-up log grammar: a pattern and what its groups mean.

A version's grammar (``engines/vllm/v<version>/log_grammar.py``) is a tuple of ``LogLine`` in
the order they are tried on each message; kvplan.verify.log applies it. Nothing here reads a
log: it is data (patterns, field names, converter names).

Converters (the text of one regex group -> the value stored):
    "gib"     a GiB figure: bytes (int) and, for a log field, its half printed step goes to
              ``resolution_bytes`` (vLLM prints 2 decimals; V0 printed some with 4)
    "int"     a whole number;  "tokens": a whole number that may have "," separators
    "float"   a number;        "text": the text itself
A field whose group did not take part in the match is left as it is (None for a refusal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP_CONVERTERS = frozenset({"gib", "int", "tokens", "float", "text"})


@dataclass(frozen=True)
class LogLine:
    """One pattern of a log grammar.

    Attributes:
        pattern: searched in the message (``anchored``: matched at its start).
        fields: (log field, group number, converter) in the order they are set; group None
            means the third item is a constant to store (e.g. where a block count came from).
            The first value read wins: every tensor-parallel rank repeats its lines.
        family: the line family a match shows ("v1" the V1 engine, "v0" the V0 engine).
        excerpt: a matching message goes to the record's log excerpt.
        refusal: a match is vLLM refusing to start, of this kind (kvplan.verify.log.Refusal);
            ``fields`` then fill the Refusal, and only the first refusal of a log counts.
        reader: the name of a reader in kvplan.verify.log for a line whose meaning is more
            than its groups (a Python dict, a unit that decides the scale, a line that ends the
            message's reading); ``fields`` are then unused.
        unless: a message holding this text is not this line (another line's wording).
    """

    pattern: re.Pattern
    fields: tuple[tuple[str, int | None, object], ...] = ()
    family: str | None = None
    excerpt: bool = True
    anchored: bool = False
    refusal: str | None = None
    reader: str | None = None
    unless: str | None = None
