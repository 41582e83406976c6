"""`kvplan estimate`: the plan of one model on one GPU configuration (the core is
kvplan.capacity.estimate through kvplan.capacity.options.plan_from_options).

Thin: flags -> EstimateFlags -> plan_from_options -> kvplan.render (table, JSON, YAML, serve
line) and, with --workload/--plot/--curves, kvplan.cli.plan.estimate_extras. Exit codes: 0 it
starts, 1 it does not, 2 bad input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from typing import Optional

import typer

from kvplan.cli.options import (
    EngineFlags,
    check_fraction,
    engine_option,
    PARALLEL_FIELDS,
    addon_values,
    parallel_values,
    parse_hf_overrides,
    parse_kv_cache_memory,
    parse_max_model_len,
    positive_engine_args,
    with_addon_options,
    with_parallel_options,
)
from kvplan.cli.serve_extras import IGNORED_WORDS
from kvplan.engines.vllm.versions import DEFAULT_HELP
from kvplan.errors import EXIT_FAIL, EXIT_OK, KvplanError

FORMATS = ("table", "json", "yaml", "serve", "k8s", "lws", "kserve", "llm-d", "compose")
STACK_FORMATS = FORMATS[4:]  # a serving stack's manifest (kvplan.render.served.write)


@dataclass(frozen=True)
class EstimateFlags(EngineFlags):
    """The flags of one ``kvplan estimate`` call as typer parsed them (text still unparsed where
    the flag takes units: ``max_model_len``, ``kv_cache_memory``, ``gpu_memory``)."""

    revision: Optional[str]
    vllm_version: Optional[str]
    usage: str
    fmt: str
    workload: Optional[str]
    shared_prefix_tokens: int
    n: int
    enable_prefix_caching: Optional[bool]
    plot: Optional[str]
    limit_mm_per_prompt: Optional[str]
    curves: bool
    verbose: bool
    hf_overrides: Optional[str] = None
    perf: bool = False
    parallel: Optional[dict] = None  # the multi-GPU flags given (options.parallel_values)
    addons: Optional[dict] = None  # the add-on flags given (cli/options.py ADDON_FIELDS)
    # the `vllm serve` flags typer did not parse (ctx.args) and the command's own option strings,
    # read against the version's catalogue once it is chosen (kvplan/cli/serve_extras.py)
    serve_tokens: tuple = ()
    declared: frozenset = frozenset()


def register(app: typer.Typer) -> None:
    """Add the ``estimate`` command to ``app``."""
    from kvplan.cli.serve_extras import CONTEXT_SETTINGS

    app.command("estimate", context_settings=CONTEXT_SETTINGS)(with_addon_options(with_parallel_options(estimate)))


def estimate(
    ctx: typer.Context,
    model: str = typer.Argument(..., metavar="MODEL", help="Hub repo id, local directory with config.json, or bundled spec id."),
    gpu: str = typer.Option("H200", "--gpu", metavar="GPU", help="GPU profile id or alias (see `kvplan gpus`)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory", metavar="SIZE", help="Override CUDA-visible memory: bytes or 80GiB / 81920MiB."),
    gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", metavar="FILE", help="Extra GPU profile YAML file(s)."),
    tensor_parallel_size: int = engine_option("tensor_parallel_size", 1),
    pipeline_parallel_size: int = engine_option("pipeline_parallel_size", 1),
    max_model_len: Optional[str] = engine_option("max_model_len", None, help="Tokens, or 'auto' for the largest that fits."),
    gpu_memory_utilization: Optional[float] = engine_option("gpu_memory_utilization", None),
    kv_cache_dtype: str = engine_option("kv_cache_dtype", "auto", help="auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2"),
    block_size: Optional[int] = engine_option("block_size", None),
    dtype: str = engine_option("dtype", "auto"),
    quantization: Optional[str] = engine_option("quantization", None),
    max_num_seqs: Optional[int] = engine_option("max_num_seqs", None),
    max_num_batched_tokens: Optional[int] = engine_option("max_num_batched_tokens", None),
    enforce_eager: bool = engine_option("enforce_eager", False),
    kv_cache_memory: Optional[str] = engine_option(
        "kv_cache_memory_bytes", None, help="KV-cache bytes (bypasses --gpu-memory-utilization)."
    ),
    revision: Optional[str] = typer.Option(None, "--revision", metavar="REVISION", help="The model revision on the Hub (a branch, tag or commit)."),
    hf_overrides: Optional[str] = typer.Option(
        None, "--hf-overrides", metavar="JSON",
        help="JSON object applied to the model's config.json as vLLM applies it, e.g. '{\"max_position_embeddings\": 65536}'.",
    ),
    vllm_version: Optional[str] = engine_option("vllm_version", None, help="vLLM version whose rules to use. " + DEFAULT_HELP),
    usage: str = typer.Option("serve", "--usage", metavar="USAGE", help="serve (vllm serve defaults) or llm (offline LLM class defaults)."),
    fmt: str = typer.Option(
        "table", "--format", metavar="FORMAT", help="table, json, yaml (a vLLM --config file), serve (the `vllm serve` line only), "
        "or a manifest that `kvplan check` reads back: k8s, lws, kserve, llm-d, compose."
    ),
    workload: Optional[str] = typer.Option(
        None, "--workload", metavar="WORKLOAD", help="Request lengths: 'prompt=MEAN[,P95] output=MEAN[,P95]' or a CSV/JSONL file."
    ),
    shared_prefix_tokens: int = typer.Option(0, "--shared-prefix-tokens", metavar="TOKENS", help="System-prompt tokens shared by all requests."),
    n: int = typer.Option(1, "--n", "--beam-width", metavar="N", help="Parallel samples / beams per request."),
    enable_prefix_caching: Optional[bool] = engine_option("enable_prefix_caching", None),
    limit_mm_per_prompt: Optional[str] = engine_option(
        "limit_mm_per_prompt", None, help="""Items per prompt by modality, JSON ('{"image": 0, "video": 0}' = text-only)."""
    ),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE", help="Write concurrency curves and memory breakdown (PNG/SVG)."),
    curves: bool = typer.Option(False, "--curves", help="Print concurrency curves in the terminal."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also print notes on kvplan's own uncertainty (always in --format json)."
    ),
    perf: bool = typer.Option(
        False, "--perf", help="Also predict serving performance of --workload at the concurrency that fits (see `kvplan perf`)."
    ),
    parallel: Optional[dict] = None,
    addons: Optional[dict] = None,
) -> None:
    """Predict vLLM's KV-cache blocks, tokens and max concurrency for MODEL on a GPU."""
    params = dict(locals())  # first: locals() is the parameters only
    del params["ctx"]
    # `vllm serve` flags estimate has no option for (--port, --no-enable-chunked-prefill ...): read in prepare_estimate
    from kvplan.cli.serve_extras import of_context

    params["serve_tokens"], params["declared"] = of_context(ctx)
    flags = estimate_flags(params)
    from kvplan.cli import fail

    try:
        code = run_estimate(flags)
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)
        return
    raise typer.Exit(code)


