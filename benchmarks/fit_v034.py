"""Fit kvplan's vLLM 0.34.0 extensible-KV-cache terms on real 0.34.0 starts, and print the
held-out errors.

    python benchmarks/fit_v034.py

Reads every start of tests/data/vllm-0.34.0-h100 that kvplan/engines/vllm/v0_34/real_starts.py STARTS lists (its `Memory after warmup` line: F, C, P, G at
0.01 GiB; KVPLAN_EXACT: the profile peak, T = max_num_batched_tokens; KVPLAN_CONFIG: hidden
size) and kvplan's own prediction of it (`kvplan verify --from-log --format json`), then fits on
the FIT starts (one per model family) and reports every start, the others held out:

* SIZING_STEP_BYTES_PER_TOKEN  = mean over the FIT starts whose logged P is above their logged
  profile peak (the sizing step set P) of (P - kvplan's forward stage) / T
* TORCH_RESERVE_GROWTH_RATIO   = mean over FIT of G / P; used only for the layer kinds
  v0_34/reserve_growth.py does not restate (G is derived there, not fitted: column "G rule")
* WARMUP_PERSISTENT_HIDDEN_COPIES = mean over FIT of (what warm-up leaves allocated, implied by
  F + C) / (2 B x hidden_size x T)

"blocks step" is how far one granule moves the count (vLLM maps each layer's segment in 2 MiB
granules, so some models' counts move in steps above 0.5 %: only an exact count is within 0.5 %).

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
    fwd, derived, step = _kvplan_terms(path.stem, config, exact)
    return {
        "forward": fwd, "g_rule": "derived" if derived else "ratio", "step": step,
        "name": path.stem, "T": t, "H": h, "P": round(float(m.group(3)) * GiB), "G": round(float(m.group(4)) * GiB),
        "peak": exact["peak_activation"], "fc_err": pred["free_after_warmup_bytes"] - fc,
        "leftover": pred["warmup_persistent_bytes"] + (pred["free_after_warmup_bytes"] - fc),
        "pred": pred, "blocks": (doc["predicted"]["num_gpu_blocks"], doc["measured"]["num_gpu_blocks"]),
    }


def _kvplan_terms(name: str, config: dict, exact: dict) -> tuple[int, bool, int]:
    """(kvplan's profile forward stage in bytes, whether G is derived, blocks one granule moves)."""
    from kvplan.engines.vllm.v0_26.activation import ProfileRun
    from kvplan.engines.vllm.v0_34 import activation, reserve_growth
    from kvplan.model.parse import parse_config

    spec = parse_config(config, name)
    run = ProfileRun(spec=spec, tp=1, act_dtype_bytes=2, tokens=exact["max_num_batched_tokens"],
                     max_num_seqs=exact["max_num_seqs"], enforce_eager=True, is_last_pp_rank=True,
                     layers=range(spec.num_hidden_layers), sm_count=None, moe_workspace_persists=True,
                     fp8_act_quant=0, max_model_len=exact["max_model_len"])
    a = spec.attention
    per_layer_block = exact["block_size"] * a.num_key_value_heads * (a.head_dim + a.head_dim_v) * 2
    step = max(1, (2 * MiB) // per_layer_block) if (2 * MiB) % per_layer_block == 0 else 1
    return activation._peak(run).forward_bytes, reserve_growth.supported(spec), step


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from kvplan.engines.vllm.v0_34.real_starts import STARTS

    paths = [DATA / (s.split("/", 1)[1] + ".log") for s in STARTS]
    starts = [s for s in (_start(p) for p in paths) if s]
    fit = [s for s in starts if s["name"] in FIT]
    raised = [s for s in fit if s["P"] > s["peak"] + GiB // 200]  # the sizing step set P
    k = sum((s["P"] - s["forward"]) / s["T"] for s in raised) / len(raised)
    ratio = sum(s["G"] / s["P"] for s in fit) / len(fit)
    copies = sum(s["leftover"] / (2 * s["H"] * s["T"]) for s in fit) / len(fit)
    print(f"fitted on {', '.join(FIT)} (SIZING_STEP_BYTES_PER_TOKEN on {', '.join(s['name'] for s in raised)}):")
    print(f"  SIZING_STEP_BYTES_PER_TOKEN = {k:.1f}   TORCH_RESERVE_GROWTH_RATIO = {ratio:.5f}   "
          f"WARMUP_PERSISTENT_HIDDEN_COPIES = {copies:.4f}")
    print(f"\n{'start':32s} {'set':8s} {'blocks pred/meas':>18s} {'err':>8s} {'step':>6s} {'F+C err':>9s} "
          f"{'P err':>8s} {'G err':>8s} {'G rule':>7s}")
    for s in starts:
        p, m = s["blocks"]
        print(f"{s['name']:32s} {'fit' if s in fit else 'held-out':8s} {p:>8,}/{m:<9,} {100 * (p - m) / m:+7.3f}% "
              f"{100 * s['step'] / m:5.2f}% {s['fc_err'] / MiB:+8.1f}M {(s['pred']['transient_peak_bytes'] - s['P']) / MiB:+7.1f}M "
              f"{(s['pred']['reserve_growth_bytes'] - s['G']) / MiB:+7.1f}M {s['g_rule']:>7s}")


if __name__ == "__main__":
    main()
