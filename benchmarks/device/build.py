"""Lay out a batch of device cases for the lent GPU machine (benchmarks/device/README.md).

usage: python3 benchmarks/device/build.py CASES.json [CASES.json ...] [--out DIR] [--only NAME,NAME] [--remote DIR]
       python3 benchmarks/device/build.py --check CASES.json ...     (validate only, write nothing)

Writes (default: the git-ignored .device/batch/, replaced whole): one folder per case holding
config.json (plus hf_quant_config.json when the config carries `_hf_quant_config`, and
draft/config.json for a `draft`), requests.json (per case: its kind, vLLM version, env, timeout
and what the runner passes on -- a `python -m kvplan.verify.child` request for a memory start,
the `kvplan verify --bench` flags for a benchmark run), queue.txt (case names in file order; the
runner re-reads it before every case) and copies of runner.sh and bench.sh. --remote: where the
batch lies on the GPU machine (default /tmp/dev/batch; $KVPLAN_DEVICE_TMP/dev/batch when the runner
is given another root).

Case format (every key; anything else is refused with the case and key named, exit 2):
  top level: {"about": "what the file is for and where it came from", "cases": [case, ...]}
  name         [A-Za-z0-9._-]+, unique over the files built together (folder and log name)
  kind         "start" (default: one vLLM engine start, KV blocks and memory) or "bench"
               (one OpenAI-server start, then a benchmark grid: `kvplan verify --bench`)
  vllm         vLLM version whose staged parts the runner installs, e.g. "0.34.0"
  model        path from the repo root to a JSON holding the model config: a bundled spec or a
               record (its "config" key) or a plain config.json      } exactly one of
  config       the config.json inline                                } model / config
  override     {key: value} replacing top-level keys of the config (e.g. num_hidden_layers)
  draft        path (as model) of a draft model's config; written to <case>/draft/ and put in
               place of "@draft" in engine_args.speculative_config.model (start only)
  engine_args  start: LLM(...) keywords, vLLM's names, passed verbatim
  usage        start: "llm" (default) or "serve" (vLLM's usage context for the defaults)
  grid         bench: a grid of kvplan/verify/bench/workload.py (GRIDS), e.g. "full", "quick"
  serve_flags  bench: `vllm serve` flags, e.g. ["--max-model-len", "16384"]
  bench_flags  bench: kvplan's own flags, e.g. ["--bench-seconds", "5", "--bench-token-limit", "140000"]
  env          {NAME: "value"} added to the case's environment
  timeout      seconds (default: start 240 eager / 420 with CUDA graphs; bench 560, SIGINT then)
  machine      the device kind the case is meant for (e.g. "nvidia-h100-x1"); not checked on the device
  record_to    where the result goes in the repo once fetched (documentation)
  source, purpose, note   free text (where the config came from, why the case exists)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
REMOTE = "/tmp/dev/batch"  # where the runner puts the batch on the GPU machine
COMMON = {"name", "kind", "vllm", "model", "config", "override", "env", "timeout", "machine",
          "record_to", "source", "purpose", "note"}
KEYS = {"start": COMMON | {"engine_args", "usage", "draft"},
        "bench": COMMON | {"grid", "serve_flags", "bench_flags"}}


class CaseError(Exception):
    """A case file that cannot be laid out; the message names the file, case and key."""


def load_config(path: str, override: dict | None = None) -> dict:
    """The config.json dict of `path` (repo-relative): its "config" key if it has one, else itself;
    keys starting with "_" dropped except `_hf_quant_config` (written to its own file); `override`
    replaces top-level keys."""
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full):
        raise CaseError(f"{path}: no such file")
    d = json.load(open(full))
    return config_of(d["config"] if isinstance(d.get("config"), dict) else d, override)


def config_of(cfg: dict, override: dict | None = None) -> dict:
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_") or k == "_hf_quant_config"}
    cfg.update(override or {})
    return cfg


def check_case(c: dict, where: str) -> dict:
    """The case with defaults filled in; CaseError naming `where`, the case and the key if malformed."""
    if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not re.fullmatch(r"[A-Za-z0-9._-]+", c["name"]):
        raise CaseError(f"{where}: every case needs a name of [A-Za-z0-9._-]+ (got {c.get('name') if isinstance(c, dict) else c!r})")
    where = f"{where} case {c['name']}"
    kind = c.get("kind", "start")
    if kind not in KEYS:
        raise CaseError(f"{where}: kind must be start or bench, not {kind!r}")
    unknown = sorted(set(c) - KEYS[kind])
    if unknown:
        raise CaseError(f"{where}: unknown key {unknown[0]!r} for a {kind} case")
    if not isinstance(c.get("vllm"), str) or not re.fullmatch(r"\d+\.\d+\.\d+\S*", c["vllm"]):
        raise CaseError(f"{where}: vllm must be a version string like \"0.34.0\"")
    if ("model" in c) == ("config" in c):
        raise CaseError(f"{where}: give exactly one of model (a path) and config (inline)")
    for key, typ in (("override", dict), ("env", dict), ("engine_args", dict), ("config", dict),
                     ("serve_flags", list), ("bench_flags", list)):
        if key in c and not isinstance(c[key], typ):
            raise CaseError(f"{where}: {key} must be a {'list' if typ is list else 'mapping'}")
    for key in ("serve_flags", "bench_flags"):
        if not all(isinstance(x, str) for x in c.get(key, [])):
            raise CaseError(f"{where}: every item of {key} must be a string")
    if not all(isinstance(v, str) for v in c.get("env", {}).values()):
        raise CaseError(f"{where}: env values must be strings")
    if kind == "start" and c.get("usage", "llm") not in ("llm", "serve"):
        raise CaseError(f"{where}: usage must be llm or serve")
    if kind == "bench" and not isinstance(c.get("grid"), str):
        raise CaseError(f"{where}: a bench case needs a grid (e.g. \"full\")")
    if "draft" in c and (c.get("engine_args", {}).get("speculative_config") or {}).get("model") != "@draft":
        raise CaseError(f"{where}: draft needs engine_args.speculative_config.model \"@draft\"")
    if "timeout" in c and (not isinstance(c["timeout"], int) or c["timeout"] <= 0):
        raise CaseError(f"{where}: timeout must be a positive number of seconds")
    eager = c.get("engine_args", {}).get("enforce_eager")
    return {**c, "kind": kind, "timeout": c.get("timeout", 560 if kind == "bench" else 240 if eager else 420)}


def load_cases(paths: list[str]) -> list[dict]:
    """Every case of the case files, checked, in file order; CaseError on a bad file or a repeated name."""
    cases, seen = [], {}
    for p in paths:
        try:
            d = json.load(open(p))
        except (OSError, ValueError) as e:
            raise CaseError(f"{p}: not a readable JSON case file ({e})") from None
        if not isinstance(d, dict) or not isinstance(d.get("cases"), list) or set(d) - {"about", "cases"}:
            raise CaseError(f"{p}: a case file is {{\"about\": ..., \"cases\": [...]}}")
        for c in d["cases"]:
            c = check_case(c, p)
            if c["name"] in seen:
                raise CaseError(f"{p} case {c['name']}: name already used in {seen[c['name']]}")
            seen[c["name"]] = p
            cases.append(c)
    return cases


def write_config(d: str, cfg: dict) -> None:
    os.makedirs(d)
    cfg = dict(cfg)
    quant = cfg.pop("_hf_quant_config", None)  # ModelOpt keeps it in its own file next to config.json
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    if quant is not None:
        json.dump(quant, open(os.path.join(d, "hf_quant_config.json"), "w"), indent=1)


def request_of(c: dict, remote: str) -> dict:
    """requests.json's entry for case `c` whose folder is `remote` on the GPU machine."""
    out = {"kind": c["kind"], "vllm": c["vllm"], "env": c.get("env", {}), "timeout": c["timeout"]}
    if c["kind"] == "bench":
        return {**out, "model": remote, "grid": c["grid"], "args": c.get("bench_flags", []) + c.get("serve_flags", [])}
    ea = json.loads(json.dumps(c.get("engine_args", {})))
    if "draft" in c:
        ea["speculative_config"]["model"] = f"{remote}/draft"
    return {**out, "request": {"name": c["name"], "model": remote, "engine_args": ea, "usage": c.get("usage", "llm"),
                               "dummy_weights": True, "expect_vllm": c["vllm"]}}


