"""Measured against predicted: the figures vLLM printed, kvplan's plan, each error, the verdict.

The comparison document (``kvplan verify --format json``):
    {"measured": {key: value|None}, "predicted": {key: value}, "errors": {key: {"abs", "pct",
     "within_log_rounding"}}, "status": "pass"|"mismatch"|"refused"|"failed"|"incomplete"|"error",
     "failure": "vLLM failed before sizing memory: ..." (status "failed", exit 3) | None,
     "log_consistent": false when the tokens line contradicts the block count (a note says why),
     "compared_on": "num_gpu_blocks"|"gpu_kv_cache_tokens", "measured_source": {key: how},
     "mismatched_on": [key, ...] (status "mismatch" only: every graded figure out of tolerance),
     "missing": {key: why}, ...}
Keys (bytes, tokens, blocks): total_bytes, requested_bytes, weights_bytes, activation_peak_bytes,
non_torch_bytes, cudagraph_bytes, cudagraph_subtracted_bytes, kv_cache_bytes, num_gpu_blocks,
block_size, gpu_kv_cache_tokens, max_concurrency, max_model_len, max_num_seqs,
max_num_batched_tokens, padding_layers.

Pure: no I/O, no subprocess. What a vLLM version's log lines mean (the --kv-cache-memory
suggestion's buffer, which counts it logs) comes from its log grammar (kvplan.verify.log).
"""

from __future__ import annotations

from typing import Any, Optional

from kvplan import __version__
from kvplan.errors import EXIT_ENVIRONMENT, EXIT_FAIL, EXIT_OK
from kvplan.io.units import GiB
from kvplan.verify.log import DEFAULT_GRAMMAR, MEMORY_REFUSAL_KINDS, VllmLog, is_memory_refusal
from kvplan.verify.versions import VERIFIED_VLLM

# The --kv-cache-memory suggestion's buffer (bytes): a rule of the vLLM version whose log this is.
SUGGESTION_BUFFER = DEFAULT_GRAMMAR.SUGGESTION_BUFFER
DEFAULT_TOLERANCE_PCT = 1.0
# A tolerance above 100 % would pass a prediction of zero blocks; it is a typo, not a check.
MAX_TOLERANCE_PCT = 100.0

# key, label, unit ("bytes", "tokens", "blocks", "x", "count")
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("total_bytes", "total (CUDA)", "bytes"),
    ("requested_bytes", "requested", "bytes"),
    ("weights_bytes", "weights", "bytes"),
    ("activation_peak_bytes", "peak activation", "bytes"),
    ("non_torch_bytes", "non-torch", "bytes"),
    ("cudagraph_bytes", "CUDA graphs", "bytes"),
    ("cudagraph_subtracted_bytes", "graphs subtracted", "bytes"),
    ("kv_cache_bytes", "available KV", "bytes"),
    ("num_gpu_blocks", "num_gpu_blocks", "blocks"),
    ("block_size", "block_size", "tokens"),
    ("gpu_kv_cache_tokens", "KV cache tokens", "tokens"),
    ("max_concurrency", "max concurrency", "x"),
    ("max_model_len", "max_model_len", "tokens"),
    ("max_num_seqs", "max_num_seqs", "count"),
    ("max_num_batched_tokens", "max_batched_tokens", "tokens"),
    ("padding_layers", "padding layers", "count"),
)
FIGURE_KEYS = tuple(k for k, _, _ in FIGURES)


def predicted_figures(doc: dict) -> dict:
    """The comparison keys from an estimate JSON document."""
    mem, kv, eng = doc["memory"], doc["kv_cache"], doc["engine"]
    return {
        "total_bytes": mem["total_bytes"],
        "requested_bytes": mem["requested_bytes"],
        "weights_bytes": mem["weights_bytes"],
        "activation_peak_bytes": mem["activation_peak_bytes"],
        "non_torch_bytes": mem["non_torch_bytes"],
        "cudagraph_bytes": mem["cudagraph_bytes"],
        "cudagraph_subtracted_bytes": mem["cudagraph_subtracted_bytes"],
        "kv_cache_bytes": mem["kv_cache_bytes"],
        "num_gpu_blocks": kv["num_gpu_blocks"],
        "block_size": kv["block_size"],
        "gpu_kv_cache_tokens": kv["gpu_kv_cache_tokens"],
        "max_concurrency": kv["max_concurrency"],
        "max_model_len": kv["max_model_len"],
        "max_num_seqs": eng["max_num_seqs"],
        "max_num_batched_tokens": eng["max_num_batched_tokens"],
        "padding_layers": kv["padding_layers"],
    }




