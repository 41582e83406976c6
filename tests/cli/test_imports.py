"""The estimate path must not import torch, vllm or transformers (nor huggingface_hub for a
bundled model): checked in a fresh interpreter after a real `kvplan estimate` run."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import io, json, sys
from contextlib import redirect_stdout
sys.argv = ["kvplan", "estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--format", "json"]
from kvplan import cli
buf = io.StringIO()
try:
    with redirect_stdout(buf):
        cli.main()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "mods": sorted(m for m in sys.modules if m.split(".")[0] in
      ("torch", "vllm", "transformers", "huggingface_hub"))}))
"""


def test_estimate_imports_no_heavy_modules():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True,
                         env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["code"] == 0
    assert res["mods"] == [], res["mods"]
