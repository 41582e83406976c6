"""``kvplan verify``: start vLLM (or read its log), take what it measured, diff against the Plan.

    run.py       start the vLLM child, its process group, timeouts, progress; ``run_case``
    child.py     the child itself (``python -m kvplan.verify.child``; standard library, then vLLM)
    log.py       read a start-up log with a vLLM version's log grammar (engines/vllm/v0_26)
    compare.py   measured vs predicted: errors, verdict, the comparison document
    predict.py   engine arguments -> estimate options, the GPU, the plan
    records.py   calibration-shaped records, --record
    from_log.py  ``verify_log`` (--from-log);  batch.py: --batch files
    versions.py  the vLLM version verify checks against
"""