def measured_figures(log: VllmLog, *, enforce_eager: Optional[bool] = None) -> tuple[dict, dict, dict, dict]:
    """What vLLM measured, in the comparison keys.

    Priority per key: the child's exact bytes (KVPLAN_EXACT, read from vLLM's worker) > exact
    log figures (MEMINFO, RESULT, block counts, token counts) > GiB figures of the log (rounded
    to 0.01 GiB by vLLM's format_gib). One derived exact figure: with ``enforce_eager`` and
    "0.0 GiB for CUDAGraph memory", the available KV bytes = the "fit into requested memory"
    suggestion + 150 MiB (vLLM gpu_worker.py, rules in engines/vllm/v0_26: suggestion = requested - weights -
    activation - non-torch - graphs - 150 MiB; available = requested - weights - activation -
    non-torch - subtracted graph estimate; both graph terms are 0 in eager mode).

    Returns:
        (values, source, resolution, missing): key -> value (None when unknown); key -> where it
        came from; key -> +- bytes of a rounded figure; key -> why a figure is unknown.
    """
    values: dict[str, Any] = {k: None for k in FIGURE_KEYS}
    source: dict[str, str] = {}
    resolution: dict[str, int] = {}
    missing: dict[str, str] = {}

    def put(key, value, how, res=None):
        if value is None or values[key] is not None:
            return
        values[key] = value
        source[key] = how
        if res:
            resolution[key] = res

    ex = log.exact or {}
    graphs_estimated = (log.env or {}).get("env", {}).get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1") != "0"
    for key, exact_key in (
        ("total_bytes", "init_total_memory"),
        ("requested_bytes", "requested_memory"),
        ("weights_bytes", "weights"),
        ("activation_peak_bytes", "peak_activation"),
        ("non_torch_bytes", "non_torch"),
        ("cudagraph_bytes", "cudagraph_bytes"),
        ("kv_cache_bytes", "available_kv_cache_memory_bytes"),
        ("num_gpu_blocks", "num_gpu_blocks"),
        ("block_size", "block_size"),
        ("gpu_kv_cache_tokens", "gpu_kv_cache_tokens"),
        ("max_model_len", "max_model_len"),
        ("max_num_seqs", "max_num_seqs"),
        ("max_num_batched_tokens", "max_num_batched_tokens"),
    ):
        if key == "kv_cache_bytes" and log.kv_cache_sizing == "extensible":
            continue  # the worker's figure is 0.34.0's reservation, not the cache (verify/log.py)
        if isinstance(ex.get(exact_key), (int, float)) and not isinstance(ex.get(exact_key), bool):
            put(key, int(ex[exact_key]), "exact: worker")
    if isinstance(ex.get("cudagraph_memory_estimate"), int):
        put("cudagraph_subtracted_bytes", ex["cudagraph_memory_estimate"] if graphs_estimated else 0, "exact: worker")
    if isinstance(ex.get("max_concurrency"), (int, float)):
        put("max_concurrency", round(float(ex["max_concurrency"]), 2), "exact: worker")
    layout = ex.get("kv_cache_layout") or {}
    if isinstance(layout.get("padding_layers"), int):
        put("padding_layers", layout["padding_layers"], "exact: worker")

    if log.meminfo and log.meminfo.get("total"):
        put("total_bytes", log.meminfo["total"], "exact: CUDA")
    for key in ("num_gpu_blocks",):
        put(key, getattr(log, key), log.num_gpu_blocks_source or "log")
    for key in ("block_size", "max_num_seqs"):
        put(key, getattr(log, key), "RESULT line" if log.result else "log")
    put("max_num_batched_tokens", log.max_num_batched_tokens, "log")
    put("gpu_kv_cache_tokens", log.gpu_kv_cache_tokens, "log")
    put("max_concurrency", log.max_concurrency, "log")
    put("max_model_len", log.max_model_len, "log")
    put("padding_layers", log.padding_layers, "log")

    eager_no_graphs = (
        enforce_eager
        and log.cudagraph_bytes == 0
        and log.cudagraph_estimate_bytes is None
        and log.kv_cache_memory_override_bytes is None
    )
    if eager_no_graphs and log.suggested_fit_requested_bytes is not None:
        put(
            "kv_cache_bytes",
            log.suggested_fit_requested_bytes + SUGGESTION_BUFFER,
            "exact: suggestion",
        )
    if enforce_eager:
        put("cudagraph_bytes", 0, "eager: none")
        put("cudagraph_subtracted_bytes", 0, "eager: none")
    for key in (
        "total_bytes",
        "requested_bytes",
        "weights_bytes",
        "activation_peak_bytes",
        "non_torch_bytes",
        "cudagraph_bytes",
        "kv_cache_bytes",
    ):
        value = getattr(log, key)
        res = log.resolution_bytes.get(key)
        how = "log" + (f" ±{res / GiB:.3g} GiB" if res else "")
        put(key, value, how, res)
    if log.cudagraph_estimate_bytes is not None:
        put(
            "cudagraph_subtracted_bytes",
            log.cudagraph_estimate_bytes if graphs_estimated else 0,
            "log",
            log.resolution_bytes.get("cudagraph_estimate_bytes"),
        )
    if log.kv_cache_memory_override_bytes is not None:
        put("kv_cache_bytes", log.kv_cache_memory_override_bytes, "log")

    if values["num_gpu_blocks"] is None:
        if log.gpu_kv_cache_tokens is not None:
            version = log.vllm_version or (log.env or {}).get("vllm") or DEFAULT_GRAMMAR.SERIES
            missing["num_gpu_blocks"] = (
                f"not in the log: this vLLM {version} log gives the KV cache size in tokens, not num_gpu_blocks; "
                "compared on gpu_kv_cache_tokens instead"
            )
        elif "v1" in log.families:
            missing["num_gpu_blocks"] = ("not in the log: neither num_gpu_blocks nor the KV cache size in tokens is in it "
                                         "(a log that ends before vLLM sized the KV cache, or an excerpt without those lines)")
        else:
            missing["num_gpu_blocks"] = "not in the log"
    for key in FIGURE_KEYS:
        if values[key] is None and key not in missing:
            missing[key] = "not in the log"
    return values, source, resolution, missing


