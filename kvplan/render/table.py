"""The rich terminal views: the estimate table (memory bar, KV figures, binding limit,
recommendations, serve line), the GPU profile list, and the hanging wrap every prose line uses.
GiB appear only in rendering and in messages.
"""

from __future__ import annotations

from kvplan.render.fit import print_table as print_whole

import math

from kvplan.capacity.estimate import Plan
from kvplan.render.document import evidence_line, gpu_label, gpus_and_layout, to_dict

GiB = 1 << 30


def hanging(head, body, indent: int | None = None, fold: bool = True):
    """``head`` then ``body``, the body wrapped to the console width with continuation lines
    starting under its first character (hanging indent), never at column 0: on a terminal of any
    width and in a pipe (rich's 80 columns). No trailing padding. Strings are plain text.
    ``indent`` sets the continuation indent instead (a title whose head is long or empty).
    ``fold`` False keeps a word longer than the width (a model id, a path) whole on a line of its
    own, past the width, instead of cutting it.
    A no-break space (U+00A0, NBSP) in ``body`` keeps the words around it on one line; it is
    printed as a plain space.

    Returns:
        a rich renderable for Console.print.
    """
    from rich.text import Text

    head = head if isinstance(head, Text) else Text(head)
    body = body if isinstance(body, Text) else Text(body)
    return _Hanging(head, body, indent, fold)


class _Hanging:
    def __init__(self, head, body, indent: int | None = None, fold: bool = True) -> None:
        self.head, self.body, self.indent, self.fold = head, body, indent, fold

    def __rich_console__(self, console, options):
        from rich.text import Text

        indent = self.head.cell_len if self.indent is None else self.indent
        width = max(options.max_width - max(indent, self.head.cell_len), 20)
        # rich breaks at any whitespace, NBSP included: wrap with a one-cell non-space in its place
        body = _swap(self.body, NBSP, _GLUE)
        lines = (body.wrap(console, width, overflow="fold") if self.fold else _wrap_whole(body, width)) or [Text("")]
        for i, line in enumerate(lines):
            line = _swap(line, _GLUE, " ")
            line.rstrip()
            yield (self.head.copy() if i == 0 else Text(" " * indent)) + line


def _wrap_whole(text, width: int) -> list:
    """``text`` (a rich Text of one paragraph) broken at spaces into lines of at most ``width``
    cells, a word longer than that alone on its line, whole (greedy, as rich's own wrap without
    folding; styles kept)."""
    import re

    plain = text.plain
    offsets, start, used = [], 0, 0
    for m in re.finditer(r"\S+\s*", plain):
        word = len(m.group().rstrip())
        if used and used + word > width:
            offsets.append(m.start())
            start, used = m.start(), 0
        used = m.end() - start
    lines = list(text.divide(offsets)) if offsets else [text.copy()]
    for line in lines:
        line.rstrip()
    return lines


NBSP = "\u00a0"
_GLUE = "\ue000"  # a private-use character, one cell wide, that rich does not break at


def _swap(text, old: str, new: str):
    """``text`` with the one-character ``old`` replaced by ``new`` (styles kept: same length)."""
    from rich.text import Text

    if old not in text.plain:
        return text
    return Text(text.plain.replace(old, new), style=text.style, spans=list(text.spans), end=text.end,
                justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap)


class _RStrip:
    """A renderable drawn without the trailing spaces rich pads table cells with."""

    def __init__(self, renderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console, options):
        from rich.segment import Segment

        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].control and not line[-1].text.rstrip():
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(), last.style, last.control)
            yield from line
            yield Segment.line()


def title_line(text: str, style: str = "bold"):
    """A header line wrapped at the console width with a two-space hanging indent (the terminal
    would otherwise break it, at column 0, mid-word)."""
    from rich.text import Text

    return hanging(Text(""), Text(text, style=style), indent=2)


