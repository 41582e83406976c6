"""The log grammar: a table of patterns per vLLM version, chosen from the log's own version line."""

from __future__ import annotations

import types

from kvplan.engines.vllm.log_line import GROUP_CONVERTERS, LogLine
from kvplan.engines.vllm.v0_26 import log_grammar as v0_26
from kvplan.verify import log as vlog


def test_the_table_is_data_the_reader_knows():
    for line in v0_26.LINES:
        assert isinstance(line, LogLine)
        if line.reader is not None:
            assert line.reader in vlog._READERS
        for name, group, conv in line.fields:
            assert group is None or conv in GROUP_CONVERTERS, (name, conv)


def test_a_log_naming_the_version_gets_its_grammar():
    text = "INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.26.0\n"
    assert vlog.grammar_for(text) is v0_26
    assert vlog.grammar_for("") is vlog.DEFAULT_GRAMMAR is v0_26


def test_a_new_version_is_one_module_and_one_table_line(monkeypatch):
    # A fictitious 9.9 whose "Available KV cache memory" line was reworded.
    import re

    reworded = LogLine(re.compile(r"KV cache memory available: (-?\d+(?:\.\d+)?) GiB"), (("kv_cache_bytes", 1, "gib"),), family="v1")
    fake = types.SimpleNamespace(VERSION="9.9.0", SERIES="9.9", LINES=(reworded,), VERSION_LINES=v0_26.VERSION_LINES)
    monkeypatch.setitem(vlog.GRAMMARS, fake.VERSION, fake)
    text = "vLLM API server version 9.9.1\nKV cache memory available: 2.0 GiB\nAvailable KV cache memory: 3.0 GiB\n"
    log = vlog.parse_log(text)
    assert log.kv_cache_bytes == 2 << 30  # 2.0 GiB read by 9.9's line; 0.26's wording unknown to it
    assert vlog.parse_log(text.replace("9.9.1", "0.26.0")).kv_cache_bytes == 3 << 30
