"""Rendering a serving prediction (kvplan/perf/serving.py PerfResult, tune.Recommendation): the
``kvplan perf --format json`` document (its schema: kvplan/render/perf_schema.py), the terminal
report, and the picture (KV-cache use over time, latency against load).

Every output carries the calibration label and the approximate reasons. Times are seconds in
JSON and ms in the table; a statistic without samples (TPOT of one-token outputs) is null.
"""

from __future__ import annotations

from kvplan.render.fit import print_table

import math

from kvplan import __version__

TIMELINE_POINTS = 100


def _num(x: float) -> float | None:
    """JSON has no NaN or infinity: null for them."""
    return None if (x is None or not math.isfinite(x)) else float(x)


def _dist(d) -> dict:
    return {"mean": _num(d.mean), "p50": _num(d.p50), "p90": _num(d.p90), "p99": _num(d.p99), "count": d.count}


def metrics_dict(s) -> dict:
    """A metrics.Summary as JSON-ready numbers (nan/inf -> null)."""
    return {
        "duration_s": _num(s.duration_s),
        "completed": s.completed,
        "output_throughput": _num(s.output_throughput),
        "total_token_throughput": _num(s.total_token_throughput),
        "request_throughput": _num(s.request_throughput),
        "ttft_s": _dist(s.ttft),
        "tpot_s": _dist(s.tpot),
        "itl_s": _dist(s.itl),
        "e2e_s": _dist(s.e2e),
        "preemptions": s.preemptions,
    }


def _timeline(points: list, most: int = TIMELINE_POINTS) -> list[list[float]]:
    """(time s, used fraction) downsampled to at most ``most`` points (every k-th step, the last kept)."""
    if len(points) <= most:
        chosen = points
    else:
        k = math.ceil(len(points) / most)
        chosen = points[::k]
        if chosen[-1] is not points[-1]:
            chosen = chosen[:-1] + [points[-1]]
    return [[round(t, 6), round(u, 6)] for t, u in chosen]


def engine_dict(cfg) -> dict:
    """The emulated engine's flags, resolved (the version's scheduler defaults filled in)."""
    from kvplan.engines.vllm import versions

    pol = versions.select(cfg.vllm_version).scheduler.POLICY
    return {
        "num_gpu_blocks": cfg.num_gpu_blocks,
        "block_size": cfg.block_size,
        "max_model_len": cfg.max_model_len,
        "max_num_seqs": cfg.max_num_seqs,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "enable_chunked_prefill": pol.enable_chunked_prefill if cfg.enable_chunked_prefill is None else cfg.enable_chunked_prefill,
        "async_scheduling": pol.async_scheduling if cfg.async_scheduling is None else cfg.async_scheduling,
    }


# What the latency-against-load points are, said with them (table) and in the JSON (``note``).
LOAD_NOTE = ("open loops of Poisson arrivals, each measured over its steady state (requests sent in the middle "
             "half of the sending window); 'kept up' when as many finished there as arrived, within 10%; "
             "Poisson arrivals put prefills into many decode steps, while a closed loop of one length runs in "
             "waves (prefills together), so the open loop's TPOT is higher at the same rate - most for MoE models, "
             "whose mixed steps above the CUDA-graph size cost the most (docs/perf.md)")


def saturation_dict(sat) -> dict | None:
    if sat is None:
        return None
    return {
        "note": LOAD_NOTE,
        "rate": _num(sat.rate),
        "bounded": sat.bounded,
        "lower_bound": sat.lower_bound,
        "concurrency": sat.concurrency,
        "requests": sat.requests,
        "points": [
            {"request_rate": _num(r), "stable": st, "ttft_p50_s": _num(s.ttft.p50), "ttft_p99_s": _num(s.ttft.p99),
             "tpot_p50_s": _num(s.tpot.p50), "tpot_p99_s": _num(s.tpot.p99), "request_throughput": _num(s.request_throughput)}
            for r, st, s in sat.points
        ],
    }


