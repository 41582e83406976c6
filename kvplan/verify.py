"""``kvplan verify``: start vLLM (or read its log), take what it measured, diff against the Plan.

Three ways in, one comparison out:

* ``run_case``: start vLLM 0.26.0 in a child process (``python -m kvplan.vllm_child``, see that
  module for the protocol), stream its log to a file, stop it (the whole process group, also on
  Ctrl-C, SIGTERM and timeout), parse the log, predict with kvplan's planner on the GPU the child
  measured (or ``--gpu``), and compare.
* ``verify_log``: the same from a saved start-up log (vLLM 0.26 format first, older formats where
  their lines allow; see kvplan.vllm_log) or a calibration-shaped JSON record. No GPU, no vLLM.
* ``run_batch``: many ``run_case`` calls from a YAML file, each in its own child, continuing
  after failures; each can be recorded in the calibration JSON shape.

The comparison document (``--format json``):
    {"measured": {key: value|None}, "predicted": {key: value}, "errors": {key: {"abs", "pct",
     "within_log_rounding"}}, "status": "pass"|"mismatch"|"refused"|"failed"|"incomplete"|"error",
     "failure": "vLLM failed before sizing memory: ..." (status "failed", exit 3) | None,
     "log_consistent": false when the tokens line contradicts the block count (a note says why),
     "compared_on": "num_gpu_blocks"|"gpu_kv_cache_tokens", "measured_source": {key: how},
     "missing": {key: why}, ...}
Keys (bytes, tokens, blocks): total_bytes, requested_bytes, weights_bytes, activation_peak_bytes,
non_torch_bytes, cudagraph_bytes, cudagraph_subtracted_bytes, kv_cache_bytes, num_gpu_blocks,
block_size, gpu_kv_cache_tokens, max_concurrency, max_model_len, max_num_seqs,
max_num_batched_tokens, padding_layers.

This module never imports torch, vLLM or transformers; only the child does.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from kvplan import __version__
from kvplan.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAIL, EXIT_OK, EnvironmentMissing, KvplanError
from kvplan.vllm_log import (
    MEMORY_REFUSAL_KINDS,
    VllmLog,
    engine_arguments,
    is_memory_refusal,
    parse_log,
    split_starts,
    start_text,
)

GiB = 1 << 30
MiB = 1 << 20
# vLLM 0.26.0 v1/worker/gpu_worker.py compile_or_warm_up_model: the --kv-cache-memory suggestion
# leaves this buffer ("redundancy_buffer_memory = 150 * (1 << 20)").
SUGGESTION_BUFFER = 150 * MiB

VERIFIED_VLLM = "0.26.0"
DEFAULT_TIMEOUT_S = 15 * 60
DEFAULT_TOLERANCE_PCT = 1.0
# A tolerance above 100 % would pass a prediction of zero blocks; it is a typo, not a check.
MAX_TOLERANCE_PCT = 100.0
STOP_GRACE_S = 10.0
MIN_CASE_S = 30.0  # with --deadline, do not start a case with less time than this left
MAX_LOG_LINES = 4000
# --from-log reads at most this much: a vLLM start-up log is a few hundred KiB even at DEBUG
# (tests/data/logs/*), and the whole file is held in memory while it is parsed.
MAX_FROM_LOG_BYTES = 64 * 2**20
# --batch files are YAML written by hand: the 2 MiB cap of every other kvplan input file.
CHILD_OVERRIDE_ENV = "KVPLAN_VERIFY_CHILD"  # a Python script used instead of kvplan.vllm_child (tests)

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

def _whole(value: Any) -> int:
    """An engine argument that vLLM takes as an int: an int, a whole finite float (8192.0) or its
    text. Raises ValueError for inf, nan, 8192.5, True/False and other text."""
    if isinstance(value, bool):
        raise ValueError("not a whole number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if not value.is_integer():
            raise ValueError("not a whole number")
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value.strip())
    raise TypeError("not a number")


def _finite(value: Any) -> float:
    """An engine argument that vLLM takes as a float; inf and nan raise ValueError."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError("not a finite number")
    return out


# vLLM keyword -> (kvplan estimate option, converter). Names are vLLM's (EngineArgs fields).
_ENGINE_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "tensor_parallel_size": ("tensor_parallel_size", _whole),
    "pipeline_parallel_size": ("pipeline_parallel_size", _whole),
    "max_model_len": ("max_model_len", lambda v: -1 if str(v).lower() == "auto" else _whole(v)),
    "gpu_memory_utilization": ("gpu_memory_utilization", _finite),
    "kv_cache_dtype": ("kv_cache_dtype", str),
    "block_size": ("block_size", _whole),
    "dtype": ("dtype", lambda v: str(v).removeprefix("torch.")),
    "quantization": ("quantization", str),
    "max_num_seqs": ("max_num_seqs", _whole),
    "max_num_batched_tokens": ("max_num_batched_tokens", _whole),
    "enforce_eager": ("enforce_eager", bool),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", _whole),
    "kv_cache_memory": ("kv_cache_memory_bytes", _whole),
    "enable_prefix_caching": ("enable_prefix_caching", bool),
    "disable_hybrid_kv_cache_manager": ("disable_hybrid_kv_cache_manager", bool),
    "revision": ("revision", str),
}
# Keywords that do not change memory (or are what verify itself sets).
_NO_MEMORY_EFFECT = frozenset(
    {
        "model", "model_tag", "tokenizer", "skip_tokenizer_init", "load_format", "seed", "disable_log_stats",
        "trust_remote_code", "served_model_name", "host", "port", "api_key", "download_dir", "tokenizer_mode",
        "enable_log_requests", "disable_log_requests", "uvicorn_log_level", "allowed_local_media_path",
        "chat_template", "hf_token", "enable_auto_tool_choice", "tool_call_parser", "reasoning_parser",
        "default_chat_template_kwargs", "override_generation_config", "generation_config", "api_server_count",
        "enable_chunked_prefill", "tokenizer_revision", "ssl_keyfile", "ssl_certfile", "root_path",
        "disable_uvicorn_access_log", "middleware", "allowed_origins", "response_role", "config",
    }
)


@dataclass
class ChildRun:
    """One vLLM child process, after it ended.

    Attributes:
        returncode: the child's exit status (None when it had to be killed).
        log_path: where its stdout+stderr went (filtered of progress bars).
        timed_out / interrupted: why it was stopped early.
        duration_s: wall-clock seconds.
        log: the parsed log.
    """

    returncode: Optional[int]
    log_path: Path
    timed_out: bool
    interrupted: bool
    duration_s: float
    log: VllmLog


@dataclass
class CaseResult:
    """One verified case: the comparison document, its exit code and the record (if written)."""

    name: str
    doc: dict
    exit_code: int
    record_path: Optional[Path] = None
    log_path: Optional[Path] = None
    error: Optional[str] = None
    plan_doc: Optional[dict] = None
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# engine arguments
# ---------------------------------------------------------------------------------------------


