"""`kvplan plan`: from a model, a context length and a concurrency target to the GPUs to rent.

Registered by kvplan.cli through ``register(app)``. Thin: parse flags -> kvplan.capacity.search (reverse
planner), kvplan.capacity.workload (capacity for real request lengths), kvplan.render.plots (pictures) -> render.
Exit codes: 0 options found, 1 no option meets the target (the closest is named), 2 bad input,
3 matplotlib missing for --plot.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

import typer

from kvplan.cli.options import engine_option, parse_hf_overrides, positive, positive_engine_args
from kvplan.engines.vllm.versions import DEFAULT_HELP, VersionChoice
from kvplan.errors import EXIT_FAIL, EXIT_OK, KvplanError

GiB = 1 << 30


def _csv(value: str, flag: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise KvplanError(f"{flag}: empty list")
    return items


def _ints(value: str, flag: str, most: int | None = None) -> tuple[int, ...]:
    out = []
    for v in _csv(value, flag):
        try:
            n = int(v)
        except ValueError:
            raise KvplanError(f"{flag}: expected whole numbers separated by commas, got {v!r}") from None
        if n < 1 or (most is not None and n > most):
            raise KvplanError(f"{flag}: must be between 1 and {most}, got {n}" if most else f"{flag}: must be >= 1, got {n}")
        out.append(n)
    return tuple(dict.fromkeys(out))


def _engine_arg_max(field: str) -> int | None:
    """The upper bound kvplan's EngineArgs puts on an int field (``le``), None when it has none."""
    from kvplan.capacity.estimate import EngineArgs

    for m in EngineArgs.model_fields[field].metadata:
        if getattr(m, "le", None) is not None:
            return int(m.le)
    return None


def _shown(x: float) -> str:
    """A float as the user would recognise it (1e400 arrives from the option parser as inf)."""
    return repr(x) if math.isfinite(x) else str(x)


def check_numbers(kw: PlanFlags) -> None:
    """Every numeric flag of `plan`: finite and in range, before anything is loaded or searched.

    --concurrency: finite, >= 1; --gpu-memory-utilization: finite, in (0, 1]; --max-gpus,
    --gpus-per-node, --top, --n, --block-size, --max-num-seqs, --max-num-batched-tokens: >= 1;
    --shared-prefix-tokens: >= 0. (--tensor-parallel-size / --pipeline-parallel-size lists,
    --price, --max-model-len and --workload are checked where they are parsed.)

    Raises:
        KvplanError: one line naming the flag (exit 2).
    """
    c = kw.concurrency
    if not (math.isfinite(c) and c >= 1):
        # a target below one request is not a load to plan for (1e-300 made the spare % absurd)
        raise KvplanError(f"--concurrency: must be a finite number >= 1 (concurrent requests), got {_shown(c)}")
    u = kw.gpu_memory_utilization
    if u is not None and not (math.isfinite(u) and 0 < u <= 1):
        raise KvplanError(f"--gpu-memory-utilization: must be a finite fraction in (0, 1], got {_shown(u)}")
    for flag, key in (("--max-gpus", "max_gpus"), ("--gpus-per-node", "gpus_per_node"), ("--top", "top"), ("--n", "n")):
        positive(flag, getattr(kw, key))
    positive_engine_args({
        "block_size": kw.block_size, "max_num_seqs": kw.max_num_seqs, "max_num_batched_tokens": kw.max_num_batched_tokens,
    })
    if kw.shared_prefix_tokens < 0:
        raise KvplanError(f"--shared-prefix-tokens: must be >= 0, got {kw.shared_prefix_tokens}")


def validate_plot(plot: str | None):
    """--plot, checked before anything is printed: a .png/.svg name in an existing, writable
    directory, and matplotlib importable. Writes nothing. For `plan` and (through kvplan.cli)
    `estimate`; see kvplan.render.plots.check_plot_path.

    Returns:
        the Path, or None without --plot.
    Raises:
        KvplanError: bad name/directory (exit 2); EnvironmentMissing: no matplotlib (exit 3).
    """
    if plot is None:
        return None
    from kvplan.render.plots import check_plot_path

    return check_plot_path(plot)


