"""Helpers shared by the `kvplan check` tests: run the CLI, pick findings, write input files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.helpers import run_cli

DATA = Path(__file__).parents[1] / "data" / "check"
R3 = DATA / "review3"  # scripts, env files and configs of single checks
R4 = DATA / "review4"  # manifests, variables, planted paths
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


GiB = 2**30

# a container's /dev/shm mount of the volume named dshm (the shm-size / shm-queues tests)
MOUNT_DSHM = """            volumeMounts:
            - {name: dshm, mountPath: /dev/shm}
"""


def vllm_deployment(args: str, *, image: str = "v0.34.0", pod: str = "", mounts: str = "", gpus: str = "1",
                    limits: str = "") -> str:
    """A one-container Deployment running ``vllm/vllm-openai:<image>`` with ``args`` (the inside of
    the YAML flow list), ``gpus`` GPUs plus ``limits`` (more `, key: value` limit entries), ``pod``
    lines before `containers:` and ``mounts`` lines after the container's resources."""
    return f"""
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: x}}
    spec:
      template:
        spec:
{pod}          containers:
          - name: vllm
            image: vllm/vllm-openai:{image}
            args: [{args}]
            resources:
              limits: {{nvidia.com/gpu: "{gpus}"{limits}}}
{mounts}"""


def check(*args: str) -> tuple[int, dict, str]:
    """Run `kvplan check ... --format json`; return (exit code, document, stderr)."""
    code, out, err = run_cli("check", *args, "--format", "json")
    assert "Traceback" not in out + err
    return code, json.loads(out), err


def found(doc: dict, severity: str | None = None) -> set[tuple[str, int | None]]:
    """{(check_id, line)} of the report's diagnostics (optionally of one severity)."""
    return {(d["check_id"], d["line"]) for d in doc["diagnostics"] if severity is None or d["severity"] == severity}


def diag(doc: dict, check_id: str) -> dict:
    hits = [d for d in doc["diagnostics"] if d["check_id"] == check_id]
    assert hits, f"no {check_id} in {[d['text'] for d in doc['diagnostics']]}"
    return hits[0]


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(p)


def _json(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "json")
    return code, json.loads(out)


def _diags(doc: dict, check_id: str) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == check_id]


def _figures(doc: dict) -> dict:
    deps = [d for f in doc["files"] for d in f["deployments"]]
    assert len(deps) == 1, deps
    return deps[0]["figures"]


def _write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p