def slo_dict(slo, summary) -> dict | None:
    if slo is None:
        return None
    return {
        "targets": {t.key: t.limit_s for t in slo.targets},
        "met": slo.meets(summary),
        "goodput": _num(slo.goodput(summary)),
        "checks": [{"key": c["key"], "value_s": _num(c["value_s"]), "limit_s": c["limit_s"], "met": c["met"]} for c in slo.check(summary)],
    }


def _candidate(c) -> dict:
    return {
        "max_num_seqs": c.max_num_seqs,
        "max_num_batched_tokens": c.max_num_batched_tokens,
        "num_gpu_blocks": c.num_gpu_blocks,
        "meets_slo": c.meets,
        "goodput": _num(c.goodput),
        "worst_ratio": _num(c.worst_ratio),
        "metrics": metrics_dict(c.summary) if c.summary is not None else None,
        "skipped": c.skipped,
    }


def recommendation_dict(rec, revision: str | None = None) -> dict | None:
    if rec is None:
        return None
    best = rec.best
    return {
        "requests_per_run": rec.requests_per_run,
        "confirmed_requests": rec.confirmed_requests,
        "keeps_given_flags": rec.keeps_given_flags,
        "best": _candidate(best) if best is not None else None,
        "serve_command": None if rec.keeps_given_flags else recommended_serve(rec, revision),
        "candidates": [_candidate(c) for c in rec.candidates],
    }


def recommended_serve(rec, revision: str | None = None) -> str | None:
    """The `vllm serve` line of the best pair (kvplan/render/serve.py on its re-planned engine)."""
    if rec is None or rec.best is None or rec.best.plan is None:
        return None
    from kvplan.render.serve import serve_command

    return serve_command(rec.best.plan, revision)


def perf_section(r, *, slo=None, recommendation=None, revision: str | None = None) -> dict:
    """The performance part of a document (``kvplan perf`` and ``estimate --perf``)."""
    s = r.summary
    load = {"kind": r.load.kind}
    if r.load.kind == "closed":
        load["concurrency"] = int(r.load.value)
    else:
        load["request_rate"] = _num(r.load.value)
    return {
        "calibration": {"status": r.calibration.status, "label": r.calibration.label, "source": r.calibration.source},
        "approximate": list(r.approximate),
        "engine": engine_dict(r.config),
        "workload": {
            "lengths": r.lengths,
            "load": load,
            "num_requests": r.num_requests,
            "seed": r.seed,
            "shared_prefix": None if r.shared_prefix is None else {"fraction": r.shared_prefix.fraction, "tokens": r.shared_prefix.tokens},
        },
        "metrics": metrics_dict(s),
        "kv_usage": {"mean": _num(s.kv_usage_mean), "max": _num(s.kv_usage_max), "timeline": _timeline(r.kv_usage)},
        "saturation": saturation_dict(r.saturation),
        "slo": slo_dict(slo, s),
        "recommendation": recommendation_dict(recommendation, revision),
    }


def to_dict(r, plan, *, slo=None, recommendation=None, revision: str | None = None) -> dict:
    """The ``kvplan perf --format json`` document (kvplan/render/perf_schema.py PerfDocument)."""
    from kvplan.render.document import version_dict

    doc = {
        "kvplan_version": __version__,
        "model": plan.spec.name,
        "gpu": plan.gpu.id,
        "tensor_parallel_size": plan.effective["tensor_parallel_size"],
        "vllm_version": plan.effective["vllm_version"],
        "vllm": version_dict(plan),
        "evidence": plan.evidence.to_dict() if plan.evidence is not None else None,
    }
    doc.update(perf_section(r, slo=slo, recommendation=recommendation, revision=revision))
    return doc


def _ms(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.1f}"


