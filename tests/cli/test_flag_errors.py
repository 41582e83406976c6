"""Bad engine flags on the command line: ONE `error: FLAG: ...` line naming the flag as typed
(exit 2, no traceback)."""

from __future__ import annotations

import pytest

from helpers import error_line, run_cli

MODEL = "meta-llama/Meta-Llama-3-8B"  # bundled spec: resolves offline

@pytest.mark.parametrize("flag", ["--kv-cache-memory", "--kv-cache-memory-bytes"])
@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_kv_cache_memory_error_names_the_flag_typed(flag, value):
    line = error_line(*run_cli("estimate", MODEL, flag, value))
    assert line.startswith(f"error: {flag}: "), line


def test_kv_cache_memory_error_with_equals_form():
    line = error_line(*run_cli("estimate", MODEL, "--kv-cache-memory=-1"))
    assert line.startswith("error: --kv-cache-memory: "), line
