"""Regression harness: byte-identical kvplan output before and after a refactor (issue 11).

    python benchmarks/regression.py record DIR     # run every case, write DIR (baseline)
    python benchmarks/regression.py compare DIR    # run every case again, diff against DIR

`compare` prints identical / differing / missing / new counts, the first differing cases with a
short diff, and exits 1 on any difference (0 when everything is identical). Options:
`-k SUBSTRING` (repeatable) keeps only cases whose id contains one of the substrings;
`--isolated` runs every case in its own `python` process (a pool of `--jobs`, default 2)
instead of in-process, which proves that no state leaks from one in-process call to the next;
`--show N` prints N differing cases (default 10); `--vllm-version V` appends
`--vllm-version V` to every case's command line (record and compare alike: pins the version
when the default changes); `--drop-version-labels` leaves the version/evidence labels out of
what is compared (see VERSION LABELS below), to show that a change moved nothing else.

Cases (ids start with the group name):

* replay/   every real vLLM start in tests/data: each record (*.json with a log_excerpt) and
            raw child log (*.log) of tests/data/vllm-0.26.0-h200, tests/data/logs/vllm-0.26.0-h200,
            tests/data/logs/device-h200-*, tests/data/calibration/vllm-0.26.0-h200 through
            `kvplan verify [MODEL] --from-log LOG --format json` (a raw log without its own
            KVPLAN_CONFIG line takes its sibling record's config, as tests/test_replay_logs.py
            does); each record with config + engine_args through `kvplan estimate <its config>
            --gpu H200 --usage llm <engine args> --format json` (as tests/calibration_cases.py
            and benchmarks/accuracy.py turn a record into flags); the public pre-0.26 logs of
            tests/data/logs/older through `verify --from-log` bare, with the bundled
            Llama-3.1-8B-Instruct on H100, and with the model/GPU tests/test_verify.py gives them.
            (../shared/calibration/vllm-0.26.0-h200 is byte-identical to
            tests/data/calibration/vllm-0.26.0-h200, so the in-repo copy stands for it and the
            harness runs on a clean clone.)
* check/    every file under tests/data/check through `kvplan check FILE --format json`, with
            and without `--gpu H100`; every fixture directory at once (all its files in one
            call, with `--junit-xml` whose file is captured too); and the manifests run from
            their own directory (`cd DIR && kvplan check kvplan.yaml`), as the check tests do.
* estimate/ every bundled model of model_specs/ x --gpu {H200, A100-80GB, L40S} x -tp {1, 2, 4}
            x --max-model-len {4096, 32768} through `kvplan estimate ... --format json`.

For every case the exit code, stdout, stderr (and any file the command writes) are stored, one
JSON file per case under DIR/cases/, plus DIR/manifest.json with the counts. Exit 1 and 2
outcomes are outputs like any other.

kvplan is driven only through its stable entry point `kvplan._entry:main` (argv in, SystemExit
out, stdout/stderr redirected); nothing else of kvplan is imported, because module paths move.
The environment is fixed before kvplan is imported: COLUMNS=200, LINES=50, NO_COLOR=1,
TERM=dumb, TZ=UTC, HF_HUB_OFFLINE=1, HF_HUB_DISABLE_TELEMETRY=1, HF_HOME set to an empty
directory of the run (so a local Hugging Face cache cannot change an answer), every KVPLAN_*
variable removed, PYTHONHASHSEED=0 (the harness re-executes itself to set it), the working
directory is the repository root and paths are passed relative to it, stdin is empty.

NORMALISED (and nothing else; every other byte must match):
  1. the run's temporary directory (config dirs written for records, HF_HOME, junit targets),
     as given and as resolved, -> <TMP>;
  2. the repository's absolute path, as given and as resolved, -> <REPO> (the baseline may be
     recorded in one checkout and compared in another);
  3. the value of every JSON key "kvplan_version" -> "<kvplan-version>";
  4. the value of the "seconds" key (check's wall-time stat) -> "<seconds>".
An uncaught exception is recorded as exit 1 with one line "uncaught TYPE: MESSAGE" in stderr
(no traceback: its module paths and line numbers change with every refactor).

VERSION LABELS (dropped only with --drop-version-labels, on both sides of a compare): in JSON
stdout the keys "vllm", "evidence" and "predicted_with" (anywhere), check's `vllm-version`
diagnostics and check id, its summary "infos" count; in JUnit files the `:: vllm-version`
test cases and every tests="N" count; in stderr the `kvplan: vLLM ...` evidence line.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("tests/data")  # relative to ROOT, the working directory of every case
FORMAT = 1
ORIG_CWD = Path.cwd()  # DIR arguments are relative to where the harness was started

GPUS = ("H200", "A100-80GB", "L40S")
TPS = (1, 2, 4)
MAX_MODEL_LENS = (4096, 32768)

FIXED_ENV = {
    "COLUMNS": "200",
    "LINES": "50",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "TZ": "UTC",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PYTHONHASHSEED": "0",
}
DROP_ENV = ("FORCE_COLOR", "CLICOLOR_FORCE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN")

# engine_args keys of a start record -> `kvplan estimate` flags (the mapping of
# tests/calibration_cases.py, frozen here so that moving the tests cannot change the cases)
RECORD_FLAGS = {
    "max_model_len": "--max-model-len",
    "enforce_eager": "--enforce-eager",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_dtype": "--kv-cache-dtype",
    "block_size": "--block-size",
    "dtype": "--dtype",
    "quantization": "--quantization",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
}

REPLAY_DIRS = (
    DATA / "vllm-0.26.0-h200",
    DATA / "logs" / "vllm-0.26.0-h200",
    DATA / "calibration" / "vllm-0.26.0-h200",
)
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # bundled
# (log, extra args) of tests/test_verify.py for the public older logs, beyond bare and LLAMA/H100
OLDER_EXTRA = {
    "v1-0.10_enginecore-prefix.log": [("Qwen/Qwen3-8B",), ("Qwen/Qwen3-8B", "--gpu", "H100")],
    "v0.6.4_llama31-8b_rtx3090_29k.log": [(LLAMA, "--gpu", "rtx-3090")],
    "v0.6.4_llama31-8b_rtx3090_20k.log": [(LLAMA, "--gpu", "rtx-3090")],
    "v1-0.13_serve_lora-args.log": [("Qwen/Qwen3-8B", "--gpu", "H100")],
}


# --- cases ----------------------------------------------------------------------------------


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", s).strip("_")


def _case(cid: str, argv: list[str], cwd: str = ".", setup: dict | None = None, files: list[str] | None = None) -> dict:
    """One case: argv to kvplan, run in ``cwd`` (relative to the repo root). ``setup`` maps
    <TMP>-relative paths to text written before the run; ``files`` are <TMP>-relative paths
    whose contents after the run are part of the output."""
    return {"id": cid, "argv": argv, "cwd": cwd, "setup": setup or {}, "files": files or []}


def _record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _replay_files(d: Path) -> list[Path]:
    if not (ROOT / d).is_dir():
        return []
    return [
        p.relative_to(ROOT) if p.is_absolute() else p
        for p in sorted((ROOT / d).iterdir())
        if p.suffix == ".log" or (p.suffix == ".json" and p.name != "batch-summary.json")
    ]


def _sibling_config(log: Path) -> dict | None:
    """A raw log without its own KVPLAN_CONFIG line takes the config of its sibling record."""
    text = (ROOT / log).read_text(encoding="utf-8", errors="replace")
    if any(s.startswith("KVPLAN_CONFIG ") for s in text.splitlines()):
        return None
    rec = _record(ROOT / log.with_suffix(".json"))
    cfg = rec.get("config") if rec else None
    return cfg if isinstance(cfg, dict) else None


def _estimate_argv(rec: dict, model_dir: str) -> list[str]:
    argv = ["estimate", model_dir, "--gpu", "H200", "--usage", "llm", "--format", "json"]
    args = dict(rec["engine_args"])
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if key in rec:
            args.setdefault(key, rec[key])
    for key, value in args.items():
        if key not in RECORD_FLAGS or value is False:
            continue
        argv += [RECORD_FLAGS[key]] if value is True else [RECORD_FLAGS[key], str(value)]
    return argv


def replay_cases() -> list[dict]:
    out: list[dict] = []
    dirs = list(REPLAY_DIRS) + sorted(p.relative_to(ROOT) for p in (ROOT / DATA / "logs").glob("device-h200-*") if p.is_dir())
    for d in dirs:
        tag = _safe(str(d.relative_to(DATA)))
        for p in _replay_files(d):
            model: list[str] = []
            setup: dict = {}
            if p.suffix == ".log":
                cfg = _sibling_config(p)
                if cfg is not None:
                    mdir = f"replay-{tag}-{p.stem}"
                    setup[f"{mdir}/config.json"] = json.dumps(cfg)
                    model = [f"<TMP>/{mdir}"]
            elif (rec := _record(ROOT / p)) is None or "log_excerpt" not in rec:
                continue  # not a start record
            out.append(_case(f"replay/verify/{tag}/{p.name}", ["verify", *model, "--from-log", str(p), "--format", "json"], setup=setup))
            if p.suffix == ".json":
                rec = _record(ROOT / p)
                if isinstance(rec.get("config"), dict) and isinstance(rec.get("engine_args"), dict):
                    mdir = f"estimate-{tag}-{p.stem}"
                    out.append(
                        _case(
                            f"replay/estimate/{tag}/{p.name}",
                            _estimate_argv(rec, f"<TMP>/{mdir}"),
                            setup={f"{mdir}/config.json": json.dumps(rec["config"])},
                        )
                    )
    older = DATA / "logs" / "older"
    for p in sorted((ROOT / older).glob("*.log")):
        log = str(older / p.name)
        variants = [(), (LLAMA, "--gpu", "H100"), *OLDER_EXTRA.get(p.name, [])]
        for extra in variants:
            suffix = _safe("-".join(extra)) or "bare"
            model, flags = (list(extra[:1]), list(extra[1:])) if extra else ([], [])
            out.append(_case(f"replay/verify/older/{p.name}/{suffix}", ["verify", *model, "--from-log", log, *flags, "--format", "json"]))
    return out


def check_cases() -> list[dict]:
    base = DATA / "check"
    out: list[dict] = []
    files = sorted(p.relative_to(ROOT) for p in (ROOT / base).rglob("*") if p.is_file())
    for f in files:
        rel = _safe(str(f.relative_to(base)))
        out.append(_case(f"check/file/{rel}", ["check", str(f), "--format", "json"]))
        out.append(_case(f"check/file-gpu-H100/{rel}", ["check", str(f), "--gpu", "H100", "--format", "json"]))
    dirs = sorted({f.parent for f in files})
    for d in dirs:
        rel = _safe(str(d.relative_to(base))) or "_root"
        members = [str(f) for f in files if f.parent == d]
        junit = f"junit-{rel}.xml"
        out.append(
            _case(f"check/dir/{rel}", ["check", *members, "--format", "json", "--junit-xml", f"<TMP>/{junit}"], files=[junit])
        )
    # manifests run from their own directory, relative paths (the manifest tests under tests/check/)
    for m in sorted(f for f in files if f.name == "kvplan.yaml"):
        rel = _safe(str(m.parent.relative_to(base)))
        out.append(_case(f"check/cwd/{rel}/kvplan.yaml", ["check", "kvplan.yaml", "--format", "json"], cwd=str(m.parent)))
        out.append(_case(f"check/cwd-gpu-H100/{rel}/kvplan.yaml", ["check", "kvplan.yaml", "--gpu", "H100", "--format", "json"], cwd=str(m.parent)))
    plant = base / "review4" / "plant"
    if (ROOT / plant / "a").is_dir():
        out.append(_case("check/cwd/review4_plant_a/b_dep.yaml", ["check", "b/dep.yaml", "--format", "json"], cwd=str(plant / "a")))
        out.append(_case("check/cwd/review4_plant/a_b_dep.yaml", ["check", "a/b/dep.yaml", "--format", "json"], cwd=str(plant)))
    return out


def bundled_models() -> list[str]:
    ids = []
    for p in sorted((ROOT / "model_specs").glob("*.json")):
        rec = _record(p) or {}
        ids.append(str(rec.get("repo_id") or p.stem.replace("__", "/", 1)))
    return sorted(ids)


def estimate_cases() -> list[dict]:
    out = []
    for model in bundled_models():
        for gpu in GPUS:
            for tp in TPS:
                for mml in MAX_MODEL_LENS:
                    out.append(
                        _case(
                            f"estimate/{_safe(model)}/{gpu}-tp{tp}-len{mml}",
                            ["estimate", model, "--gpu", gpu, "-tp", str(tp), "--max-model-len", str(mml), "--format", "json"],
                        )
                    )
    return out


def all_cases() -> list[dict]:
    cases = replay_cases() + check_cases() + estimate_cases()
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    return cases


# --- running ----------------------------------------------------------------------------------


class Runner:
    """Runs cases with a fixed environment; every path under one temporary root."""

    def __init__(self, isolated: bool, jobs: int, vllm_version: str | None = None) -> None:
        self.vllm_version = vllm_version
        self.isolated = isolated
        self.jobs = jobs
        self.tmp = Path(tempfile.mkdtemp(prefix="kvplan-regress-"))
        (self.tmp / "hf").mkdir()
        os.environ["HF_HOME"] = str(self.tmp / "hf")
        self._subs = sorted(
            {str(self.tmp), os.path.realpath(self.tmp), str(ROOT), os.path.realpath(ROOT)}, key=len, reverse=True
        )
        self._names = {str(self.tmp): "<TMP>", os.path.realpath(self.tmp): "<TMP>", str(ROOT): "<REPO>", os.path.realpath(ROOT): "<REPO>"}
        self._entry = None

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def normalise(self, text: str) -> str:
        for s in self._subs:
            text = text.replace(s, self._names[s])
        text = re.sub(r'("kvplan_version":\s*)"[^"]*"', r'\1"<kvplan-version>"', text)
        text = re.sub(r'("seconds":\s*)-?[0-9][0-9.eE+-]*', r'\1"<seconds>"', text)
        return text

    def _argv(self, case: dict) -> list[str]:
        pin = ["--vllm-version", self.vllm_version] if self.vllm_version else []
        return [a.replace("<TMP>", str(self.tmp)) for a in case["argv"]] + pin

    def _prepare(self, case: dict) -> None:
        for rel, text in case["setup"].items():
            p = self.tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        for rel in case["files"]:
            (self.tmp / rel).unlink(missing_ok=True)

    def _result(self, case: dict, code: int, out: str, err: str) -> dict:
        files = {}
        for rel in case["files"]:
            p = self.tmp / rel
            files[rel] = self.normalise(p.read_text(encoding="utf-8", errors="replace")) if p.is_file() else None
        return {
            "id": case["id"],
            "argv": case["argv"],
            "cwd": case["cwd"],
            "exit_code": code,
            "stdout": self.normalise(out),
            "stderr": self.normalise(err),
            "files": files,
        }

    def run_inprocess(self, case: dict) -> dict:
        if self._entry is None:
            from kvplan._entry import main  # the stable entry point; nothing else of kvplan

            self._entry = main
        self._prepare(case)
        out, err = io.StringIO(), io.StringIO()
        old_argv, old_stdin = sys.argv, sys.stdin
        sys.argv, sys.stdin = ["kvplan", *self._argv(case)], io.StringIO("")
        code = 0
        os.chdir(ROOT / case["cwd"])
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    self._entry()
                except SystemExit as e:
                    if e.code is None or isinstance(e.code, int):
                        code = e.code or 0
                    else:
                        code = 1
                        print(e.code, file=sys.stderr)
                except BaseException as e:  # noqa: BLE001 - a crash is an output too
                    code = 1
                    print(f"uncaught {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.argv, sys.stdin = old_argv, old_stdin
            os.chdir(ROOT)
        return self._result(case, code, out.getvalue(), err.getvalue())

    def run_subprocess(self, case: dict) -> dict:
        self._prepare(case)
        code = (
            "import sys\nfrom kvplan._entry import main\nsys.argv = ['kvplan'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit:\n    raise\n"
            "except BaseException as e:\n    print(f'uncaught {type(e).__name__}: {e}', file=sys.stderr); sys.exit(1)\n"
        )
        p = subprocess.run(
            [sys.executable, "-c", code, *self._argv(case)],
            cwd=ROOT / case["cwd"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
        return self._result(case, p.returncode, p.stdout, p.stderr)

    def run_all(self, cases: list[dict]) -> list[dict]:
        if not self.isolated:
            return [self.run_inprocess(c) for c in cases]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(self.run_subprocess, cases))


def _fix_environment() -> None:
    """Re-execute with PYTHONHASHSEED=0 when it is not set; then fix the rest of the environment."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    for key in list(os.environ):
        if key.startswith("KVPLAN_") or key in DROP_ENV:
            del os.environ[key]
    os.environ.update(FIXED_ENV)
    if hasattr(time, "tzset"):
        time.tzset()
    global ORIG_CWD
    ORIG_CWD = Path.cwd()
    os.chdir(ROOT)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != (ROOT / "benchmarks").resolve()]


