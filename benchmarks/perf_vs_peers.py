#!/usr/bin/env python3
"""kvplan's step-time prediction, a plain roofline and aiconfigurator on the same measured points.

    python benchmarks/perf_vs_peers.py RECORD.json [RECORD.json ...] [--aic-python PATH]
    python benchmarks/perf_vs_peers.py --synthetic        # placeholder points, no measurement

For every closed-loop point of the records (benchmarks/perf_points.py: TPOT p50 at each
concurrency, TTFT p50 at concurrency 1) it prints the measured ms and, with their signed
errors:

* kvplan    for a real record: the replay (kvplan/verify/bench/replay.py), the point's own
            workload through the scheduler emulator on kvplan's predicted pool, timed by the
            step-time model with the GPU's coefficients (fitted for this GPU and vLLM version if
            kvplan/perf/coefficients.yaml has them, else the priors: then the column says
            "uncalibrated"); for a synthetic record the steady-state formula of perf_points.py;
* roofline  the same bytes and FLOPs at 100 % of the datasheet peaks with no overhead (what a
            plain BentoML-style roofline gives);
* aic       NVIDIA aiconfigurator's vLLM backend, system h200_sxm, static batch of c requests
            of input/output I/O -> TTFT and TPOT. It runs in its own virtual environment
            (--aic-python, default /work/aic-venv/bin/python, or $AIC_PYTHON): `python3 -m venv
            /work/aic-venv && /work/aic-venv/bin/pip install aiconfigurator`. When it is not
            installed, lacks the model or the system, the column says why and the others print.

Then the median |error| per column and kind. --synthetic makes points from the priors with a
+-10 % pattern: they show the table works, and measure nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_points import Observation, load_all, median, synthetic_record  # noqa: E402

from kvplan.errors import KvplanError  # noqa: E402
from kvplan.perf.coefficients import PRIORS, Efficiency  # noqa: E402

ROOFLINE = Efficiency(bandwidth_fraction=1.0, matmul_fraction=1.0, step_overhead_ms=0.0, per_request_us=0.0,
                      allreduce_latency_us=0.0, status="uncalibrated", source="plain roofline: datasheet peaks, no overhead")
DEFAULT_AIC_PYTHON = "/work/aic-venv/bin/python"
AIC_SYSTEM = "h200_sxm"
AIC_BACKEND = "vllm"

# The records of tests/data/bench/vllm-0.26.0-h200 were made from local config copies (their
# "model" is a /tmp path); the models they are (that folder's README.md), by record file stem, in
# the names aiconfigurator bundles. The 70B record is Llama-3.1-70B-Instruct with online
# `--quantization fp8`; aiconfigurator's nearest bundled model is NVIDIA's FP8 checkpoint of it.
AIC_MODEL_OF_RECORD = {
    "llama3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "llama3.1-70b-fp8": "nvidia/Llama-3.1-70B-Instruct-FP8",
}

# Run inside aiconfigurator's venv: JSON list of points on stdin -> JSON list of results.
_AIC_DRIVER = Path(__file__).resolve().parent / "aic_driver.py"


def aiconfigurator(points: list[dict], python: str) -> tuple[list[dict | None], str | None]:
    """aiconfigurator's TTFT/TPOT (ms) per point, or (Nones, why) when it cannot run."""
    if not Path(python).exists():
        return [None] * len(points), f"aiconfigurator not installed ({python} missing)"
    try:
        proc = subprocess.run([python, str(_AIC_DRIVER)], input=json.dumps(points), capture_output=True,
                              text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [None] * len(points), f"aiconfigurator did not run ({exc})"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [None] * len(points), f"aiconfigurator failed: {tail}"
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    errors = sorted({r["error"] for r in results if "error" in r})
    versions = sorted({r["aic_backend_version"] for r in results if "aic_backend_version" in r})
    why = "; ".join(errors) if errors else None
    if versions:
        why = (why + "; " if why else "") + f"aiconfigurator vLLM data version {', '.join(versions)}, static batches"
    return [None if "error" in r else r for r in results], why


def _err(pred: float | None, meas: float) -> str:
    if pred is None:
        return f"{'-':>9} {'':>7}"
    return f"{pred:9.2f} {(pred - meas) / meas * 100:+6.1f}%"


def replayed(paths: list[str]) -> dict[tuple[str, str, str], float]:
    """kvplan's emulated TPOT/TTFT p50 (ms) per (record file name, point, kind) of the real
    (non-synthetic) records among ``paths``."""
    from kvplan.verify.bench import replay as R

    out: dict[tuple[str, str, str], float] = {}
    for p in paths:
        path = Path(p)
        try:
            rec = R.load(path)
        except KvplanError:
            continue  # synthetic or hand-made: the steady-state formula stands in
        for pr in R.replay(rec, path.name):
            out[(path.name, pr.point, "tpot")] = pr.predicted["tpot_p50"]
            out[(path.name, pr.point, "ttft")] = pr.predicted["ttft_p50"]
    return out


def compare(obs: list[Observation], aic_python: str | None, kvplan_ms: dict | None = None) -> list[str]:
    """The table's lines (one per observation, then the medians); ``kvplan_ms`` overrides the
    kvplan column per (record, point, kind) (the replay)."""
    pts = [{"model": AIC_MODEL_OF_RECORD.get(o.record.split(".json")[0], o.model.name), "gpu": o.model.gpu_id, "tp": o.model.tp, "batch": o.concurrency,
            "isl": o.input_len, "osl": o.output_len, "system": AIC_SYSTEM, "backend": AIC_BACKEND,
            "moe": bool(o.model.num_experts)} for o in obs]
    aic, why = aiconfigurator(pts, aic_python) if aic_python else ([None] * len(obs), "aiconfigurator skipped (--no-aic)")
    lines = []
    labels = sorted({lab for o in obs for lab in o.model.labels})
    head = f"{'record':<22} {'point':<16} {'kind':<4} {'measured':>9} | {'kvplan':>17} | {'roofline':>17} | {'aic':>17}"
    lines.append(head)
    lines.append("-" * len(head))
    errs: dict[tuple[str, str], list[float]] = {}
    for o, a in zip(obs, aic):
        k = (kvplan_ms or {}).get((o.record, o.point, o.kind))
        k = o.predict() if k is None else k
        r = o.predict(o.model.with_efficiency(ROOFLINE))
        x = (a or {}).get(o.kind) if a else None
        for col, v in (("kvplan", k), ("roofline", r), ("aic", x)):
            if v is not None:
                errs.setdefault((col, o.kind), []).append(abs(v - o.measured_ms) / o.measured_ms * 100)
        lines.append(f"{o.record[:22]:<22} {o.point[:16]:<16} {o.kind:<4} {o.measured_ms:9.2f} | {_err(k, o.measured_ms)} | "
                     f"{_err(r, o.measured_ms)} | {_err(x, o.measured_ms)}")
    lines.append("-" * len(head))
    for kind in ("tpot", "ttft"):
        cells = []
        for col in ("kvplan", "roofline", "aic"):
            m = median(errs.get((col, kind), []))
            cells.append(f"{'-' if m is None else f'{m:.1f}%':>17}")
        lines.append(f"{'median |error|':<22} {'':<16} {kind:<4} {'':>9} | " + " | ".join(cells))
    if why:
        lines.append(f"aic: {why}")
    for lab in labels:
        lines.append(f"kvplan: {lab}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="*", help="benchmark record JSON files")
    ap.add_argument("--synthetic", action="store_true", help="placeholder points from the priors (no measurement)")
    ap.add_argument("--aic-python", default=os.environ.get("AIC_PYTHON", DEFAULT_AIC_PYTHON),
                    help="python of the venv with aiconfigurator")
    ap.add_argument("--no-aic", action="store_true", help="leave the aiconfigurator column out")
    ns = ap.parse_args(argv)
    paths = list(ns.records)
    tmp = None
    if ns.synthetic:
        tmp = tempfile.TemporaryDirectory()
        wobble = lambda k: (1.1, 0.95, 1.0, 0.9)[k % 4]  # noqa: E731
        for i, model in enumerate(("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B")):
            p = Path(tmp.name) / f"synthetic-{i}.json"
            p.write_text(json.dumps(synthetic_record(model, "NVIDIA H200", PRIORS, None, noise=wobble)))
            paths.append(str(p))
        print("SYNTHETIC points (the priors x a +-10 % pattern): they show the table, they measure nothing")
    if not paths:
        print("perf_vs_peers: give benchmark record files or --synthetic", file=sys.stderr)
        return 2
    try:
        # synthetic points are made from the priors: their kvplan column is the priors too
        obs = load_all(paths, efficiency=PRIORS if ns.synthetic else None)
    except (KvplanError, OSError, ValueError) as exc:
        print(f"perf_vs_peers: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    if not obs:
        print("perf_vs_peers: no closed-loop TPOT/TTFT points in these records", file=sys.stderr)
        return 2
    try:
        kv = replayed(paths)
    except KvplanError as exc:
        print(f"perf_vs_peers: {exc.message}", file=sys.stderr)
        return 2
    print("\n".join(compare(obs, None if ns.no_aic else ns.aic_python, kv)))
    if kv:
        print("kvplan: emulated replay of each point (kvplan/verify/bench/replay.py); roofline and aic: steady state")
    return 0


if __name__ == "__main__":
    sys.exit(main())