def engine_kwargs_to_options(kwargs: dict) -> tuple[dict, list[str]]:
    """Map vLLM engine keywords (``LLM(...)``/``vllm serve`` names) to kvplan estimate options.

    Returns:
        (options, unmodelled): options for ``plan_from_options``; the keywords kvplan does not
        model but which may change memory (reported, never silently dropped).
    Raises:
        KvplanError: a value of a known keyword cannot be converted (names the keyword).
    """
    options: dict[str, Any] = {}
    unmodelled: list[str] = []
    for key, value in kwargs.items():
        if key in _ENGINE_OPTIONS:
            if value is None:
                continue
            option, conv = _ENGINE_OPTIONS[key]
            try:
                options[option] = conv(value)
            except (TypeError, ValueError, OverflowError) as exc:
                why = str(exc) if str(exc).startswith("not a") else "not a number of the kind vLLM takes"
                raise KvplanError(f"engine_args.{key}: cannot use {value!r} ({why})") from None
            if option == "kv_cache_dtype" and options[option] == "auto":
                del options[option]
            if option == "dtype" and options[option] == "auto":
                del options[option]
        elif key not in _NO_MEMORY_EFFECT:
            unmodelled.append(key)
    return options, unmodelled


def _check_logged_options(options: dict, *, skip: set) -> None:
    """Check engine options read from a log as ``kvplan estimate`` checks its flags (a
    max_model_len of -8192, a block_size of 7), except those in ``skip`` (the user's flags
    replace them).

    Raises:
        KvplanError: ``engine_args.KEY: ...`` naming the log's key, not a flag the user never typed.
    """
    from pydantic import ValidationError

    from kvplan.cli import _plain_message
    from kvplan.planner import EngineArgs

    given = {k: v for k, v in options.items() if k in EngineArgs.model_fields and k not in skip}
    try:
        EngineArgs(**given)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "engine_args"
        raise KvplanError(f"engine_args.{key}: {_plain_message(err)} (got {err.get('input')!r})") from None


def options_to_engine_kwargs(options: dict) -> dict:
    """kvplan estimate options the user set -> ``LLM(...)`` keywords (vLLM 0.26.0 names).

    ``max_model_len=-1`` (auto) stays -1, which vLLM 0.26.0 accepts as auto-fit
    (config/model.py). Options equal to None, "auto" dtypes and ``enforce_eager=False`` are left
    to vLLM's defaults.
    """
    out: dict[str, Any] = {}
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "block_size",
        "dtype",
        "quantization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_memory_bytes",
        "enable_prefix_caching",
        "disable_hybrid_kv_cache_manager",
        "revision",
    ):
        v = options.get(key)
        if v is None or (key in ("kv_cache_dtype", "dtype") and v == "auto"):
            continue
        if key in ("tensor_parallel_size", "pipeline_parallel_size") and v == 1:
            continue
        out[key] = v
    if options.get("enforce_eager"):
        out["enforce_eager"] = True
    return out


# ---------------------------------------------------------------------------------------------
# GPU and prediction
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuChoice:
    """Which GPU profile the prediction uses and why.

    Attributes:
        gpu: profile id for plan_from_options.
        gpu_memory: --gpu-memory override (bytes as text) or None.
        extra_profiles: profile files to load (the user's plus a generated one for this machine).
        source: one line saying where the figures come from.
    """

    gpu: str
    gpu_memory: Optional[str]
    extra_profiles: tuple[str, ...]
    source: str


def _machine_profile_file(
    name: str | None, total: int, compute_capability: str | None, user_profiles, nvml_total: int | None = None, quality: str = "measured"
) -> str:
    """Write a one-profile YAML for the GPU this log/child measured and return its path."""
    import yaml

    from kvplan.gpus import find_gpu, load_profiles

    base = None
    if name:
        try:
            base = find_gpu(name, load_profiles(list(user_profiles or [])))
        except KvplanError:
            base = None
    entry: dict[str, Any] = {
        "id": "measured-gpu",
        "name": name or (base.display_name if base else "measured GPU"),
        "reported_name": name,
        "memory_bytes": int(total),
        "memory_quality": quality,
        "memory_source": "the verified start (torch.cuda.mem_get_info total)" if quality == "measured" else "the vLLM log",
    }
    if nvml_total:
        entry["nvidia_smi_total_mib"] = int(nvml_total) // MiB
    if base is not None:
        entry["fp8_supported"] = base.fp8_supported
        entry["bf16_supported"] = base.bf16_supported
        entry["compute_capability"] = base.compute_capability
        if not nvml_total and base.nvidia_smi_total_mib:
            entry["nvidia_smi_total_mib"] = base.nvidia_smi_total_mib
    elif compute_capability:
        try:
            major, minor = (int(x) for x in compute_capability.split(".")[:2])
            entry["fp8_supported"] = (major, minor) >= (8, 9)
            entry["bf16_supported"] = major >= 8
            entry["compute_capability"] = compute_capability
        except ValueError:
            pass
    fd, path = tempfile.mkstemp(prefix="kvplan-gpu-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"gpus": [entry]}, fh)
    return path


def choose_gpu(log: VllmLog, *, gpu: Optional[str], gpu_memory: Optional[str], gpu_profiles, record_gpu: dict | None = None) -> GpuChoice:
    """Pick the GPU profile for the prediction.

    ``--gpu`` wins. Otherwise the GPU the run measured: the child's MEMINFO/KVPLAN_ENV line or a
    record's ``gpu.cuda_total_bytes`` (exact); else the log's total GiB when it matches exactly
    one known profile; else that rounded total itself.

    Raises:
        KvplanError: the log does not show the GPU memory and --gpu is not given.
    """
    user = tuple(gpu_profiles or ())
    if gpu:
        return GpuChoice(gpu, gpu_memory, user, f"--gpu {gpu}")
    env = log.env or {}
    total = None
    name = None
    if log.meminfo and log.meminfo.get("total"):
        total, name = log.meminfo["total"], log.meminfo.get("name")
    if record_gpu and record_gpu.get("cuda_total_bytes"):
        total = total or int(record_gpu["cuda_total_bytes"])
        name = name or record_gpu.get("name")
    if env.get("cuda_total_bytes"):
        total = total or int(env["cuda_total_bytes"])
        name = name or env.get("cuda_device")
    if total:
        path = _machine_profile_file(name, total, env.get("compute_capability"), user, env.get("nvml_total_bytes"))
        return GpuChoice("measured-gpu", gpu_memory, user + (path,), f"{name or 'GPU'}: {total:,} B measured by CUDA")
    if log.total_bytes:
        from kvplan.gpus import load_profiles

        res = log.resolution_bytes.get("total_bytes", int(0.005 * GiB))
        matches = [p for p in load_profiles(list(user)).values() if abs(p.memory_bytes - log.total_bytes) <= res]
        if len(matches) == 1:
            p = matches[0]
            return GpuChoice(p.id, gpu_memory, user, f"{p.id}: the only profile whose memory matches the log's {log.total_bytes / GiB:.2f} GiB")
        path = _machine_profile_file(None, log.total_bytes, None, user, quality="vllm-log-gib")
        return GpuChoice(
            "measured-gpu",
            gpu_memory,
            user + (path,),
            f"the log's total {log.total_bytes / GiB:.2f} GiB (rounded to 0.01 GiB by vLLM; give --gpu for exact bytes)",
        )
    raise KvplanError("--gpu: the log does not show the GPU's memory; name the GPU it ran on", hint="e.g. --gpu H100-80GB")


def predict(model: str, options: dict, choice: GpuChoice, *, revision: Optional[str] = None):
    """(Plan, ModelSource) for ``model`` with kvplan estimate ``options`` on ``choice``.

    Reuses kvplan.cli.plan_from_options (the same path as ``kvplan estimate``).
    Raises:
        KvplanError: bad options or model (exit 2).
    """
    from kvplan.cli import plan_from_options

    kw = dict(options)
    kw.pop("revision", None)
    return plan_from_options(
        model=model,
        gpu=choice.gpu,
        gpu_memory=choice.gpu_memory,
        gpu_profiles=list(choice.extra_profiles) or None,
        revision=revision,
        **kw,
    )


def plan_document(plan, source) -> dict:
    """The ``kvplan estimate --format json`` document of a plan (kvplan.render.to_dict)."""
    from kvplan import render

    return render.to_dict(plan, source.provenance | {"origin": source.origin})


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


# ---------------------------------------------------------------------------------------------
# measured figures
# ---------------------------------------------------------------------------------------------


def measured_figures(log: VllmLog, *, enforce_eager: Optional[bool] = None) -> tuple[dict, dict, dict, dict]:
    """What vLLM measured, in the comparison keys.

    Priority per key: the child's exact bytes (KVPLAN_EXACT, read from vLLM's worker) > exact
    log figures (MEMINFO, RESULT, block counts, token counts) > GiB figures of the log (rounded
    to 0.01 GiB by vLLM's format_gib). One derived exact figure: with ``enforce_eager`` and
    "0.0 GiB for CUDAGraph memory", the available KV bytes = the "fit into requested memory"
    suggestion + 150 MiB (vLLM 0.26.0 gpu_worker.py: suggestion = requested - weights -
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
        if "v1" in log.families or log.gpu_kv_cache_tokens is not None:
            missing["num_gpu_blocks"] = (
                "not in the log: vLLM 0.26 does not log num_gpu_blocks at INFO level (it logs the KV "
                "cache size in tokens); compared on gpu_kv_cache_tokens instead"
            )
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


# ---------------------------------------------------------------------------------------------
# the child process
# ---------------------------------------------------------------------------------------------

_STAGE_LINES = (
    (re.compile(r"^KVPLAN_STAGE (.+)$"), None),
    (re.compile(r"non-default args|Initializing a V1 LLM engine"), "configuring engine"),
    (re.compile(r"Starting to load model|Loading weights took"), "loading weights"),
    (re.compile(r"Model loading took"), "profiling memory"),
    (re.compile(r"Available KV cache memory"), "allocating KV cache"),
    (re.compile(r"Capturing CUDA graph|Graph capturing|Compile and warming up"), "capturing CUDA graphs"),
    (re.compile(r"init engine \(profile"), "stopping vLLM"),
)
_PROGRESS = re.compile(r"\d+%\|[^|]*\|\s*\d+/\d+")


def _clean(line: str) -> Optional[str]:
    """A child output line as kept in the log file: progress-bar redraws and bars dropped."""
    line = line.rstrip("\n")
    if "\r" in line:
        line = line.rsplit("\r", 1)[-1]
    if _PROGRESS.search(line):
        return None
    return line


def child_command(request: dict) -> list[str]:
    """The child's command line: ``sys.executable -m kvplan.vllm_child '<json>'`` (or the
    script named by $KVPLAN_VERIFY_CHILD, used by tests to stand in for vLLM)."""
    payload = json.dumps(request, separators=(",", ":"))
    override = os.environ.get(CHILD_OVERRIDE_ENV)
    if override:
        return [sys.executable, override, payload]
    return [sys.executable, "-m", "kvplan.vllm_child", payload]


def _child_env() -> dict:
    env = dict(os.environ)
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in the child's own process
    env["PYTHONUNBUFFERED"] = "1"
    pkg_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop the child and everything it started (it leads its own process group)."""
    if not hasattr(os, "killpg"):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        return
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    # Grandchildren (compile workers...) may outlive the leader: end the rest of the group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Terminated(BaseException):
    """SIGTERM received while a child runs (handled like Ctrl-C)."""


