"""`kvplan perf`: predicted serving throughput and latency of MODEL on a GPU under a workload
(kvplan/perf/serving.py on the estimate's exact pool), the saturation rate, and with --slo the
--max-num-seqs / --max-num-batched-tokens that maximise goodput (kvplan/perf/tune.py).

Thin: flags -> PerfFlags -> checks (one line, exit 2, before anything runs) -> estimate ->
step model -> emulate -> kvplan/render/perf.py. Exit codes: 0 predicted (and with --slo: the SLO
is met by the given flags or by a recommended pair), 1 vLLM would not start / no pair tried
meets the SLO, 2 bad input, 3 matplotlib missing for --plot.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Optional

import typer

from kvplan.cli.options import (
    EngineFlags,
    check_fraction,
    engine_option,
    parse_kv_cache_memory,
    parse_max_model_len,
    positive,
    positive_engine_args,
)
from kvplan.engines.vllm.versions import DEFAULT_HELP
from kvplan.errors import EXIT_FAIL, EXIT_OK, KvplanError

FORMATS = ("table", "json")


@dataclass(frozen=True)
class PerfFlags(EngineFlags):
    """The flags of one ``kvplan perf`` call as typer parsed them."""

    enable_prefix_caching: Optional[bool]
    revision: Optional[str]
    vllm_version: Optional[str]
    input_len: Optional[int]
    output_len: Optional[int]
    workload: Optional[str]
    concurrency: Optional[int]
    request_rate: Optional[float]
    num_requests: int
    shared_prefix: Optional[str]
    seed: int
    slo: Optional[str]
    fmt: str
    plot: Optional[str]
    saturation: bool = True
    parallel: Optional[dict] = None  # the multi-GPU flags given (options.parallel_values)
    spec_acceptance: Optional[float] = None  # mean tokens a speculative step emits per request
    addons: Optional[dict] = None  # the add-on flags given (cli/options.py ADDON_FIELDS)
    # (the `vllm serve` tokens typer left, the command's option strings): kvplan/cli/serve_extras.py
    serve_tokens: tuple = ((), frozenset())


def register(app: typer.Typer) -> None:
    """Add the ``perf`` command to ``app``."""
    from kvplan.cli.options import with_addon_options, with_parallel_options

    from kvplan.cli.serve_extras import CONTEXT_SETTINGS

    app.command("perf", context_settings=CONTEXT_SETTINGS)(with_addon_options(with_parallel_options(perf)))


def perf(
    ctx: typer.Context,
    model: str = typer.Argument(..., metavar="MODEL", help="Hub repo id, local directory with config.json, or bundled spec id."),
    gpu: str = typer.Option("H200", "--gpu", metavar="GPU", help="GPU profile id or alias (see `kvplan gpus`)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", metavar="SIZE", help="Override CUDA-visible memory."),
    gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", metavar="FILE", help="Extra GPU profile YAML file(s)."),
    tensor_parallel_size: int = engine_option("tensor_parallel_size", 1),
    pipeline_parallel_size: int = engine_option("pipeline_parallel_size", 1),
    max_model_len: Optional[str] = engine_option("max_model_len", None),
    gpu_memory_utilization: Optional[float] = engine_option("gpu_memory_utilization", None),
    kv_cache_dtype: str = engine_option("kv_cache_dtype", "auto"),
    block_size: Optional[int] = engine_option("block_size", None),
    dtype: str = engine_option("dtype", "auto"),
    quantization: Optional[str] = engine_option("quantization", None),
    max_num_seqs: Optional[int] = engine_option("max_num_seqs", None),
    max_num_batched_tokens: Optional[int] = engine_option("max_num_batched_tokens", None),
    enforce_eager: bool = engine_option("enforce_eager", False),
    kv_cache_memory: Optional[str] = engine_option("kv_cache_memory_bytes", None),
    enable_prefix_caching: Optional[bool] = engine_option("enable_prefix_caching", None),
    revision: Optional[str] = typer.Option(None, "--revision", metavar="REVISION", help="The model revision on the Hub (a branch, tag or commit)."),
    vllm_version: Optional[str] = engine_option("vllm_version", None, help="vLLM version whose rules to use. " + DEFAULT_HELP),
    input_len: Optional[int] = typer.Option(None, "--input-len", metavar="TOKENS", help="Prompt tokens of every request."),
    output_len: Optional[int] = typer.Option(None, "--output-len", metavar="TOKENS", help="Output tokens of every request (ignore_eos)."),
    workload: Optional[str] = typer.Option(
        None, "--workload", metavar="WORKLOAD", help="Request lengths instead: 'prompt=MEAN[,P95] output=MEAN[,P95]' or a CSV/JSONL file."
    ),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", metavar="C", help="Closed loop: C requests in flight."),
    request_rate: Optional[float] = typer.Option(None, "--request-rate", metavar="R", help="Open loop: Poisson arrivals at R requests/s."),
    num_requests: int = typer.Option(1000, "--num-requests", "--num-prompts", metavar="N",
                                     help="Requests to send (--num-prompts: vllm bench serve's name), at most 100,000."),
    shared_prefix: Optional[str] = typer.Option(
        None, "--shared-prefix", metavar="FRACTION:TOKENS", help="A share of the requests starting with the same TOKENS-token prefix."
    ),
    seed: int = typer.Option(0, "--seed", metavar="S", min=0, help="Seed of the lengths, prefixes and arrivals (>= 0)."),
    slo: Optional[str] = typer.Option(
        None, "--slo", metavar="KEY=TIME,...", help="Latency targets, e.g. ttft_p99=2s,tpot_p50=50ms; adds flag recommendations."
    ),
    fmt: str = typer.Option("table", "--format", metavar="FORMAT", help="table or json."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE", help="Write KV-cache use over time and latency against load (PNG/SVG)."),
    saturation: bool = typer.Option(
        True, "--saturation/--no-saturation", help="Search the saturation rate (several open-loop runs; the slow part)."
    ),
    spec_acceptance: Optional[float] = typer.Option(
        None, "--spec-acceptance", metavar="TOKENS",
        help="With --speculative-config: mean tokens a step emits per request (vLLM's 'Mean acceptance length', 1..K+1); no default.",
    ),
    addons: Optional[dict] = None,
    parallel: Optional[dict] = None,
) -> None:
    """Predict vLLM's throughput, TTFT/TPOT/ITL/E2E and saturation rate for MODEL on a GPU."""
    from kvplan.cli import fail
    from kvplan.cli.serve_extras import of_context

    flags = PerfFlags(
        model=model, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization, kv_cache_dtype=kv_cache_dtype,
        block_size=block_size, dtype=dtype, quantization=quantization, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, enforce_eager=enforce_eager, kv_cache_memory=kv_cache_memory,
        enable_prefix_caching=enable_prefix_caching, revision=revision, vllm_version=vllm_version,
        input_len=input_len, output_len=output_len, workload=workload, concurrency=concurrency,
        request_rate=request_rate, num_requests=num_requests, shared_prefix=shared_prefix, seed=seed, slo=slo,
        fmt=fmt, plot=plot, saturation=saturation, spec_acceptance=spec_acceptance, addons=addons,
        parallel=parallel, serve_tokens=of_context(ctx),
    )
    try:
        code = run_perf(flags)
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)
        return
    raise typer.Exit(code)


