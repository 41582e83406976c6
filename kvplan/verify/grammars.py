"""Which log grammar reads a vLLM log: one per vLLM version whose log changed
(engines/vllm/v<version>/log_grammar.py), picked from the log's own "vLLM version" line; and the
message part of a log line, which every grammar reads. Applied by kvplan.verify.log (which
re-exports these names)."""

from __future__ import annotations

import re

from kvplan.engines.vllm.v0_26 import log_grammar as _v0_26
from kvplan.engines.vllm.v0_33 import log_grammar as _v0_33
from kvplan.engines.vllm.v0_34 import log_grammar as _v0_34

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# "INFO 08-01 12:00:00 [gpu_worker.py:561] " / "INFO 01-14 12:36:51 model_runner.py:1099] "
# / "DEBUG 12-01 19:49:03 [v1/worker/gpu_worker.py:484] "
_PREFIX = re.compile(
    r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+"
    r"\[?[\w./\\-]+:\d+\]\s?"
)


def message_of(line: str) -> str:
    """The message part of one log line: ANSI colours and the vLLM prefix (level, date, time,
    [file:line], plus anything before it such as "(EngineCore_DP0 pid=7)") removed."""
    line = _ANSI.sub("", line).rstrip("\r\n")
    if "\r" in line:  # progress bars rewrite the line; keep what was shown last
        line = line.rsplit("\r", 1)[-1]
    m = _PREFIX.search(line)
    if m:
        return line[m.end():].strip()
    return line.strip()


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
