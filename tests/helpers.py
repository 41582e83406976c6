"""Helpers shared by tests: run the CLI in-process and capture output and exit code."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout

# A two-layer Llama small enough to size by hand: hidden 256 (4 heads of 64, 2 KV heads),
# intermediate 512, vocabulary 1000, bf16. Copy it (dict(TINY_LLAMA)) before changing a key.
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run `kvplan ARGS` through kvplan.cli.main; return (exit code, stdout, stderr)."""
    from kvplan import cli

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["kvplan", *args]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv
    return code, out.getvalue(), err.getvalue()


def unwrapped(text: str) -> str:
    """``text`` with every run of whitespace made one space: human output wraps its lines at the
    console width (hanging indent), so a phrase may span lines."""
    return " ".join(text.split())


def error_line(code: int, out: str, err: str) -> str:
    """The single `error: ...` line of an exit-2 run (a hint line may follow)."""
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = [s for s in err.splitlines() if s.strip()]
    assert lines and lines[0].startswith("error: "), err
    assert all(s.lstrip().startswith("hint:") for s in lines[1:]), err
    return lines[0]