def compare(predicted: dict, measured: dict, resolution: dict, *, tolerance_pct: float) -> tuple[dict, str, str]:
    """Per-key errors (predicted - measured) and the verdict.

    The verdict compares num_gpu_blocks when measured, else gpu_kv_cache_tokens (proportional to
    blocks for one layout): |error| <= tolerance_pct % -> "pass", else "mismatch"; neither
    measured -> "incomplete". A measured 0 against a non-zero prediction has no percentage
    error (``pct`` None): it decides nothing, and the next figure (or "incomplete") does.

    Returns:
        (errors, status, compared_on)
    """
    errors: dict[str, dict] = {}
    for key in FIGURE_KEYS:
        p, m = predicted.get(key), measured.get(key)
        if not isinstance(p, (int, float)) or not isinstance(m, (int, float)) or isinstance(p, bool):
            continue
        diff = p - m
        pct = (100.0 * diff / m) if m else (0.0 if diff == 0 else None)
        entry = {"abs": round(diff, 4) if isinstance(diff, float) else diff, "pct": None if pct is None else round(pct, 4)}
        if key in resolution:
            entry["within_log_rounding"] = abs(diff) <= resolution[key]
        errors[key] = entry
    for key in ("num_gpu_blocks", "gpu_kv_cache_tokens"):
        if key in errors and errors[key]["pct"] is not None:
            ok = abs(errors[key]["pct"]) <= tolerance_pct + 1e-9
            return errors, ("pass" if ok else "mismatch"), key
    return errors, "incomplete", ""




# Figures graded beside the block count (same tolerance): the two numbers of vLLM's "GPU KV cache
# size: N tokens, Maximum concurrency for L tokens per request: Cx" line.
ALSO_GRADED = ("gpu_kv_cache_tokens", "max_concurrency")
# max_concurrency is printed to 2 decimals by vLLM ("%.2fx") and kept to 2 by kvplan's document:
# an error within both roundings (0.005 each) is no error.
CONCURRENCY_ROUNDING = 0.01


def out_of_tolerance(errors: dict, measured: dict, compared_on: str, *, tolerance_pct: float) -> list[str]:
    """The graded figures whose error exceeds ``tolerance_pct`` %: ``compared_on`` (the verdict's
    figure) and the KV tokens and max concurrency (ALSO_GRADED) where both sides are known, in
    that order. A measured 0 (no percentage error) is not graded; max concurrency allows the
    two 2-decimal roundings (CONCURRENCY_ROUNDING) on top of the tolerance.

    Returns: the keys, [] when every graded figure is within tolerance."""
    out = []
    for key in (compared_on, *ALSO_GRADED):
        if not key or key in out or key not in errors or errors[key]["pct"] is None:
            continue
        slack = CONCURRENCY_ROUNDING if key == "max_concurrency" else 0
        m = measured.get(key) or 0
        if abs(errors[key]["abs"]) > abs(m) * (tolerance_pct + 1e-9) / 100.0 + slack:
            out.append(key)
    return out