def print_table(plan: Plan, console, revision: str | None = None, verbose: bool = False) -> None:
    """The human view: memory bar, KV figures, binding limit, recommendations, serve line (an
    ``approximate, not exact`` line under the title when ``plan.exact`` is False). ``verbose`` adds the plan's notes (kvplan's own uncertainty, which the user cannot act on)."""
    from rich.table import Table
    from rich.text import Text

    doc = to_dict(plan, revision=revision)
    b = plan.worst_stage.budget
    eff = plan.effective
    n_gpus, layout = gpus_and_layout(plan)
    title = f"{plan.spec.name} on {n_gpus}x {gpu_label(plan.gpu)} ({layout}) - vLLM{NBSP}{eff['vllm_version']}"
    console.print(title_line(title))
    if plan.gpu.memory_source == "--gpu-memory":
        console.print(hanging(Text("note: ", style="dim"), (
            f"--gpu-memory replaced only the memory of the {plan.gpu.id} profile (the default when --gpu is not "
            f"given); fp8/bf16 support, compute capability and vLLM's batch defaults are still the {plan.gpu.id}'s"
        )))
    if not plan.exact:
        # issue 12: an architecture without a kvplan family, sized from the standard keys; said at
        # the top, not among the warnings (nor behind --verbose)
        console.print(hanging(
            Text("approximate, not exact: ", style="bold yellow"),
            "; ".join(a.reason for a in plan.approximations),
        ))
    console.print(hanging(Text("evidence: ", style="dim"), evidence_line(plan)))

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
    rows = _extensible_rows(b, eff) if getattr(b, "extensible", False) else [
        ("total (CUDA-visible)", b.total_bytes),
        (f"requested = total x {eff['gpu_memory_utilization']}", b.requested_bytes),
        ("- weights", b.weights_bytes),
        ("- peak activation", b.activation_peak_bytes),
        ("- non-torch", b.non_torch_bytes),
        ("- CUDA graphs (subtracted)", b.cudagraph_applied_bytes),
        ("= KV cache", b.kv_cache_bytes),
    ]
    if b.cudagraph_bytes and not b.cudagraph_applied_bytes and not getattr(b, "extensible", False):
        rows.append(("CUDA graphs (added later)", b.cudagraph_bytes))
    for name, n in rows:
        gib_cell = f"{n / GiB:.2f}" if n >= 0 else f"{n / GiB:.2f} (none left)"
        t.add_row(name, f"{n:,}", gib_cell)
    print_whole(console, t)

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
    print_whole(console, k)

    _print_addons(plan, console)
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
    from kvplan.render.parallel import print_parallel

    print_parallel(plan, console, doc["serve_command"])
    console.print(Text("vllm serve line:", style="bold"))
    # soft_wrap: never insert line breaks into the command, so it copies and pastes intact; emoji:
    # a path or name with ":rocket:" in it is printed as written, not as rich's emoji
    console.print(doc["serve_command"], soft_wrap=True, markup=False, highlight=False, emoji=False)
    for origin, label in (("user", "your flags"), ("recommended", "kvplan's fixes"), ("pinned", "pinned by kvplan")):
        shown = [f["flag"] + ("" if f["value"] is True else f" {f['value']}") for f in doc["serve_flags"] if f["origin"] == origin]
        if shown:
            console.print(Text(f"  {label}: " + ", ".join(shown)), highlight=False)


