"""The `kvplan plan` views: the --format json document and the ranked table, serve lines, price
notes, the workload report (capacity for real request lengths) and --explain.

``flags`` is the command's parsed flags (kvplan.cli.plan.PlanFlags; read here: model, top,
show_all, explain, revision). Units: tokens, requests, USD per hour; bytes never appear.
"""

from __future__ import annotations

from kvplan.capacity.search_option import count_text
from kvplan.render.fit import print_table


def _choice(flags):
    """The version choice of the run (flags.version_choice; the flag's version when a caller
    built the flags without one)."""
    from kvplan.engines.vllm.versions import VersionChoice, resolve

    choice = getattr(flags, "version_choice", None)
    return choice if isinstance(choice, VersionChoice) else resolve(flags.vllm_version)


def evidence_lines(options) -> list[tuple[str, list[int]]]:
    """(evidence label, option numbers from 1) for each distinct label among ``options``."""
    out: dict[str, list[int]] = {}
    for i, o in enumerate(options, 1):
        if o.plan.evidence is not None:
            out.setdefault(o.plan.evidence.label(), []).append(i)
    return list(out.items())


def _served(o, p) -> tuple[float | None, float | None]:
    """(requests served per hour, USD per served request) of option ``o`` under its `plan --slo`
    run ``p`` (kvplan/capacity/search.py); None where unknown."""
    from kvplan.capacity.search import cost_per_served_request, served_requests_per_hour

    rps = p.summary.request_throughput if p is not None and p.summary is not None else None
    return served_requests_per_hour(o, rps), cost_per_served_request(o, rps)


def ranking_line(perf) -> str:
    """What the options are ranked by: cost per served request with `--slo` (a predicted
    throughput), else cost per hour at the target concurrency."""
    from kvplan.capacity.search import RANKED_BY_HOURLY_COST, RANKED_BY_SERVED_REQUEST

    return RANKED_BY_SERVED_REQUEST if perf is not None else RANKED_BY_HOURLY_COST


def _perf_dict(p, o=None) -> dict:
    """One option's `plan --slo` run (kvplan/perf/tune.py OptionPerf) for JSON, with the
    option's requests served per hour and USD per served request (None where unknown)."""
    from kvplan.render.perf import metrics_dict

    per_hour, per_request = _served(o, p) if o is not None else (None, None)
    return {
        "requests_per_hour": None if per_hour is None else round(per_hour, 1),
        "cost_per_request_usd": None if per_request is None else float(f"{per_request:.6g}"),
        "concurrency": p.concurrency,
        "meets_slo": p.meets,
        "calibration": p.calibration,
        "approximate": list(p.approximate),
        "metrics": metrics_dict(p.summary) if p.summary is not None else None,
        "refused": p.refused,
    }


def to_dict(result, flags, capacity=None, wl=None, perf=None) -> dict:
    """The --format json document: {"kvplan_version", "model", "exact", ["approximate"], "vllm",
    "target", "options" (each with its own "exact" and "evidence"), "closest",
    "closest_note", "unpriced_gpus", "search", "workload", "skipped" (with --explain)}."""
    from kvplan import __version__

    rev = flags.revision
    top = flags.top
    out = {
        "kvplan_version": __version__,
        "model": flags.model,
        "fully_modelled": result.exact,
        "exact": result.exact,  # deprecated name of fully_modelled (render/schema.py), kept one release
        **({} if result.exact else {"approximate": [a.reason for a in result.approximations]}),
        "vllm": _choice(flags).to_dict(),
        "target": {"max_model_len": result.target.max_model_len, "concurrency": result.target.concurrency},
        "ranking": ranking_line(perf),
        "layout_notes": list(result.layout_notes),
        "options": [o.to_dict(rev) for o in result.options[:top]],
        "options_total": len(result.options),
        "closest": result.closest.to_dict(rev) if (result.closest is not None and not result.options) else None,
        "closest_note": result.closest_note,
        "unpriced_gpus": result.unpriced,
        "search": {
            "combinations": result.combinations,
            "planner_calls": result.evaluated,
            "elapsed_s": round(result.elapsed_s, 4),
            "dominated": len(result.dominated),
        },
        "workload": None,
    }
    if wl is not None:
        from kvplan.capacity.workload import workload_summary

        mml = capacity.max_model_len if capacity is not None else result.target.max_model_len
        # the lengths of the requests counted (those vLLM refuses are left out, and counted as such)
        out["workload"] = workload_summary(wl.workload, mml) | {
            "capacity_of_first_option": capacity.to_dict() if capacity is not None else None,
        }
    if perf is not None:  # `plan --slo`: each option's run under the SLO, and the options dropped
        by = perf["by_option"]
        for o, d in zip(result.options[:top], out["options"]):
            d["perf"] = _perf_dict(by[id(o)], o)
        if out["closest"] is not None and id(result.closest) in by:
            out["closest"]["perf"] = _perf_dict(by[id(result.closest)], result.closest)
        out["slo"] = {
            "targets": {t.key: t.limit_s for t in perf["slo"].targets},
            "options_missing_slo": len(perf["missed"]),
        }
    if flags.show_all:
        out["dominated_options"] = [o.to_dict(rev) for o in result.dominated]
    if flags.explain:
        out["skipped"] = [s.to_dict() for s in result.skipped]
    return out