def resolve(cases: list[dict]) -> tuple[dict, dict]:
    """({name: config}, {name: draft config}) of `cases`; CaseError naming a file that is missing."""
    configs, drafts = {}, {}
    for c in cases:
        try:
            configs[c["name"]] = (load_config(c["model"], c.get("override")) if "model" in c
                                  else config_of(c["config"], c.get("override")))
            if "draft" in c:
                drafts[c["name"]] = load_config(c["draft"])
        except CaseError as e:
            raise CaseError(f"case {c['name']}: {e}") from None
    return configs, drafts


def build(cases: list[dict], out: str, remote: str = REMOTE) -> None:
    """Write the batch folder `out` (replaced whole) for `cases` (as load_cases returns them), whose
    copy on the GPU machine will be `remote`."""
    configs, drafts = resolve(cases)  # every file read before anything is written
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    requests = {}
    for c in cases:
        d = os.path.join(out, c["name"])
        write_config(d, configs[c["name"]])
        if c["name"] in drafts:
            write_config(os.path.join(d, "draft"), drafts[c["name"]])
        requests[c["name"]] = request_of(c, f"{remote}/{c['name']}")
    json.dump(requests, open(os.path.join(out, "requests.json"), "w"), indent=1)
    open(os.path.join(out, "queue.txt"), "w").write("".join(c["name"] + "\n" for c in cases))
    for f in ("runner.sh", "bench.sh"):
        shutil.copy(os.path.join(HERE, f), out)


def main(argv: list[str]) -> int:
    out, only, check, files, remote = os.path.join(ROOT, ".device", "batch"), None, False, [], REMOTE
    it = iter(argv)
    for a in it:
        if a == "--out":
            out = next(it, None)
        elif a == "--only":
            only = next(it, "").split(",")
        elif a == "--remote":
            remote = next(it, REMOTE)
        elif a == "--check":
            check = True
        else:
            files.append(a)
    if not files or out is None:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        cases = load_cases(files)
        if only is not None:
            missing = sorted(set(only) - {c["name"] for c in cases})
            if missing:
                raise CaseError(f"--only: no case named {missing[0]}")
            cases = [c for c in cases if c["name"] in only]
        if check:
            resolve(cases)
        else:
            build(cases, out, remote)
    except CaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(len(cases), "cases", "checked" if check else f"in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