def estimate_flags(params: dict) -> EstimateFlags:
    """The EstimateFlags of one `kvplan estimate` call from its parameters as click parsed them
    ({parameter name: value}). The one place parameters become flags: the CLI's callback and the
    web API (kvplan.cli.web.api) both build them here. Parameters are EstimateFlags' fields by
    name; one that is not (a group of flags kept together) is mapped here.

    Raises:
        TypeError: a parameter EstimateFlags does not have, or a field missing from ``params``.
    """
    params = dict(params)
    if "parallel" not in params:  # the web API's parameters: the multi-GPU flags one by one (the CLI's decorator groups them)
        params["parallel"] = parallel_values(**{k: params.pop(k) for k in PARALLEL_FIELDS if k in params})
    if "addons" not in params:  # the web API's parameters: the add-on flags one by one (the CLI's decorator groups them)
        params["addons"] = addon_values(params)
    return EstimateFlags(**params)


@dataclass
class PreparedEstimate:
    """Everything `kvplan estimate` prints, worked out before any output (see prepare_estimate):
    the plan and its source, the --workload/--plot/--curves extras (``extras_fn`` None without
    them) and the --perf result (or the note saying why there is none)."""

    flags: EstimateFlags
    plan: object
    source: object
    extras: dict
    extras_fn: object = None
    perf: object = None
    perf_note: Optional[str] = None

    @property
    def exit_code(self) -> int:
        """0 it starts, 1 it does not (the CLI's exit code)."""
        return EXIT_OK if self.plan.fits else EXIT_FAIL


