"""Plan -> JSON contract, vLLM --config YAML, `vllm serve` line, and the rich terminal view.

The JSON shape is a stable contract (bytes as ints, per GPU of the stage with the fewest blocks):
{"kvplan_version", "model", "gpu", "engine", "memory", "kv_cache", "binding_limit",
 "recommendations", "serve_command", "warnings", "fits", "failure", "largest_max_model_len",
 "stages"}.
GiB appear only here and in messages.
"""

from __future__ import annotations

import math

from kvplan import __version__
from kvplan.engines.vllm import flags
from kvplan.planner import Plan
from kvplan.recommend import recommendations

GiB = 1 << 30


def hanging(head, body):
    """``head`` then ``body``, the body wrapped to the console width with continuation lines
    starting under its first character (hanging indent), never at column 0: on a terminal of any
    width and in a pipe (rich's 80 columns). No trailing padding. Strings are plain text.

    Returns:
        a rich renderable for Console.print.
    """
    from rich.text import Text

    head = head if isinstance(head, Text) else Text(head)
    body = body if isinstance(body, Text) else Text(body)
    return _Hanging(head, body)


class _Hanging:
    def __init__(self, head, body) -> None:
        self.head, self.body = head, body

    def __rich_console__(self, console, options):
        from rich.text import Text

        indent = self.head.cell_len
        width = max(options.max_width - indent, 20)
        lines = self.body.wrap(console, width, overflow="fold") or [Text("")]
        for i, line in enumerate(lines):
            line.rstrip()
            yield (self.head.copy() if i == 0 else Text(" " * indent)) + line


def _gib(n: int | float) -> str:
    return f"{n / GiB:.2f} GiB"


def explicit_args(plan: Plan) -> dict:
    """The engine arguments the user set (kvplan's EngineArgs minus None/defaults)."""
    a = plan.args
    out = {}
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "block_size",
        "dtype",
        "quantization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enforce_eager",
        "kv_cache_memory_bytes",
        "enable_prefix_caching",
    ):
        v = getattr(a, key)
        if v is not None:
            out[key] = v
    if a.usage == "llm":
        # The offline LLM class's batch defaults differ from `vllm serve`'s: pin what was sized.
        out.setdefault("max_num_batched_tokens", plan.effective["max_num_batched_tokens"])
        out.setdefault("max_num_seqs", plan.effective["max_num_seqs"])
    return out


def _served_model(name: str) -> str:
    """What `vllm serve` takes: the directory when kvplan was given a path to a config.json."""
    if name.endswith("config.json") and ("/" in name or "\\" in name or name == "config.json"):
        import os.path

        return os.path.dirname(name) or "."
    return name


def serve_settings(plan: Plan, revision: str | None = None) -> list[dict]:
    """What the serve line carries, in order: ``{"flag", "value", "origin", "tokens"}`` per flag.

    ``origin`` is "user" (a flag the user set to something other than vLLM's default),
    "recommended" (a fix or pin from kvplan.recommend, which replaces the user's value of the same
    flag) or "pinned" (the offline LLM class's batch sizes kvplan sized). ``--max-model-len`` is
    written only when it is not the model's own default (vLLM's default when the flag is absent).
    """
    values = explicit_args(plan)
    origin = {k: "user" for k in values}
    if plan.args.usage == "llm":
        for k in ("max_num_batched_tokens", "max_num_seqs"):
            if getattr(plan.args, k) is None:
                origin[k] = "pinned"
    a_mml = plan.args.max_model_len
    if a_mml is not None and a_mml != plan.spec.derived_max_model_len:
        values["max_model_len"] = "auto" if a_mml == -1 else a_mml
        origin["max_model_len"] = "user"
    if revision:
        values["revision"] = revision
        origin["revision"] = "user"
    field_of = {flag: f for f, (flag, _) in flags.SERVE_FLAGS_0_26.items()}
    for r in recommendations(plan):
        f = field_of.get(r.flag)
        if f is not None and r.in_serve_line:
            values[f] = r.value
            origin[f] = "recommended"
    return [
        {"flag": toks[0], "value": toks[1] if len(toks) > 1 else True, "origin": origin[f], "tokens": toks, "field": f}
        for f, toks in flags.serve_tokens(values)
    ]


def serve_command(plan: Plan, revision: str | None = None) -> str:
    """The copy-pasteable ``vllm serve`` line: the user's flags plus kvplan's fixes (serve_settings)."""
    import shlex

    toks = [t for s in serve_settings(plan, revision) for t in s["tokens"]]
    return shlex.join(["vllm", "serve", _served_model(plan.spec.name), *toks])