# --- record / compare ------------------------------------------------------------------------


def _case_path(out_dir: Path, cid: str) -> Path:
    return out_dir / "cases" / (cid + ".json")


def _select(cases: list[dict], keys: list[str] | None) -> list[dict]:
    return [c for c in cases if not keys or any(k in c["id"] for k in keys)]


def _group(cid: str) -> str:
    return cid.split("/", 1)[0]


def _counts(ids) -> dict:
    out = {"replay": 0, "check": 0, "estimate": 0}
    for i in ids:
        out[_group(i)] = out.get(_group(i), 0) + 1
    out["total"] = sum(out.values())
    return out


def _dump(result: dict) -> str:
    return json.dumps(result, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def _git_head() -> str | None:
    try:
        p = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return p.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def record(out_dir: Path, keys: list[str] | None, runner: Runner) -> int:
    cases = _select(all_cases(), keys)
    t0 = time.monotonic()
    results = runner.run_all(cases)
    wall = time.monotonic() - t0
    if (out_dir / "cases").exists():
        shutil.rmtree(out_dir / "cases")
    for r in results:
        p = _case_path(out_dir, r["id"])
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(_dump(r), encoding="utf-8")
    exits: dict = {}
    for r in results:
        g = exits.setdefault(_group(r["id"]), {})
        g[str(r["exit_code"])] = g.get(str(r["exit_code"]), 0) + 1
    manifest = {
        "format": FORMAT,
        "counts": _counts(r["id"] for r in results),
        "exit_codes": exits,
        "selection": keys or None,
        "git_head": _git_head(),
        "python": sys.version.split()[0],
        "wall_s": round(wall, 1),
        "cases": {r["id"]: hashlib.sha256(_dump(r).encode()).hexdigest()[:16] for r in results},
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    c = manifest["counts"]
    print(f"recorded {c['total']} cases in {out_dir} ({wall:.1f} s): replay {c['replay']}, check {c['check']}, estimate {c['estimate']}")
    print(f"exit codes: {json.dumps(exits, sort_keys=True)}")
    return 0


_LABEL_KEYS = ("vllm", "evidence", "predicted_with")


def _drop_json_labels(x):
    if isinstance(x, dict):
        out = {k: _drop_json_labels(v) for k, v in x.items() if k not in _LABEL_KEYS}
        if isinstance(out.get("diagnostics"), list):
            out["diagnostics"] = [d for d in out["diagnostics"] if not (isinstance(d, dict) and d.get("check_id") == "vllm-version")]
        if isinstance(out.get("checks"), list):
            out["checks"] = [c for c in out["checks"] if c != "vllm-version"]
        if isinstance(out.get("summary"), dict):
            out["summary"] = {k: v for k, v in out["summary"].items() if k != "infos"}
        return out
    if isinstance(x, list):
        return [_drop_json_labels(v) for v in x]
    return x


def drop_version_labels(result: dict) -> dict:
    """``result`` without the version/evidence labels (module docstring: VERSION LABELS)."""
    r = dict(result)
    try:
        r["stdout"] = json.dumps(_drop_json_labels(json.loads(r["stdout"])), indent=1, sort_keys=True)
    except (TypeError, ValueError):
        pass
    r["stderr"] = "".join(s for s in (r.get("stderr") or "").splitlines(True) if not s.startswith("kvplan: vLLM "))
    files = {}
    for k, v in (r.get("files") or {}).items():
        if isinstance(v, str):
            v = re.sub(r'\n\s*<testcase [^>]*:: vllm-version"(?:\s*/>|>.*?</testcase>)', "", v, flags=re.S)
            v = re.sub(r' tests="\d+"', "", v)
        files[k] = v
    r["files"] = files
    return r


def _short_diff(old: dict, new: dict, max_lines: int) -> list[str]:
    lines: list[str] = []
    for key in ("exit_code", "stdout", "stderr", "files"):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str):
            d = list(difflib.unified_diff(a.splitlines(), b.splitlines(), f"baseline {key}", f"now {key}", n=1, lineterm=""))
        else:
            d = [f"{key}: baseline {json.dumps(a)[:300]}", f"{key}: now      {json.dumps(b)[:300]}"]
        lines += d
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return lines


def compare(base_dir: Path, keys: list[str] | None, runner: Runner, show: int, drop_labels: bool = False) -> int:
    manifest_path = base_dir / "manifest.json"
    if not manifest_path.is_file():
        print(f"error: {base_dir}: no manifest.json (record a baseline first: regression.py record {base_dir})", file=sys.stderr)
        return 2
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    baseline_ids = [i for i in manifest.get("cases", {}) if not keys or any(k in i for k in keys)]
    cases = _select(all_cases(), keys)
    t0 = time.monotonic()
    results = {r["id"]: r for r in runner.run_all(cases)}
    wall = time.monotonic() - t0
    identical, differing, missing = [], [], []
    for cid in baseline_ids:
        p = _case_path(base_dir, cid)
        if cid not in results:
            missing.append(cid)
            continue
        try:
            old = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            old = {"stdout": f"<baseline file {p} unreadable>"}
        new = results[cid]
        if drop_labels:
            old, new = drop_version_labels(old), drop_version_labels(new)
        same = all(old.get(k) == new[k] for k in ("exit_code", "stdout", "stderr", "files"))
        (identical if same else differing).append((cid, old, new))
    new_ids = sorted(set(results) - set(baseline_ids))

    by_group: dict = {}
    for label, items in (("identical", identical), ("differing", differing)):
        for cid, _, _ in items:
            by_group.setdefault(_group(cid), {}).setdefault(label, 0)
            by_group[_group(cid)][label] += 1
    for label, ids in (("missing", missing), ("new", new_ids)):
        for cid in ids:
            by_group.setdefault(_group(cid), {}).setdefault(label, 0)
            by_group[_group(cid)][label] += 1

    print(f"compared {len(results)} cases against {base_dir} ({wall:.1f} s)")
    for g in sorted(by_group):
        c = by_group[g]
        print(f"  {g:9} identical {c.get('identical', 0):5}  differing {c.get('differing', 0):4}  missing {c.get('missing', 0):4}  new {c.get('new', 0):4}")
    print(f"  {'total':9} identical {len(identical):5}  differing {len(differing):4}  missing {len(missing):4}  new {len(new_ids):4}")
    for cid, old, new in differing[:show]:
        print(f"\nDIFFERS {cid}\n  argv: kvplan {' '.join(new['argv'])}" + (f"  (in {new['cwd']})" if new["cwd"] != "." else ""))
        for line in _short_diff(old, new, 24):
            print("  " + line)
    if len(differing) > show:
        print(f"\n... and {len(differing) - show} more differing cases")
    for cid in missing[:show]:
        print(f"MISSING {cid} (in the baseline, not produced now)")
    for cid in new_ids[:show]:
        print(f"NEW {cid} (produced now, not in the baseline)")
    return 1 if differing or missing or new_ids else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("record", "compare", "list"))
    ap.add_argument("dir", nargs="?", type=Path)
    ap.add_argument("-k", action="append", dest="keys", metavar="SUBSTRING", help="only cases whose id contains SUBSTRING")
    ap.add_argument("--isolated", action="store_true", help="one python process per case (pool of --jobs)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--show", type=int, default=10, help="differing cases to print")
    ap.add_argument("--vllm-version", metavar="V", help="append --vllm-version V to every case (pin the version)")
    ap.add_argument("--drop-version-labels", action="store_true", help="compare without the version/evidence labels")
    args = ap.parse_args(argv)
    if args.command == "list":
        for c in _select(all_cases(), args.keys):
            print(c["id"])
        return 0
    if args.dir is None:
        ap.error(f"{args.command} needs DIR")
    out_dir = (ORIG_CWD / args.dir).resolve()
    runner = Runner(args.isolated, args.jobs, args.vllm_version)
    try:
        if args.command == "record":
            out_dir.mkdir(parents=True, exist_ok=True)
            return record(out_dir, args.keys, runner)
        return compare(out_dir, args.keys, runner, args.show, args.drop_version_labels)
    finally:
        runner.close()


if __name__ == "__main__":
    _fix_environment()
    sys.exit(main())
