#!/usr/bin/env python3
"""Fit the step-time model's efficiency coefficients on benchmark records, per GPU.

    python benchmarks/fit_perf.py RECORD.json [RECORD.json ...] [--out FILE] [--dry-run]
        [--holdout-every N] [--holdout-record SUBSTRING ...]

Reads `kvplan verify --bench` records (benchmarks/perf_points.py turns their closed-loop
points into TPOT and TTFT observations), fits, per (GPU profile, vLLM version):

    bandwidth_fraction, matmul_fraction, step_overhead_ms, per_request_us

by least squares on RELATIVE errors ((predicted - measured) / measured), prints every point
with its error and the median |error| per kind on the fit and held-out sets, and writes the
coefficients with their provenance (records, points, date, split rule, residuals) into
kvplan/perf/coefficients.yaml (or --out).

The model is linear in (1/bandwidth_fraction, 1/matmul_fraction, step_overhead_ms,
per_request_us) once each phase's bound side (memory or compute) is fixed, so the fit
alternates: choose the sides at the current coefficients, solve the 4-unknown linear least
squares, repeat until the sides stop changing. A coefficient no point constrains (e.g.
matmul_fraction when every point is bandwidth-bound) keeps its prior and is reported as such;
an overhead that comes out negative is fixed at 0; a fraction is kept in [0.05, 1.5].

Split rule (stated in the output and the file): within each (GPU, version), observations sorted
by (record, point, kind); every Nth (index % N == N-1, N = --holdout-every, default 3) is held
out; --holdout-record holds out every observation of records whose file name contains the
substring. Held-out points are never used by the fit.

Plain Python; no numpy needed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from dataclasses import replace
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_points import Observation, load_all, median  # noqa: E402

from kvplan.errors import KvplanError  # noqa: E402
from kvplan.perf.coefficients import FITTED_NAMES, PRIORS, Efficiency  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "kvplan" / "perf" / "coefficients.yaml"
FRACTION_RANGE = (0.05, 1.5)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Least squares x of a x ~ b via the normal equations (Gaussian elimination, partial
    pivoting); None when singular."""
    n = len(a[0]) if a else 0
    ata = [[sum(r[i] * r[j] for r in a) for j in range(n)] for i in range(n)]
    atb = [sum(r[i] * y for r, y in zip(a, b)) for i in range(n)]
    m = [row[:] + [v] for row, v in zip(ata, atb)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-18:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for k in range(col, n + 1):
                    m[r][k] -= f * m[col][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def _unknowns(e: Efficiency) -> dict[str, float]:
    return {"u": 1 / e.bandwidth_fraction, "v": 1 / e.matmul_fraction, "o": e.step_overhead_ms, "r": e.per_request_us / 1e3}


def _efficiency(x: dict[str, float], base: Efficiency) -> Efficiency:
    lo, hi = FRACTION_RANGE
    return replace(
        base,
        bandwidth_fraction=min(hi, max(lo, 1 / x["u"])) if x["u"] > 0 else hi,
        matmul_fraction=min(hi, max(lo, 1 / x["v"])) if x["v"] > 0 else hi,
        step_overhead_ms=max(0.0, x["o"]),
        per_request_us=max(0.0, x["r"] * 1e3),
    )


def fit(obs: list[Observation], start: Efficiency = PRIORS, iterations: int = 30) -> tuple[Efficiency, list[str]]:
    """Coefficients minimising the squared relative error over ``obs`` (module docstring).

    Returns:
        (Efficiency with status "fitted", notes on coefficients kept at their prior or bounds).
    Raises:
        KvplanError: no observations.
    """
    if not obs:
        raise KvplanError("fit_perf: no observations to fit (closed-loop points with TPOT/TTFT)")
    eff = start
    fixed: dict[str, float] = {}
    notes: list[str] = []
    names = ["u", "v", "o", "r"]
    prev_sides = None
    for _ in range(iterations):
        rows = []
        for ob in obs:
            model = ob.model.with_efficiency(eff)
            b, m, r, f = ob.row(model)
            rows.append(({"u": b, "v": m, "o": ob.steps_weight, "r": r}, f, ob.measured_ms))
        sides = tuple(round(r[0]["u"], 9) > 0 for r in rows)
        free = [n for n in names if n not in fixed and any(abs(r[0][n]) > 1e-12 for r in rows)]
        for n in names:
            if n not in free and n not in fixed:
                fixed[n] = _unknowns(eff)[n]
                notes.append(f"{n}: no point constrains it; kept at {fixed[n]:.4g}")
        while True:
            a = [[cols[n] / y for n in free] for cols, _, y in rows]
            rhs = [(y - f - sum(cols[n] * v for n, v in fixed.items())) / y for cols, f, y in rows]
            x = _solve(a, rhs) if free else []
            if x is None:
                raise KvplanError("fit_perf: the points do not separate the coefficients (singular system); add varied points")
            sol = dict(zip(free, x))
            bad = [n for n in ("o", "r") if n in sol and sol[n] < 0]
            if not bad:
                break
            for n in bad:
                fixed[n] = 0.0
                free.remove(n)
                notes.append(f"{n}: came out negative; fixed at 0")
        allx = {**_unknowns(eff), **fixed, **sol}
        new = _efficiency(allx, eff)
        if new == eff and sides == prev_sides:
            break
        eff, prev_sides = new, sides
    lo, hi = FRACTION_RANGE
    for name in ("bandwidth_fraction", "matmul_fraction"):
        if getattr(eff, name) in (lo, hi):
            notes.append(f"{name}: at its bound {getattr(eff, name)}")
    return replace(eff, status="fitted", source="benchmarks/fit_perf.py"), list(dict.fromkeys(notes))


def split(obs: list[Observation], every: int, holdout_records: list[str]) -> tuple[list[Observation], list[Observation]]:
    """(fit, held_out) by the rule in the module docstring."""
    ordered = sorted(obs, key=lambda o: (o.record, o.point, o.kind))
    fit_set, held = [], []
    for i, o in enumerate(ordered):
        if any(s in o.record for s in holdout_records) or (every > 1 and i % every == every - 1):
            held.append(o)
        else:
            fit_set.append(o)
    return fit_set, held


def errors(obs: list[Observation], eff: Efficiency) -> list[tuple[Observation, float, float]]:
    """(observation, predicted ms, error %) with ``eff``."""
    out = []
    for o in obs:
        p = o.predict(o.model.with_efficiency(eff))
        out.append((o, p, (p - o.measured_ms) / o.measured_ms * 100))
    return out


def summary(rows: list[tuple[Observation, float, float]]) -> dict[str, float | int | None]:
    """Median |error| % per kind and the point count."""
    out: dict[str, float | int | None] = {"points": len(rows)}
    for kind in ("tpot", "ttft"):
        v = median([abs(e) for o, _, e in rows if o.kind == kind])
        out[f"{kind}_median_abs_pct"] = None if v is None else round(v, 2)
    return out


def _table(rows: list[tuple[Observation, float, float]], which: str) -> list[str]:
    lines = []
    for o, p, e in rows:
        lines.append(
            f"  {which:<8} {o.record[:28]:<28} {o.point[:22]:<22} {o.kind:<4} c={o.concurrency:<4} "
            f"{o.input_len:>5}/{o.output_len:<5} meas {o.measured_ms:9.2f} ms  pred {p:9.2f} ms  {e:+7.1f} %"
        )
    return lines


def write(out: Path, gpu: str, version: str, eff: Efficiency, provenance: dict) -> None:
    """Replace the (gpu, version) entry of the coefficients file ``out`` (keeping its header)."""
    header = []
    entries = []
    if out.exists():
        text = out.read_text()
        header = [ln for ln in text.splitlines() if ln.startswith("#")]
        entries = (yaml.safe_load(text) or {}).get("fits") or []
    entries = [e for e in entries if (str(e.get("gpu")), str(e.get("vllm_version"))) != (gpu, version)]
    from kvplan.gpus import bundled_profiles

    prof = bundled_profiles().get(gpu)
    entry = {
        "gpu": gpu,
        "vllm_version": version,
        # the unit a fit transfers within (kvplan/perf/coefficients.py resolve)
        "compute_capability": prof.compute_capability if prof is not None else None,
        "cross_gpu": [],
        "coefficients": {n: round(getattr(eff, n), 6) for n in FITTED_NAMES},
        **provenance,
    }
    entries.append(entry)
    body = yaml.safe_dump({"fits": entries}, sort_keys=False, width=120)
    out.write_text("\n".join(header) + ("\n" if header else "") + body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", nargs="+", help="benchmark record JSON files")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="coefficients file to update (default: the bundled one)")
    ap.add_argument("--holdout-every", type=int, default=3, help="hold out every Nth observation (default 3; 0 = none)")
    ap.add_argument("--holdout-record", action="append", default=[], help="hold out records whose name contains this")
    ap.add_argument("--dry-run", action="store_true", help="print, do not write")
    ns = ap.parse_args(argv)
    try:
        obs = load_all(ns.records)
    except (KvplanError, OSError, ValueError) as exc:
        print(f"fit_perf: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    groups: dict[tuple[str, str], list[Observation]] = {}
    for o in obs:
        groups.setdefault(o.group, []).append(o)
    if not groups:
        print("fit_perf: no closed-loop TPOT/TTFT points in these records", file=sys.stderr)
        return 2
    if any(o.synthetic for o in obs) and not ns.dry_run and Path(ns.out).resolve() == DEFAULT_OUT.resolve():
        print("fit_perf: synthetic records are not measurements; they are never fitted into the bundled "
              f"{DEFAULT_OUT.relative_to(ROOT)} (pass --out FILE or --dry-run)", file=sys.stderr)
        return 2
    rule = f"sorted by (record, point, kind), every N-th held out (N = {ns.holdout_every})" if ns.holdout_every > 1 else "none by index"
    if ns.holdout_record:
        rule += f"; records containing {ns.holdout_record} held out"
    for (gpu, version), group in sorted(groups.items()):
        fit_set, held = split(group, ns.holdout_every, ns.holdout_record)
        try:
            eff, notes = fit(fit_set)
        except KvplanError as exc:
            print(f"fit_perf: {gpu} vLLM {version}: {exc.message}", file=sys.stderr)
            return 2
        f_rows, h_rows = errors(fit_set, eff), errors(held, eff)
        print(f"== {gpu}, vLLM {version}: {len(fit_set)} fit, {len(held)} held out ({rule})")
        for n in FITTED_NAMES:
            print(f"  {n:<20} {getattr(eff, n):10.4f}   (prior {getattr(PRIORS, n):g})")
        for n in notes:
            print(f"  note: {n}")
        for line in _table(f_rows, "fit") + _table(h_rows, "held-out"):
            print(line)
        fs, hs = summary(f_rows), summary(h_rows)
        print(f"  median |error|  fit: TPOT {fs['tpot_median_abs_pct']} %, TTFT {fs['ttft_median_abs_pct']} %   "
              f"held-out: TPOT {hs['tpot_median_abs_pct']} %, TTFT {hs['ttft_median_abs_pct']} %")
        if ns.dry_run:
            continue
        provenance = {
            "fitted_on": sorted({o.record for o in fit_set}),
            "fitted_points": len(fit_set),
            "held_out_points": len(held),
            "split": rule,
            "fitted_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "residuals": {"fit": fs, "held_out": hs},
            "notes": notes,
        }
        write(Path(ns.out), gpu, version, eff, provenance)
        print(f"  wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