def parse_shared_prefix(text: Optional[str]):
    """--shared-prefix FRACTION:TOKENS -> perf.workload.SharedPrefix (None without it).

    Raises:
        KvplanError: not FRACTION:TOKENS, fraction outside 0..1, tokens < 0 (names the flag).
    """
    if text is None:
        return None
    from kvplan.perf.workload import SharedPrefix

    frac, sep, tokens = text.partition(":")
    try:
        f, n = float(frac), int(tokens)
    except ValueError:
        raise KvplanError(f"--shared-prefix: expected FRACTION:TOKENS (e.g. 0.5:512), got {text!r}") from None
    if not sep or not (0.0 <= f <= 1.0) or n < 0:
        raise KvplanError(f"--shared-prefix: expected FRACTION:TOKENS with FRACTION in 0..1 and TOKENS >= 0, got {text!r}")
    return SharedPrefix(f, n)


def lengths_from_flags(input_len, output_len, workload):
    """--input-len/--output-len or --workload -> perf.workload.Lengths.

    Raises:
        KvplanError: neither or both given, or one of --input-len/--output-len alone (names them).
    """
    from kvplan.perf.workload import Lengths

    if workload is not None:
        if input_len is not None or output_len is not None:
            raise KvplanError("--workload: give it or --input-len/--output-len, not both")
        from kvplan.capacity.workload_input import parse_workload

        return Lengths.from_workload(parse_workload(workload))
    if input_len is None or output_len is None:
        raise KvplanError(
            "--input-len/--output-len: give both (tokens in and out per request) or --workload",
            hint="e.g. --input-len 1024 --output-len 256",
        )
    positive("--input-len", input_len)
    positive("--output-len", output_len)
    return Lengths.fixed(input_len, output_len)