def print_report(r, console, *, slo=None, recommendation=None, revision: str | None = None, title: str | None = None,
                 plan=None) -> None:
    """The terminal report of one prediction (rich console). With ``plan`` (``kvplan perf``; the
    estimate's own table says it for ``estimate --perf``): the vLLM version, why, and the
    evidence label, as estimate's table words them, and a substitute version's warning."""
    from rich.table import Table

    s = r.summary
    c = r.config
    console.print(title or f"Serving prediction ({r.calibration.label})", style="bold", soft_wrap=True)
    if plan is not None:
        from kvplan.render.document import evidence_line

        console.print(f"  evidence: {evidence_line(plan)}", soft_wrap=True)
        choice = plan.version_choice
        if choice is not None and choice.substituted:
            console.print(f"  warning: {choice.warning()}", soft_wrap=True)
    console.print(
        f"  workload: {r.lengths}, {r.load.describe()}, {r.num_requests} requests, seed {r.seed}"
        + (f", shared prefix {r.shared_prefix.tokens} tokens on {r.shared_prefix.fraction:g} of requests" if r.shared_prefix else ""),
        soft_wrap=True,
    )
    e = engine_dict(c)
    console.print(
        f"  engine: {c.num_gpu_blocks} blocks x {c.block_size} tokens, --max-num-seqs {c.max_num_seqs}, "
        f"--max-num-batched-tokens {c.max_num_batched_tokens}, prefix caching {'on' if e['enable_prefix_caching'] else 'off'}, "
        f"chunked prefill {'on' if e['enable_chunked_prefill'] else 'off'}, async scheduling {'on' if e['async_scheduling'] else 'off'}",
        soft_wrap=True,
    )
    console.print(
        f"  throughput: {s.output_throughput:,.0f} output tok/s, {s.total_token_throughput:,.0f} total tok/s, "
        f"{s.request_throughput:.2f} req/s; preemptions {s.preemptions}", soft_wrap=True,
    )
    t = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
    for h in ("latency (ms)", "p50", "p90", "p99", "mean"):
        t.add_column(h, justify="right" if h != "latency (ms)" else "left")
    for name, d in (("TTFT", s.ttft), ("TPOT", s.tpot), ("ITL", s.itl), ("E2E", s.e2e)):
        t.add_row(name, _ms(d.p50), _ms(d.p90), _ms(d.p99), _ms(d.mean))
    print_table(console, t)
    console.print(f"  KV-cache use: mean {s.kv_usage_mean:.1%}, peak {s.kv_usage_max:.1%} of {c.num_gpu_blocks - 1} usable blocks", soft_wrap=True)
    if r.saturation is not None:
        sat = r.saturation
        console.print(f"  saturation: {sat.rate:.2f} req/s (the most a closed loop sustained, at {sat.concurrency} "
                      f"in flight{'; ' + sat.note if sat.note else ''})", soft_wrap=True)
        lat = "; ".join(f"{r:.2f} req/s {'kept up' if st else 'NOT kept up'} (served {s_.request_throughput:.2f}): "
                        f"TTFT p50 {_ms(s_.ttft.p50)} ms, TPOT p50 {_ms(s_.tpot.p50)} ms"
                        for r, st, s_ in sat.points)
        console.print(f"  latency against load: {lat}", soft_wrap=True)
        console.print(f"    ({LOAD_NOTE})", soft_wrap=True)
    if slo is not None:
        checks = ", ".join(f"{c_['key']} {_ms(c_['value_s'])} ms {'<=' if c_['met'] else '>'} {c_['limit_s'] * 1e3:g} ms" for c_ in slo.check(s))
        console.print(f"  SLO {'met' if slo.meets(s) else 'missed'}: {checks}; goodput {slo.goodput(s):.2f} req/s", soft_wrap=True)
    if recommendation is not None:
        print_recommendation(recommendation, console, revision)
    console.print(f"  calibration: {r.calibration.label}: {r.calibration.source}", soft_wrap=True)
    for a in r.approximate:
        console.print(f"  approximate: {a}", soft_wrap=True)


