"""Records of verified starts: the calibration-shaped JSON, the --record directory, record names.

A record (``<name>.json`` beside ``<name>.log``) has the fields of ../shared/calibration's
records plus ``exact_bytes`` (KVPLAN_EXACT) and ``kvplan_prediction`` (estimate JSON), so the
start can be replayed with ``kvplan verify --from-log <name>.json``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from kvplan import __version__
from kvplan.errors import EXIT_FAIL, EXIT_OK, KvplanError
from kvplan.io.units import GiB
from kvplan.verify.log import VllmLog

from kvplan.io.limits import MAX_FROM_LOG_BYTES  # noqa: E402,F401 - what --from-log reads at most

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


# Kernel pseudo-filesystems: nothing can be created there (/proc, /sys) or nothing should be
# (/dev, except the /dev/shm tmpfs); root passes os.access's write test on all of them.
_PSEUDO_FS = ("/proc", "/sys", "/dev")


def check_record_dir(value: Optional[str]) -> Optional[Path]:
    """--record DIR, checked before the environment and before anything is created.

    DIR is an existing writable directory, or a path whose nearest existing ancestor is a
    writable directory (run_case / run_batch create DIR when a start is about to be recorded).
    Raises:
        KvplanError: empty, an existing non-directory, a missing or unwritable ancestor, or a
            path in a kernel pseudo-filesystem (exit 2).
    """
    if value is None:
        return None
    if not value.strip():
        raise KvplanError("--record: empty directory name", hint="--record DIR names the directory the records go to")
    path = Path(value)

    def kind(p: Path) -> str:
        try:
            st = p.lstat()
        except OSError:
            return "unreadable"
        if stat.S_ISLNK(st.st_mode):
            return f"a broken symbolic link (-> {os.readlink(p)})" if not p.exists() else "a symbolic link"
        for test, word in ((stat.S_ISREG, "a regular file"), (stat.S_ISCHR, "a character device"),
                           (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                           (stat.S_ISSOCK, "a socket")):
            if test(st.st_mode):
                return word
        return "not a directory"

    if os.path.lexists(path) and not path.is_dir():
        raise KvplanError(
            f"--record: {value} is {kind(path)}, not a directory; kvplan writes <name>.json and <name>.log into a directory"
        )
    existing = path.absolute()
    while not os.path.lexists(existing):
        existing = existing.parent
    real = os.path.realpath(existing)
    top = next((t for t in _PSEUDO_FS if real == t or real.startswith(t + "/")), None)
    if top is not None and not (real == "/dev/shm" or real.startswith("/dev/shm/")):
        raise KvplanError(f"--record: {value} is in {top}, a kernel pseudo-filesystem, not a directory for records")
    if not existing.is_dir():
        raise KvplanError(f"--record: {value} cannot be created: {existing} is {kind(existing)}, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == path.absolute():
            raise KvplanError(f"--record: {value} is a directory that is not writable")
        raise KvplanError(f"--record: {value} cannot be created: {existing} is not writable")
    return path


def make_record_dir(path: Path) -> None:
    """Create the --record directory (and its parents), after the environment check, when a
    start is about to be recorded (check_record_dir checked the path before anything ran).

    Raises:
        KvplanError: it cannot be created after all (exit 2).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KvplanError(f"--record: cannot create {path}: {e.strerror or e}") from None



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


def recorded_result(name: str, existing: Path) -> CaseResult:
    """The verdict of a case already recorded in ``existing`` (``<name>.json``), for
    ``--batch --skip-existing``: status, compared_on and errors of its ``verify`` entry, blocks
    and tokens measured and predicted. An unreadable record (over MAX_FROM_LOG_BYTES, not JSON,
    nested too deeply) reads as status "recorded"; never raises."""
    from kvplan.io.files import InputError, read_bytes

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
    return CaseResult(
        name=name,
        doc={
            "name": name,
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
