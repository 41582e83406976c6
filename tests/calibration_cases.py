"""Real vLLM 0.26.0 start-ups on one H200 (copied from ../shared/calibration) as test cases."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data" / "calibration" / "vllm-0.26.0-h200"

# engine_args keys of the records -> kvplan estimate flags
FLAG = {
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


def load_cases() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))]


def estimate_argv(case: dict, model_dir: Path) -> list[str]:
    """`kvplan estimate` arguments reproducing one recorded start (LLM-class defaults)."""
    # these are vLLM 0.26.0 starts: predicted with 0.26.0's rules (the default is the newest)
    argv = ["estimate", str(model_dir), "--gpu", "H200", "--usage", "llm", "--format", "json", "--vllm-version", "0.26.0"]
    args = dict(case["engine_args"])
    args.setdefault("max_num_seqs", case["max_num_seqs"])
    args.setdefault("max_num_batched_tokens", case["max_num_batched_tokens"])
    for key, value in args.items():
        if key not in FLAG:
            continue
        if value is True:
            argv.append(FLAG[key])
        elif value is False:
            continue
        else:
            argv += [FLAG[key], str(value)]
    return argv