def _dropped(perf, by) -> str:
    """How many options `plan --slo` dropped: those that ran and missed the SLO, and those the
    serving model could not evaluate (pipeline parallelism, hybrid layers), said apart."""
    missed = perf["missed"]
    refused = [o for o in missed if by.get(id(o)) is not None and by[id(o)].summary is None]
    ran = len(missed) - len(refused)
    parts = [f"{ran} option(s) that miss it dropped"]
    if refused:
        parts.append(f"{len(refused)} not evaluated ({by[id(refused[0])].refused})")
    return "; ".join(parts)


def _perf_cells(o, p) -> tuple[str, str, str]:
    if p is None or p.summary is None:
        return ("-", "-", "-")
    cost = _served(o, p)[1]
    return (_ms(p.summary.ttft.p99), _ms(p.summary.tpot.p50), "?" if cost is None else f"{cost * 1000:.3f}")


_LIMIT_SHORT = {"kv_cache": "KV", "kv_state": "state", "max_num_seqs": "seqs", "max_num_batched_tokens": "tokens"}


def _short(dtype: str) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(dtype, dtype)


def _money(o) -> str:
    return "?" if o.hourly_cost is None else f"{o.hourly_cost:.2f}"


def _ranges(nums: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3,5'."""
    out, start, prev = [], nums[0], nums[0]
    for x in nums[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if x is not None:
            start = prev = x
    return ",".join(out)


def _ms(x) -> str:
    import math

    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.0f}"


def print_result(result, console, flags, capacity=None, wl=None, perf=None) -> None:
    """The human view: ranked options, serve lines, price notes, workload report, --explain."""
    from rich.table import Table
    from rich.text import Text

    t = result.target
    head = f"{flags.model}: {count_text(t.concurrency)} concurrent requests at --max-model-len {t.max_model_len}"
    if wl is not None:
        head += f", workload {wl.workload.description}"
    from kvplan.render.table import title_line

    console.print(title_line(head))
    from kvplan.render.table import hanging as _hang

    choice = _choice(flags)
    console.print(_hang(Text("vllm: ", style="dim"), choice.label()))
    if choice.substituted:
        console.print(_hang(Text("warning: ", style="bold yellow"), choice.warning()))
    if not result.exact:
        # issue 12: the model has no kvplan family; every option below is sized from the standard keys
        from kvplan.render.table import hanging

        console.print(hanging(
            Text("approximate, not exact: ", style="bold yellow"),
            "; ".join(a.reason for a in result.approximations),
        ))
    shown = result.options[: flags.top]
    if flags.show_all and perf is None:  # with --slo the dominated were screened into the options, ranked per request
        shown = sorted(result.options + result.dominated, key=__import__("kvplan.capacity.search", fromlist=["rank_key"]).rank_key)[: flags.top]
    if shown:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col, just in (("#", "right"), ("GPUs", "left"), ("TP/PP/DP", "left"), ("kv", "left"), ("wts", "left"),
                          ("$/h", "right"), ("req", "right"), ("spare", "right"), ("limit", "left")):
            table.add_column(col, justify=just, no_wrap=True)
        if not result.exact:
            table.add_column("exact", no_wrap=True)
        by = perf["by_option"] if perf is not None else None
        if by is not None:
            for col in ("ttft99", "tpot50", "$/1k req"):
                table.add_column(col, justify="right", no_wrap=True)
        for i, o in enumerate(shown, 1):
            eff = o.plan.effective
            table.add_row(
                str(i), f"{o.num_gpus}x {o.gpu.id}", f"{o.tensor_parallel_size}/{o.pipeline_parallel_size}/{o.data_parallel_size}"
                + (" EP" if o.plan.args.enable_expert_parallel else "")
                + (f" DCP{o.plan.args.decode_context_parallel_size}" if (o.plan.args.decode_context_parallel_size or 1) > 1 else ""),
                _short(eff["kv_cache_dtype"] if eff["kv_cache_dtype"] != "auto" else eff["dtype"]),
                _short(eff["quantization"] or eff["dtype"]), _money(o), f"{o.achieved:.1f}", f"{o.headroom:+.0%}",
                _LIMIT_SHORT.get(o.binding, o.binding) + (" *" if o in result.dominated else ""),
                *(() if result.exact else ("no" if not o.plan.exact else "yes",)),
                *(() if by is None else _perf_cells(o, by.get(id(o)))),
            )
        print_table(console, table)
        console.print(_hang(Text("ranking: ", style="dim"), ranking_line(perf)))
        for line in result.layout_notes:
            console.print(_hang(Text("layout: ", style="dim"), line))
        for label, idx in evidence_lines(shown):
            who = "" if len(idx) == len(shown) else f" ({_ranges(idx)})"
            console.print(_hang(Text(f"evidence{who}: ", style="dim"), label))
        if by is not None:
            labels = sorted({by[id(o)].calibration for o in shown if id(o) in by})
            console.print(
                f"ttft99 / tpot50 / $/1k req: TTFT p99 / TPOT p50 in ms and USD per 1000 served requests, in a closed loop at each option's share of --concurrency, {wl.workload.description}; "
                f"{'; '.join(labels)}; every option shown meets --slo {perf['slo'].text} "
                f"({_dropped(perf, by)})", soft_wrap=True,
            )
        lines: dict[str, list[int]] = {}
        nodes: dict[str, int] = {}
        links: dict[str, str] = {}
        for i, o in enumerate(shown, 1):
            cmd = o.serve_command(flags.revision)
            lines.setdefault(cmd, []).append(i)
            if o.multi_node:
                nodes[cmd] = -(-o.engine_gpus // o.gpus_per_node)
            if o.link_warning:
                links[cmd] = o.link_warning
        for cmd, idx in lines.items():
            console.print(Text(f"{_ranges(idx)}: ", style="bold") + Text(cmd), soft_wrap=True)
            if cmd in nodes:
                console.print(f"   (one engine spans {nodes[cmd]} nodes: pipeline stages across nodes need a Ray cluster)")
            if cmd in links:
                console.print(_hang(Text("   warning: ", style="yellow"), links[cmd]))
        if len(result.options) > len(shown) and not flags.show_all:
            console.print(f"{len(result.options) - len(shown)} more option(s): --top N")
    else:
        console.print(Text("no option meets the target", style="bold red"))
        if result.closest_note:
            console.print(result.closest_note, soft_wrap=True)
        if perf is not None and result.closest is not None and id(result.closest) in perf["by_option"]:
            p = perf["by_option"][id(result.closest)]
            why = p.refused or f"TTFT p99 {_ms(p.summary.ttft.p99)} ms, TPOT p50 {_ms(p.summary.tpot.p50)} ms ({p.calibration})"
            console.print(f"   its prediction: {why}", soft_wrap=True)
        if result.closest is not None:
            console.print("   " + result.closest.serve_command(flags.revision), soft_wrap=True)
    if result.unpriced:
        from kvplan.render.table import hanging

        console.print(hanging(
            "price unknown: ",
            ", ".join(result.unpriced) + ": ranked after the priced options (?), by GPU count; pass --price GPU=USD "
            "or a --gpu-profiles YAML with price_per_hour_usd",
        ))
    if capacity is not None:
        print_capacity(capacity, wl, console)
    from kvplan.render.table import hanging

    console.print(hanging(
        "searched ", f"{result.combinations} combinations ({result.evaluated} planner calls) in {result.elapsed_s * 1000:.0f} ms"
        + ("" if flags.explain else "; --explain lists what was skipped and why")
    ))
    if flags.explain:
        ex = Table("GPU", "TP", "PP", "kv", "quant", "skipped", "why", box=None, header_style="bold")
        for s in result.skipped:
            ex.add_row(s.gpu, str(s.tensor_parallel_size), str(s.pipeline_parallel_size), s.kv_cache_dtype, s.quantization or "none", s.category, s.reason)
        print_table(console, ex)


def print_capacity(cap, wl, console) -> None:
    """The workload report for one engine: paged vs static, sharing, binding limit, fixes."""
    from rich.table import Table
    from rich.text import Text

    from kvplan.capacity.workload import LIMIT_NAMES

    from kvplan.render.table import hanging

    from kvplan.capacity.workload import workload_summary

    w = workload_summary(wl.workload, cap.max_model_len)  # over the requests vLLM takes
    console.print(hanging(
        Text("workload per engine: ", style="bold"),
        f"prompt mean {w['mean_prompt_tokens']:.0f} (p95 {w['p95_prompt_tokens']}), output mean "
        f"{w['mean_output_tokens']:.0f} (p95 {w['p95_output_tokens']}) tokens" + _counted(w),
    ))
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    t.add_column("PagedAttention", justify="right", no_wrap=True)
    t.add_column("static max-length", justify="right", no_wrap=True)
    t.add_row("blocks per sequence", f"{cap.blocks.per_sequence:.2f} (at completion {cap.blocks_at_completion.per_sequence:.2f})", str(cap.static_blocks_per_sequence))
    t.add_row("concurrent sequences (KV)", f"{cap.kv_sequences:.1f} (at completion {cap.kv_sequences_at_completion:.1f})", str(cap.static_sequences))
    t.add_row("KV memory holding tokens", f"{cap.paged_utilization:.1%}", f"{cap.static_utilization:.1%}")
    print_table(console, t)
    s = cap.sharing
    if s.shared_prefix_tokens or s.n > 1:
        console.print(hanging(
            "sharing: ",
            f"prefix caching {'on' if s.enable_prefix_caching else 'off'}; shared prefix {s.shared_prefix_tokens} tokens "
            f"= {cap.blocks.global_shared:.0f} block(s) held once; n={s.n}",
        ))
    console.print(hanging(
        "limits: ",
        f"KV blocks {cap.kv_sequences:.1f}, --max-num-seqs {cap.max_num_seqs}, "
        f"--max-num-batched-tokens {cap.max_num_batched_tokens} sustains {cap.mbt_sequences:.1f} sequences",
    ))
    console.print(hanging(
        Text("binding: ", style="bold"),
        f"{LIMIT_NAMES[cap.binding]} -> {cap.sequences:.1f} sequences ({cap.requests:.1f} requests)",
    ))
    for c in cap.changes:
        console.print(hanging(
            f"  {c.flag} {c.value}: ",
            f"{c.sequences:.1f} sequences (+{c.gain:.1f}; then {LIMIT_NAMES[c.binding_after]}) - {c.note}",
        ))
    if cap.excluded_fraction:
        left = (f"{w['requests_left_out']:,} of {w['requests_counted'] + w['requests_left_out']:,} requests "
                f"({cap.excluded_fraction:.1%})" if w["requests_left_out"] is not None
                else f"{cap.excluded_fraction:.1%} of requests")
        console.print(hanging(
            "warning: ",
            f"{left} exceed --max-model-len {cap.max_model_len}; vLLM refuses them, so every count above leaves "
            "them out",
        ))


def _counted(summary: dict) -> str:
    """The summary's note on what it counts: '' when every request is counted."""
    if not summary["left_out_reason"]:
        return ""
    if summary["requests_left_out"] is not None:
        return (f", over the {summary['requests_counted']:,} requests counted "
                f"({summary['requests_left_out']:,} left out: longer than --max-model-len)")
    return f", over the {1 - summary['fraction_left_out']:.1%} of the distribution counted (the rest is longer than --max-model-len)"
