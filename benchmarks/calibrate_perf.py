#!/usr/bin/env python3
"""Fit the step-time coefficients THROUGH THE EMULATOR on real benchmark records, report every
point held out, and write kvplan/perf/coefficients.yaml.

    python benchmarks/calibrate_perf.py [RECORD.json.gz ...] [--dry-run] [--out FILE]

Default records: tests/data/bench/vllm-0.26.0-h200/{llama3.1-8b,qwen3-30b-a3b,llama3.1-70b-fp8}.
Every point is replayed (kvplan/verify/bench/replay.py: the point's real workload on kvplan's
predicted pool and engine defaults); the fit moves the coefficients to minimise, over the FIT
points, the sum of |log(predicted / measured)| of TPOT p50, TTFT p50 and output tokens/s (L1 on
log ratios: one odd point cannot drag the fit), by Nelder-Mead on log-coefficients.

SPLIT RULE (fixed before looking at any error; held-out points are never evaluated by the fit):
  FIT      closed-loop points at 128/512 and 8192/64 of the records whose file name does not
           contain "70b" (Llama-3.1-8B and Qwen3-30B-A3B);
  HELD OUT every 2048/256 point, every open-loop point, and the whole 70B record.
A record run with --enforce-eager (the 4-layer smoke record) is neither fitted nor counted: CUDA
graphs change the step overhead, and kvplan has no eager term.

Fitted coefficients: bandwidth_fraction, matmul_fraction, step_overhead_ms, per_request_us,
request_latency_ms, request_serial_ms, per_layer_us, moe_layer_us, moe_bandwidth_fraction,
moe_matmul_fraction (kvplan/perf/coefficients.py). The search starts from the priors (or
--start) with two values of per_request_us (see start_point) and keeps the better start.
allreduce_latency_us stays at its prior (TP = 1 only).

Writing: the fit's entry replaces the entry of the same (GPU, vLLM version) in the file; the other
entries stay. The entry records the GPU's compute capability (the unit a fit transfers within:
kvplan/perf/coefficients.py resolve).

CROSS-GPU CHECK (the transfer's error, measured):

    python benchmarks/calibrate_perf.py --check-gpu --from h200@0.26.0 H100_RECORD.json.gz ...

replays every counted point of the records (another GPU of the fit's compute capability) with the
fit's coefficients unchanged -- nothing is fitted on them -- prints the table, and writes the
median |errors| into the fit's entry as ``cross_gpu: [{gpu, vllm_version, records, points,
residuals, checked_at}]`` (--dry-run: print only). Every prediction transferred from that fit then
names the measured error in its label. The reverse direction is the same command with the other
GPU's fit (--from h100-sxm@0.26.0 H200 records).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from kvplan.perf.coefficients import PRIORS, Efficiency
from kvplan.verify.bench import replay as R

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "bench" / "vllm-0.26.0-h200"
DEFAULT_RECORDS = [DATA / f"{n}.json.gz" for n in ("llama3.1-8b", "qwen3-30b-a3b", "llama3.1-70b-fp8")]
DEFAULT_OUT = ROOT / "kvplan" / "perf" / "coefficients.yaml"
NAMES = ("bandwidth_fraction", "matmul_fraction", "step_overhead_ms", "per_request_us", "request_latency_ms",
         "request_serial_ms", "per_layer_us", "moe_layer_us", "moe_bandwidth_fraction", "moe_matmul_fraction",
         "eager_layer_us", "eager_moe_layer_us")
BOUNDS = {"bandwidth_fraction": (0.05, 1.0), "matmul_fraction": (0.05, 1.0), "moe_bandwidth_fraction": (0.02, 1.0),
          "moe_matmul_fraction": (0.02, 1.0), "step_overhead_ms": (0.0, 20.0), "per_request_us": (0.0, 500.0),
          "request_latency_ms": (0.0, 50.0), "request_serial_ms": (0.0, 20.0), "per_layer_us": (0.0, 200.0), "moe_layer_us": (0.0, 500.0),
          "eager_layer_us": (0.0, 5000.0), "eager_moe_layer_us": (0.0, 5000.0)}
OBJECTIVE = ("tpot_p50", "ttft_p50", "output_tok_s")
SPLIT_RULE = ("fit: closed-loop 128/512 and 8192/64 points of the Llama-3.1-8B and Qwen3-30B-A3B records; "
              "held out: every 2048/256 point, every open-loop point, the whole Llama-3.1-70B FP8 record")


def is_fit_point(record_name: str, point: R.PointRecord) -> bool:
    """The split rule (module docstring)."""
    w = point.workload
    return "70b" not in record_name and w.mode == "closed" and (w.input_len, w.output_len) in ((128, 512), (8192, 64))


def counted(rec: R.BenchRecord) -> bool:
    """Records in the acceptance numbers: CUDA-graph runs (not --enforce-eager)."""
    return not rec.engine_args.get("enforce_eager")


def start_point(per_request_us: float = PRIORS.per_request_us) -> Efficiency:
    """Where the search starts: the priors, with the terms that are off by default (MoE
    fractions, request_serial_ms, per_layer_us) set to small non-zero values so the search on
    log-coefficients can move them. ``per_request_us`` is tried at two starts because a step is
    max(GPU, host): below the GPU time the host term has no gradient at all."""
    return replace(PRIORS, moe_bandwidth_fraction=PRIORS.bandwidth_fraction, moe_matmul_fraction=PRIORS.matmul_fraction,
                   request_serial_ms=0.5, per_layer_us=5.0, moe_layer_us=5.0, per_request_us=per_request_us)


def _eff(x: list[float], base: Efficiency) -> Efficiency:
    vals = {}
    for n, v in zip(NAMES, x):
        lo, hi = BOUNDS[n]
        vals[n] = min(max(math.exp(v), lo), hi)
    return replace(base, **vals)


def _log(v: float) -> float:
    return math.log(max(v, 1e-6))


def loss(items, eff: Efficiency) -> float:
    """Sum of |log(pred / measured)| of the objective figures over ``items`` ((engine, record
    name, point) triples), at ``eff``."""
    total = 0.0
    for eng, name, point in items:
        pr = R.replay_point(R.with_efficiency(eng, eff), point, name)
        for k in OBJECTIVE:
            m, p = pr.measured.get(k), pr.predicted.get(k)
            if m and p and p > 0:
                total += abs(math.log(p / m))
    return total


def nelder_mead(f, x0: list[float], step: float = 0.3, iters: int = 250, tol: float = 1e-4, report=None):
    """Minimise f from x0 (plain Nelder-Mead, standard coefficients); ``report(x, value)`` is
    called with the best point every 10 iterations."""
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for it in range(iters):
        if it % 10 == 0:
            b = min(range(n + 1), key=lambda k: vals[k])
            print(f"  iteration {it}: loss {vals[b]:.4f}", flush=True)
            if report:
                report(pts[b], vals[b])
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < tol:
            break
        c = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        xr = [c[j] + (c[j] - pts[-1][j]) for j in range(n)]
        fr = f(xr)
        if fr < vals[0]:
            xe = [c[j] + 2 * (c[j] - pts[-1][j]) for j in range(n)]
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [c[j] + 0.5 * (pts[-1][j] - c[j]) for j in range(n)]
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]
                    vals[i] = f(pts[i])
    i = min(range(n + 1), key=lambda k: vals[k])
    return pts[i], vals[i]


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def residuals(rows) -> dict:
    """Median |error| in % per figure over PointReplay rows."""
    out = {"points": len(rows)}
    for k in R.METRICS:
        v = median([abs(r.error(k)) * 100 for r in rows if r.error(k) is not None])
        out[f"{k}_median_abs_pct"] = None if v is None else round(v, 2)
    return out


def table(rows, label: str) -> list[str]:
    lines = [f"| set | record | point | TTFT p50 ms meas / pred | TPOT p50 ms meas / pred | ITL p50 | E2E p50 | out tok/s meas / pred | req/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def cell(k, fmt="{:.4g}"):
            m, p, e = r.measured.get(k), r.predicted.get(k), r.error(k)
            return f"{fmt.format(m)} / {fmt.format(p)} ({e * 100:+.0f} %)" if e is not None else "-"
        def err(k):
            e = r.error(k)
            return f"{e * 100:+.0f} %" if e is not None else "-"
        lines.append(f"| {label} | {r.record} | {r.point} | {cell('ttft_p50')} | {cell('tpot_p50')} | {err('itl_p50')} | "
                     f"{err('e2e_p50')} | {cell('output_tok_s', '{:.0f}')} | {err('req_s')} |")
    return lines


def _header() -> str:
    return "\n".join(ln for ln in DEFAULT_OUT.read_text().splitlines() if ln.startswith("#")) + "\n"


def merged_fits(text: str, entry: dict) -> list[dict]:
    """The file's ``fits`` list with ``entry`` in place of the entry of the same (gpu,
    vllm_version), or appended."""
    fits = (yaml.safe_load(text) or {}).get("fits") or []
    key = (str(entry["gpu"]), str(entry["vllm_version"]))
    out = [f for f in fits if (str(f.get("gpu")), str(f.get("vllm_version"))) != key]
    return out + [entry]


def with_cross_gpu(text: str, fit_gpu: str, fit_version: str, check: dict) -> str:
    """``text`` (a coefficients file) with ``check`` ({gpu, vllm_version, records, points,
    residuals, checked_at}) in the cross_gpu list of the (fit_gpu, fit_version) entry, replacing
    an earlier check of the same GPU and version; the header comments kept.

    Raises:
        SystemExit: no such entry.
    """
    fits = (yaml.safe_load(text) or {}).get("fits") or []
    for f in fits:
        if (str(f.get("gpu")), str(f.get("vllm_version"))) == (fit_gpu, fit_version):
            kept = [c for c in f.get("cross_gpu") or []
                    if (str(c.get("gpu")), str(c.get("vllm_version"))) != (check["gpu"], check["vllm_version"])]
            f["cross_gpu"] = kept + [check]
            break
    else:
        raise SystemExit(f"--from {fit_gpu}@{fit_version}: no such fit in the coefficients file")
    header = "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))
    return header + "\n" + yaml.safe_dump({"fits": fits}, sort_keys=False, width=100)


def check_gpu(paths: list[Path], source: str, out: Path, dry_run: bool) -> int:
    """The cross-GPU check (module docstring): the fit ``source`` ("gpu@version") replayed on
    another GPU's records, nothing fitted."""
    from kvplan.gpus import bundled_profiles, find_gpu
    from kvplan.perf.coefficients import parse_entries

    fit_gpu, _, fit_version = source.partition("@")
    text = out.read_text()
    fit = parse_entries(text, str(out)).get((fit_gpu, fit_version))
    if fit is None:
        raise SystemExit(f"--from {source}: no such fit in {out}")
    profiles = bundled_profiles()
    fit_cc = fit.fit.get("compute_capability") or profiles[fit_gpu].compute_capability
    rows, names, target = [], [], None
    for p in paths:
        rec = R.load(p)
        if not counted(rec):
            print(f"skip {p.name}: --enforce-eager run")
            continue
        gpu = find_gpu(rec.gpu_name or "", profiles)
        if gpu.id == fit_gpu or gpu.compute_capability != fit_cc:
            raise SystemExit(f"{p.name}: {gpu.id} (compute capability {gpu.compute_capability}) is not another GPU "
                             f"of {fit_gpu}'s architecture ({fit_cc})")
        if target not in (None, (gpu.id, rec.vllm_version)):
            raise SystemExit(f"{p.name}: records of one GPU and vLLM version per check")
        target = (gpu.id, rec.vllm_version)
        name = p.name.replace(".json.gz", "").replace(".json", "")
        eng = R.engine_for(rec, efficiency=fit)
        names.append(name)
        for pt in rec.points:
            if pt.requests and not any(r.error is not None or r.done_us is None for r in pt.requests):
                rows.append(R.replay_point(eng, pt, name))
    if not rows:
        raise SystemExit("no counted points in the records")
    print("\n".join(table(rows, f"{fit_gpu}->{target[0]}")))
    res = residuals(rows)
    print("cross-GPU", res)
    if dry_run:
        return 0
    check = {"gpu": target[0], "vllm_version": target[1], "records": names,
             "points": [f"{r.record}:{r.point}" for r in rows], "residuals": res,
             "checked_at": _dt.date.today().isoformat(),
             "how": "benchmarks/calibrate_perf.py --check-gpu: every counted point replayed with the fit unchanged"}
    out.write_text(with_cross_gpu(text, fit_gpu, fit_version, check))
    print(f"wrote the cross-GPU check into {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("records", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--iters", type=int, default=250)
    ap.add_argument("--start", type=Path, help="YAML of coefficient values to start the search from")
    ap.add_argument("--checkpoint", type=Path, help="write the best coefficients so far here (YAML)")
    ap.add_argument("--fixed", type=Path, help="YAML of coefficients: skip the search, report these")
    ap.add_argument("--check-gpu", action="store_true",
                    help="replay the records with the --from fit unchanged and record the cross-GPU error")
    ap.add_argument("--from", dest="source", default="h200@0.26.0", help="the fit a --check-gpu replays: GPU@VERSION")
    a = ap.parse_args(argv)
    if a.check_gpu:
        if not a.records:
            ap.error("--check-gpu needs the other GPU's records")
        return check_gpu(a.records, a.source, a.out, a.dry_run)
    paths = a.records or DEFAULT_RECORDS
    fit_items, held_items, names = [], [], []
    recs = []
    for p in paths:
        rec = R.load(p)
        if not counted(rec):
            print(f"skip {p.name}: --enforce-eager run (not fitted, not counted)")
            continue
        name = p.name.replace(".json.gz", "").replace(".json", "")
        eng = R.engine_for(rec, efficiency=start_point())
        print(f"{name}: num_gpu_blocks kvplan {eng.predicted_blocks} vs vLLM log {eng.measured_blocks} "
              f"({(eng.pool_error or 0) * 100:+.2f} %)")
        recs.append((name, rec, eng))
        names.append(p.name)
        for pt in rec.points:
            if any(r.error is not None or r.done_us is None for r in pt.requests) or not pt.requests:
                continue
            (fit_items if is_fit_point(name, pt) else held_items).append((eng, name, pt))
    starts = [start_point(v) for v in (PRIORS.per_request_us, 80.0)]
    if a.start:
        given = yaml.safe_load(a.start.read_text())
        starts = [replace(start_point(), **{k: float(v) for k, v in given.items() if k in NAMES and k != "per_request_us"},
                          per_request_us=pru) for pru in (float(given.get("per_request_us", 10.0)), 80.0)]
    search_note = "Nelder-Mead on log-coefficients over the fit points"
    if a.fixed:
        search_note = (f"values from a Nelder-Mead checkpoint ({a.fixed.name}) of this script's search over the fit "
                       "points; --fixed only re-reports them")
        given = yaml.safe_load(a.fixed.read_text())
        base = replace(start_point(), **{k: float(v) for k, v in given.items() if k in NAMES})
        a.iters = 0
    else:
        base = min(starts, key=lambda e: loss(fit_items, e))
    x0 = [math.log(max(getattr(base, n), 1e-3)) for n in NAMES]
    f = lambda x: loss(fit_items, _eff(x, base))  # noqa: E731

    def report(x, v):
        if a.checkpoint:
            e = _eff(x, base)
            a.checkpoint.write_text(yaml.safe_dump({"loss": v, **{n: getattr(e, n) for n in NAMES}}))

    x, val = nelder_mead(f, x0, iters=a.iters, report=report)
    x, val = nelder_mead(f, x, step=0.1, iters=a.iters // 3, report=report)  # restart: the simplex may have collapsed
    eff = replace(_eff(x, base), status="fitted", source="benchmarks/calibrate_perf.py")
    print(f"fit loss {val:.4f} on {len(fit_items)} points")
    for n in NAMES:
        print(f"  {n:24s} {getattr(eff, n):.4g}   (prior {getattr(base, n):.4g})")

    def rows_of(items):
        out = []
        for eng, name, pt in items:
            out.append(R.replay_point(R.with_efficiency(eng, eff), pt, name))
        return out

    f_rows, h_rows = rows_of(fit_items), rows_of(held_items)
    print("\n".join(table(f_rows, "fit") + table(h_rows, "held-out")[2:]))
    res = {"fit": residuals(f_rows), "held_out": residuals(h_rows), "all": residuals(f_rows + h_rows)}
    for k, v in res.items():
        print(k, v)
    if a.dry_run:
        return 0
    gpu = recs[0][2].model.gpu_id
    version = recs[0][1].vllm_version
    from kvplan.gpus import bundled_profiles

    entry = {
        "gpu": gpu, "vllm_version": version,
        "compute_capability": bundled_profiles()[gpu].compute_capability,
        "cross_gpu": [],
        "coefficients": {n: round(getattr(eff, n), 5) for n in NAMES},
        "fitted_on": sorted({n for _, n, _ in fit_items}),
        "held_out_records": sorted({n for _, n, _ in held_items} - {n for _, n, _ in fit_items}),
        "search": search_note,
        "fitted_by": "benchmarks/calibrate_perf.py (through the emulator: kvplan/verify/bench/replay.py)",
        "split": SPLIT_RULE,
        "fitted_points": [f"{n}:{pt.name}" for _, n, pt in fit_items],
        "held_out_points": [f"{n}:{pt.name}" for _, n, pt in held_items],
        "objective": "sum |log(pred/measured)| of TPOT p50, TTFT p50, output tok/s over the fit points",
        "fitted_at": _dt.date.today().isoformat(),
        "residuals": res,
    }
    current = a.out.read_text() if a.out.exists() else ""
    a.out.write_text(_header() + yaml.safe_dump({"fits": merged_fits(current, entry)}, sort_keys=False, width=100))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