def log_consistency(log: VllmLog, measured: dict, source: dict, plan_doc: Optional[dict]) -> Optional[str]:
    """None, or a note when the log's "GPU KV cache size: N tokens" contradicts its block count
    (0 blocks next to N > 0 tokens included).

    vLLM (v1/core/kv_cache_utils.py, the report after get_kv_cache_configs; engines/vllm/v0_26) prints
    ``num_blocks // len(kv_cache_groups) * block_size`` tokens, so N <= num_gpu_blocks x
    block_size, and N is about that product divided by the number of KV-cache groups (every
    recorded start in tests/data: 1.0 for one group, 0.4995 for gemma2's two, 0.143 for
    gemma3-1b's seven). The group count is the child's exact layout, else kvplan's prediction;
    as the latter can be wrong, the lower bound allows twice as many groups. Both the block count
    and the tokens are vLLM's integers, so only 1 % is allowed for rounding.
    """
    blocks, bs, tokens = measured.get("num_gpu_blocks"), measured.get("block_size"), measured.get("gpu_kv_cache_tokens")
    if blocks == 0 and isinstance(tokens, int) and tokens > 0 and not isinstance(blocks, bool):
        # no percentage error of 0 exists, so compare() judges on the tokens here
        return (
            f"the log contradicts itself: 'GPU KV cache size: {tokens:,} tokens' but 0 blocks "
            f"(num_gpu_blocks from {source.get('num_gpu_blocks', 'the log')}); a start that sized its KV cache "
            "has at least one block, so the 0 is wrong: the verdict compares the KV cache tokens"
        )
    if not (isinstance(blocks, int) and isinstance(bs, int) and isinstance(tokens, int)) or blocks <= 0 or bs <= 0:
        return None
    layout = (log.exact or {}).get("kv_cache_layout") or {}
    groups = layout.get("groups") if isinstance(layout.get("groups"), list) else None
    if groups is None and plan_doc is not None and isinstance(plan_doc.get("kv_cache", {}).get("groups"), list):
        groups = plan_doc["kv_cache"]["groups"]
    n_groups = max(1, len(groups or ()))
    capacity = blocks * bs
    if tokens <= capacity * 1.01 and tokens * 2 * n_groups >= capacity * 0.99:
        return None
    group_text = f" for {n_groups} KV-cache groups" if n_groups > 1 else ""
    return (
        f"the log contradicts itself: 'GPU KV cache size: {tokens:,} tokens' but {blocks:,} blocks x {bs} = "
        f"{capacity:,} tokens{group_text} (num_gpu_blocks from {source.get('num_gpu_blocks', 'the log')}); "
        "num_gpu_blocks wins: it is the count vLLM's allocator used, and the tokens line is only printed "
        "from it, so the verdict compares num_gpu_blocks and the KV cache tokens error means nothing"
    )


