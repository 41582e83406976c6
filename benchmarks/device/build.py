"""Lay out a batch of device cases for the lent GPU machine (benchmarks/device/README.md).

usage: python3 benchmarks/device/build.py benchmarks/device/cases/session5.json
Writes (git-ignored) .device/batch/: one folder per case holding config.json (and draft/config.json),
requests.json (one kvplan.verify.child request per case, plus its vLLM version, env and timeout),
queue.txt (case names in priority order; the runner re-reads it before every case), and copies
runner.sh. Model configs come from a path in the repo (or ../shared): a bundled spec or a record
(a JSON with a "config" key) or a plain config.json; "override" replaces top-level keys.
"""
import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REMOTE = "/tmp/dev/batch"  # where the runner puts the batch on the GPU machine


def load_config(path: str, override: dict | None = None) -> dict:
    d = json.load(open(os.path.join(ROOT, path)))
    cfg = d["config"] if isinstance(d.get("config"), dict) else d
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg.update(override or {})
    return cfg


def main(cases_file: str) -> None:
    out = os.path.join(ROOT, ".device", "batch")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cases = json.load(open(cases_file))["cases"]
    requests = {}
    for c in cases:
        d = os.path.join(out, c["name"])
        os.makedirs(d)
        json.dump(load_config(c["model"], c.get("override")), open(os.path.join(d, "config.json"), "w"), indent=1)
        ea = json.loads(json.dumps(c.get("engine_args", {})))
        if "draft" in c:
            os.makedirs(os.path.join(d, "draft"))
            json.dump(load_config(c["draft"]), open(os.path.join(d, "draft", "config.json"), "w"), indent=1)
            ea["speculative_config"]["model"] = f"{REMOTE}/{c['name']}/draft"
        requests[c["name"]] = {
            "request": {"name": c["name"], "model": f"{REMOTE}/{c['name']}", "engine_args": ea,
                        "usage": c.get("usage", "llm"), "dummy_weights": True, "expect_vllm": c["vllm"]},
            "vllm": c["vllm"], "env": c.get("env", {}),
            "timeout": c.get("timeout", 240 if ea.get("enforce_eager") else 420),
        }
    json.dump(requests, open(os.path.join(out, "requests.json"), "w"), indent=1)
    open(os.path.join(out, "queue.txt"), "w").write("".join(c["name"] + "\n" for c in cases))
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.sh"), out)
    print(len(cases), "cases in", out)


if __name__ == "__main__":
    main(sys.argv[1])
