"""Verify a saved vLLM start: ``kvplan verify --from-log FILE``. No GPU, no vLLM.

The file is a vLLM start-up log (the format of the version kvplan predicts with first, older
formats where their lines allow; see kvplan.verify.log) or a calibration-shaped JSON record
(kvplan.verify.records). The log is re-planned and compared as a live start is.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from kvplan.errors import KvplanError
from kvplan.verify.compare import DEFAULT_TOLERANCE_PCT, comparison_document
from kvplan.verify.log import engine_arguments, parse_log, split_starts, start_text
from kvplan.verify.predict import _check_logged_options, _config_dir, _predict_for, engine_kwargs_to_options, plan_document
from kvplan.verify.records import MAX_FROM_LOG_BYTES
from kvplan.verify.versions import VERIFIED_VLLM



def _read_log_file(path: str) -> tuple[str, dict | None]:
    """(log text, record) of a log file or a calibration-shaped JSON record.

    At most MAX_FROM_LOG_BYTES (64 MiB) are read, and only from a regular file (a FIFO or a
    device such as /dev/zero is refused before it is read; kvplan.io.files.read_bytes).
    Raises:
        KvplanError: missing, not a regular file, over 64 MiB, or a JSON record without a
            ``log_excerpt`` list (one line naming --from-log and the file).
    """
    from kvplan.io.files import InputError, read_bytes

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
    vllm_version: Optional[str] = None,
    workdir: Optional[Path] = None,
    start: Optional[int] = None,
) -> tuple[dict, int]:
    """Re-plan a saved vLLM start and diff: ``kvplan verify --from-log FILE``.

    A log holding several starts (kvplan.verify.log.split_starts: a server restarted into the same
    file) is compared on one: ``start`` (1-based, ``--start N``), by default the last, with a
    note naming how many there are and which was used.

    Args:
        path: a vLLM log, or a calibration-shaped JSON record (``log_excerpt`` + config...).
        model: overrides the model the log names (repo id, directory or config.json).
        overrides: kvplan estimate options that replace what the log shows.
        usage: "llm"/"serve"; default: what the log shows, else "serve" (a record: "llm").
        vllm_version: the rules to predict with (``--vllm-version``); None: the version the log
            names ("vLLM version" / engine banner line, a record's environment), the nearest
            supported one (with a warning note) when kvplan has no rules for it; a log naming
            none: the default (engines/vllm/versions.resolve).
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
            from kvplan.verify.log import Refusal

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
    # issue 13: --vllm-version, else the version the log names (the nearest supported one,
    # labelled, when kvplan has no rules for it), else the default (engines/vllm/versions.py)
    from kvplan.capacity.estimate import with_version_choice
    from kvplan.engines.vllm.versions import choose, resolve

    logged_version = log.vllm_version or (log.env or {}).get("vllm")
    if vllm_version is None and isinstance(logged_version, str) and logged_version.strip():
        version_choice = choose(logged_version, "named by the log")
    else:
        version_choice = resolve(vllm_version)
    if version_choice.substituted:
        notes.append("warning: " + version_choice.warning())
    vllm_version = version_choice.version
    plan_doc = None
    prediction_error = None
    gpu_source = ""
    try:
        plan, source, choice = _predict_for(
            log, model_for_kvplan, options, usage, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles,
            record_gpu=record_gpu, revision=revision, vllm_version=vllm_version,
        )
        plan = with_version_choice(plan, version_choice)
        plan_doc = plan_document(plan, source)
        gpu_source = choice.source
        sizing_note = _sizing_path_note(log, plan_doc)
        if sizing_note:
            notes.append(sizing_note)
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
    if plan_doc is None:  # the prediction failed: the version it was made with still shows
        doc["predicted_with"] = version_choice.to_dict()
    sizing = _sizing_terms(log, plan_doc)
    if sizing:
        doc["kv_cache_sizing"] = sizing
    return doc, code



def _sizing_path_note(log, plan_doc: dict) -> str | None:
    """A warning when the log shows vLLM 0.34.0 sizing its KV cache by another path than the
    one kvplan predicted (``memory.kv_cache_sizing.mode`` against the log's
    ``kv_cache_sizing``: a ``Disabling the extensible KV cache`` warning, e.g. a failed VMM
    probe, which no engine argument shows); None when they agree or either says nothing."""
    predicted = ((plan_doc.get("memory") or {}).get("kv_cache_sizing") or {}).get("mode")
    if not predicted or not log.kv_cache_sizing or predicted == log.kv_cache_sizing:
        return None
    why = f" ({log.extensible_disabled_reason})" if log.extensible_disabled_reason else ""
    return (f"warning: the log shows vLLM sizing the KV cache by the {log.kv_cache_sizing} path{why}; kvplan "
            f"predicted the {predicted} path from the engine arguments, so the numbers compare different rules")


def _sizing_terms(log, plan_doc: dict | None) -> dict:
    """vLLM 0.34.0's KV-cache sizing path and terms, predicted (the estimate's
    ``memory.kv_cache_sizing``) beside measured (the log's ``Memory after warmup`` line: F + C,
    P, G, bytes at the log's 0.01 GiB resolution); {} when neither side has them (logs and rules
    before 0.34.0)."""
    predicted = ((plan_doc or {}).get("memory") or {}).get("kv_cache_sizing")
    measured: dict = {}
    if log.kv_cache_sizing:
        measured["mode"] = log.kv_cache_sizing
    if log.free_after_warmup_bytes is not None:
        measured["free_after_warmup_bytes"] = log.free_after_warmup_bytes + (log.kv_committed_bytes or 0)
        measured["transient_peak_bytes"] = log.transient_peak_bytes
        measured["reserve_growth_bytes"] = log.reserve_growth_bytes
    if not predicted and not measured:
        return {}
    return {"predicted": predicted, "measured": measured or None}
