"""Fit kvplan's vLLM 0.34.0 extensible-KV-cache terms on real 0.34.0 starts, and print the
held-out errors.

    python benchmarks/fit_v034.py

Reads every start of tests/data/vllm-0.34.0-h100 that kvplan/engines/vllm/v0_34/real_starts.py STARTS lists (its `Memory after warmup` line: F, C, P, G at
0.01 GiB; KVPLAN_EXACT: the profile peak, T = max_num_batched_tokens; KVPLAN_CONFIG: hidden
size) and kvplan's own prediction of it (`kvplan verify --from-log --format json`), then fits on
the FIT starts (one per model family) and reports every start, the others held out:

* SIZING_STEP_BYTES_PER_TOKEN  = mean over FIT of (P - the profile peak) / T
* TORCH_RESERVE_GROWTH_RATIO   = mean over FIT of G / P
* WARMUP_PERSISTENT_HIDDEN_COPIES = mean over FIT of (what warm-up leaves allocated, implied by
  F + C) / (2 B x hidden_size x T)

The implied leftover is kvplan's current leftover plus its F + C error, so it also absorbs
kvplan's consumed-memory error for that model. The constants live in
kvplan/engines/vllm/v0_34/activation.py; rerun after changing them to see the errors.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "vllm-0.34.0-h100"
GiB, MiB = 1 << 30, 1 << 20
# one start per model family (dense Llama-3-8B, MoE Qwen3-30B-A3B, sliding-window Gemma-2-9B)
FIT = ("llama3-8b_eager", "qwen3-30b-a3b_eager", "gemma2-9b_eager")


def _start(path: Path) -> dict | None:
    text = path.read_text()
    m = re.search(r"Memory after warmup: ([\d.]+) GiB free, ([\d.]+) GiB committed to the KV cache, [\d.]+ GiB kept "
                  r"for transient activations \(([\d.]+) GiB allocated at peak, ([\d.]+) GiB of torch reservation growth",
                  text)
    if not m:
        return None  # the estimate path: nothing to fit
    exact = json.loads(re.search(r"^KVPLAN_EXACT (.*)$", text, re.M).group(1))
    config = json.loads(re.search(r"^KVPLAN_CONFIG (.*)$", text, re.M).group(1))
    run = subprocess.run([sys.executable, "-m", "kvplan", "verify", "--from-log", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT)
    doc = json.loads(run.stdout)
    pred = doc["kv_cache_sizing"]["predicted"]
    fc = round(float(m.group(1)) * GiB) + round(float(m.group(2)) * GiB)
    t, h = exact["max_num_batched_tokens"], config.get("hidden_size") or config["text_config"]["hidden_size"]
    return {
        "name": path.stem, "T": t, "H": h, "P": round(float(m.group(3)) * GiB), "G": round(float(m.group(4)) * GiB),
        "peak": exact["peak_activation"], "fc_err": pred["free_after_warmup_bytes"] - fc,
        "leftover": pred["warmup_persistent_bytes"] + (pred["free_after_warmup_bytes"] - fc),
        "pred": pred, "blocks": (doc["predicted"]["num_gpu_blocks"], doc["measured"]["num_gpu_blocks"]),
    }


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from kvplan.engines.vllm.v0_34.real_starts import STARTS

    paths = [DATA / (s.split("/", 1)[1] + ".log") for s in STARTS]
    starts = [s for s in (_start(p) for p in paths) if s]
    fit = [s for s in starts if s["name"] in FIT]
    k = sum((s["P"] - s["peak"]) / s["T"] for s in fit) / len(fit)
    ratio = sum(s["G"] / s["P"] for s in fit) / len(fit)
    copies = sum(s["leftover"] / (2 * s["H"] * s["T"]) for s in fit) / len(fit)
    print(f"fitted on {', '.join(FIT)}:")
    print(f"  SIZING_STEP_BYTES_PER_TOKEN = {k:.1f}   TORCH_RESERVE_GROWTH_RATIO = {ratio:.5f}   "
          f"WARMUP_PERSISTENT_HIDDEN_COPIES = {copies:.4f}")
    print(f"\n{'start':32s} {'set':8s} {'blocks pred/meas':>18s} {'err':>8s} {'F+C err':>9s} {'P err':>8s} {'G err':>8s}")
    for s in starts:
        p, m = s["blocks"]
        print(f"{s['name']:32s} {'fit' if s in fit else 'held-out':8s} {p:>8,}/{m:<9,} {100 * (p - m) / m:+7.3f}% "
              f"{s['fc_err'] / MiB:+8.1f}M {(s['pred']['transient_peak_bytes'] - s['P']) / MiB:+7.1f}M "
              f"{(s['pred']['reserve_growth_bytes'] - s['G']) / MiB:+7.1f}M")


if __name__ == "__main__":
    main()