@lru_cache(maxsize=8)
def load_spec(model: str, revision: str | None, hf_overrides: str | None = None, vllm_version: str | None = None):
    """The parsed ModelSpec for (model, revision, --hf-overrides JSON text), its notes naming
    ``vllm_version``, once per process (kvplan.capacity.options.load_spec_with_overrides).

    Raises:
        KvplanError: model not found / config not understood (with the overrides applied).
    """
    from kvplan.capacity.options import load_spec_with_overrides

    return load_spec_with_overrides(model, revision, parse_hf_overrides(hf_overrides), vllm_version=vllm_version)[0]


def _gpus(names: Optional[str], profiles: dict) -> tuple:
    from kvplan.gpus import find_gpu

    if names is None:  # no --gpus: all of them; an explicit '' is an empty list (as ',,' is)
        return tuple(profiles.values())
    out = {}
    for name in _csv(names, "--gpus"):
        try:
            p = find_gpu(name, profiles)
        except KvplanError as e:
            raise KvplanError(e.message.replace("--gpu:", "--gpus:", 1), e.hint) from None
        out[p.id] = p
    return tuple(out.values())


def parse_prices(values: Optional[list[str]], profiles: dict) -> dict[str, float]:
    """``--price GPU=USD`` (repeatable, or comma-separated) -> {profile id: USD per GPU-hour}.

    Raises:
        KvplanError: malformed entry, unknown GPU, negative price, one GPU priced twice
            (under two aliases or the same name; names both) (names --price).
    """
    from kvplan.gpus import find_gpu

    out: dict[str, float] = {}
    given: dict[str, str] = {}  # profile id -> the name it was priced under
    for value in values or []:
        for item in _csv(value, "--price"):
            name, sep, usd = item.partition("=")
            if not sep or not name.strip():
                raise KvplanError(f"--price: expected GPU=USD, got {item!r}", hint="e.g. --price H200=3.50")
            try:
                p = find_gpu(name.strip(), profiles)
            except KvplanError as e:
                raise KvplanError(e.message.replace("--gpu:", "--price:", 1), e.hint) from None
            try:
                price = float(usd)
            except ValueError:
                raise KvplanError(f"--price: {name.strip()}: {usd!r} is not a number of USD per GPU-hour") from None
            if not (math.isfinite(price) and price >= 0):
                raise KvplanError(f"--price: {name.strip()}: must be a finite number >= 0 (USD per GPU-hour), got {usd!r}")
            if p.id in given:
                # two spellings of one GPU (H100 and h100-sxm): which price is meant is unclear
                raise KvplanError(
                    f"--price: {given[p.id]!r} and {name.strip()!r} are the same GPU ({p.id}); give it one price",
                )
            given[p.id] = name.strip()
            out[p.id] = price
    return out


def workload_model_from_flags(workload, shared_prefix_tokens=0, n=1, enable_prefix_caching=None):
    """--workload/--shared-prefix-tokens/--n/--enable-prefix-caching -> WorkloadModel (None without
    --workload). Raises KvplanError naming the flag."""
    if n < 1:
        raise KvplanError(f"--n: must be >= 1, got {n}")
    if shared_prefix_tokens < 0:
        raise KvplanError(f"--shared-prefix-tokens: must be >= 0, got {shared_prefix_tokens}")
    if workload is None:
        if shared_prefix_tokens or n != 1:
            raise KvplanError(
                "--shared-prefix-tokens/--n: need --workload (the request lengths they apply to)",
                hint="add --workload 'prompt=MEAN[,P95] output=MEAN[,P95]'",
            )
        return None
    from kvplan.capacity.workload import WorkloadModel, parse_workload

    return WorkloadModel(
        parse_workload(workload, shared_prefix_tokens),
        shared_prefix_tokens=shared_prefix_tokens,
        n=n,
        enable_prefix_caching=enable_prefix_caching,
    )