def run_estimate(f: EstimateFlags) -> int:
    """The body of `kvplan estimate`: check the flags, plan, render. Returns the exit code.

    Raises:
        KvplanError: a bad flag, file or model (exit 2), no matplotlib for --plot (exit 3).
    """
    p = prepare_estimate(f)
    plan, extras, estimate_extras = p.plan, p.extras, p.extras_fn
    from kvplan import render

    revision = f.revision
    if f.fmt == "json":
        print(json.dumps(estimate_document(p), indent=2))
    elif f.fmt in ("yaml", "serve") or f.fmt in STACK_FORMATS:
        text = estimate_text(p)  # built before any output: a plan no manifest can carry fails alone
        print("kvplan: " + render.evidence_line(plan), file=sys.stderr)
        if not plan.exact:
            print(render.approximate_warning(plan), file=sys.stderr)
        ignored = [w for w in plan.warnings if w.startswith(IGNORED_WORDS)]
        if ignored:  # the table and JSON carry it among the warnings
            print("kvplan: " + ignored[0], file=sys.stderr)
        if not plan.fits:
            print(render.no_start_warning(plan), file=sys.stderr)
        sys.stdout.write(text)
        if estimate_extras:
            estimate_extras(plan, fmt=f.fmt, **extras)
    else:
        from rich.console import Console

        # emoji=False: kvplan writes no emoji codes, so a ":name:" in a model path prints as written
        # (and rich's 3 ms emoji table is not loaded)
        console = Console(emoji=False)
        render.print_table(plan, console, revision, verbose=f.verbose)
        if estimate_extras:
            estimate_extras(plan, fmt=f.fmt, console=console, **extras)
        if p.perf is not None:
            from kvplan.render.perf import print_report

            print_report(p.perf, console, title=f"Serving at the concurrency that fits ({p.perf.calibration.label})")
        elif p.perf_note is not None:
            console.print(f"note: {p.perf_note}", soft_wrap=True)
    return p.exit_code