def run_child(
    request: dict,
    *,
    log_path: Path,
    timeout_s: float,
    on_stage: Callable[[str], None] = lambda s: None,
    grace_s: float = STOP_GRACE_S,
) -> ChildRun:
    """Start the vLLM child, stream its output to ``log_path``, and stop it.

    The child leads a new process group; on return (normal end, timeout, Ctrl-C, SIGTERM) the
    group is terminated (SIGTERM, then SIGKILL after ``grace_s``), so no vLLM process and none of
    its GPU memory remain. KeyboardInterrupt is re-raised after cleanup.

    Raises:
        EnvironmentMissing: the child cannot be started at all.
        KeyboardInterrupt: Ctrl-C or SIGTERM (after the child is gone).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = child_command(request)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_child_env(),
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        raise EnvironmentMissing(f"cannot start {cmd[0]}: {exc.strerror}") from None

    lines: "queue.Queue[Optional[str]]" = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, name="kvplan-vllm-log", daemon=True)
    reader.start()
    timed_out = interrupted = False
    previous_handler = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:

        def on_term(signum, frame):
            raise _Terminated()

        previous_handler = signal.signal(signal.SIGTERM, on_term)
    kept = 0
    try:
        with open(log_path, "w", encoding="utf-8") as out:
            while True:
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                    break
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line is None:
                    break
                clean = _clean(line)
                if clean is None:
                    continue
                for rx, name in _STAGE_LINES:
                    m = rx.search(clean)
                    if m:
                        on_stage(name or m.group(1).strip())
                        break
                if kept < MAX_LOG_LINES:
                    out.write(clean + "\n")
                    kept += 1
                    if kept == MAX_LOG_LINES:
                        out.write(f"[kvplan verify: log cut after {MAX_LOG_LINES} lines]\n")
                elif clean.startswith(("RESULT ", "KVPLAN_", "MEMINFO ")):
                    out.write(clean + "\n")  # protocol lines always kept
                out.flush()
    except (KeyboardInterrupt, _Terminated):
        interrupted = True
    finally:
        on_stage("stopping vLLM")
        _stop_group(proc, grace_s)
        reader.join(timeout=5)
        if in_main and previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
    if interrupted:
        raise KeyboardInterrupt
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return ChildRun(
        returncode=None if timed_out else proc.returncode,
        log_path=log_path,
        timed_out=timed_out,
        interrupted=False,
        duration_s=time.monotonic() - start,
        log=parse_log(text),
    )


def make_record_dir(path: Path) -> None:
    """Create the --record directory (and its parents), after the environment check, when a
    start is about to be recorded (kvplan.cli_verify checked the path before anything ran).

    Raises:
        KvplanError: it cannot be created after all (exit 2).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KvplanError(f"--record: cannot create {path}: {e.strerror or e}") from None


def check_environment(expect_vllm: Optional[str]) -> None:
    """Fail fast (exit 3) when torch or vLLM is not importable, or vLLM is another version.

    Uses importlib metadata only (nothing is imported). Skipped when $KVPLAN_VERIFY_CHILD names
    a stand-in child. The GPU itself is checked by the child (it needs torch).
    """
    if os.environ.get(CHILD_OVERRIDE_ENV):
        return
    hint = "pip install 'kvplan[verify]' (vLLM and torch), or use --from-log FILE without a GPU"
    if importlib.util.find_spec("torch") is None:
        raise EnvironmentMissing("torch is not installed", hint=hint)
    if importlib.util.find_spec("vllm") is None:
        raise EnvironmentMissing("vLLM is not installed", hint=hint)
    if expect_vllm:
        try:
            from importlib.metadata import version

            found = version("vllm")
        except Exception:
            return  # no metadata (unpacked source): the child checks vllm.__version__
        if found != expect_vllm:
            raise EnvironmentMissing(
                f"vLLM {found} is installed; kvplan verify checks against vLLM {expect_vllm}",
                hint=f"pip install vllm=={expect_vllm}",
            )


# ---------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return s[:80] or "case"