def run_plan(kw: PlanFlags) -> int:
    """The body of `kvplan plan` (see register)."""
    from kvplan.capacity.options import build_engine_args
    from kvplan.cli.options import parse_max_model_len
    from kvplan.capacity.estimate import QUANTIZATIONS, VLLM_ONLY_KV_CACHE_DTYPES
    from kvplan.capacity.search import SearchSpace, Target, search
    from kvplan.engines.vllm import versions
    from kvplan.gpus import load_profiles

    KV_CACHE_DTYPES = versions.default().kv_spec.KV_CACHE_DTYPES
    fmt = kw.fmt
    from kvplan.render.served import FORMATS as STACK_FORMATS

    if fmt not in ("table", "json", *STACK_FORMATS):
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use table, json or " + ", ".join(STACK_FORMATS))
    choice = versions.resolve(kw.vllm_version)  # an unknown --vllm-version is refused here (exit 2)
    kw = replace(kw, vllm_version=choice.version, version_choice=choice)
    # Flags first (cheap, one line each), then files, then the model, then the sweep: nothing is
    # printed or written until every input has been read.
    check_numbers(kw)
    slo = None
    if kw.slo is not None:
        from kvplan.perf.slo import parse_slo

        slo = parse_slo(kw.slo)
        if kw.workload is None:
            raise KvplanError("--slo: needs --workload (the request lengths the targets are for)",
                              hint="add --workload 'prompt=MEAN[,P95] output=MEAN[,P95]'")
        if kw.n != 1:
            raise KvplanError("--slo: --n > 1 (parallel sampling / beams) is not emulated", hint="drop --n or --slo")
    validate_plot(kw.plot)
    kv_dtypes = tuple(dict.fromkeys(_csv(kw.kv_cache_dtype, "--kv-cache-dtype")))
    for kv in kv_dtypes:
        if kv in VLLM_ONLY_KV_CACHE_DTYPES:
            build_engine_args(kv_cache_dtype=kv)  # raises estimate's message: vLLM takes it, kvplan cannot size it
        if kv not in KV_CACHE_DTYPES:
            raise KvplanError(f"--kv-cache-dtype: unknown value {kv!r}", hint="use " + ", ".join(KV_CACHE_DTYPES))
    quants: list[str | None] = []
    for q in _csv(kw.quantization, "--quantization"):
        if q.lower() == "none":
            quants.append(None)
        elif q.lower() in QUANTIZATIONS:
            quants.append(q.lower())
        else:
            raise KvplanError(f"--quantization: unknown value {q!r}", hint="use none or " + ", ".join(QUANTIZATIONS))
    tps = _ints(kw.tensor_parallel_size, "--tensor-parallel-size", _engine_arg_max("tensor_parallel_size"))
    pps = _ints(kw.pipeline_parallel_size, "--pipeline-parallel-size", _engine_arg_max("pipeline_parallel_size"))
    mml = parse_max_model_len(kw.max_model_len)
    if mml == -1:
        raise KvplanError("--max-model-len: `plan` needs a number of tokens (auto is for `estimate`)")

    base_fields = {
        "gpu_memory_utilization": kw.gpu_memory_utilization,
        "block_size": kw.block_size,
        "dtype": kw.dtype,
        "max_num_seqs": kw.max_num_seqs,
        "max_num_batched_tokens": kw.max_num_batched_tokens,
        "enforce_eager": kw.enforce_eager or None,
        "enable_prefix_caching": kw.enable_prefix_caching,
        "usage": kw.usage,
        "vllm_version": kw.vllm_version,
        **(kw.addons or {}),
    }
    build_engine_args(**base_fields)  # one-line errors naming the flag
    base = {k: v for k, v in base_fields.items() if v is not None}

    profiles = load_profiles(kw.gpu_profiles)
    gpus = _gpus(kw.gpus, profiles)
    prices = parse_prices(kw.price, profiles)
    wl = workload_model_from_flags(kw.workload, kw.shared_prefix_tokens, kw.n, kw.enable_prefix_caching)

    parse_hf_overrides(kw.hf_overrides)  # a bad value fails with the other flags' errors
    spec = load_spec(kw.model, kw.revision, kw.hf_overrides, kw.vllm_version)
    if kw.addons and any(k in kw.addons for k in ("speculative_config", "spec_method", "spec_model")):
        # --speculative-config's draft, read like any model (sources/draft.py), rides on the spec
        from kvplan.capacity.options import load_spec_with_overrides
        from kvplan.sources.draft import attach_draft

        config = load_spec_with_overrides(kw.model, kw.revision, parse_hf_overrides(kw.hf_overrides),
                                          vllm_version=kw.vllm_version)[1].config
        spec = attach_draft(spec, build_engine_args(**base_fields), config, kw.vllm_version)
    if mml is None:
        mml = spec.derived_max_model_len
    target = Target(max_model_len=mml, concurrency=float(kw.concurrency))
    space = SearchSpace(
        gpus=gpus,
        tensor_parallel_sizes=tps,
        pipeline_parallel_sizes=pps,
        kv_cache_dtypes=kv_dtypes,
        quantizations=tuple(quants),
        max_gpus=kw.max_gpus,
        gpus_per_node=kw.gpus_per_node,
        expert_parallel=(False, True) if kw.enable_expert_parallel is None else (kw.enable_expert_parallel,),
        decode_context_parallel=_dcp_choice(kw.decode_context_parallel_size),
        latency_layouts=slo is not None,  # more GPUs buy latency: larger DP layouts are candidates too
    )
    import os

    result = search(spec, target, space, base, prices=prices, workload=wl, env=dict(os.environ))
    choice = kw.version_choice
    if choice is not None and choice.wanted is not None:  # each option's evidence says which release it stands for
        def marked(o):
            return replace(o, plan=replace(o.plan, evidence=choice.apply_to(o.plan.evidence))) if o is not None else None

        result.options, result.dominated = [marked(o) for o in result.options], [marked(o) for o in result.dominated]
        result.closest = marked(result.closest)
    if result.refusal:
        # Every combination was refused before an engine was sized, for the flags' own values
        # (TP not dividing the heads, a quantization the checkpoint lacks, ...): bad input, as
        # `estimate` says for the same flag - not "nothing meets the target".
        raise KvplanError(
            result.refusal,
            hint=result.refusal_hint or "every combination was refused before sizing an engine; change the flag(s) named",
        )

    perf = None
    if slo is not None:
        from kvplan.perf import progress

        with progress.on_terminal(progress.wanted(fmt)):  # stderr, a terminal only; never in JSON or CI
            result, perf = _screen_slo(result, wl, slo, kw.concurrency)
    focus = result.options[0] if result.options else result.closest
    capacity = None
    if wl is not None and focus is not None:
        capacity = wl.capacity_with_fixes(focus.plan)
    pics = None
    if focus is not None and (kw.plot is not None or kw.curves):
        from kvplan.render.plots import pictures, save_plot

        pics = pictures(focus.plan, wl)
        if kw.plot is not None:
            save_plot(pics, kw.plot)

    from kvplan.render.plan import print_result, to_dict

    if fmt in STACK_FORMATS:
        return _write_manifest(result, fmt, kw)
    if fmt == "json":
        print(json.dumps(to_dict(result, kw, capacity, wl, perf=perf), indent=2))
    else:
        from rich.console import Console

        console = Console()
        print_result(result, console, kw, capacity, wl, perf=perf)
        if pics is not None and kw.curves:
            from kvplan.render.plots import print_pictures

            print_pictures(pics, console)
        if kw.plot is not None and pics is not None:
            console.print(f"plot written to {kw.plot}", soft_wrap=True)
    return EXIT_OK if result.options else EXIT_FAIL