def prepare_estimate(f: EstimateFlags) -> PreparedEstimate:
    """Check the flags, plan, and work out the extras and --perf: everything before any output
    (a refusal raises here, so the command prints one error and nothing else). Writes nothing.

    Raises:
        KvplanError: a bad flag, file or model (exit 2), no matplotlib for --plot (exit 3).
    """
    from kvplan.capacity.estimate import with_version_choice
    from kvplan.capacity.options import plan_from_options
    from kvplan.engines.vllm.versions import resolve

    if f.fmt not in FORMATS:
        raise KvplanError(f"--format: unknown value {f.fmt!r}", hint="use " + ", ".join(FORMATS))
    if f.fmt in STACK_FORMATS and f.gpu_memory is not None:
        raise KvplanError(f"--gpu-memory: cannot be written in a --format {f.fmt} manifest (check would size the "
                          "GPU profile's own memory)", hint="drop --gpu-memory, or add a GPU profile with --gpu-profiles")
    positive_engine_args({
        "tensor_parallel_size": f.tensor_parallel_size,
        "pipeline_parallel_size": f.pipeline_parallel_size,
        "max_num_seqs": f.max_num_seqs,
        "max_num_batched_tokens": f.max_num_batched_tokens,
        "block_size": f.block_size,
    })
    check_fraction("gpu_memory_utilization", f.gpu_memory_utilization)
    if f.perf and f.workload is None:
        raise KvplanError("--perf: needs --workload (the request lengths to serve)", hint="add --workload 'prompt=MEAN[,P95] output=MEAN[,P95]'")
    if f.perf and f.fmt not in ("table", "json"):
        raise KvplanError(f"--perf: not written in --format {f.fmt}", hint="use --format table or json")
    choice = resolve(f.vllm_version)
    extras_of_line = _serve_extras(f, choice.version)
    if extras_of_line.model is not None:
        f = replace(f, model=extras_of_line.model)
    kv_cache_memory_bytes = parse_kv_cache_memory(f.kv_cache_memory)
    max_model_len = parse_max_model_len(f.max_model_len)
    hf_overrides = parse_hf_overrides(f.hf_overrides)
    extras = {"plot": f.plot, "curves": f.curves}
    wl_args = (f.workload, f.shared_prefix_tokens, f.n, f.enable_prefix_caching)
    if f.workload is not None or f.shared_prefix_tokens or f.n != 1 or f.plot is not None or f.curves:
        from kvplan.cli.plan import estimate_extras, prepare_extras, validate_plot, workload_model_from_flags

        validate_plot(f.plot)  # exit 2 (bad path) or 3 (no matplotlib) before any output
        extras["workload"] = workload_model_from_flags(*wl_args)  # bad input fails before any output
    else:
        estimate_extras = None
    plan, source = plan_from_options(
        model=f.model, gpu=f.gpu, gpu_memory=f.gpu_memory, gpu_profiles=f.gpu_profiles, revision=f.revision,
        hf_overrides=hf_overrides,
        tensor_parallel_size=f.tensor_parallel_size, pipeline_parallel_size=f.pipeline_parallel_size,
        max_model_len=max_model_len, gpu_memory_utilization=f.gpu_memory_utilization,
        kv_cache_dtype=f.kv_cache_dtype, block_size=f.block_size, dtype=f.dtype, quantization=f.quantization,
        max_num_seqs=f.max_num_seqs, max_num_batched_tokens=f.max_num_batched_tokens, enforce_eager=f.enforce_eager,
        vllm_version=choice.version, usage=f.usage, enable_prefix_caching=f.enable_prefix_caching,
        kv_cache_memory_bytes=kv_cache_memory_bytes, limit_mm_per_prompt=f.limit_mm_per_prompt,
        **(f.parallel or {}),
        **(f.addons or {}),
        **(extras_of_line.engine or {}),
    )
    plan = with_version_choice(plan, choice)
    if f.serve_tokens:
        from kvplan.cli.serve_extras import apply

        plan = apply(plan, extras_of_line)
    _warn_multi_node(plan)
    if estimate_extras:  # a workload this plan cannot take fails here, before any output
        extras = prepare_extras(plan, **extras)
    perf = perf_note = None
    if f.perf:  # worked out before any output: a refusal prints one error and nothing else
        from kvplan.cli.perf import estimate_perf
        from kvplan.perf import progress

        with progress.on_terminal(progress.wanted(f.fmt)):  # stderr, a terminal only; never in JSON or CI
            perf, perf_note = estimate_perf(plan, extras["prepared"][0], extras["prepared"][1])
    return PreparedEstimate(f, plan, source, extras, estimate_extras, perf, perf_note)


def _serve_extras(f: EstimateFlags, version: str):
    """The `vllm serve` flags of ``f`` estimate has no option for, read against vLLM ``version``'s
    catalogue (kvplan/cli/serve_extras.py). Raises KvplanError for one that is no flag of it."""
    from kvplan.cli.serve_extras import ServeExtras, read

    if not f.serve_tokens and not f.model.startswith("-"):
        return ServeExtras()
    return read(list(f.serve_tokens), f.model, version, set(f.declared))