_SHORT = {
    "max_model_len": "mml",
    "gpu_memory_utilization": "u",
    "kv_cache_dtype": "kv",
    "block_size": "bs",
    "max_num_seqs": "seqs",
    "max_num_batched_tokens": "mbt",
    "quantization": "q",
    "dtype": "",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
}


def default_name(model: str, engine_args: dict, usage: str) -> str:
    """A readable record name: model basename plus the arguments that differ from defaults."""
    base = Path(model.rstrip("/")).name or model
    parts = [_slug(base).lower()]
    for key, value in engine_args.items():
        if key == "enforce_eager" and value:
            parts.append("eager")
        elif key in _SHORT:
            parts.append(f"{_SHORT[key]}{value}")
    if usage == "serve":
        parts.append("serve")
    return _slug("_".join(str(p) for p in parts))


def _materialize_model(model: str, revision: Optional[str], workdir: Path, dummy_weights: bool) -> tuple[str, dict | None]:
    """What vLLM should load, and the config kvplan reads.

    With dummy weights vLLM only needs config.json: a local directory is used as is; a bundled or
    Hub model's config is written to ``workdir/<name>/config.json``. Without dummy weights the
    model string goes to vLLM unchanged (it loads the real checkpoint).
    Raises:
        KvplanError: the model cannot be resolved.
    """
    from kvplan.sources import resolve_model

    path = Path(model).expanduser()
    if os.path.isdir(path):  # False for a name the file system refuses: resolve_model says why
        return str(path), None
    source = resolve_model(model, revision=revision)
    if not dummy_weights:
        return model, source.config
    target = workdir / _slug(source.name.replace("/", "__"))
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(source.config, indent=1), encoding="utf-8")
    return str(target), source.config


def _config_dir(config: dict, workdir: Path, name: str) -> str:
    target = workdir / _slug(name)
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return str(target)


def _predict_for(log: VllmLog, model_for_kvplan: str, options: dict, usage: str, *, gpu, gpu_memory, gpu_profiles, record_gpu=None, revision=None, vllm_version=VERIFIED_VLLM):
    """(plan, source, GpuChoice) or raises KvplanError."""
    choice = choose_gpu(log, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles, record_gpu=record_gpu)
    opts = dict(options)
    opts["usage"] = usage
    opts.setdefault("vllm_version", vllm_version)
    try:
        plan, source = predict(model_for_kvplan, opts, choice, revision=revision)
    finally:
        for path in choice.extra_profiles[len(tuple(gpu_profiles or ())):]:  # the generated ones
            try:
                os.unlink(path)
            except OSError:
                pass
    return plan, source, choice


def log_consistency(log: VllmLog, measured: dict, source: dict, plan_doc: Optional[dict]) -> Optional[str]:
    """None, or a note when the log's "GPU KV cache size: N tokens" contradicts its block count
    (0 blocks next to N > 0 tokens included).

    vLLM 0.26.0 (v1/core/kv_cache_utils.py, the report after get_kv_cache_configs) prints
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
    for lineno, why in log.rejected_lines:
        notes.append(f"log line {lineno} set aside: {why}")
    version = log.vllm_version or (log.env or {}).get("vllm")
    note = version_note(log, version)
    if note:
        notes.append(note)
    doc = {
        "kvplan_version": __version__,
        "mode": mode,
        "model": model,
        "usage": usage,
        "engine_args": engine_args,
        "vllm_version": version,
        "gpu": gpu_source,
        "status": status,
        "tolerance_pct": tolerance_pct,
        "compared_on": compared_on or None,
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


# ---------------------------------------------------------------------------------------------
# --from-log
# ---------------------------------------------------------------------------------------------


def version_note(log: VllmLog, version: str | None) -> str | None:
    """The note a log from another vLLM gets (docs/verify.md): its version when it names one,
    else the V0 engine's line formats (vLLM before the V1 engine), else None.

    A V0 start sized its KV cache with other rules (another memory profile, its own block
    manager), so a difference against 0.26.0's rules is expected, not a kvplan error."""
    if version and version != VERIFIED_VLLM:
        return (
            f"the log is from vLLM {version}; kvplan predicts with vLLM {VERIFIED_VLLM} rules, so differences "
            "may come from the version"
        )
    if not version and "v0" in log.families and "v1" not in log.families:
        return (
            "the log is in the format of vLLM's V0 engine (an older release; the log names no version): kvplan "
            f"predicts with vLLM {VERIFIED_VLLM} rules (V1 engine), which size the KV cache differently, so "
            "differences may come from the version"
        )
    return None


