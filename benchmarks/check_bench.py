"""Benchmark `kvplan check`: 1,000 deployment files over 20 distinct bundled models, offline.

Writes the files into a temporary directory (70% vLLM --config YAML, 20% shell scripts with line
continuations, 10% Kubernetes Deployments), then, in this one process:

1. checks them all with one Checker (model specs cached per (model, revision), plans per
   (model, revision, GPU, engine args)) -- what `kvplan check deploy/*.yaml` does;
2. checks them again with a fresh Checker per file (no cache shared between files);

and prints the times, the cache counters and the ratio. Target: run 1 within 2 s.

    .venv/bin/python benchmarks/check_bench.py [--files 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # bundled models only; never the network
T_START = time.perf_counter()

# 20 bundled models, with tensor-parallel sizes that divide their attention and KV heads.
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": (1, 2, 4),
    "meta-llama/Meta-Llama-3-8B": (1, 2),
    "meta-llama/Llama-3.1-70B-Instruct": (2, 4, 8),
    "meta-llama/Llama-3.3-70B-Instruct": (4, 8),
    "meta-llama/Llama-2-7b-hf": (1, 2),
    "meta-llama/Llama-2-13b-hf": (1, 2),
    "mistralai/Mistral-7B-Instruct-v0.3": (1, 2),
    "mistralai/Mixtral-8x7B-v0.1": (2, 4),
    "Qwen/Qwen2.5-7B-Instruct": (1, 2, 4),
    "Qwen/Qwen2.5-14B": (1, 2),
    "Qwen/Qwen2.5-32B": (2, 4),
    "Qwen/Qwen3-8B": (1, 2),
    "Qwen/Qwen3-32B": (2, 4),
    "Qwen/Qwen3-30B-A3B": (1, 2, 4),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (2, 4),
    "google/gemma-2-9b": (1, 2),
    "google/gemma-3-27b-it": (2, 4),
    "microsoft/phi-4": (1, 2),
    "openai/gpt-oss-20b": (1, 2),
    "deepseek-ai/DeepSeek-V2-Lite": (1, 2),
}
GPUS = ("H100", "H200", "A100-80GB", "L40S", "L4")
MAX_LENS = ("4096", "8192", "16k", "32768", "32K")


def write_files(root: Path, n: int, rng: random.Random) -> list[str]:
    """``n`` deployment files spread over the 20 models; returns their paths."""
    paths = []
    models = list(MODELS)
    for i in range(n):
        model = models[i % len(models)]
        tp = rng.choice(MODELS[model])
        gpu = rng.choice(GPUS)
        mml = rng.choice(MAX_LENS)
        util = rng.choice(("0.85", "0.9", "0.92"))
        seqs = rng.choice((64, 128, 256))
        kind = i % 10
        if kind < 7:
            p = root / f"deploy/svc-{i:04d}.yaml"
            text = (
                f"model: {model}\ntensor-parallel-size: {tp}\nmax-model-len: {mml}\n"
                f"gpu-memory-utilization: {util}\nmax-num-seqs: {seqs}\nenable-prefix-caching: true\n"
                f"port: 8000\nkvplan:\n  gpu: {gpu}\n  gpu_count: {tp}\n  min_concurrency: 2\n"
            )
        elif kind < 9:
            p = root / f"scripts/serve-{i:04d}.sh"
            text = (
                f"#!/usr/bin/env bash\n# kvplan: gpu={gpu} gpu_count={tp}\nMODEL={model}\n"
                f'exec vllm serve "$MODEL" \\\n    --tensor-parallel-size={tp} \\\n    --max-model-len {mml} \\\n'
                f"    --gpu-memory-utilization {util} --max-num-seqs {seqs}\n"
            )
        else:
            p = root / f"k8s/deploy-{i:04d}.yaml"
            text = (
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc\nspec:\n  template:\n    spec:\n"
                "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.26.0\n"
                f"          args: [--model, {model}, -tp, '{tp}', --max-model-len, '{mml}']\n"
                f"          resources:\n            limits:\n              nvidia.com/gpu: {tp}\n"
                f"# kvplan: gpu={gpu}\n"
            )
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        paths.append(str(p))
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args()

    from kvplan.check.checker import Checker  # the import cost is reported separately

    t_import = time.perf_counter() - T_START
    rng = random.Random(opts.seed)
    with tempfile.TemporaryDirectory(prefix="kvplan-bench-") as tmp:
        root = Path(tmp)
        (root / ".git").mkdir()  # stop kvplan.yaml discovery at this "repository"
        paths = write_files(root, opts.files, rng)

        t0 = time.perf_counter()
        report = Checker().check_paths(paths)
        cached = time.perf_counter() - t0

        t0 = time.perf_counter()
        for p in paths:
            Checker().check_paths([p])
        uncached = time.perf_counter() - t0

    diags = report.diagnostics
    deployments = sum(len(f.deployments) for f in report.files)
    models = {d.model for f in report.files for d in f.deployments}
    parse_errors = [d for d in diags if d.check_id == "parse-error"]
    s = report.stats
    print(f"kvplan check benchmark: {len(paths)} files, {deployments} deployments, {len(models)} distinct models (offline, bundled)")
    print(f"  import kvplan.check.checker    {t_import:7.3f} s")
    print(f"  check, one cache for the run   {cached:7.3f} s   ({len(paths) / cached:,.0f} files/s)   target <= 2 s: {'PASS' if cached <= 2 else 'MISS'}")
    print(f"  check, fresh Checker per file  {uncached:7.3f} s   ({len(paths) / uncached:,.0f} files/s)")
    print(f"  ratio uncached / cached        {uncached / cached:7.2f} x")
    print(
        f"  model specs loaded {s['spec_loads']} (cache hits {s['spec_cache_hits']}); "
        f"plans computed {s['plans']} (cache hits {s['plan_cache_hits']})"
    )
    print(
        f"  findings: {sum(d.severity == 'error' for d in diags)} errors, "
        f"{sum(d.severity == 'warning' for d in diags)} warnings, {sum(d.severity == 'info' for d in diags)} notes; "
        f"exit code {report.exit_code()}"
    )
    if parse_errors or deployments != len(paths):
        print(f"  unexpected: {len(parse_errors)} parse errors, {deployments} deployments for {len(paths)} files", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
