"""Build the vLLM 0.33.0 real-start cases (issue 13) for the lent H200.

Mirrors the 14 calibration cases in ../shared/calibration/vllm-0.26.0-h200/*.json (their
`config` and `engine_args`, so each 0.33 start compares one to one with a 0.26 start), adds
Qwen3-30B-A3B (model_specs/Qwen__Qwen3-30B-A3B.json) eager, eager with usage "serve" and with
CUDA graphs, and granite-4.0-h-small (the `config` of tests/data/vllm-0.26.0-h200/
granite4h-small_eager.json). Writes .device/cases/B/<name>/config.json and .device/cases_B.json.
Run from the repo root: python3 benchmarks/device/cases_v033.py
"""
import glob, json, os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAL = os.path.join(os.path.dirname(ROOT), "shared", "calibration", "vllm-0.26.0-h200")
ORDER = ["llama3-8b_eager", "llama3-8b_eager_fp8kv", "llama3-8b_eager_u05", "llama3-8b_eager_bs32",
         "llama3-8b_eager_mbt16k", "llama3-8b_eager_mbt8k_seqs256", "mistral-7b_eager",
         "qwen2.5-7b_eager", "gemma2-9b_eager", "dsv2-lite_eager", "mixtral-8x7b_eager",
         "llama3-70b_fp8_eager", "qwen3-next-80b_fp8_eager",
         "qwen3-30b-a3b_eager", "qwen3-30b-a3b_eager_serve", "llama3-8b_default",
         "qwen3-30b-a3b_graphs", "granite4h-small_eager"]


def cases():
    out = {}
    for f in sorted(glob.glob(os.path.join(CAL, "*.json"))):
        d = json.load(open(f))
        out[d["name"]] = (d["config"], d["engine_args"], "llm", f"calibration {os.path.basename(f)}")
    q = json.load(open(os.path.join(ROOT, "model_specs", "Qwen__Qwen3-30B-A3B.json")))
    q = q["config"]
    src = "model_specs/Qwen__Qwen3-30B-A3B.json"
    out["qwen3-30b-a3b_eager"] = (q, {"enforce_eager": True, "max_model_len": 32768}, "llm", src)
    out["qwen3-30b-a3b_eager_serve"] = (q, {"enforce_eager": True, "max_model_len": 32768}, "serve", src)
    out["qwen3-30b-a3b_graphs"] = (q, {"max_model_len": 32768}, "llm", src)
    g = json.load(open(os.path.join(ROOT, "tests", "data", "vllm-0.26.0-h200", "granite4h-small_eager.json")))
    out["granite4h-small_eager"] = (g["config"], g["engine_args"], "llm",
                                    "tests/data/vllm-0.26.0-h200/granite4h-small_eager.json config")
    # fame (issue 12): Gemma-4 with per-layer attention shapes, which 0.26.0 cannot start; its
    # config is the KVPLAN_CONFIG of that failed 0.26.0 start (an aiconfigurator copy of the Hub file)
    log = os.path.join(ROOT, "tests", "data", "vllm-0.26.0-h200", "families", "gemma4-26b-a4b_eager.log")
    line = next(l for l in open(log, errors="replace") if l.startswith("KVPLAN_CONFIG "))
    out["gemma4-26b-a4b_eager"] = (json.loads(line.split(" ", 1)[1]),
                                   {"enforce_eager": True, "max_model_len": 32768,
                                    "limit_mm_per_prompt": {"image": 0, "video": 0}}, "llm",
                                   "tests/data/vllm-0.26.0-h200/families/gemma4-26b-a4b_eager.log KVPLAN_CONFIG")
    return [(n,) + out[n] for n in ORDER + ["gemma4-26b-a4b_eager"]]


def main():
    base = os.path.join(ROOT, ".device", "cases", "B")
    os.makedirs(base, exist_ok=True)
    reqs = []
    for name, cfg, ea, usage, src in cases():
        d = os.path.join(base, name)
        os.makedirs(d, exist_ok=True)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
        reqs.append({"name": name, "model": f"/tmp/cases/B/{name}", "engine_args": ea, "usage": usage,
                     "dummy_weights": True, "expect_vllm": "0.33.0", "_source": src})
    json.dump(reqs, open(os.path.join(ROOT, ".device", "cases_B.json"), "w"), indent=1)
    print(len(reqs), "cases")


if __name__ == "__main__":
    main()
