"""Many verified starts from one YAML file: ``kvplan verify --batch FILE`` (see docs/verify.md).

Each case runs in its own vLLM child (kvplan.verify.run); the batch goes on after failures and
stops only when the environment is missing; each case can be recorded (kvplan.verify.records).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from kvplan.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAIL, EXIT_OK, EnvironmentMissing, KvplanError
from kvplan.verify.compare import DEFAULT_TOLERANCE_PCT, MAX_TOLERANCE_PCT
from kvplan.verify.predict import engine_kwargs_to_options
from kvplan.verify.records import CaseResult, make_record_dir, recorded_result
from kvplan.verify.run import DEFAULT_TIMEOUT_S, check_environment, run_case
from kvplan.verify.versions import VERIFIED_VLLM

# --batch files are YAML written by hand: the 2 MiB cap of every other kvplan input file.
MIN_CASE_S = 30.0  # with --deadline, do not start a case with less time than this left


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

    from kvplan.io.files import InputError, load_yaml, read_text

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
            r = recorded_result(case["name"], existing)
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