def estimate_document(p: PreparedEstimate) -> dict:
    """The ``kvplan estimate --format json`` document of a prepared estimate (what the CLI prints
    and the web API returns; schema: kvplan.render.schema.estimate_json_schema). Writes --plot
    when it was given, as the CLI does.

    Raises:
        KvplanError: --plot cannot be written (exit 2).
    """
    from kvplan import render

    doc = render.to_dict(p.plan, p.source.provenance | {"origin": p.source.origin}, p.flags.revision)
    if p.extras_fn:
        p.extras_fn(p.plan, fmt="json", doc=doc, **p.extras)
    if p.perf is not None:
        from kvplan.render.perf import perf_section

        doc["perf"] = perf_section(p.perf)
    elif p.perf_note is not None:  # a model kvplan perf does not model: the estimate stands, perf is null and said why
        doc["perf"] = None
        doc["warnings"] = [*doc["warnings"], p.perf_note]
    return doc


def estimate_text(p: PreparedEstimate) -> str:
    """What ``kvplan estimate --format yaml|serve|<stack>`` writes on stdout (a `vllm serve --config`
    file, the serve line and a newline, or a serving stack's manifest); the stderr lines are the caller's.

    Raises:
        KvplanError: a plan the stack's manifest cannot carry (exit 2).
    """
    from kvplan import render

    if p.flags.fmt in STACK_FORMATS:
        from kvplan.render.manifests import write

        return write(p.flags.fmt, p.plan, p.flags.revision)
    if p.flags.fmt == "yaml":
        return render.config_yaml(p.plan, p.flags.revision)
    from kvplan.render.parallel import launch_lines  # one line per node (the serve line on one node)

    lines = launch_lines(p.plan, render.serve_command(p.plan, p.flags.revision))
    return "".join(ln["command"] + "\n" for ln in lines)


def _warn_multi_node(plan) -> None:
    """Add a warning when --tensor-parallel-size spans more GPUs than one node holds, or else when
    the layout puts more GPUs on one node (TP x PP x PCP x DP-local) than it holds. GPU profiles
    record no node size, so kvplan assumes 8 (kvplan.gpus.GPUS_PER_NODE) and says so; `plan`
    keeps TP within --gpus-per-node instead."""
    from kvplan.gpus import GPUS_PER_NODE

    tp = plan.effective["tensor_parallel_size"]
    if tp > GPUS_PER_NODE:
        plan.warnings.append(
            f"--tensor-parallel-size {tp} spans more than one node (kvplan assumes {GPUS_PER_NODE} GPUs per node; "
            "GPU profiles do not record it): tensor parallelism across nodes all-reduces over the network "
            f"and is slow; prefer --tensor-parallel-size {GPUS_PER_NODE} with --pipeline-parallel-size "
            f"{max(1, tp // GPUS_PER_NODE) * plan.effective['pipeline_parallel_size']} (needs a Ray cluster)"
        )
        return
    w = plan.parallel.world if plan.parallel is not None else None
    if w is None:
        return
    # GPUs one node starts workers on: TP x PP x PCP x the engines on it (--data-parallel-size-local,
    # inferred from --nnodes as vLLM does: capacity/ranks.py _dp_local); one engine over N nodes
    # puts 1/N of its ranks on each
    per_node = w.engine_gpus * w.data_parallel_size_local if w.dp > 1 else -(-w.engine_gpus // w.nnodes)
    if per_node > GPUS_PER_NODE:
        need = -(-w.gpus // GPUS_PER_NODE)
        plan.warnings.append(
            f"{per_node} GPUs on one node (TP {w.tp} x PP {w.pp} x PCP {w.pcp} x {w.data_parallel_size_local} "
            f"data-parallel engine(s) on the node; kvplan assumes {GPUS_PER_NODE} GPUs per node; GPU profiles do "
            f"not record it): give --nnodes {need} (and --node-rank on each node) to spread the {w.gpus} GPUs"
        )
