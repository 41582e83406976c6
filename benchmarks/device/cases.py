"""Device calibration cases: real vLLM 0.26.0 starts to run on the lent H200.

Two kinds:
* probes: reduced-layer copies of real configs (the activation peak happens inside one layer, so
  2-4 layers measure it as well as the full model, in a fraction of the start-up time), chosen
  to separate the terms of kvplan's activation model (per-token slope, sampler, MoE workspaces,
  Gated DeltaNet, CUDA graphs);
* records: full real configs for tests/data/vllm-0.26.0-h200 (replayed by the test suite).

`python benchmarks/device/cases.py OUTDIR` writes OUTDIR/<case>/config.json and OUTDIR/cases.yaml
for `kvplan verify --batch OUTDIR/cases.yaml`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "model_specs"


def cfg(file: str, **overrides) -> dict:
    data = json.loads((SPECS / file).read_text())["config"]
    data = json.loads(json.dumps(data))
    tc = data.get("text_config")
    target = tc if isinstance(tc, dict) and tc else data
    for k, v in overrides.items():
        if k == "layers":
            target["num_hidden_layers"] = v
            if isinstance(target.get("layer_types"), list):
                target["layer_types"] = target["layer_types"][:v]
        else:
            target[k] = v
    return data


CAL = ROOT / "tests/data/calibration/vllm-0.26.0-h200"


def cal_cfg(name: str, **overrides) -> dict:
    data = json.loads((CAL / f"{name}.json").read_text())["config"]
    for k, v in overrides.items():
        if k == "layers":
            data["num_hidden_layers"] = v
            if isinstance(data.get("layer_types"), list):
                data["layer_types"] = data["layer_types"][:v]
        else:
            data[k] = v
    return data


E = {"enforce_eager": True}

PROBES = [
    # V2 runner, dense: sampler bytes per logit (forward small, 1024 sampler rows)
    ("p-llama3-4L-t2048-s1024", cal_cfg("llama3-8b_eager", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 1024}),
    ("p-gemma2-4L-t2048-s1024", cal_cfg("gemma2-9b_eager", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 1024, "dtype": "bfloat16"}),
    ("p-qwen25-4L-t2048-s1024", cal_cfg("qwen2.5-7b_eager", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 1024}),
    # V2 runner, dense: forward slope with the sampler small
    ("p-gemma2-4L-t16384-s256", cal_cfg("gemma2-9b_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256, "dtype": "bfloat16"}),
    ("p-qwen25-4L-t16384-s256", cal_cfg("qwen2.5-7b_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-llama70b-2L-t16384-s256", cfg("meta-llama__Meta-Llama-3-70B.json", layers=2, torch_dtype="bfloat16"), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-phi3-4L-t16384-s256", cfg("microsoft__Phi-3-mini-4k-instruct.json", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    # V1 runner, MoE: per-token slope from two token counts
    ("p-mixtral-2L-t16384-s256", cal_cfg("mixtral-8x7b_eager", layers=2), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-mixtral-2L-t8192-s256", cal_cfg("mixtral-8x7b_eager", layers=2), {**E, "max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    ("p-qwen3moe-4L-t16384-s256", cfg("Qwen__Qwen3-30B-A3B.json", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-qwen3moe-4L-t8192-s256", cfg("Qwen__Qwen3-30B-A3B.json", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    # V2 runner, MoE + MLA
    ("p-dsv2lite-4L-t16384-s256", cal_cfg("dsv2-lite_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-dsv2lite-4L-t8192-s256", cal_cfg("dsv2-lite_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    # Hybrid Gated DeltaNet (3 linear + 1 full attention layer), bf16
    ("p-qwen3next-4L-t16384-s256", cal_cfg("qwen3-next-80b_fp8_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-qwen3next-4L-t8192-s256", cal_cfg("qwen3-next-80b_fp8_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    # Qwen2.5 weights: is the extra 0.1 GiB per layer or fixed? (4 vs 28 layers)
    ("p-qwen25-4L-t8192-s256", cal_cfg("qwen2.5-7b_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 256}),
    # CUDA graphs: V2 dense (reported, not subtracted) and V1 MoE (estimate subtracted)
    ("p-llama3-4L-graphs", cal_cfg("llama3-8b_eager", layers=4), {"max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 1024}),
    ("p-qwen3moe-4L-graphs", cfg("Qwen__Qwen3-30B-A3B.json", layers=4), {"max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 1024}),
]

# Second round (V1-runner MoE forward and sampler, gpt-oss), run when the first round showed the
# V1 sampler (top-k/top-p warm-up over max_num_seqs rows) dominating MoE starts.
PROBES2 = [
    ("p-qwen3moe-4L-t16384-s256", cfg("Qwen__Qwen3-30B-A3B.json", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-qwen3moe-4L-t2048-s1024", cfg("Qwen__Qwen3-30B-A3B.json", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 1024}),
    ("p-gptoss-4L-t2048-s1024", cfg("openai__gpt-oss-20b.json", layers=4), {**E, "max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 1024}),
    ("p-gptoss-4L-t16384-s256", cfg("openai__gpt-oss-20b.json", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
    ("p-qwen3next-4L-t16384-s256", cal_cfg("qwen3-next-80b_fp8_eager", layers=4), {**E, "max_model_len": 8192, "max_num_batched_tokens": 16384, "max_num_seqs": 256}),
]

SERVE = {"max_num_batched_tokens": 8192, "max_num_seqs": 1024}  # `vllm serve` defaults on an H200

RECORDS = [
    ("qwen3-8b_graphs_32k", cfg("Qwen__Qwen3-8B.json"), {"max_model_len": 32768}),
    ("qwen3-30b-a3b_graphs", cfg("Qwen__Qwen3-30B-A3B.json"), {"max_model_len": 32768}),
    ("qwen3-30b-a3b_eager_serve", cfg("Qwen__Qwen3-30B-A3B.json"), {**E, "max_model_len": 32768, **SERVE}),
    ("gemma3-1b_eager", cfg("google__gemma-3-1b-it.json"), {**E, "max_model_len": 32768}),
    ("gemma3-27b_eager", cfg("google__gemma-3-27b-it.json"), {**E, "max_model_len": 32768}),
    ("phi3-mini-4k_eager", cfg("microsoft__Phi-3-mini-4k-instruct.json"), {**E}),
    ("gpt-oss-20b_eager", cfg("openai__gpt-oss-20b.json"), {**E, "max_model_len": 32768}),
    ("llama3.1-8b_eager_128k", cfg("meta-llama__Llama-3.1-8B-Instruct.json"), {**E, "max_model_len": 131072}),
    ("llama3.1-70b-awq_eager", cfg("hugging-quants__Meta-Llama-3.1-70B-Instruct-AWQ-INT4.json"), {**E, "max_model_len": 16384}),
    ("llama2-7b-gptq_eager", cfg("TheBloke__Llama-2-7B-GPTQ.json"), {**E}),
    ("llama3.1-8b_serve_defaults", cfg("meta-llama__Llama-3.1-8B-Instruct.json"), {"max_model_len": 32768, **SERVE}),
    ("mistral-7b-v0.1_eager_bs32", cfg("mistralai__Mistral-7B-v0.1.json"), {**E, "max_model_len": 32768, "block_size": 32}),
    ("qwen3-8b_eager_fp8kv", cfg("Qwen__Qwen3-8B.json"), {**E, "max_model_len": 32768, "kv_cache_dtype": "fp8"}),
]


# Third round (2026-11-29, second session): architectures and quantizations no start had covered:
# Mamba-2 and Mamba-1 hybrids with MoE, FP8 block-quantized and ModelOpt FP8 checkpoints, MLA with
# FP8 experts (DeepSeek-V3 shape), a 120B MXFP4 MoE, an old learned-position model (OPT), Phi-4,
# Gemma-2-27B, TinyLlama. Granite-4.0-H-Small's bundled config is partial: the Mamba head layout
# and the attention positions below are the published sibling configs' (see the spec's note); the
# record stores the config it ran, so it replays exactly whatever the real file says.
GRANITE_H_SMALL = cfg(
    "ibm-granite__granite-4.0-h-small.json",
    architectures=["GraniteMoeHybridForCausalLM"],
    mamba_n_heads=128, mamba_d_head=64, mamba_n_groups=1, mamba_chunk_size=256,
    mamba_conv_bias=True, mamba_proj_bias=False,
    max_position_embeddings=131072, position_embedding_type="nope", rope_scaling=None,
    layer_types=["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)],
)
RECORDS3 = [
    ("granite4h-small_eager", GRANITE_H_SMALL, {**E, "max_model_len": 32768}),
    ("p-dsv3-4L", cfg("deepseek-ai__DeepSeek-V3.json", layers=4), {**E, "max_model_len": 16384}),
    ("qwen3-32b-fp8_eager", cfg("Qwen__Qwen3-32B-FP8.json"), {**E, "max_model_len": 32768}),
    ("llama3.1-70b-modelopt-fp8_eager", cfg("nvidia__Llama-3.1-70B-Instruct-FP8.json"), {**E, "max_model_len": 16384}),
    ("gpt-oss-120b_eager", cfg("openai__gpt-oss-120b.json"), {**E, "max_model_len": 32768}),
    ("p-jamba-8L", cfg("ai21labs__Jamba-v0.1.json", layers=8), {**E, "max_model_len": 16384}),
    ("phi4_eager", cfg("microsoft__phi-4.json"), {**E, "max_model_len": 16384}),
    ("gemma2-27b_eager", cfg("google__gemma-2-27b.json"), {**E, "dtype": "bfloat16"}),
    ("opt-125m_eager", cfg("facebook__opt-125m.json"), {**E}),
    ("tinyllama_serve_defaults", cfg("TinyLlama__TinyLlama-1.1B-Chat-v1.0.json"), {**SERVE}),
]

# torch.compile + CUDA graphs on the V2 runner at other hidden sizes (the compiled forward's
# fixed part was fitted at H=4096 only; TinyLlama at H=2048 showed it is not a constant).
GRAPHS = {"max_model_len": 8192, "max_num_batched_tokens": 8192, "max_num_seqs": 1024}
PROBES3 = [
    ("p-llama70b-2L-graphs", cfg("meta-llama__Meta-Llama-3-70B.json", layers=2, torch_dtype="bfloat16"), GRAPHS),
    ("p-phi4-4L-graphs", cfg("microsoft__phi-4.json", layers=4), GRAPHS),
]


def write(outdir: Path, which: str = "all") -> Path:
    cases = []
    sel = {"probes": PROBES, "probes2": PROBES2, "records": RECORDS, "round3": RECORDS3, "probes3": PROBES3, "all": PROBES + RECORDS}[which]
    for name, config, args in sel:
        d = outdir / name
        d.mkdir(parents=True, exist_ok=True)
        config = dict(config)
        modelopt = config.pop("_hf_quant_config", None)  # ModelOpt keeps it in its own file
        (d / "config.json").write_text(json.dumps(config, indent=1))
        if modelopt is not None:
            (d / "hf_quant_config.json").write_text(json.dumps(modelopt, indent=1))
        cases.append({"name": name, "model": str(d), "engine_args": args})
    path = outdir / f"cases-{which}.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}, sort_keys=False))
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "device-cases")
    for which in ("probes", "probes2", "records", "round3", "probes3", "all"):
        print(write(out, which))
