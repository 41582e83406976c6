"""Start vLLM in a child process and verify it: ``kvplan verify MODEL``.

``run_case`` starts vLLM (the version of kvplan.verify.versions) in a child process
(``python -m kvplan.verify.child``, see that module for the protocol), streams its log to a
file, stops it (the whole process group, also on Ctrl-C, SIGTERM and timeout), parses the log,
predicts with kvplan's planner on the GPU the child measured (or ``--gpu``), and compares
(kvplan.verify.compare). Saved logs: kvplan.verify.from_log; many cases: kvplan.verify.batch.

This module never imports torch, vLLM or transformers; only the child does.
"""

from __future__ import annotations

import importlib.util
import json
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from kvplan.errors import EXIT_ENVIRONMENT, EnvironmentMissing, KvplanError
from kvplan.verify.compare import DEFAULT_TOLERANCE_PCT, comparison_document
from kvplan.verify.log import Refusal, VllmLog, parse_log
from kvplan.verify.predict import _config_dir, _materialize_model, _predict_for, engine_kwargs_to_options, plan_document
from kvplan.verify.records import CaseResult, build_record, default_name, make_record_dir
from kvplan.verify.versions import VERIFIED_VLLM

DEFAULT_TIMEOUT_S = 15 * 60
STOP_GRACE_S = 10.0
from kvplan.io.limits import MAX_LOG_LINES  # noqa: E402
CHILD_OVERRIDE_ENV = "KVPLAN_VERIFY_CHILD"  # a Python script used instead of kvplan.verify.child (tests)


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
    """The child's command line: ``sys.executable -m kvplan.verify.child '<json>'`` (or the
    script named by $KVPLAN_VERIFY_CHILD, used by tests to stand in for vLLM)."""
    payload = json.dumps(request, separators=(",", ":"))
    override = os.environ.get(CHILD_OVERRIDE_ENV)
    if override:
        return [sys.executable, override, payload]
    return [sys.executable, "-m", "kvplan.verify.child", payload]


def _child_env() -> dict:
    env = dict(os.environ)
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in the child's own process
    env["PYTHONUNBUFFERED"] = "1"
    pkg_root = str(Path(__file__).resolve().parents[2])
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


def check_environment(expect_vllm: Optional[str]) -> None:
    """Fail fast (exit 3) when torch or vLLM is not importable, or vLLM is another version.

    Uses importlib metadata only (nothing is imported). Skipped when $KVPLAN_VERIFY_CHILD names
    a stand-in child. The GPU itself is checked by the child (it needs torch).
    """
    if os.environ.get(CHILD_OVERRIDE_ENV):
        return
    from kvplan import DISTRIBUTION

    hint = f"pip install '{DISTRIBUTION}[verify]' (vLLM and torch), or use --from-log FILE without a GPU"
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