def to_dict(plan: Plan, source_provenance: dict | None = None, revision: str | None = None) -> dict:
    """The --format json document (see module docstring)."""
    worst = plan.worst_stage
    b = worst.budget
    spec = plan.spec
    groups = []
    for g in worst.layout.groups:
        groups.append(
            {
                "kind": g.kind,
                "num_layers": g.num_layers,
                "padding_layers": g.padding_layers,
                "block_size": g.block_size,
                "page_size_bytes": g.page_size_bytes,
                "sliding_window": g.sliding_window,
                "attention_chunk_size": g.chunk_size,
                "blocks_per_max_len_request": g.blocks_per_request(
                    max(plan.effective["max_model_len"], 1), plan.max_in_flight_tokens
                ),
            }
        )
    recs = {
        r.flag: {"value": r.value, "reason": r.reason, "kind": r.kind} for r in recommendations(plan)
    }
    return {
        "kvplan_version": __version__,
        "model": {
            "name": spec.name,
            "architecture": spec.architecture,
            "model_type": spec.model_type,
            "num_hidden_layers": spec.num_hidden_layers,
            "num_attention_heads": spec.attention.num_attention_heads,
            "num_key_value_heads": spec.attention.num_key_value_heads,
            "head_dim": spec.attention.head_dim,
            "layer_kinds": {k.value: spec.count(k) for k in dict.fromkeys(spec.layer_kinds)},
            "sliding_window": spec.sliding_window,
            "mla": spec.mla.model_dump() if spec.mla else None,
            "moe": spec.moe.model_dump() if spec.moe else None,
            "checkpoint_dtype": spec.dtype,
            "quantization": spec.quantization.model_dump() if spec.quantization else None,
            "derived_max_model_len": spec.derived_max_model_len,
            "source": source_provenance or {},
        },
        "gpu": {
            "name": plan.gpu.id,
            "display_name": plan.gpu.display_name,
            "memory_bytes": plan.gpu.memory_bytes,
            "memory_quality": plan.gpu.memory_quality,
            "memory_source": plan.gpu.memory_source,
            "count": plan.effective["tensor_parallel_size"] * plan.effective["pipeline_parallel_size"],
        },
        "engine": dict(plan.effective),
        "memory": {
            "total_bytes": b.total_bytes,
            "requested_bytes": b.requested_bytes,
            "weights_bytes": b.weights_bytes,
            "activation_peak_bytes": b.activation_peak_bytes,
            "non_torch_bytes": b.non_torch_bytes,
            "cudagraph_bytes": b.cudagraph_bytes,
            "cudagraph_subtracted_bytes": b.cudagraph_applied_bytes,
            "kv_cache_bytes": b.kv_cache_bytes,
            "kv_cache_memory_override": b.kv_cache_memory_override,
            "suggested_kv_cache_memory_bytes": b.suggested_kv_cache_memory_bytes,
            "weights_breakdown": dict(worst.weights_breakdown),
        },
        "kv_cache": {
            "num_gpu_blocks": plan.num_gpu_blocks,
            "block_size": plan.block_size,
            "page_size_bytes": plan.page_size_bytes,
            "bytes_per_token": plan.bytes_per_token,
            "bytes_per_block": worst.layout.bytes_per_block,
            "gpu_kv_cache_tokens": plan.gpu_kv_cache_tokens,
            "max_concurrency": round(plan.max_concurrency, 2),
            "max_model_len": plan.effective["max_model_len"],
            "padding_layers": worst.layout.padding_layers,
            "groups": groups,
        },
        "binding_limit": plan.binding_limit,
        "fits": plan.fits,
        "outcome": plan.outcome.value,
        "failure": plan.failure,
        "largest_max_model_len": plan.largest_max_model_len,
        "recommendations": recs,
        "serve_command": serve_command(plan, revision),
        "serve_flags": [
            {"flag": st["flag"], "value": st["value"], "origin": st["origin"]} for st in serve_settings(plan, revision)
        ],
        "warnings": list(plan.warnings),
        "notes": list(plan.notes),
        "stages": [
            {
                "pipeline_rank": s.pipeline_rank,
                "layers": [s.layers.start, s.layers.stop],
                "num_gpu_blocks": s.num_blocks,
                "weights_bytes": s.budget.weights_bytes,
                "activation_peak_bytes": s.budget.activation_peak_bytes,
                "kv_cache_bytes": s.budget.kv_cache_bytes,
            }
            for s in plan.stages
        ],
    }


def config_yaml(plan: Plan, revision: str | None = None) -> str:
    """A vLLM ``--config`` file for this plan."""
    import yaml

    args = {}
    for st in serve_settings(plan, revision):
        if st["flag"].startswith("--no-"):
            args[st["field"]] = False
        else:
            args[st["field"]] = True if st["value"] is True else _typed(st["value"])
    return yaml.safe_dump(flags.config_yaml_dict(_served_model(plan.spec.name), args, None), sort_keys=False)


def _typed(raw: str):
    """A serve-line value back as int / float / text (for the --config YAML)."""
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    return raw