def _read_log_file(path: str) -> tuple[str, dict | None]:
    """(log text, record) of a log file or a calibration-shaped JSON record.

    At most MAX_FROM_LOG_BYTES (64 MiB) are read, and only from a regular file (a FIFO or a
    device such as /dev/zero is refused before it is read; kvplan.safe_io.read_bytes).
    Raises:
        KvplanError: missing, not a regular file, over 64 MiB, or a JSON record without a
            ``log_excerpt`` list (one line naming --from-log and the file).
    """
    from kvplan.safe_io import InputError, read_bytes

    p = Path(path)
    try:
        data = read_bytes(p, MAX_FROM_LOG_BYTES)
    except InputError as exc:
        if exc.kind == "missing":
            raise KvplanError(f"--from-log: file not found: {path}") from None
        raise KvplanError(f"--from-log: {path}: {exc.message}", hint=_LOG_HINT if exc.kind == "too-large" else None) from None
    raw = data.decode("utf-8", errors="replace")
    stripped = raw.lstrip()
    if p.suffix == ".json" or stripped.startswith("{"):
        from kvplan.sources.local import MAX_JSON_DEPTH, json_text_depth

        if json_text_depth(raw) > MAX_JSON_DEPTH:  # "[[[[...": a RecursionError in json.loads
            raise KvplanError(
                f"--from-log: {path}: JSON nested more than {MAX_JSON_DEPTH} levels deep; not a vLLM log or a calibration record"
            )
        try:
            record = json.loads(raw)
        except RecursionError:  # cannot happen below MAX_JSON_DEPTH; never a traceback
            raise KvplanError(f"--from-log: {path}: JSON nested too deeply") from None
        except json.JSONDecodeError as exc:
            if p.suffix == ".json":
                raise KvplanError(f"--from-log: {path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            return raw, None
        if not isinstance(record, dict) or not isinstance(record.get("log_excerpt"), list):
            raise KvplanError(f"--from-log: {path}: a JSON record needs a 'log_excerpt' list (the calibration shape)")
        lines = [str(x) for x in record["log_excerpt"]]
        if isinstance(record.get("exact_bytes"), dict) and not any(s.startswith("KVPLAN_EXACT ") for s in lines):
            lines.append("KVPLAN_EXACT " + json.dumps(record["exact_bytes"]))
        return "\n".join(lines), record
    return raw, None


_LOG_HINT = "give the start-up part of the log (vLLM prints its memory lines in the first minutes), e.g. head -c 10M"


def _same_model(logged: str, given: str) -> bool:
    """Whether the model a log names and MODEL are the same: equal, or the same last path
    part (a Hub id and its local copy, or one directory written to two temporary paths)."""
    a, b = logged.rstrip("/"), given.rstrip("/")
    return a == b or a.rsplit("/", 1)[-1] == b.rsplit("/", 1)[-1]


def _record_usage(record: dict) -> str:
    if record.get("usage") in ("llm", "serve"):
        return record["usage"]
    notes = str((record.get("environment") or {}).get("notes", ""))
    if "serve" in notes and "LLM class" not in notes:
        return "serve"
    return "llm"  # the calibration starts used the offline LLM class (calibration/README.md)


def verify_log(
    path: str,
    *,
    model: Optional[str] = None,
    gpu: Optional[str] = None,
    gpu_memory: Optional[str] = None,
    gpu_profiles=None,
    overrides: Optional[dict] = None,
    usage: Optional[str] = None,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    revision: Optional[str] = None,
    vllm_version: str = VERIFIED_VLLM,
    workdir: Optional[Path] = None,
    start: Optional[int] = None,
) -> tuple[dict, int]:
    """Re-plan a saved vLLM start and diff: ``kvplan verify --from-log FILE``.

    A log holding several starts (kvplan.vllm_log.split_starts: a server restarted into the same
    file) is compared on one: ``start`` (1-based, ``--start N``), by default the last, with a
    note naming how many there are and which was used.

    Args:
        path: a vLLM log, or a calibration-shaped JSON record (``log_excerpt`` + config...).
        model: overrides the model the log names (repo id, directory or config.json).
        overrides: kvplan estimate options that replace what the log shows.
        usage: "llm"/"serve"; default: what the log shows, else "serve" (a record: "llm").
    Returns:
        (document, exit code)
    Raises:
        KvplanError: unreadable file, no vLLM lines, model not resolvable, bad options (exit 2).
    """
    text, record = _read_log_file(path)
    spans = split_starts(text)
    if start is not None and not 1 <= start <= len(spans):
        raise KvplanError(
            f"--start: {start} is not a start of {path}: it holds {len(spans)} vLLM start{'s' if len(spans) > 1 else ''}",
            hint=f"give --start 1 to {len(spans)}" if len(spans) > 1 else "leave --start out",
        )
    chosen = start or len(spans)
    if len(spans) > 1:
        text = start_text(text, spans[chosen - 1])
    log = parse_log(text)
    def at(lineno: int) -> str:
        return f"{path}: log_excerpt line {lineno}" if record is not None else f"{path}:{lineno}"

    if log.rejected_lines:
        lineno, why = log.rejected_lines[0]
        raise KvplanError(f"--from-log: {at(lineno)}: {why}; not a line kvplan's child writes")
    if log.invalid_lines:
        lineno, why = log.invalid_lines[0]
        raise KvplanError(f"--from-log: {at(lineno)}: {why}")
    if record is not None:
        rgpu = record.get("gpu") if isinstance(record.get("gpu"), dict) else {}
        if log.meminfo is None and isinstance(rgpu.get("cuda_total_bytes"), int):
            log.meminfo = {"total": rgpu["cuda_total_bytes"], "free": rgpu.get("cuda_free_bytes_at_start"), "name": rgpu.get("name")}
            log.total_bytes = rgpu["cuda_total_bytes"]
        if log.padding_layers is None and isinstance(record.get("padding_layers"), int):
            log.padding_layers = record["padding_layers"]
        if log.num_gpu_blocks is None and isinstance(record.get("num_gpu_blocks"), int):
            log.num_gpu_blocks, log.num_gpu_blocks_source = record["num_gpu_blocks"], "record"
        outcome = str(record.get("outcome") or "")
        if log.refusal is None and outcome.startswith("refused"):
            from kvplan.vllm_log import Refusal

            log.refusal = Refusal(kind="error", message=outcome.removeprefix("refused: "))
        renv = record.get("environment") if isinstance(record.get("environment"), dict) else {}
        if log.vllm_version is None and isinstance(renv.get("vllm"), str):
            log.vllm_version = renv["vllm"]
        if log.case is None:
            log.case = {
                "name": record.get("name"),
                "model": None,
                "engine_args": record.get("engine_args") or {},
                "usage": _record_usage(record),
            }
        elif not log.case.get("usage"):
            log.case["usage"] = _record_usage(record)
        log.usage, log.usage_evidence = log.case["usage"], "the record's environment notes"
    if not (log.families or log.excerpt or log.refusal or log.case):
        raise KvplanError(f"--from-log: {path}: no vLLM start-up lines found", hint="pass the log vLLM printed while starting")
    notes: list[str] = []
    if len(spans) > 1:
        where = ", ".join(f"{i} at lines {a}-{b}" for i, (a, b) in enumerate(spans, 1))
        which = f"start {chosen} (--start {chosen})" if start else f"the last, start {chosen}"
        notes.append(
            f"the log holds {len(spans)} vLLM starts ({where}); compared with {which}"
            + ("" if start else "; pass --start N for another")
        )
    if workdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="kvplan-verify-"))
        try:
            return verify_log(
                path, model=model, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles, overrides=overrides,
                usage=usage, tolerance_pct=tolerance_pct, revision=revision, vllm_version=vllm_version, workdir=tmp,
                start=start,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # model for kvplan
    model_for_kvplan = model
    if model_for_kvplan is None and record is not None and isinstance(record.get("config"), dict):
        model_for_kvplan = _config_dir(record["config"], workdir, record.get("name") or "record")
    if model_for_kvplan is None and isinstance(log.config, dict):
        model_for_kvplan = _config_dir(log.config, workdir, (log.case or {}).get("name") or "logged-model")
    if model_for_kvplan is None:
        if not log.model:
            raise KvplanError(f"--from-log: {path}: the log does not name the model", hint="pass the model (repo id or directory) as MODEL")
        from kvplan.sources import resolve_model

        try:
            resolve_model(log.model, revision=revision)
        except KvplanError as exc:
            raise KvplanError(
                f"--from-log: the log's model {log.model!r} cannot be read here ({exc.message})",
                hint="pass the model (repo id or a directory with config.json) as MODEL",
            ) from None
        model_for_kvplan = log.model
    if model is not None:
        # the header names the model predicted; say so when the log ran another one
        model_name = model
        logged = log.model or ((record or {}).get("model") if isinstance((record or {}).get("model"), str) else None)
        if logged and not _same_model(logged, model):
            notes.append(
                f"the log's start ran {logged!r}; kvplan predicted {model!r} as MODEL asks, so differences may come from the model"
            )
    else:
        model_name = (record or {}).get("name") or log.model or model_for_kvplan

    engine_args = engine_arguments(log)
    if log.args_line is not None:
        args_where = at(log.args_line) + (": KVPLAN_CASE line" if log.case is not None and "kvplan-child" in log.families else "")
    elif record is not None and log.case is not None:
        args_where = f"{path}: the record's engine_args"
    else:
        args_where = f"{path}: the engine config line"
    try:
        options, unmodelled = engine_kwargs_to_options(engine_args)
        _check_logged_options(options, skip=set(k for k, v in (overrides or {}).items() if v is not None))
    except KvplanError as exc:
        raise KvplanError(f"--from-log: {args_where}: {exc.message}") from None
    if unmodelled:
        notes.append("engine arguments kvplan does not model: " + ", ".join(sorted(unmodelled)))
    args_known = log.case is not None or log.non_default_args is not None
    if not args_known and "max_model_len" not in options and log.max_model_len:
        # No argument line: take the length vLLM ran with ("Maximum concurrency for N tokens").
        options["max_model_len"] = log.max_model_len
        notes.append(f"max_model_len {log.max_model_len} taken from the log (it shows no engine-argument line)")
    for key, value in (overrides or {}).items():
        if value is not None:
            options[key] = value
    if usage is None:
        usage = log.usage or "serve"
        notes.append(f"usage {usage}: " + (log.usage_evidence or "the log does not show the entry point; assumed `vllm serve`"))
    record_gpu = (record or {}).get("gpu") if isinstance((record or {}).get("gpu"), dict) else None
    plan_doc = None
    prediction_error = None
    gpu_source = ""
    try:
        plan, source, choice = _predict_for(
            log, model_for_kvplan, options, usage, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles,
            record_gpu=record_gpu, revision=revision, vllm_version=vllm_version,
        )
        plan_doc = plan_document(plan, source)
        gpu_source = choice.source
    except KvplanError as exc:
        if log.refusal is None:
            raise
        prediction_error = exc.message
    doc, code = comparison_document(
        log=log,
        plan_doc=plan_doc,
        prediction_error=prediction_error,
        options=options,
        engine_args=engine_args,
        usage=usage,
        tolerance_pct=tolerance_pct,
        model=str(model_name),
        gpu_source=gpu_source,
        log_path=str(path),
        mode="from_log",
        notes=notes,
    )
    return doc, code


# ---------------------------------------------------------------------------------------------
# live run
# ---------------------------------------------------------------------------------------------


def build_record(*, name: str, request: dict, config: Optional[dict], log: VllmLog, doc: dict, plan_doc: Optional[dict]) -> dict:
    """The calibration-shaped JSON record of one start (../shared/calibration/README.md fields)
    plus ``exact_bytes`` (KVPLAN_EXACT) and ``kvplan_prediction`` (estimate JSON)."""

    def gib(v):
        return None if v is None else round(v / GiB, 2)

    env = log.env or {}
    ex = log.exact or {}
    meminfo = log.meminfo or {}
    layout = ex.get("kv_cache_layout") or {}
    est_cg = log.cudagraph_estimate_bytes
    if est_cg is None and isinstance(ex.get("cudagraph_memory_estimate"), int) and ex["cudagraph_memory_estimate"]:
        est_cg = ex["cudagraph_memory_estimate"]
    driver = env.get("driver")
    gpu_line = f"{env.get('cuda_device') or meminfo.get('name')} ({env.get('cuda_device_count', 1)} GPU" + (
        f", driver {driver})" if driver else ")"
    )
    usage = request.get("usage", "llm")
    notes = (
        ("LLM class (offline usage context)" if usage == "llm" else "`vllm serve` engine (OPENAI_API_SERVER usage context)")
        + (", load_format=dummy, skip_tokenizer_init=True" if request.get("dummy_weights", True) else "")
        + ", VLLM_ENABLE_V1_MULTIPROCESSING=0, started by kvplan verify"
    )
    excerpt = [line for line in log.excerpt if not line.startswith(("KVPLAN_", "MEMINFO "))]
    if log.result and not any(s.startswith("RESULT ") for s in excerpt):
        excerpt.append("RESULT " + " ".join(f"{k}={v}" for k, v in log.result.items()))
    if doc["status"] in ("refused", "error", "failed"):
        # keep why it failed: vLLM's last error lines and the child's verdict line
        excerpt += [line for line in log.error_lines[-6:] if line not in excerpt]
        if log.child_error:
            excerpt.append("KVPLAN_ERROR " + json.dumps(log.child_error))
    return {
        "name": name,
        "engine_args": request.get("engine_args", {}),
        "usage": usage,
        "config": config or log.config,
        "gpu": {
            "name": env.get("cuda_device") or meminfo.get("name"),
            "cuda_total_bytes": meminfo.get("total") or env.get("cuda_total_bytes"),
            "cuda_free_bytes_at_start": meminfo.get("free") or env.get("cuda_free_bytes"),
        },
        "measured_gib": {
            "weights": gib(log.weights_bytes if log.weights_bytes is not None else ex.get("weights")),
            "peak_activation": gib(log.activation_peak_bytes if log.activation_peak_bytes is not None else ex.get("peak_activation")),
            "non_torch": gib(log.non_torch_bytes if log.non_torch_bytes is not None else ex.get("non_torch")),
            "cudagraph": gib(log.cudagraph_bytes if log.cudagraph_bytes is not None else ex.get("cudagraph_bytes")),
        },
        "suggested_kv_cache_memory_bytes": {
            "fit_requested": log.suggested_fit_requested_bytes,
            "fill_gpu": log.suggested_fill_gpu_bytes,
        },
        "gpu_memory_utilization": log.gpu_memory_utilization if log.gpu_memory_utilization is not None else ex.get("gpu_memory_utilization"),
        "requested_gib": gib(log.requested_bytes if log.requested_bytes is not None else ex.get("requested_memory")),
        "available_kv_cache_gib": gib(log.kv_cache_bytes if log.kv_cache_bytes is not None else ex.get("available_kv_cache_memory_bytes")),
        "gpu_kv_cache_tokens": log.gpu_kv_cache_tokens,
        "max_model_len": log.max_model_len if log.max_model_len is not None else ex.get("max_model_len"),
        "max_concurrency": log.max_concurrency,
        "num_gpu_blocks": log.num_gpu_blocks,
        "block_size": log.block_size,
        "max_num_seqs": log.max_num_seqs,
        "max_num_batched_tokens": log.max_num_batched_tokens,
        "attention_backend": log.attention_backend,
        "estimated_cudagraph_gib": gib(est_cg),
        "padding_layers": layout.get("padding_layers", log.padding_layers),
        "log_excerpt": excerpt,
        "environment": {
            "vllm": env.get("vllm") or log.vllm_version,
            "torch": env.get("torch"),
            "gpu": gpu_line,
            "compute_capability": env.get("compute_capability"),
            "cuda_runtime": env.get("cuda_runtime"),
            "env": env.get("env", {}),
            "notes": notes,
        },
        "outcome": "started" if log.started and doc["status"] != "refused" else f"refused: {(doc.get('refusal') or {}).get('message') or (log.child_error or {}).get('message', 'vLLM did not start')}",
        "exact_bytes": ex or None,
        "kvplan_prediction": plan_doc if plan_doc is not None else {"error": doc.get("prediction_error")},
        "verify": {
            "status": doc["status"],
            "compared_on": doc["compared_on"],
            "tolerance_pct": doc["tolerance_pct"],
            "errors": doc["errors"],
            "kvplan_version": __version__,
        },
    }


def run_case(
    *,
    model: str,
    engine_args: dict,
    usage: str = "llm",
    dummy_weights: bool = True,
    name: Optional[str] = None,
    gpu: Optional[str] = None,
    gpu_memory: Optional[str] = None,
    gpu_profiles=None,
    revision: Optional[str] = None,
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    record_dir: Optional[Path] = None,
    vllm_version: str = VERIFIED_VLLM,
    config: Optional[dict] = None,
    on_stage: Callable[[str], None] = lambda s: None,
    workdir: Optional[Path] = None,
    validate: bool = True,
) -> CaseResult:
    """Start vLLM with ``engine_args`` for ``model`` in a child, compare with kvplan's plan.

    Args:
        model: repo id, bundled id, directory or config.json path (``config`` given: a label).
        engine_args: ``LLM(...)`` keywords (vLLM names), passed to vLLM verbatim.
        usage: "llm" (offline LLM class, the default) or "serve" (`vllm serve` defaults).
        config: a config.json dict to run instead of resolving ``model``.
        validate: predict once before starting vLLM so bad input fails before the GPU is used.
    Returns:
        a CaseResult; exit_code 0 pass, 1 mismatch/refused/incomplete, 3 environment.
    Raises:
        KvplanError: bad input found by the pre-validation (exit 2).
        EnvironmentMissing: no torch/vLLM, wrong vLLM version, no GPU, timeout (exit 3).
        KeyboardInterrupt: after the child is stopped.
    """
    if workdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="kvplan-verify-"))
        try:
            return run_case(
                model=model, engine_args=engine_args, usage=usage, dummy_weights=dummy_weights, name=name, gpu=gpu,
                gpu_memory=gpu_memory, gpu_profiles=gpu_profiles, revision=revision, tolerance_pct=tolerance_pct,
                timeout_s=timeout_s, record_dir=record_dir, vllm_version=vllm_version, config=config, on_stage=on_stage,
                workdir=tmp, validate=validate,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    options, unmodelled = engine_kwargs_to_options(engine_args)
    notes = []
    if unmodelled:
        notes.append("engine arguments kvplan does not model: " + ", ".join(sorted(unmodelled)))
    if config is not None:
        vllm_model = _config_dir(config, workdir, name or "model")
        kvplan_model = vllm_model
        cfg = config
    else:
        vllm_model, cfg = _materialize_model(model, revision, workdir, dummy_weights)
        kvplan_model = vllm_model if os.path.isdir(vllm_model) else model
        if cfg is None and (Path(vllm_model) / "config.json").is_file():
            from kvplan.sources.local import read_config

            cfg = read_config(Path(vllm_model) / "config.json")
    name = name or default_name(model, engine_args, usage)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise KvplanError(f"--name: {name!r} must be letters, digits, '.', '_' or '-' (it names the record files)")
    if validate:
        probe = parse_log("")
        _predict_for(
            probe, kvplan_model, options, usage, gpu=gpu or "h200", gpu_memory=gpu_memory, gpu_profiles=gpu_profiles,
            revision=revision, vllm_version=vllm_version,
        )
    check_environment(vllm_version)
    if record_dir is not None:  # only now: a run that cannot start leaves no directory behind
        make_record_dir(record_dir)
    request = {
        "name": name,
        "model": vllm_model,
        "engine_args": engine_args,
        "usage": usage,
        "dummy_weights": dummy_weights,
        "expect_vllm": vllm_version,
    }
    log_path = (record_dir / f"{name}.log") if record_dir else Path(tempfile.mkstemp(prefix=f"kvplan-verify-{name}-", suffix=".log")[1])
    child = run_child(request, log_path=log_path, timeout_s=timeout_s, on_stage=on_stage)
    log = child.log
    if child.timed_out:
        raise EnvironmentMissing(
            f"vLLM did not finish starting within {timeout_s:g} s; it was stopped (log: {log_path})",
            hint="raise --timeout, or look at the log for where it hung",
        )
    err = log.child_error or {}
    if child.returncode == EXIT_ENVIRONMENT or err.get("kind") == "environment":
        raise EnvironmentMissing(f"{err.get('message') or 'the vLLM child reported a missing environment'} (log: {log_path})")
    vllm_failed = child.returncode != 0
    if vllm_failed:
        notes.append(
            f"vLLM exited with status {child.returncode} "
            + ("after sizing the KV cache" if log.started else "before sizing the KV cache")
        )
        if log.refusal is None:
            from kvplan.vllm_log import Refusal

            message = err.get("message") or (log.error_lines[-1] if log.error_lines else f"exit status {child.returncode}")
            log.refusal = Refusal(kind="error", message=message)

    plan_doc = None
    prediction_error = None
    gpu_source = ""
    try:
        plan, source, choice = _predict_for(
            log, kvplan_model, options, usage, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles,
            revision=revision, vllm_version=vllm_version,
        )
        plan_doc = plan_document(plan, source)
        gpu_source = choice.source
        measured_total = (log.meminfo or {}).get("total")
        if gpu and measured_total and measured_total != plan_doc["memory"]["total_bytes"]:
            notes.append(
                f"--gpu {gpu} has {plan_doc['memory']['total_bytes']:,} B; this GPU reports {measured_total:,} B "
                "(omit --gpu to predict for the measured memory)"
            )
    except KvplanError as exc:
        prediction_error = exc.message
    doc, code = comparison_document(
        log=log,
        plan_doc=plan_doc,
        prediction_error=prediction_error,
        options=options,
        engine_args=engine_args,
        usage=usage,
        tolerance_pct=tolerance_pct,
        model=model,
        gpu_source=gpu_source,
        log_path=str(log_path),
        mode="run",
        notes=notes,
        vllm_failed=vllm_failed,
    )
    doc["name"] = name
    doc["startup_s"] = log.startup_s or round(child.duration_s, 1)
    result = CaseResult(name=name, doc=doc, exit_code=code, log_path=log_path, plan_doc=plan_doc)
    if record_dir is not None:
        record = build_record(name=name, request=request, config=cfg, log=log, doc=doc, plan_doc=plan_doc)
        path = record_dir / f"{name}.json"
        path.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
        result.record_path = path
    return result


# ---------------------------------------------------------------------------------------------
# batch
# ---------------------------------------------------------------------------------------------


def load_batch(path: str) -> dict:
    """Read and validate a batch file (YAML; see docs/verify.md).

    Shape: ``{"defaults": {...}, "cases": [{"name", "model" | "config", "engine_args", "usage",
    "dummy_weights", "timeout", "gpu"}, ...]}``; unknown keys are refused.
    Raises:
        KvplanError: missing/unreadable file, bad YAML, or a bad key (names file and key).
    """
    from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

    class Defaults(BaseModel):
        model_config = ConfigDict(extra="forbid")
        usage: str = "llm"
        dummy_weights: bool = True
        timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, allow_inf_nan=False)
        tolerance: float = Field(default=DEFAULT_TOLERANCE_PCT, ge=0, le=MAX_TOLERANCE_PCT, allow_inf_nan=False)
        gpu: Optional[str] = None
        engine_args: dict = Field(default_factory=dict)

        @field_validator("usage")
        @classmethod
        def _usage(cls, v):
            if v not in ("llm", "serve"):
                raise ValueError("must be 'llm' or 'serve'")
            return v

    class Case(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
        model: Optional[str] = None
        config: Optional[dict] = None
        engine_args: dict = Field(default_factory=dict)
        usage: Optional[str] = None
        dummy_weights: Optional[bool] = None
        timeout: Optional[float] = Field(default=None, gt=0, allow_inf_nan=False)
        gpu: Optional[str] = None

        @field_validator("usage")
        @classmethod
        def _usage(cls, v):
            if v is not None and v not in ("llm", "serve"):
                raise ValueError("must be 'llm' or 'serve'")
            return v

    class Batch(BaseModel):
        model_config = ConfigDict(extra="forbid")
        defaults: Defaults = Field(default_factory=Defaults)
        cases: list[Case] = Field(min_length=1)

    from kvplan.safe_io import InputError, load_yaml, read_text

    try:
        docs = load_yaml(read_text(Path(path)))
    except InputError as exc:
        if exc.kind == "missing":
            raise KvplanError(f"--batch: file not found: {path}") from None
        where = f"{path}:{exc.line}" if exc.line else path
        raise KvplanError(f"--batch: {where}: {exc.message}") from None
    if len(docs) > 1:
        raise KvplanError(f"--batch: {path}:{docs[1].line}: a second YAML document; expected one mapping with a 'cases' list")
    data = docs[0].data if docs else None
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, dict):
        raise KvplanError(f"--batch: {path}: expected a mapping with a 'cases' list")
    try:
        batch = Batch(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        raise KvplanError(f"--batch: {path}: {key}: {err['msg']}") from None
    names = set()
    out_cases = []
    for i, c in enumerate(batch.cases):
        if (c.model is None) == (c.config is None):
            raise KvplanError(f"--batch: {path}: cases.{i}: give exactly one of 'model' or 'config'")
        if c.name in names:
            raise KvplanError(f"--batch: {path}: cases.{i}.name: {c.name!r} appears twice")
        names.add(c.name)
        args = dict(batch.defaults.engine_args)
        args.update(c.engine_args)
        try:
            engine_kwargs_to_options(args)  # convertible values, or a KvplanError naming the key
        except KvplanError as exc:
            key = exc.message.split(":", 1)[0].removeprefix("engine_args.")
            where = f"cases.{i}" if key in c.engine_args else "defaults"
            raise KvplanError(f"--batch: {path}: {where}.{exc.message}") from None
        out_cases.append(
            {
                "name": c.name,
                "model": c.model or c.name,
                "config": c.config,
                "engine_args": args,
                "usage": c.usage or batch.defaults.usage,
                "dummy_weights": batch.defaults.dummy_weights if c.dummy_weights is None else c.dummy_weights,
                "timeout": c.timeout or batch.defaults.timeout,
                "gpu": c.gpu or batch.defaults.gpu,
            }
        )
    return {"tolerance": batch.defaults.tolerance, "cases": out_cases}


def run_batch(
    path: str,
    *,
    record_dir: Optional[Path] = None,
    tolerance_pct: Optional[float] = None,
    timeout_s: Optional[float] = None,
    deadline_s: Optional[float] = None,
    gpu_profiles=None,
    vllm_version: str = VERIFIED_VLLM,
    skip_existing: bool = False,
    on_case: Callable[[int, int, str], None] = lambda i, n, name: None,
    on_stage: Callable[[str], None] = lambda s: None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
) -> tuple[list[CaseResult], int]:
    """Run every case of a batch file in turn, each in its own vLLM child; go on after failures.

    ``deadline_s``: seconds from now after which no new case starts (each case's timeout is cut
    to the time left), so records written so far survive a short device session.
    ``skip_existing``: cases whose ``<name>.json`` is already in ``record_dir`` are not run again
    (their recorded verdict is reported), so a batch split over several calls resumes.
    Returns:
        (results, exit code): 0 all pass; 1 any mismatch/refusal/error; 3 the environment is
        missing (stops the batch: every later case would fail the same way).
    Raises:
        KvplanError: the batch file is bad (exit 2), before anything starts.
    """
    batch = load_batch(path)
    check_environment(vllm_version)
    tol = batch["tolerance"] if tolerance_pct is None else tolerance_pct
    if record_dir is not None:
        make_record_dir(record_dir)
    start = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="kvplan-batch-"))
    try:
        return _run_batch_cases(
            batch, workdir, start, record_dir=record_dir, tol=tol, timeout_s=timeout_s, deadline_s=deadline_s,
            gpu_profiles=gpu_profiles, vllm_version=vllm_version, skip_existing=skip_existing,
            on_case=on_case, on_stage=on_stage, on_result=on_result,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_batch_cases(
    batch, workdir, start, *, record_dir, tol, timeout_s, deadline_s, gpu_profiles, vllm_version, skip_existing,
    on_case, on_stage, on_result,
) -> tuple[list[CaseResult], int]:
    results: list[CaseResult] = []
    code = EXIT_OK
    cases = batch["cases"]
    for i, case in enumerate(cases):
        existing = record_dir / f"{case['name']}.json" if record_dir is not None else None
        if skip_existing and existing is not None and existing.is_file():
            from kvplan.safe_io import InputError, read_bytes

            from kvplan.sources.local import MAX_JSON_DEPTH, json_text_depth

            try:
                text = read_bytes(existing, MAX_FROM_LOG_BYTES).decode("utf-8", errors="replace")
                # a record nested deeper than any kvplan writes is unreadable, not a traceback
                old = json.loads(text) if json_text_depth(text) <= MAX_JSON_DEPTH else {}
            except (InputError, ValueError, RecursionError):
                old = {}
            if not isinstance(old, dict):
                old = {}
            verdict = old.get("verify") or {}
            status = verdict.get("status", "recorded")
            kv_pred = ((old.get("kvplan_prediction") or {}).get("kv_cache") or {})
            r = CaseResult(
                name=case["name"],
                doc={
                    "name": case["name"],
                    "status": status,
                    "compared_on": verdict.get("compared_on"),
                    "errors": verdict.get("errors", {}),
                    "measured": {k: old.get(k) for k in ("num_gpu_blocks", "gpu_kv_cache_tokens")},
                    "predicted": {k: kv_pred.get(k) for k in ("num_gpu_blocks", "gpu_kv_cache_tokens")},
                },
                exit_code=EXIT_OK if status == "pass" else EXIT_FAIL,
                record_path=existing,
                log_path=existing.with_suffix(".log") if existing.with_suffix(".log").is_file() else None,
                extra={"reused": True},
            )
            results.append(r)
            on_result(r)
            if r.exit_code != EXIT_OK:
                code = max(code, EXIT_FAIL)
            continue
        limit = case["timeout"] if timeout_s is None else timeout_s
        if deadline_s is not None:
            left = deadline_s - (time.monotonic() - start)
            if left < MIN_CASE_S:
                for rest in cases[i:]:
                    r = CaseResult(name=rest["name"], doc={"name": rest["name"], "status": "skipped"}, exit_code=EXIT_FAIL, error="--deadline reached")
                    results.append(r)
                    on_result(r)
                code = max(code, EXIT_FAIL)
                break
            limit = min(limit, left)
        on_case(i, len(cases), case["name"])
        try:
            r = run_case(
                model=case["model"],
                config=case["config"],
                engine_args=case["engine_args"],
                usage=case["usage"],
                dummy_weights=case["dummy_weights"],
                name=case["name"],
                gpu=case["gpu"],
                gpu_profiles=gpu_profiles,
                tolerance_pct=tol,
                timeout_s=limit,
                record_dir=record_dir,
                vllm_version=vllm_version,
                on_stage=on_stage,
                workdir=workdir,
            )
        except EnvironmentMissing as exc:
            r = CaseResult(name=case["name"], doc={"name": case["name"], "status": "environment"}, exit_code=EXIT_ENVIRONMENT, error=str(exc))
            results.append(r)
            on_result(r)
            if "did not finish starting within" in exc.message:
                code = max(code, EXIT_FAIL)
                continue  # a timeout is this case's problem; the next may start
            code = EXIT_ENVIRONMENT
            break
        except KvplanError as exc:
            r = CaseResult(name=case["name"], doc={"name": case["name"], "status": "bad input"}, exit_code=EXIT_BAD_INPUT, error=str(exc))
            results.append(r)
            on_result(r)
            code = max(code, EXIT_FAIL)
            continue
        results.append(r)
        on_result(r)
        if r.exit_code != EXIT_OK:
            code = max(code, EXIT_FAIL)
    if record_dir is not None:
        summary = [
            {
                "name": r.name,
                "status": r.doc.get("status"),
                "exit_code": r.exit_code,
                "error": r.error,
                "reused": bool(r.extra.get("reused")),
                "record": r.record_path.name if r.record_path else None,
                "log": r.log_path.name if r.log_path else None,
                "compared_on": r.doc.get("compared_on"),
                "errors": {k: v for k, v in (r.doc.get("errors") or {}).items() if k in ("num_gpu_blocks", "gpu_kv_cache_tokens", "kv_cache_bytes", "activation_peak_bytes", "weights_bytes")},
            }
            for r in results
        ]
        (record_dir / "batch-summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return results, code