def _write_manifest(result, fmt: str, kw) -> int:
    """`plan --format k8s|lws|kserve|llm-d|compose`: the manifest of the cheapest option's
    engine with its data-parallel size as the stack's replicas (compose: one), except a
    data-parallel size the serve line carries itself (`--data-parallel-size`: all its GPUs in
    one pod or group, render/served.py); exit 1 with
    nothing on stdout when no option meets the target."""
    import sys

    from kvplan.render.manifests import write

    if not result.options:
        print("kvplan: no option meets the target; nothing written (`kvplan plan` without --format says why)",
              file=sys.stderr)
        return EXIT_FAIL
    best = result.options[0]
    # a --data-parallel-size in the engine's own serve line (a MoE layout: one engine over its DP
    # ranks) is GPUs of one pod/group, never replicas; the rest of the option's DP are copies
    in_line = best.plan.args.data_parallel_size or 1
    dp = max(best.data_parallel_size // in_line, 1)
    text = write(fmt, best.plan, kw.revision, replicas=dp)
    where = "one replica (compose runs one; scale it with `docker compose up --scale`)" if fmt == "compose" and dp > 1 else \
        f"{dp} replica(s)"
    what = f"{dp} replica(s) of this engine" if in_line == 1 else \
        f"{dp} replica(s) of one --data-parallel-size {in_line} deployment ({best.num_gpus // dp} GPUs)"
    print(f"kvplan: the cheapest option: {what} on {best.plan.gpu.id}; the manifest has {where}", file=sys.stderr)
    sys.stdout.write(text)
    return EXIT_OK


def _screen_slo(result, wl, slo, concurrency: float):
    """`plan --slo`: serve the workload on every option (kvplan/perf/tune.py screen_options), keep
    those meeting the SLO, ranked by cost per served request (kvplan/capacity/search.py
    served_rank_key: $/hour over the predicted requests/hour; dominated options are screened too,
    since a larger engine can be the cheapest per request). Returns (result with only those options, perf)
    where perf = {"slo": SLO, "by_option": {id(option): OptionPerf}, "missed": options dropped}."""
    from dataclasses import replace

    from kvplan.capacity.search import rank_key, served_rank_key
    from kvplan.perf.tune import screen_options
    from kvplan.perf.workload import Lengths, SharedPrefix

    prefix = SharedPrefix(1.0, wl.shared_prefix_tokens) if wl.shared_prefix_tokens else None
    # a dominated option (more GPU than the concurrency needs) may be the cheapest that is fast enough
    candidates = sorted(result.options + result.dominated, key=rank_key)
    by_option = _screen_families(candidates, lambda batch: screen_options(
        batch, Lengths.from_workload(wl.workload), slo, concurrency, shared_prefix=prefix))
    candidates = [o for o in candidates if id(o) in by_option]
    meeting = sorted((o for o in candidates if by_option[id(o)].meets),
                     key=lambda o: served_rank_key(o, _throughput(by_option[id(o)])))
    missed = [o for o in candidates if not by_option[id(o)].meets]
    closest = result.closest if meeting else (missed[0] if missed else result.closest)
    note = result.closest_note
    if not meeting and missed:
        refused = [by_option[id(o)].refused for o in missed if by_option[id(o)].summary is None]
        if len(refused) == len(missed):  # nothing ran: say so, not that the SLO was missed
            note = (f"{len(missed)} option(s) hold the concurrency, but none could be evaluated against --slo "
                    f"{slo.text} ({refused[0]}); the cheapest is shown, unchecked")
        else:
            note = f"{len(missed)} option(s) hold the concurrency, none meets --slo {slo.text}; the cheapest is shown"
    return replace(result, options=meeting, dominated=[], closest=closest, closest_note=note), {"slo": slo, "by_option": by_option, "missed": missed}


def _layout_family(o) -> tuple:
    """Options that differ only in their data-parallel size (replicas, or a MoE model's DP engines
    of one TP x PP shape with the same --enable-expert-parallel): one family."""
    a = o.plan.args
    return (o.gpu.id, o.kv_cache_dtype, o.quantization, o.tensor_parallel_size, o.pipeline_parallel_size,
            bool(a.enable_expert_parallel), a.decode_context_parallel_size or 1)


def _screen_families(candidates, screen) -> dict:
    """Run ``screen`` (a list of options -> one OptionPerf each) on the fewest-GPU option of every
    layout family first, then on the next larger data-parallel size only of the families whose
    last option missed the SLO; a family's larger sizes after one that meets it are not run.
    They could not rank before it: at the same --concurrency, d engines cost d x as much and
    serve d x one engine's closed-loop throughput at c/d in flight, which is no more than at c
    (the option holds the concurrency: no preemption), so the cost per served request does not
    fall with d. This keeps `plan --slo`'s added latency layouts (search_layouts.latency_dp_sizes)
    from costing perf runs where the fewest GPUs already meet the SLO.
    Returns {id(option): OptionPerf} for the options run."""
    families: dict[tuple, list] = {}
    for o in candidates:
        families.setdefault(_layout_family(o), []).append(o)
    queues = [sorted(f, key=lambda o: o.num_gpus) for f in families.values()]
    by_option: dict = {}
    pending = [q.pop(0) for q in queues]
    rest = {id(p): q for p, q in zip(pending, queues)}
    while pending:
        nxt = []
        for o, p in zip(pending, screen(pending)):
            by_option[id(o)] = p
            q = rest.pop(id(o))
            if not p.meets and q:
                n = q.pop(0)
                rest[id(n)] = q
                nxt.append(n)
        pending = nxt
    return by_option


def _throughput(p) -> float | None:
    """requests/s of one engine in an option's `plan --slo` run (None when it was not predicted)."""
    return p.summary.request_throughput if p is not None and p.summary is not None else None


def prepare_extras(plan, *, workload=None, shared_prefix_tokens: int = 0, n: int = 1,
                   enable_prefix_caching: bool | None = None, plot: str | None = None, curves: bool = False) -> dict:
    """Everything estimate_extras needs from the plan, worked out before anything is printed:
    a workload that does not fit this plan (every request over --max-model-len, a shared
    prefix longer than a prompt) raises here, so the command prints one error and nothing on
    stdout. Returns the keyword arguments for estimate_extras.

    Raises:
        KvplanError: bad --workload/--plot for this plan (exit 2); EnvironmentMissing (3).
    """
    from kvplan.capacity.workload import WorkloadModel

    validate_plot(plot)
    wl = workload if isinstance(workload, WorkloadModel) else workload_model_from_flags(
        workload, shared_prefix_tokens, n, enable_prefix_caching
    )
    cap = wl.capacity_with_fixes(plan) if (wl is not None and plan.fits) else None
    pics = None
    if plot is not None or curves:
        from kvplan.render.plots import pictures

        pics = pictures(plan, wl)
    return {"prepared": (wl, cap, pics), "plot": plot, "curves": curves}


def estimate_extras(plan, *, fmt: str, doc: dict | None = None, console=None, workload=None,
                    shared_prefix_tokens: int = 0, n: int = 1, enable_prefix_caching: bool | None = None,
                    plot: str | None = None, curves: bool = False, prepared=None) -> None:
    """The workload report and pictures for one `estimate` plan (for kvplan.cli, which owns
    `estimate`): adds doc["workload"] for --format json, prints the report/curves for table,
    writes --plot. Call after the plan is rendered; does nothing without those flags.
    ``prepared``: what prepare_extras worked out before any output (give it, so that a bad
    --workload fails before anything is printed); without it, it is worked out here.

    Raises:
        KvplanError: bad --workload/--plot (exit 2); EnvironmentMissing without matplotlib (3).
    """
    if prepared is None:
        prepared = prepare_extras(plan, workload=workload, shared_prefix_tokens=shared_prefix_tokens, n=n,
                                  enable_prefix_caching=enable_prefix_caching, plot=plot, curves=curves)["prepared"]
    wl, cap, pics = prepared
    if doc is not None:
        if cap is not None:
            from kvplan.capacity.workload import workload_summary

            # the counted requests' lengths, and how many were left out and why
            doc["workload"] = cap.to_dict() | {"summary": workload_summary(wl.workload, cap.max_model_len)}
        else:
            doc["workload"] = None
        if curves and pics is not None:  # --curves --format json: the pictures' numbers
            from kvplan.render.plots import pictures_dict

            doc["curves"] = pictures_dict(pics)
    if console is not None and fmt == "table" and cap is not None:
        from kvplan.render.plan import print_capacity

        print_capacity(cap, wl, console)
    if pics is not None:
        from kvplan.render.plots import print_pictures, save_plot

        if plot is not None:
            save_plot(pics, plot)
        if curves and console is not None and fmt == "table":
            print_pictures(pics, console)


@dataclass(frozen=True)
class PlanFlags:
    """The flags of one ``kvplan plan`` call as typer parsed them (lists still comma-separated
    text; ``show_all`` is --all)."""

    model: str
    max_model_len: Optional[str]
    concurrency: float
    gpus: Optional[str]
    max_gpus: int
    gpus_per_node: int
    tensor_parallel_size: str
    pipeline_parallel_size: str
    kv_cache_dtype: str
    quantization: str
    price: Optional[list[str]]
    gpu_profiles: Optional[list[str]]
    gpu_memory_utilization: Optional[float]
    block_size: Optional[int]
    dtype: str
    max_num_seqs: Optional[int]
    max_num_batched_tokens: Optional[int]
    enforce_eager: bool
    enable_prefix_caching: Optional[bool]
    workload: Optional[str]
    shared_prefix_tokens: int
    n: int
    top: int
    show_all: bool
    explain: bool
    curves: bool
    plot: Optional[str]
    revision: Optional[str]
    vllm_version: Optional[str]
    usage: str
    fmt: str
    hf_overrides: Optional[str] = None
    version_choice: Optional[VersionChoice] = None  # set by run_plan: which version and why
    addons: Optional[dict] = None  # the add-on flags given (cli/options.py ADDON_FIELDS), the same for every option
    slo: Optional[str] = None
    enable_expert_parallel: Optional[bool] = None  # None = try a MoE model's DP layouts with and without EP
    decode_context_parallel_size: str = "auto"  # auto = also try DCP over the TP ranks; 1 = never


def _dcp_choice(value: str) -> bool:
    """--decode-context-parallel-size for plan: "auto" (try DCP layouts) or 1 (never).

    Raises:
        KvplanError: anything else (names the flag)."""
    if value == "auto":
        return True
    if value.strip() == "1":
        return False
    raise KvplanError(f"--decode-context-parallel-size: plan takes auto or 1, got {value!r}",
                      hint="auto tries the largest size vLLM accepts on each TP; estimate takes any size")


def register(app: typer.Typer) -> None:
    """Add the `plan` command to kvplan's typer app."""
    from kvplan.cli.options import with_addon_options

    app.command("plan")(with_addon_options(plan_cmd))


def plan_cmd(
    model: str = typer.Argument(..., help="Hub repo id, local directory with config.json, or bundled spec id."),
    max_model_len: Optional[str] = engine_option("max_model_len", None, help="Tokens per request (default: the model's limit)."),
    concurrency: float = typer.Option(1.0, "--concurrency", help="Concurrent requests to serve."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="GPU profiles to consider, comma-separated (default: all)."),
    max_gpus: int = typer.Option(8, "--max-gpus", help="Most GPUs in one option (TP x PP x DP)."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", help="GPUs per node; TP stays within a node."),
    tensor_parallel_size: str = engine_option("tensor_parallel_size", "1,2,4,8", help="TP sizes to try."),
    pipeline_parallel_size: str = engine_option("pipeline_parallel_size", "1,2,4", help="PP sizes to try."),
    kv_cache_dtype: str = engine_option("kv_cache_dtype", "auto,fp8", help="KV-cache dtypes to try."),
    quantization: str = engine_option("quantization", "none,fp8", help="Weight quantizations to try (none = the checkpoint)."),
    price: Optional[list[str]] = typer.Option(None, "--price", help="GPU=USD per GPU-hour (repeatable)."),
    gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", help="Extra GPU profile YAML file(s)."),
    gpu_memory_utilization: Optional[float] = engine_option("gpu_memory_utilization", None),
    block_size: Optional[int] = engine_option("block_size", None),
    dtype: str = engine_option("dtype", "auto"),
    max_num_seqs: Optional[int] = engine_option("max_num_seqs", None),
    max_num_batched_tokens: Optional[int] = engine_option("max_num_batched_tokens", None),
    enforce_eager: bool = engine_option("enforce_eager", False),
    enable_prefix_caching: Optional[bool] = engine_option(
        "enable_prefix_caching", None, help="Default: vLLM's (on; for hybrid models as the chosen version decides (docs/versions.md row 9))."
    ),
    workload: Optional[str] = typer.Option(None, "--workload", help="'prompt=MEAN[,P95] output=MEAN[,P95]' or a CSV/JSONL of prompt_tokens,output_tokens."),
    shared_prefix_tokens: int = typer.Option(0, "--shared-prefix-tokens", help="Tokens every prompt starts with (a system prompt)."),
    n: int = typer.Option(1, "--n", "--beam-width", metavar="N", help="Sequences per request (parallel sampling n / beam width)."),
    top: int = typer.Option(10, "--top", help="Options to show."),
    show_all: bool = typer.Option(False, "--all", help="Also show dominated options (marked *)."),
    explain: bool = typer.Option(False, "--explain", help="List skipped combinations and why."),
    curves: bool = typer.Option(False, "--curves", help="Show concurrency curves and the memory breakdown of the first option."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the curves and memory breakdown to a .png or .svg file."),
    revision: Optional[str] = typer.Option(None, "--revision", help="The model revision on the Hub (a branch, tag or commit)."),
    hf_overrides: Optional[str] = typer.Option(
        None, "--hf-overrides", metavar="JSON", help="JSON object applied to the model's config.json as vLLM applies it."
    ),
    vllm_version: Optional[str] = engine_option("vllm_version", None, help="vLLM version whose rules to use. " + DEFAULT_HELP),
    usage: str = typer.Option("serve", "--usage", help="serve (vllm serve defaults) or llm (offline LLM class defaults)."),
    fmt: str = typer.Option("table", "--format", help="table, json, or the cheapest option's manifest: k8s, lws, kserve, llm-d, compose."),
    enable_expert_parallel: Optional[bool] = typer.Option(
        None, "--enable-expert-parallel/--no-enable-expert-parallel", "-ep",
        help="A MoE model's data-parallel layouts: only with expert parallel / only without (default: both).",
    ),
    decode_context_parallel_size: str = typer.Option(
        "auto", "--decode-context-parallel-size", "-dcp", metavar="auto|1",
        help="auto: also try decode context parallel over the TP ranks where the attention allows it; 1: never.",
    ),
    slo: Optional[str] = typer.Option(
        None, "--slo", metavar="KEY=TIME,...", help="Latency targets (ttft_p99=2s,tpot_p50=50ms): keep the options that meet them (needs --workload)."
    ),
    addons: Optional[dict] = None,
) -> None:
    """Find the cheapest GPUs that serve CONCURRENCY requests of MAX_MODEL_LEN tokens."""
    from kvplan.cli import fail

    flags = PlanFlags(
        model=model, max_model_len=max_model_len, concurrency=concurrency, gpus=gpus, max_gpus=max_gpus,
        gpus_per_node=gpus_per_node, tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size, kv_cache_dtype=kv_cache_dtype,
        quantization=quantization, price=price, gpu_profiles=gpu_profiles,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size, dtype=dtype,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, enforce_eager=enforce_eager,
        enable_prefix_caching=enable_prefix_caching, workload=workload,
        shared_prefix_tokens=shared_prefix_tokens, n=n, top=top, show_all=show_all, explain=explain,
        curves=curves, plot=plot, revision=revision, vllm_version=vllm_version, usage=usage, fmt=fmt,
        hf_overrides=hf_overrides,
        slo=slo, enable_expert_parallel=enable_expert_parallel,
        decode_context_parallel_size=decode_context_parallel_size,
        addons=addons,
    )
    try:
        code = run_plan(flags)
    except KvplanError as e:
        fail(e.message, e.hint, e.exit_code)
        return
    raise typer.Exit(code)