def print_recommendation(rec, console, revision: str | None = None) -> None:
    """The grid's best pair and its serve line, or why none meets the SLO."""
    ran = [c for c in rec.candidates if c.summary is not None]
    console.print(f"  recommendation ({len(ran)} flag pairs, {rec.requests_per_run}-request runs each):", soft_wrap=True)
    if rec.best is None:
        console.print("    no --max-num-seqs / --max-num-batched-tokens pair tried meets the SLO", soft_wrap=True)
        return
    b = rec.best
    runs = (f"on {rec.confirmed_requests}-request runs, as the headline" if rec.confirmed_requests
            else f"on {rec.requests_per_run}-request runs")
    if rec.keeps_given_flags:
        # the user's own flags: not a recommendation (and its figures are the headline's above when
        # the runs are as long; the grid's shorter runs differ)
        console.print(f"    the flags as given (--max-num-seqs {b.max_num_seqs} --max-num-batched-tokens "
                      f"{b.max_num_batched_tokens}) are the best pair tried: no change recommended", soft_wrap=True)
        return
    console.print(
        f"    --max-num-seqs {b.max_num_seqs} --max-num-batched-tokens {b.max_num_batched_tokens}: "
        f"goodput {b.goodput:.2f} req/s, TTFT p99 {_ms(b.summary.ttft.p99)} ms, TPOT p50 {_ms(b.summary.tpot.p50)} ms "
        f"({runs})",
        soft_wrap=True,
    )
    console.print(f"    {recommended_serve(rec, revision)}", soft_wrap=True)
    d = rec.default
    if d is not None and d is not b and d.summary is not None:
        console.print(
            f"    (the flags as given, --max-num-seqs {d.max_num_seqs} --max-num-batched-tokens {d.max_num_batched_tokens}, "
            f"on the same runs: goodput {d.goodput:.2f} req/s{'' if d.meets else ', SLO missed'})", soft_wrap=True,
        )


def save_plot(r, path: str):
    """Write KV-cache use over time and latency against load (the saturation runs) to ``path``
    (.png/.svg), atomically (kvplan/render/plots.py check_plot_path's rules).

    Raises:
        KvplanError: bad --plot path (exit 2). EnvironmentMissing: no matplotlib (exit 3).
    """
    from kvplan.render.plots import check_plot_path

    out = check_plot_path(path)
    fmt = out.suffix.lower().lstrip(".")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    ts = [t for t, _ in r.kv_usage]
    a1.plot(ts, [u * 100 for _, u in r.kv_usage], lw=1)
    a1.set_xlabel("time (s)")
    a1.set_ylabel("KV-cache blocks used (%)")
    a1.set_title("KV-cache use over time")
    if r.saturation is not None and r.saturation.points:
        pts = r.saturation.points
        rates = [p[0] for p in pts]
        a2.plot(rates, [p[2].ttft.p50 * 1e3 for p in pts], "o-", label="TTFT p50")
        a2.plot(rates, [p[2].ttft.p99 * 1e3 for p in pts], "o--", label="TTFT p99")
        a2.plot(rates, [p[2].tpot.p50 * 1e3 if math.isfinite(p[2].tpot.p50) else float("nan") for p in pts], "s-", label="TPOT p50")
        a2.axvline(r.saturation.rate, color="grey", ls=":", label="saturation")
        a2.set_yscale("log")
        a2.legend(fontsize=8)
    a2.set_xlabel("request rate (req/s, open loop)")
    a2.set_ylabel("latency (ms)")
    a2.set_title("latency against load")
    fig.suptitle(f"{r.calibration.label}" + (" - approximate" if r.approximate else ""), fontsize=9)
    fig.tight_layout()
    try:
        from kvplan.io.files import write_file_atomically

        write_file_atomically(out, "--plot", path, lambda tmp: fig.savefig(tmp, format=fmt), suffix=f".{fmt}")
    finally:
        plt.close(fig)
    return out