def load_from_flags(concurrency, request_rate):
    """--concurrency C (closed loop) or --request-rate R (open loop) -> perf.serving.Load.

    Raises:
        KvplanError: neither or both, C < 1, R not > 0 (names the flag).
    """
    from kvplan.perf.serving import Load

    if (concurrency is None) == (request_rate is None):
        raise KvplanError("--concurrency/--request-rate: give exactly one (a closed loop at C or an open loop at R requests/s)")
    if concurrency is not None:
        positive("--concurrency", concurrency)
        return Load("closed", concurrency)
    if math.isnan(request_rate) or not request_rate > 0:
        raise KvplanError(f"--request-rate: must be > 0 requests/s, got {request_rate}")
    return Load("open", request_rate)


def step_timer(plan):
    """The step model of the plan's model, GPU and flags (kvplan/perf/step_time.py; its
    coefficients: fitted for the GPU and vLLM version if bundled, else the priors). Tests
    replace this function to inject a constant or linear step time.

    Returns:
        (StepModel, step_time callable seconds(StepBatch)).
    """
    from kvplan.perf.step_time import step_model

    sm = step_model(plan.spec, plan.gpu, plan.args, vllm_version=plan.effective["vllm_version"])
    return sm, sm.seconds


def run_perf(f: PerfFlags) -> int:
    """The body of `kvplan perf` (see the module docstring). Returns the exit code.

    Raises:
        KvplanError: a bad flag (exit 2), vLLM would not start (exit 1), no matplotlib (exit 3).
    """
    from kvplan.capacity.estimate import with_version_choice
    from kvplan.capacity.options import plan_from_options
    from kvplan.engines.vllm.versions import resolve

    if f.fmt not in FORMATS:
        raise KvplanError(f"--format: unknown value {f.fmt!r}", hint="use table or json")
    from kvplan.cli.serve_extras import ServeExtras, apply, ignored_line, read

    tokens, declared = f.serve_tokens  # the pasted `vllm serve` flags, read first: a stray word is named as such
    extras = (read(list(tokens), f.model, resolve(f.vllm_version).version, set(declared), "perf")
              if tokens or f.model.startswith("-") else ServeExtras())
    positive_engine_args({
        "tensor_parallel_size": f.tensor_parallel_size, "pipeline_parallel_size": f.pipeline_parallel_size,
        "max_num_seqs": f.max_num_seqs, "max_num_batched_tokens": f.max_num_batched_tokens, "block_size": f.block_size,
    })
    check_fraction("gpu_memory_utilization", f.gpu_memory_utilization)
    from kvplan.perf.serving import check_num_requests

    check_num_requests(f.num_requests)
    load = load_from_flags(f.concurrency, f.request_rate)
    prefix = parse_shared_prefix(f.shared_prefix)
    slo = None
    if f.slo is not None:
        from kvplan.perf.slo import parse_slo

        slo = parse_slo(f.slo)
    if f.plot is not None:
        from kvplan.render.plots import check_plot_path

        check_plot_path(f.plot)
    lengths = lengths_from_flags(f.input_len, f.output_len, f.workload)
    from kvplan.perf.serving import check_modelled, check_shared_prefix

    check_shared_prefix(prefix, lengths)
    choice = resolve(f.vllm_version)  # as estimate chooses it: flag > installed vllm > newest supported
    plan, _ = plan_from_options(
        model=extras.model or f.model, gpu=f.gpu, gpu_memory=f.gpu_memory, gpu_profiles=f.gpu_profiles, revision=f.revision,
        tensor_parallel_size=f.tensor_parallel_size, pipeline_parallel_size=f.pipeline_parallel_size,
        max_model_len=parse_max_model_len(f.max_model_len), gpu_memory_utilization=f.gpu_memory_utilization,
        kv_cache_dtype=f.kv_cache_dtype, block_size=f.block_size, dtype=f.dtype, quantization=f.quantization,
        max_num_seqs=f.max_num_seqs, max_num_batched_tokens=f.max_num_batched_tokens, enforce_eager=f.enforce_eager,
        vllm_version=choice.version, enable_prefix_caching=f.enable_prefix_caching,
        kv_cache_memory_bytes=parse_kv_cache_memory(f.kv_cache_memory),
        **(f.parallel or {}), **(f.addons or {}), **(extras.engine or {}),
    )
    plan = apply(with_version_choice(plan, choice), extras)  # unmodelled flags: approximate (perf's approximate list)
    if ignored_line(extras):  # perf's documents have no warnings list: stderr, in every format
        print("kvplan: " + ignored_line(extras), file=sys.stderr)
    engines = refuse_multi_gpu_layout(plan, dense_dp_ok=True)
    load = per_engine_load(load, engines)
    num_requests = max(1, f.num_requests // engines)
    check_modelled(plan)  # a layer kind kvplan does not model (KV-less): said before anything runs
    acceptance = _check_spec_acceptance(plan, f.spec_acceptance)
    from kvplan.perf.serving import predict

    from kvplan.perf import progress

    model, timer = step_timer(plan)
    rec = None
    code = EXIT_OK
    spec_effect = adjust = None
    if acceptance is not None:  # the headline metrics, SLO verdict and goodput include it (perf/speculative.py)
        spec_effect = speculative_effect_of(plan, model, lengths, load, acceptance)
        adjust = speculative_adjuster(model, lengths, load, acceptance)
    with progress.on_terminal(progress.wanted(f.fmt)):  # stderr, a terminal only; never in JSON or CI
        result = predict(plan, model, lengths, load, num_requests=num_requests, seed=f.seed, shared_prefix=prefix,
                         step_time=timer, saturation=f.saturation)
        if slo is not None:
            from kvplan.perf.tune import TUNE_REQUESTS, recommend

            rec = recommend(plan, timer, lengths, load, slo, seed=f.seed, shared_prefix=prefix,
                            num_requests=min(num_requests, TUNE_REQUESTS),
                            efficiency=model.efficiency if model is not None else None, adjust=adjust,
                            confirm_requests=num_requests)  # the winner re-run at the headline's length
    if spec_effect is not None:
        result, spec_effect = with_speculation(result, spec_effect, load)
    if slo is not None and not slo.meets(result.summary) and rec.best is None:
        code = EXIT_FAIL
    from kvplan.render import perf as render_perf

    if f.plot is not None:
        render_perf.save_plot(result, f.plot)
    if f.fmt == "json":
        if choice.substituted:  # the JSON names it too ("vllm".requested, "evidence".unchecked)
            print(f"warning: {choice.warning()}", file=sys.stderr)
        doc = render_perf.to_dict(result, plan, slo=slo, recommendation=rec, revision=f.revision)
        if engines > 1:
            doc["data_parallel"] = data_parallel_section(result, engines, plan)
            doc["approximate"] = [*doc.get("approximate", []), doc["data_parallel"]["balancer"]]
        if spec_effect is not None:
            doc["speculative"] = spec_effect.to_dict()
        print(json.dumps(doc, indent=2))
    else:
        from rich.console import Console

        console = Console()
        render_perf.print_report(result, console, slo=slo, recommendation=rec, revision=f.revision,
                                 title=f"{plan.spec.name} on {plan.gpu.display_name}: serving prediction ({result.calibration.label})",
                                 plan=plan)
        if engines > 1:
            dpd = data_parallel_section(result, engines, plan)
            console.print(
                f"data parallel: the figures above are one of {engines} engines at 1/{engines} of the load"
                f"{' (the engine with the fewest KV blocks; all step in lockstep)' if dpd['lockstep'] else ''}; together "
                f"{dpd['output_throughput']:.1f} output tokens/s, {dpd['request_throughput']:.2f} requests/s "
                f"({dpd['balancer']})", soft_wrap=True,
            )
        if spec_effect is not None:
            e = spec_effect
            console.print(
                f"speculative decoding ({e.method}, K={e.num_speculative_tokens}, acceptance {e.acceptance:g} tokens/step) "
                f"is in the figures above: at {e.batch} decodes of ~{e.context} tokens a step takes "
                f"{e.plain_step_ms:.2f} -> {e.spec_step_ms:.2f} ms (draft {e.draft_ms:.2f} ms), so TPOT x{e.tpot_factor:.2f} "
                "(approximate: see the speculative decoding line above)", soft_wrap=True)
        if f.plot is not None:
            console.print(f"plot written to {f.plot}", soft_wrap=True)
    return code


def _check_spec_acceptance(plan, acceptance):
    """--spec-acceptance checked against the plan: required with speculative decoding (no default),
    refused without it. None when neither is given. Raises KvplanError (exit 2)."""
    from kvplan.perf.speculative import check_acceptance

    rep = getattr(plan, "addons", None)
    sp = rep.features.speculative if rep is not None and rep.features is not None else None
    if sp is None:
        if acceptance is not None:
            raise KvplanError("--spec-acceptance: needs --speculative-config (there is no speculative decoding to scale)")
        return None
    return check_acceptance(acceptance, sp.num_speculative_tokens or 1, sp.method)


def speculative_effect_of(plan, model, lengths, load, acceptance):
    """The speculative effect (kvplan/perf/speculative.py) at the run's decode batch (the closed
    loop's concurrency, else the plan's max_num_seqs capped by its concurrency; at most
    max_num_seqs) and mean context (prompt + half the output, tokens)."""
    from kvplan.perf.speculative import speculative_effect
    from kvplan.perf.step_time import step_model

    pairs, weights = lengths.pairs, lengths.weights or [1.0] * len(lengths.pairs)
    total = sum(weights)
    context = int(sum(w * (p + o / 2) for (p, o), w in zip(pairs, weights)) / total)
    cap = max(1, int(plan.max_concurrency)) if plan.max_concurrency else 1
    batch = int(load.value) if load.kind == "closed" else min(plan.effective["max_num_seqs"], cap)
    batch = max(1, min(batch, plan.effective["max_num_seqs"]))
    draft = getattr(plan.spec, "speculative_draft", None)
    draft_model = None
    if draft is not None and model is not None:
        draft_model = step_model(draft.spec, plan.gpu, plan.args, vllm_version=plan.effective["vllm_version"])
    return speculative_effect(plan, model, acceptance, batch=batch, context=context, draft_step_model=draft_model)


def speculative_adjuster(model, lengths, load, acceptance):
    """``f(plan, SimulationResult) -> Summary`` for tune.recommend: each candidate pair's run with
    speculative decoding applied at that candidate's own plan (its --max-num-seqs sets the batch)."""
    from kvplan.perf.speculative import speculative_summary

    def adjust(plan, sim):
        eff = speculative_effect_of(plan, model, lengths, load, acceptance)
        return speculative_summary(sim, eff, load.kind == "closed")

    return adjust


def with_speculation(result, effect, load):
    """(PerfResult, SpeculativeEffect): the run with its summary (every headline metric, the SLO
    verdict and goodput read it) from perf/speculative.py speculative_summary and its approximate
    reasons naming the stated acceptance (the saturation rate's line says it is without speculative
    decoding); the effect with the resulting median TPOT (s) and output
    throughput (tokens/s)."""
    from dataclasses import replace as _replace

    from kvplan.perf.speculative import headline_label, speculative_summary

    s = speculative_summary(result.result, effect, load.kind == "closed")
    sat = result.saturation
    if sat is not None:  # its search runs the plain engine: said on its own line too
        sat = _replace(sat, note="without speculative decoding")
    result = _replace(result, summary=s, saturation=sat,
                      approximate=tuple(dict.fromkeys((*result.approximate, headline_label(effect.acceptance)))))
    tpot = s.tpot.p50 if s.tpot is not None and s.tpot.count else None
    return result, _replace(effect, tpot_s=tpot, output_throughput=s.output_throughput)


ESTIMATE_REQUESTS = 1000
# estimate --perf sends at least this many times the concurrency (a closed loop of fewer requests
# is mostly ramp-up and drain: kvplan/perf/serving.py short_run_note).
ESTIMATE_REQUESTS_PER_SLOT = 4


def estimate_requests(concurrency: int) -> int:
    """Requests ``estimate --perf`` sends at ``concurrency``: ESTIMATE_REQUESTS, raised to
    ESTIMATE_REQUESTS_PER_SLOT x the concurrency when that is more, at most the emulator's cap
    (kvplan/perf/serving.py MAX_REQUESTS; a shorter run than 3 x the concurrency is labelled by
    the prediction itself). The output's workload line and JSON ``workload.num_requests`` state
    the number."""
    from kvplan.perf.serving import MAX_REQUESTS

    return min(max(ESTIMATE_REQUESTS, ESTIMATE_REQUESTS_PER_SLOT * int(concurrency)), MAX_REQUESTS)


def refuse_multi_gpu_layout(plan, dense_dp_ok: bool = False) -> int:
    """perf's step-time model and scheduler emulation are one engine's on TP x PP GPUs. With
    ``dense_dp_ok`` (`kvplan perf`) DP engines are returned as a count and the load is split
    over them: a dense model's DP engines are each exactly that engine (capacity/ranks.py); a
    MoE model's DP engines (with or without --enable-expert-parallel) step in lockstep, and the
    step model adds the experts' share, the dispatch/combine per MoE layer and the lockstep
    (kvplan/perf/step_time.py, kvplan/perf/comm.py). Expert parallel over TP alone is one engine.
    Context parallel and several nodes (cross-node links) are refused before anything runs,
    naming the flag, rather than predicted without their communication (DCP all-gathers).

    Returns:
        the number of independent engines (1 without a multi-GPU layout).
    Raises:
        KvplanError: exit 2, naming the first multi-GPU flag given.
    """
    lp = plan.parallel
    if lp is None or not lp.shown:
        return 1
    w = lp.world
    single_node = not (w.dcp > 1 or w.pcp > 1 or w.nnodes > 1)
    dense_dp = w.dp > 1 and not w.is_moe and single_node
    if single_node and w.dp > 1 and dense_dp_ok:
        return w.dp
    if single_node and w.dp == 1:  # expert parallel over TP alone: one engine, its experts whole per GPU
        return 1
    if single_node and w.dp > 1 and not dense_dp:
        raise KvplanError(
            f"--data-parallel-size {w.dp}: estimate --perf predicts one engine; a MoE model's {w.dp} DP engines "
            "step in lockstep",
            hint=f"use `kvplan perf ... --data-parallel-size {w.dp}` (the load split over the engines)",
        )
    if dense_dp:
        raise KvplanError(
            f"--data-parallel-size {w.dp}: estimate --perf predicts one engine; a dense model's {w.dp} DP engines are "
            "independent (each a DP 1 deployment)",
            hint=f"use `kvplan perf ... --data-parallel-size {w.dp}` (the load split over the engines)",
        )
    flag = ("--decode-context-parallel-size" if w.dcp > 1 else "--prefill-context-parallel-size" if w.pcp > 1
            else "--nnodes")
    raise KvplanError(
        f"{flag}: kvplan perf does not model this multi-GPU layout's step times yet (context-parallel "
        "all-gathers, cross-node links); `kvplan estimate` sizes its KV cache",
        hint="use `kvplan estimate` with the same flags for blocks, tokens and per-engine concurrency",
    )


DP_BALANCER = ("independent engines behind vLLM's balancer taken as an even split of the load (approximate; "
               "derived from the vLLM source, not checked on multi-GPU hardware)")
MOE_DP_BALANCER = ("a MoE model's DP engines behind vLLM's least-loaded balancer, taken as an even split, stepping in "
                   "lockstep (idle engines run dummy batches): the engine with the fewest KV blocks is emulated and "
                   "its step is every engine's (approximate; uncalibrated: multi-GPU communication from link physics, "
                   "no multi-GPU record)")


def data_parallel_section(result, engines: int, plan=None) -> dict:
    """The perf JSON's ``data_parallel`` object: the engine count, that every other figure is
    one engine's, whether the engines step in lockstep (a MoE model: vLLM DPEngineCoreProc),
    and the engines' summed throughput (tokens/s, requests/s)."""
    s = result.summary
    lockstep = bool(plan is not None and plan.parallel is not None and plan.parallel.world.is_moe)
    return {
        "engines": engines,
        "figures_are_per_engine": True,
        "lockstep": lockstep,
        "output_throughput": round(s.output_throughput * engines, 3),
        "total_token_throughput": round(s.total_token_throughput * engines, 3),
        "request_throughput": round(s.request_throughput * engines, 4),
        "balancer": MOE_DP_BALANCER if lockstep else DP_BALANCER,
    }


def per_engine_load(load, engines: int):
    """The load one of ``engines`` DP engines sees behind vLLM's balancer, taken as an even
    split (the DP coordinator routes each request to the least-loaded engine,
    v1/engine/core_client.py, restated in kvplan/perf/comm.py balance: round-robin from empty
    engines, C / N each in a steady closed loop): a closed loop of C requests
    gives each engine C / N (C must divide), an open loop of R requests/s gives each R / N.

    Raises:
        KvplanError: --concurrency not a multiple of the engine count (names the flag).
    """
    from kvplan.perf.serving import Load

    if engines <= 1:
        return load
    if load.kind == "closed":
        # C requests into empty engines go round-robin (perf/comm.py balance): even iff N divides C
        if int(load.value) % engines:
            raise KvplanError(
                f"--concurrency {int(load.value)}: not a multiple of --data-parallel-size {engines}; each engine "
                "would serve a different number of requests",
                hint=f"use a multiple of {engines}",
            )
        return Load("closed", int(load.value) // engines)
    return Load("open", load.value / engines)


def perf_unavailable_note(reason: str) -> str:
    """The one line ``estimate --perf`` prints (table) or adds to ``warnings`` (JSON) when the
    model is one kvplan perf does not model (the estimate itself stands)."""
    return f"perf section not available: {reason}"


def estimate_perf(plan, workload_model, capacity):
    """``estimate --workload ... --perf``: the workload's request lengths in a closed loop at the
    concurrency kvplan says fits without preemption (the capacity report's requests, or its
    at-completion sequences if fewer: requests of one length finish in waves, all at their last
    step at once; floored, at least 1), on
    estimate_requests(concurrency) seeded requests (seed 0), the shared prefix on every request.

    Returns:
        (PerfResult or None, note or None): (None, None) when the plan does not start (the
        estimate says why); (None, note) for a model kvplan perf does not model (a hybrid
        model: kvplan/perf/serving.py check_modelled), the estimate still printed, exit code
        the estimate's.
    Raises:
        KvplanError: --n > 1 (parallel sampling is not emulated), a layout or GPU the perf model
            cannot take (exit 2).
    """
    refuse_multi_gpu_layout(plan)
    if not plan.fits or capacity is None:
        return None, None
    if workload_model.n != 1:
        raise KvplanError("--perf: --n > 1 (parallel sampling / beams) is not emulated", hint="drop --n or --perf")
    from kvplan.perf.serving import Load, check_modelled, predict
    from kvplan.perf.workload import Lengths, SharedPrefix

    try:
        check_modelled(plan)
    except KvplanError as e:
        return None, perf_unavailable_note(e.message)
    lengths = Lengths.from_workload(workload_model.workload)
    prefix = SharedPrefix(1.0, workload_model.shared_prefix_tokens) if workload_model.shared_prefix_tokens else None
    conc = max(1, int(min(capacity.requests, capacity.kv_sequences_at_completion) + 1e-9))
    model, timer = step_timer(plan)
    return predict(plan, model, lengths, Load("closed", conc), num_requests=estimate_requests(conc), seed=0,
                   shared_prefix=prefix, step_time=timer), None
