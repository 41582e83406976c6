"""Pictures of a plan: concurrency vs --max-model-len, concurrency vs --gpu-memory-utilization,
and the per-GPU memory breakdown - in the terminal (rich) and as a PNG/SVG file (matplotlib,
the optional extra ``kvplan-vllm[plot]``, imported only when a file is asked for).

The curves are re-plans of the same model, GPU and flags with one value changed
(kvplan.capacity.estimate, under the plan's own vLLM version's rules); nothing here computes
memory itself. Units: tokens, bytes (int); GiB appear
only in labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvplan import DISTRIBUTION
from kvplan.errors import EnvironmentMissing, KvplanError

GiB = 1 << 30
UTILIZATIONS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.92, 0.95, 0.98)


@dataclass(frozen=True)
class CurvePoint:
    """One re-plan: x (tokens or a utilization fraction), vLLM's max concurrency for
    max_model_len-token requests (0 when it does not start), and the workload's requests
    (None without a workload) with the fraction of its requests too long for that max_model_len."""

    x: float
    max_concurrency: float
    workload_requests: float | None
    fits: bool
    workload_excluded: float = 0.0  # fraction of the workload longer than max_model_len (left out)


@dataclass(frozen=True)
class PlanPictures:
    """Data for the three pictures of one engine.

    Attributes:
        title: model on N x GPU.
        by_max_model_len / by_utilization: CurvePoints.
        memory: (label, bytes per GPU) of the worst pipeline stage, summing to the GPU's total.
        current_max_model_len / current_utilization: where the plan itself sits.
        max_num_seqs: the scheduler cap (a line on the curves).
    """

    title: str
    by_max_model_len: tuple[CurvePoint, ...]
    by_utilization: tuple[CurvePoint, ...]
    memory: tuple[tuple[str, int], ...]
    current_max_model_len: int
    current_utilization: float
    max_num_seqs: int
    total_bytes: int = 0  # the GPU's CUDA-visible total (a line on the memory picture)
    requested_bytes: int = 0  # total x --gpu-memory-utilization
    failure: str | None = None  # why the plan itself does not start (None when it does)


def _lengths(current: int, upper: int) -> list[int]:
    out, x = [], 1024
    while x < upper:
        out.append(x)
        x *= 2
    out += [upper, current]
    return sorted({v for v in out if 0 < v <= upper})


def memory_parts(plan) -> tuple[tuple[str, int], ...]:
    """(label, bytes) per GPU of the worst stage: weights, activation, non-torch, CUDA graphs
    (inside or outside the budget), KV cache, and what --gpu-memory-utilization leaves unused."""
    b = plan.worst_stage.budget
    parts = [
        ("weights", b.weights_bytes),
        ("activation peak", b.activation_peak_bytes),
        ("non-torch", b.non_torch_bytes),
    ]
    if b.cudagraph_applied_bytes:
        parts.append(("CUDA graphs", b.cudagraph_applied_bytes))
    parts.append(("KV cache", max(b.kv_cache_bytes, 0)))
    outside = b.cudagraph_bytes if not b.cudagraph_applied_bytes else 0
    if outside:
        parts.append(("CUDA graphs (after sizing)", outside))
    used = sum(n for _, n in parts)
    parts.append(("unused", max(b.total_bytes - used, 0)))
    return tuple(parts)


def pictures(plan, workload=None) -> PlanPictures:
    """Re-plan ``plan`` over max_model_len and gpu_memory_utilization.

    Args:
        workload: an optional kvplan.capacity.workload.WorkloadModel (adds the workload's requests).
    Rule source: kvplan.capacity.estimate.plan (the rules of the plan's --vllm-version).
    """
    from kvplan.capacity.estimate import plan as plan_fn

    def point(x, update) -> CurvePoint:
        try:
            p = plan_fn(plan.spec, plan.gpu, plan.args.model_copy(update=update))
        except KvplanError:
            return CurvePoint(x, 0.0, None, False)
        if not p.fits:
            return CurvePoint(x, 0.0, 0.0 if workload is not None else None, False)
        wl, excluded = None, 0.0
        if workload is not None:
            try:
                cap = workload.capacity(p)
                wl, excluded = cap.requests, cap.excluded_fraction
            except KvplanError:
                wl, excluded = 0.0, 1.0
        return CurvePoint(x, p.max_concurrency, wl, True, excluded)

    eff = plan.effective
    mml = int(eff["max_model_len"]) or plan.spec.derived_max_model_len
    by_len = tuple(point(x, {"max_model_len": x}) for x in _lengths(mml, plan.spec.derived_max_model_len))
    utils = sorted(set(UTILIZATIONS) | {float(eff["gpu_memory_utilization"])})
    by_util = tuple(point(u, {"gpu_memory_utilization": u}) for u in utils)
    from kvplan.render.document import gpus_and_layout

    n, layout = gpus_and_layout(plan)
    title = f"{plan.spec.name} on {n}x {plan.gpu.display_name} ({layout})"
    b = plan.worst_stage.budget
    return PlanPictures(
        title, by_len, by_util, memory_parts(plan), mml, float(eff["gpu_memory_utilization"]), int(eff["max_num_seqs"]),
        total_bytes=b.total_bytes, requested_bytes=b.requested_bytes, failure=None if plan.fits else plan.failure,
    )


def pictures_dict(pics: PlanPictures) -> dict:
    """The ``curves`` section of ``kvplan estimate --curves --format json`` (what the terminal
    picture shows, as numbers; the web page draws it): {"by_max_model_len", "by_utilization":
    [{"x", "max_concurrency", "fits", "workload_requests", "workload_excluded"}], "memory":
    [{"label", "bytes"}], "current_max_model_len", "current_utilization", "max_num_seqs"}.
    x is tokens (by_max_model_len) or a fraction (by_utilization); bytes are ints."""

    def points(ps):
        return [
            {"x": p.x, "max_concurrency": round(p.max_concurrency, 2), "fits": p.fits,
             "workload_requests": None if p.workload_requests is None else round(p.workload_requests, 2),
             "workload_excluded": p.workload_excluded}
            for p in ps
        ]

    return {
        "by_max_model_len": points(pics.by_max_model_len),
        "by_utilization": points(pics.by_utilization),
        "memory": [{"label": label, "bytes": int(n)} for label, n in pics.memory],
        "current_max_model_len": pics.current_max_model_len,
        "current_utilization": pics.current_utilization,
        "max_num_seqs": pics.max_num_seqs,
    }


def _fmt_tokens(x: float) -> str:
    x = int(x)
    return f"{x // 1024}k" if x % 1024 == 0 and x >= 1024 else str(x)


def print_pictures(pics: PlanPictures, console, width: int = 30) -> None:
    """The three pictures as rich bar charts (one row per point)."""
    from rich.text import Text

    def bars(title: str, points, label, mark):
        console.print(Text(title, style="bold"))
        vals = [max(p.max_concurrency, p.workload_requests or 0.0) for p in points]
        top = max(vals + [1e-9])
        for p in points:
            row = Text(f"  {label(p.x):>7} ")
            cells = int(round(width * p.max_concurrency / top))
            row.append("█" * cells, style="green" if p.fits else "red")
            if p.workload_requests is not None and p.workload_requests > p.max_concurrency:
                extra = int(round(width * p.workload_requests / top)) - cells
                row.append("▒" * max(extra, 0), style="cyan")
            row.append(" " * max(0, width + 9 - len(row.plain)))
            txt = f" {p.max_concurrency:8.2f}x" if p.fits else "  does not start"
            if p.workload_requests is not None and p.fits:
                txt += f"  wl {p.workload_requests:7.1f}"
                if p.workload_excluded:
                    txt += f" ({p.workload_excluded:.0%} too long)"
            row.append(txt)
            if mark(p.x):
                row.append(" <- this plan", style="bold")
            console.print(row)

    bars(
        "concurrency vs --max-model-len (█ max-length requests, ▒ wl: workload requests)",
        pics.by_max_model_len,
        _fmt_tokens,
        lambda x: int(x) == pics.current_max_model_len,
    )
    bars(
        "concurrency vs --gpu-memory-utilization",
        pics.by_utilization,
        lambda x: f"{x:.2f}",
        lambda x: abs(x - pics.current_utilization) < 1e-9,
    )
    console.print(Text("memory per GPU", style="bold"))
    total = sum(n for _, n in pics.memory) or 1
    styles = {"weights": "blue", "activation peak": "magenta", "non-torch": "yellow", "KV cache": "green", "unused": "dim"}
    bar = Text("  ")
    for name, n in pics.memory:
        bar.append("█" * int(round((2 * width + 10) * n / total)), style=styles.get(name, "cyan"))
    console.print(bar)
    for name, n in pics.memory:
        console.print(Text(f"  {name:<28} {n / GiB:8.2f} GiB", style=styles.get(name, "cyan")))


PLOT_FORMATS = ("png", "svg")


def check_plot_path(path: str) -> Path:
    """Check a --plot target before anything is computed or printed; writes nothing.

    The name must end in .png or .svg (any case); what is there must be a regular file or
    nothing (a symbolic link is followed to the file it points to; a directory, FIFO or device
    is refused, never replaced); its directory must exist and accept a new file (tried, see
    kvplan.io.files.output_target); matplotlib (the ``kvplan-vllm[plot]`` extra) must import.

    Returns:
        the file to write (absolute, symbolic links resolved).
    Raises:
        KvplanError: empty name, another extension, a missing or read-only directory, a
            directory or other non-regular file as the name (names --plot; exit 2).
        EnvironmentMissing: matplotlib is not installed (exit 3; ``pip install 'kvplan-vllm[plot]'``).
    """
    if not str(path).strip():
        raise KvplanError("--plot: empty file name", hint="e.g. --plot plan.png")
    if Path(path).suffix.lower().lstrip(".") not in PLOT_FORMATS:
        raise KvplanError(f"--plot: {path}: expected a .png or .svg file name")
    from kvplan.io.files import output_target

    out = output_target(path, "--plot", "plan.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise EnvironmentMissing("--plot: matplotlib is not installed", hint=f"pip install '{DISTRIBUTION}[plot]'") from None
    return out


def save_plot(pics: PlanPictures, path: str) -> Path:
    """Write the three pictures to ``path`` (.png or .svg) with matplotlib (Agg backend). The
    figure goes to a temporary file in the same directory, renamed over ``path`` only when
    complete: a failed write leaves no file behind (and an older file untouched).

    Raises:
        KvplanError: see check_plot_path, or the file cannot be written (names --plot).
        EnvironmentMissing: matplotlib is not installed (exit 3; ``pip install 'kvplan-vllm[plot]'``).
    """
    out = check_plot_path(path)
    fmt = out.suffix.lower().lstrip(".")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EnvironmentMissing("--plot: matplotlib is not installed", hint=f"pip install '{DISTRIBUTION}[plot]'") from None

    fig = figure(pics)
    try:
        from kvplan.io.files import write_file_atomically

        write_file_atomically(out, "--plot", path, lambda tmp: fig.savefig(tmp, format=fmt), suffix=f".{fmt}")
    finally:
        plt.close(fig)
    return out


def _no_start_note(ax, pics: PlanPictures, what: str) -> None:
    """Write why nothing starts into an empty panel (instead of a flat line at zero)."""
    import textwrap

    why = pics.failure or "no engine starts at these settings"
    ax.text(0.5, 0.5, textwrap.fill(f"does not start at any {what}: {why}", 48), transform=ax.transAxes,
            ha="center", va="center", fontsize=8, color="darkred")


def figure(pics: PlanPictures):
    """The three pictures as one matplotlib Figure (caller closes it): concurrency vs
    --max-model-len and vs --gpu-memory-utilization (a panel where no point starts says why in
    words), and the per-GPU memory breakdown with lines at the GPU's total and the requested memory.

    Raises:
        EnvironmentMissing: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EnvironmentMissing("--plot: matplotlib is not installed", hint=f"pip install '{DISTRIBUTION}[plot]'") from None

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    try:
        from matplotlib.ticker import FuncFormatter

        ax = axes[0]
        pts = pics.by_max_model_len
        xs = [p.x for p in pts]
        if any(p.fits for p in pts):
            ax.plot(xs, [p.max_concurrency for p in pts], marker="o", label="max-length requests (vLLM)")
            if any(p.workload_requests is not None for p in pts):
                ax.plot(xs, [p.workload_requests or 0 for p in pts], marker="s", label="workload requests")
                cut = [p for p in pts if p.workload_excluded]
                if cut:
                    ax.plot([p.x for p in cut], [p.workload_requests or 0 for p in cut], "x", color="red", markersize=10,
                            label="part of the workload longer than max-model-len")
            ax.axhline(pics.max_num_seqs, color="grey", linestyle=":", label="--max-num-seqs")
            ax.set_yscale("log")
            ax.legend(fontsize=8)
        else:
            if len(set(xs)) > 1:
                ax.set_xlim(min(xs), max(xs))
            _no_start_note(ax, pics, "--max-model-len")
        ax.axvline(pics.current_max_model_len, color="black", linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_tokens(v)))
        ax.set_xlabel("--max-model-len (tokens)")
        ax.set_ylabel("concurrent requests")
        ax.set_title("concurrency vs max-model-len")

        ax = axes[1]
        pts = pics.by_utilization
        xs = [p.x for p in pts]
        if any(p.fits for p in pts):
            ax.plot(xs, [p.max_concurrency for p in pts], marker="o", label="max-length requests (vLLM)")
            if any(p.workload_requests is not None for p in pts):
                ax.plot(xs, [p.workload_requests or 0 for p in pts], marker="s", label="workload requests")
            ax.legend(fontsize=8)
        else:
            ax.set_xlim(min(xs), max(xs))
            _no_start_note(ax, pics, "--gpu-memory-utilization")
        ax.axvline(pics.current_utilization, color="black", linestyle="--", linewidth=0.8)
        ax.set_xlabel("--gpu-memory-utilization")
        ax.set_ylabel("concurrent requests")
        ax.set_title("concurrency vs GPU memory utilization")

        ax = axes[2]
        bottom = 0.0
        for name, n in pics.memory:
            ax.bar([0], [n / GiB], bottom=[bottom], label=f"{name} {n / GiB:.1f} GiB")
            bottom += n / GiB
        top = bottom
        if pics.total_bytes:
            ax.axhline(pics.total_bytes / GiB, color="black", linewidth=1.2,
                       label=f"GPU total {pics.total_bytes / GiB:.1f} GiB")
            top = max(top, pics.total_bytes / GiB)
        if pics.requested_bytes:
            ax.axhline(pics.requested_bytes / GiB, color="black", linestyle="--", linewidth=0.8,
                       label=f"requested (x {pics.current_utilization:g}) {pics.requested_bytes / GiB:.1f} GiB")
        ax.set_ylim(0, top * 1.05 if top > 0 else 1)
        ax.set_xticks([])
        ax.set_ylabel("GiB per GPU")
        ax.set_title("memory breakdown" + (" (does not start)" if pics.failure else ""))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle(pics.title)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig
