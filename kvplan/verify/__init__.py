"""``kvplan verify``: start vLLM (or read its log), take what it measured, diff against the Plan.

    run.py       start the vLLM child, its process group, timeouts, progress; ``run_case``
    child.py     the child itself (``python -m kvplan.verify.child``; standard library, then vLLM)
    log.py       read a start-up log with a vLLM version's log grammar (engines/vllm/v0_26)
    compare.py   measured vs predicted: errors, verdict, the comparison document
    predict.py   engine arguments -> estimate options, the GPU, the plan
    records.py   calibration-shaped records, --record
    from_log.py  ``verify_log`` (--from-log);  batch.py: --batch files
    versions.py  the vLLM version verify checks against

Until every importer names those modules, ``kvplan.verify.X`` still finds what the old
kvplan/verify.py defined (loaded on first use, so that the child, which imports this package,
stays on the standard library): this alias goes when every importer is updated (issue 11).
"""

from __future__ import annotations

import importlib

_HOMES = {
    "compare": (
        "SUGGESTION_BUFFER", "DEFAULT_TOLERANCE_PCT", "MAX_TOLERANCE_PCT", "FIGURES", "FIGURE_KEYS", "predicted_figures",
        "measured_figures", "compare", "log_consistency", "comparison_document", "version_note",
    ),
    "predict": (
        "_whole", "_finite", "_ENGINE_OPTIONS", "_NO_MEMORY_EFFECT", "engine_kwargs_to_options", "_check_logged_options",
        "options_to_engine_kwargs", "GpuChoice", "_machine_profile_file", "choose_gpu", "predict", "plan_document",
        "_materialize_model", "_config_dir", "_predict_for",
    ),
    "records": (
        "MAX_FROM_LOG_BYTES", "CaseResult", "check_record_dir", "make_record_dir", "_slug", "_SHORT", "default_name",
        "build_record", "recorded_result",
    ),
    "run": (
        "DEFAULT_TIMEOUT_S", "STOP_GRACE_S", "MAX_LOG_LINES", "CHILD_OVERRIDE_ENV", "ChildRun", "_STAGE_LINES",
        "_PROGRESS", "_clean", "child_command", "_child_env", "_stop_group", "_Terminated", "run_child",
        "check_environment", "run_case", "importlib",
    ),
    "from_log": ("_read_log_file", "_LOG_HINT", "_same_model", "_record_usage", "verify_log"),
    "batch": ("MIN_CASE_S", "load_batch", "run_batch", "_run_batch_cases"),
    "versions": ("VERIFIED_VLLM",),
    "log": (
        "MEMORY_REFUSAL_KINDS", "VllmLog", "engine_arguments", "is_memory_refusal", "parse_log", "split_starts", "start_text",
    ),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan.verify' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kvplan.verify.{module}"), name)
