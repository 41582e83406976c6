"""Which log grammar reads a vLLM log: one per vLLM version whose log changed
(engines/vllm/v<version>/log_grammar.py), picked from the log's own "vLLM version" line.
Applied by kvplan.verify.log (which re-exports these names)."""

from __future__ import annotations

from kvplan.engines.vllm.v0_26 import log_grammar as _v0_26
from kvplan.engines.vllm.v0_33 import log_grammar as _v0_33
from kvplan.engines.vllm.v0_34 import log_grammar as _v0_34

# vLLM version -> its log grammar (engines/vllm/v<version>/log_grammar.py). A version whose log
# changed adds its module and one line here; a log of a version not listed is read with
# DEFAULT_GRAMMAR (the version kvplan predicts with), older formats where their lines match.
GRAMMARS = {grammar.VERSION: grammar for grammar in (_v0_26, _v0_33, _v0_34)}
DEFAULT_GRAMMAR = _v0_26
# The log names its version in its first lines (server banner, engine config line).
_VERSION_SCAN_LINES = 400


def grammar_for(text: str):
    """The log grammar for a log: the one of the version its own "vLLM version" line names (the
    grammar of the same major.minor series), else DEFAULT_GRAMMAR."""
    from kvplan.verify.log import message_of  # the prefix rules live there

    for n, raw in enumerate(text.splitlines()):
        if n >= _VERSION_SCAN_LINES:
            break
        msg = message_of(raw)
        for pattern in DEFAULT_GRAMMAR.VERSION_LINES:
            m = pattern.search(msg)
            if m and m.group(1):
                series = ".".join(m.group(1).split(".")[:2])
                for grammar in GRAMMARS.values():
                    if grammar.SERIES == series:
                        return grammar
                return DEFAULT_GRAMMAR
    return DEFAULT_GRAMMAR
