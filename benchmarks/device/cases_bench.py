"""Build the vLLM 0.26.0 serving-benchmark cases (issue 15) for the lent H200.

Each case is one `python -m kvplan verify --bench DIR --grid G --record R [vllm serve flags]`
run (one vLLM OpenAI-server start, the whole grid), with vLLM's `vllm serve` defaults except
the flags listed. Configs: ../shared/reference/model_configs (Llama-3.1-8B-Instruct,
Qwen3-30B-A3B, Llama-3.1-70B-Instruct in bf16 quantized online with `--quantization fp8`,
as the calibration case llama3-70b_fp8_eager), tests/data for the 4-layer smoke model.
Writes .device/cases/C/<name>/config.json and .device/cases_C.json. Run from the repo root:
    python3 benchmarks/device/cases_bench.py
"""
import json, os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REF = os.path.join(os.path.dirname(ROOT), "shared", "reference", "model_configs")


def ref(name):
    d = json.load(open(os.path.join(REF, name)))
    return d.get("config", d)


def cases():
    smoke = json.load(open(os.path.join(ROOT, "tests", "data", "vllm-0.26.0-h200", "llama3-4L_graphs_serve.json")))["config"]
    return [
        # name, config, grid, serve flags, bench flags, timeout s
        ("smoke-llama3-4L", smoke, "quick", ["--max-model-len", "4096", "--enforce-eager"], [], 240),
        ("llama3.1-8b", ref("meta-llama__Llama-3.1-8B-Instruct.json"), "full", ["--max-model-len", "16384"], [], 560),
        ("qwen3-30b-a3b", ref("Qwen__Qwen3-30B-A3B.json"), "full", ["--max-model-len", "16384"], [], 560),
        ("llama3.1-70b-fp8", ref("meta-llama__Llama-3.1-70B-Instruct.json"), "full",
         ["--max-model-len", "16384", "--quantization", "fp8"], ["--bench-seconds", "5", "--bench-token-limit", "140000"], 290),
        # session 4: the same 70B grid again, whole (session 3's run was cut at 290 s); the first 6 points
        # repeat session 3's and show run-to-run spread
        ("llama3.1-70b-fp8-full", ref("meta-llama__Llama-3.1-70B-Instruct.json"), "full",
         ["--max-model-len", "16384", "--quantization", "fp8"], ["--bench-seconds", "5", "--bench-token-limit", "140000"], 560),
    ]


def main():
    base = os.path.join(ROOT, ".device", "cases", "C")
    os.makedirs(base, exist_ok=True)
    reqs = []
    for name, cfg, grid, serve, bench, tmo in cases():
        d = os.path.join(base, name)
        os.makedirs(d, exist_ok=True)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
        argv = ["verify", "--bench", f"/tmp/cases/C/{name}", "--grid", grid,
                "--record", f"/tmp/logs/bench/{name}.json", *bench, *serve]
        reqs.append({"name": name, "argv": argv, "timeout": tmo, "env": {}})
    json.dump(reqs, open(os.path.join(ROOT, ".device", "cases_C.json"), "w"), indent=1)
    print(len(reqs), "cases")


if __name__ == "__main__":
    main()