def print_gpus(profiles, console) -> None:
    """The `kvplan gpus` table: id (never cut: users copy it into --gpu), name, GiB, fp8, bf16,
    $/h, aliases, CUDA-visible bytes, then a note on the price column. ``profiles`` is a list of
    GPUProfile.

    Ids and numbers are never cut or wrapped; only the name and aliases wrap. Three layouts by
    console width: name and aliases in columns of their own (wide); both in one column, aliases
    under the name (80 columns, rich's width in a pipe); one hanging-indented line per GPU
    (narrower still)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    rows = list(profiles)
    unpriced = [p.id for p in rows if p.price_per_hour_usd is None]

    def numbers(p) -> list[str]:
        return [
            f"{p.memory_bytes / 2**30:.2f}",
            "yes" if p.fp8_supported else "no",
            "yes" if p.bf16_supported else "no",
            "?" if p.price_per_hour_usd is None else f"{p.price_per_hour_usd:.2f}",
            f"{p.memory_bytes:,}",
        ]

    heads = [("GiB", "right"), ("fp8", "left"), ("bf16", "left"), ("$/h", "right"), ("CUDA bytes", "right")]
    id_w = max((len(p.id) for p in rows), default=2)
    num_w = [max([len(h)] + [len(numbers(p)[j]) for p in rows]) for j, (h, _) in enumerate(heads)]
    fixed = id_w + sum(num_w)  # cells that never wrap
    width = console.width
    # one space between columns (collapse_padding, no edge padding); a text column at least 16
    if width >= fixed + 7 + 2 * 16:
        layout = "wide"
    elif width >= fixed + 6 + 16:
        layout = "narrow"
    else:
        layout = "lines"

    if layout == "lines":
        for p in rows:
            n = numbers(p)
            console.print(hanging(Text(f"{p.id}  ", style="bold"), (
                f"{p.display_name}; {n[0]} GiB ({n[4]} bytes); fp8 {n[1]}; bf16 {n[2]}; $/h {n[3]}"
                + (f"; aliases {', '.join(p.aliases)}" if p.aliases else "")
            )))
    else:
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)
        t.add_column("id", no_wrap=True, min_width=id_w)
        if layout == "wide":
            t.add_column("name", overflow="fold", max_width=32)
        else:
            t.add_column("name / aliases", overflow="fold")
        for (h, just), w in zip(heads[:4], num_w):
            t.add_column(h, justify=just, no_wrap=True, min_width=w)
        if layout == "wide":
            t.add_column("aliases", overflow="fold")
        t.add_column(heads[4][0], justify="right", no_wrap=True, min_width=num_w[4])
        for p in rows:
            n = numbers(p)
            aliases = ", ".join(p.aliases)
            if layout == "wide":
                t.add_row(p.id, p.display_name, *n[:4], aliases, n[4])
            else:
                text = Text(p.display_name)
                if aliases:
                    text.append("\n" + aliases, style="dim")
                t.add_row(p.id, text, *n)
        console.print(_RStrip(t))
    console.print(hanging(
        "$/h: ",
        "on-demand list price of one GPU (USD per hour; source and date: --format json, price_source)"
        + (
            "; ? = no price bundled: `kvplan plan` ranks it after priced GPUs (give one with --price GPU=USD)"
            if unpriced
            else ""
        ),
    ))


def _extensible_rows(b, eff: dict) -> list[tuple[str, int]]:
    """The budget rows of vLLM 0.34.0's extensible KV cache (engines/vllm/v0_34/memory.py):
    free memory after warm-up and capture, less the margin and the transient kept free; the
    requested cap when --gpu-memory-utilization binds before the margin does."""
    non_kv = b.weights_bytes + b.non_torch_bytes + b.cudagraph_bytes + b.warmup_persistent_bytes
    rows = [
        ("total (CUDA-visible)", b.total_bytes),
        ("free at start (total - CUDA context)", b.free_at_start_bytes),
        ("- weights", b.weights_bytes),
        ("- non-torch", b.non_torch_bytes),
        ("- CUDA graphs (captured)", b.cudagraph_bytes),
        ("- left allocated by warm-up", b.warmup_persistent_bytes),
        ("= free after warm-up and capture", b.headroom_bytes),
    ]
    keep = max(b.sizing_peak_bytes, b.reserve_growth_bytes)
    if b.requested_bytes - non_kv < b.headroom_bytes - b.margin_bytes:
        rows.append((f"capped by requested = total x {eff['gpu_memory_utilization']}", b.requested_bytes - non_kv))
    else:
        rows.append(("- margin max(1 GiB, 0.75 x peak)", b.margin_bytes))
    rows += [("- transient kept free max(peak, growth)", keep), ("= KV cache", b.kv_cache_bytes)]
    return rows


def _print_addons(plan: Plan, console) -> None:
    """One line per add-on term (capacity/addons.py AddonReport): what speculative decoding, LoRA
    and the offloads add to (or take from) each GPU, and the host memory the offloads need."""
    rep = getattr(plan, "addons", None)
    if rep is None:
        return
    from rich.text import Text

    groups: dict[str, int] = {}
    for name, b in rep.parts.items():
        key = ("draft model" if name.startswith("draft") else "LoRA slots" if name.startswith("lora")
               else "offloaded weights" if name.endswith("offloaded") else name.replace("_", " "))
        groups[key] = groups.get(key, 0) + b
    text = ", ".join(f"{k} {v / 2**30:+.2f} GiB" for k, v in groups.items())
    if rep.draft_layers:
        text += f"; the draft's {rep.draft_layers} KV layer(s) join the groups"
    if rep.host_bytes:
        text += f"; host memory for offloading {rep.host_bytes / 2**30:.2f} GiB"
    text = text.lstrip("; ")  # no GPU term (KV offloading alone): the line starts with what there is
    if text:
        console.print(hanging(Text("add-ons: ", style="bold"), text))