def comparison_document(
    *,
    log: VllmLog,
    plan_doc: Optional[dict],
    prediction_error: Optional[str],
    options: dict,
    engine_args: dict,
    usage: str,
    tolerance_pct: float,
    model: str,
    gpu_source: str,
    log_path: Optional[str],
    mode: str,
    notes: list[str],
    vllm_failed: bool = False,
) -> tuple[dict, int]:
    """Build the verify document and its exit code (0 pass, 1 mismatch/refused/incomplete).

    ``vllm_failed``: the child exited with an error (vLLM did not finish starting), whatever
    figures it printed before."""
    enforce_eager = bool(options.get("enforce_eager", False))  # vLLM's default: graphs on
    if log.exact and isinstance(log.exact.get("enforce_eager"), bool):
        enforce_eager = log.exact["enforce_eager"]
    measured, source, resolution, missing = measured_figures(log, enforce_eager=enforce_eager)
    predicted = predicted_figures(plan_doc) if plan_doc else {}
    errors, status, compared_on = compare(predicted, measured, resolution, tolerance_pct=tolerance_pct)
    refusal = None
    failure = None
    if log.refusal is not None:
        r = log.refusal
        refusal = {k: v for k, v in r.__dict__.items() if v is not None}
        refusal["memory"] = is_memory_refusal(r)
        if not refusal["memory"] and not log.started:
            # vLLM stopped before it sized memory, for a reason that is not memory: nothing of
            # kvplan's prediction was tested (exit 3, like a missing environment)
            failure = f"vLLM failed before sizing memory: {r.message}; not a memory prediction"
            status = "failed"
        elif vllm_failed or not log.started or r.kind in MEMORY_REFUSAL_KINDS:
            status = "refused"
    if plan_doc is None and failure is None:
        status = "refused" if refusal else "error"
    consistency = log_consistency(log, measured, source, plan_doc)
    if consistency:
        notes.append(consistency)
    mismatched: list[str] = []
    if status in ("pass", "mismatch"):
        # a self-contradicting tokens line grades nothing (the note says why): only the verdict's figure
        mismatched = (
            out_of_tolerance(errors, measured, compared_on, tolerance_pct=tolerance_pct)
            if consistency is None
            else ([compared_on] if status == "mismatch" else [])
        )
        if mismatched:
            status = "mismatch"
    for lineno, why in log.rejected_lines:
        notes.append(f"log line {lineno} set aside: {why}")
    version = log.vllm_version or (log.env or {}).get("vllm")
    predicted_with = ((plan_doc or {}).get("engine") or {}).get("vllm_version") or VERIFIED_VLLM
    flagged = ((plan_doc or {}).get("vllm") or {}).get("reason") == "--vllm-version"
    note = version_note(log, version, predicted_with, flagged=flagged)
    if note:
        notes.append(note)
    doc = {
        "kvplan_version": __version__,
        "mode": mode,
        "model": model,
        "usage": usage,
        "engine_args": engine_args,
        "vllm_version": version,
        # which version's rules predicted, why, and what they stand on (render.document)
        "predicted_with": (plan_doc or {}).get("vllm"),
        "evidence": (plan_doc or {}).get("evidence"),
        # what the prediction itself says it does not stand behind (render.document "approximate")
        "approximate": list((plan_doc or {}).get("approximate") or []),
        "gpu": gpu_source,
        "status": status,
        "tolerance_pct": tolerance_pct,
        "compared_on": compared_on or None,
        **({"mismatched_on": mismatched} if status == "mismatch" and mismatched else {}),
        "measured": measured,
        "predicted": predicted,
        "errors": errors,
        "measured_source": source,
        "missing": missing,
        "refusal": refusal,
        "kvplan_fits": None if plan_doc is None else plan_doc["fits"],
        "kvplan_failure": None if plan_doc is None else plan_doc["failure"],
        "kvplan_largest_max_model_len": None if plan_doc is None else plan_doc["largest_max_model_len"],
        "prediction_error": prediction_error,
        "failure": failure,
        "log_consistent": consistency is None,
        "error_lines": log.error_lines if status in ("refused", "error", "failed") else [],
        "notes": notes,
        "log": log_path,
    }
    if status == "pass":
        return doc, EXIT_OK
    return doc, (EXIT_ENVIRONMENT if status == "failed" else EXIT_FAIL)


def version_note(log: VllmLog, version: str | None, predicted_with: str = VERIFIED_VLLM, *, flagged: bool = False) -> str | None:
    """The note a log from another vLLM gets (docs/verify.md): its version when it names one,
    else the V0 engine's line formats (vLLM before the V1 engine), else None.

    A V0 start sized its KV cache with other rules (another memory profile, its own block
    manager), so a difference against ``predicted_with``'s rules is expected, not a kvplan error.
    ``flagged``: ``predicted_with`` was chosen by --vllm-version over the log's own version: the
    note is a warning ("warning: ..."; the CLI prints it as a warning line)."""
    if version and version != predicted_with and flagged:
        return (
            f"warning: the log is from vLLM {version}; --vllm-version {predicted_with}: kvplan predicts with vLLM "
            f"{predicted_with} rules, not the rules of the vLLM that wrote the log, so differences may come from "
            "the version"
        )
    if version and version != predicted_with:
        return (
            f"the log is from vLLM {version}; kvplan predicts with vLLM {predicted_with} rules, so differences "
            "may come from the version"
        )
    if not version and "v0" in log.families and "v1" not in log.families:
        return (
            "the log is in the format of vLLM's V0 engine (an older release; the log names no version): kvplan "
            f"predicts with vLLM {predicted_with} rules (V1 engine), which size the KV cache differently, so "
            "differences may come from the version"
        )
    return None