def print_table(plan: Plan, console, revision: str | None = None, verbose: bool = False) -> None:
    """The human view: memory bar, KV figures, binding limit, recommendations, serve line.
    ``verbose`` adds the plan's notes (kvplan's own uncertainty, which the user cannot act on)."""
    from rich.table import Table
    from rich.text import Text

    doc = to_dict(plan, revision=revision)
    b = plan.worst_stage.budget
    eff = plan.effective
    n_gpus = eff["tensor_parallel_size"] * eff["pipeline_parallel_size"]
    title = (
        f"{plan.spec.name} on {n_gpus}x {plan.gpu.display_name} "
        f"(TP={eff['tensor_parallel_size']}, PP={eff['pipeline_parallel_size']}) - vLLM {eff['vllm_version']}"
    )
    console.print(Text(title, style="bold"), soft_wrap=True)

    # Memory bar, per GPU.
    width = 60
    total = b.total_bytes
    parts = [
        ("weights", b.weights_bytes, "blue"),
        ("activation", b.activation_peak_bytes, "magenta"),
        ("non-torch", b.non_torch_bytes, "yellow"),
        ("cuda graphs", b.cudagraph_applied_bytes, "cyan"),
        ("KV cache", max(b.kv_cache_bytes, 0), "green"),
    ]
    bar = Text()
    used = 0
    # Scale by whichever is larger, the GPU or what the terms add up to (an over-large
    # --kv-cache-memory-bytes can exceed the GPU): the bar never grows past `width` cells.
    scale = max(total, sum(max(n, 0) for _, n, _ in parts), 1)
    for _, n, style in parts:
        cells = min(width - used, int(round(width * max(n, 0) / scale)))
        used += cells
        bar.append("█" * cells, style=style)
    bar.append("░" * max(0, width - used), style="dim")
    console.print(bar)

    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("per GPU")
    t.add_column("bytes", justify="right")
    t.add_column("GiB", justify="right")
    rows = [
        ("total (CUDA-visible)", b.total_bytes),
        (f"requested = total x {eff['gpu_memory_utilization']}", b.requested_bytes),
        ("- weights", b.weights_bytes),
        ("- peak activation", b.activation_peak_bytes),
        ("- non-torch", b.non_torch_bytes),
        ("- CUDA graphs (subtracted)", b.cudagraph_applied_bytes),
        ("= KV cache", b.kv_cache_bytes),
    ]
    if b.cudagraph_bytes and not b.cudagraph_applied_bytes:
        rows.append(("CUDA graphs (added later)", b.cudagraph_bytes))
    for name, n in rows:
        gib_cell = f"{n / GiB:.2f}" if n >= 0 else f"{n / GiB:.2f} (none left)"
        t.add_row(name, f"{n:,}", gib_cell)
    console.print(t)

    kv = doc["kv_cache"]
    k = Table(show_header=False, box=None, pad_edge=False)
    k.add_column()
    k.add_column(justify="right")
    k.add_row("KV bytes per token (all layers)", f"{kv['bytes_per_token']:,}")
    k.add_row("KV bytes per block (all layers)", f"{kv['bytes_per_block']:,}")
    k.add_row("block_size (tokens)", str(kv["block_size"]))
    k.add_row("num_gpu_blocks", f"{kv['num_gpu_blocks']:,}")
    k.add_row("GPU KV cache size (tokens)", f"{kv['gpu_kv_cache_tokens']:,}")
    k.add_row(f"Maximum concurrency for {eff['max_model_len']:,} tokens per request", f"{plan.max_concurrency:.2f}x")
    by_kind: dict[str, list[dict]] = {}
    for g in kv["groups"]:
        by_kind.setdefault(g["kind"], []).append(g)
    groups = ", ".join(
        f"{kind} {len(gs)}x{max(g['num_layers'] for g in gs)}"
        + (f" (+{sum(g['padding_layers'] for g in gs)} pad)" if any(g["padding_layers"] for g in gs) else "")
        for kind, gs in by_kind.items()
    )
    k.add_row("KV-cache groups", groups)
    console.print(k)

    if plan.fits:
        limit = (
            f"KV cache: {plan.max_concurrency:.2f} max-length requests fit, below max_num_seqs={eff['max_num_seqs']}"
            if plan.binding_limit == "kv_cache"
            else f"max_num_seqs={eff['max_num_seqs']}: the KV cache would hold {math.floor(plan.max_concurrency + 1e-9)} "
            "max-length requests"
        )
        console.print(hanging(Text("binding limit: ", style="bold"), limit))
    else:
        console.print(hanging(Text("will not start: ", style="bold red"), plan.failure or ""))

    if doc["recommendations"]:
        console.print(Text("recommended flags", style="bold"))
        for flag, r in doc["recommendations"].items():
            tag = "" if r["kind"] != "option" else " (optional, not in the serve line)"
            console.print(hanging(f"  {flag} {r['value']}  - ", f"{r['reason']}{tag}"))
    for w in plan.warnings:
        console.print(hanging(Text("warning: ", style="yellow"), w))
    if verbose:
        for w in plan.notes:
            console.print(hanging(Text("note: ", style="dim"), w))
    console.print(Text("vllm serve line:", style="bold"))
    # soft_wrap: never insert line breaks into the command, so it copies and pastes intact
    console.print(doc["serve_command"], soft_wrap=True, markup=False, highlight=False)
    for origin, label in (("user", "your flags"), ("recommended", "kvplan's fixes"), ("pinned", "pinned by kvplan")):
        shown = [f["flag"] + ("" if f["value"] is True else f" {f['value']}") for f in doc["serve_flags"] if f["origin"] == origin]
        if shown:
            console.print(Text(f"  {label}: " + ", ".join(shown)), highlight=False)
