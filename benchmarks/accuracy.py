"""Per-case accuracy table: kvplan vs real vLLM 0.26.0 starts (num_gpu_blocks, KV tokens).

Cases: tests/data/calibration/vllm-0.26.0-h200/*.json (handed-out calibration) and
tests/data/vllm-0.26.0-h200/*.json (starts recorded with `kvplan verify --record`).
Also shows the popular back-of-envelope formula
    blocks = (total x util - weights) / (block_size x layers x 2 x hidden_size x dtype_bytes)
for contrast. Run: python benchmarks/accuracy.py [--markdown]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from calibration_cases import estimate_argv  # noqa: E402
from helpers import run_cli  # noqa: E402

DIRS = [ROOT / "tests/data/calibration/vllm-0.26.0-h200", ROOT / "tests/data/vllm-0.26.0-h200"]


def naive_blocks(case: dict) -> float:
    cfg = case["config"].get("text_config") or case["config"]
    total = case["gpu"]["cuda_total_bytes"] * case["gpu_memory_utilization"]
    weights = case["measured_gib"]["weights"] * 2**30
    dtype = 1 if str(case["engine_args"].get("kv_cache_dtype", "auto")).startswith("fp8") else 2
    per_block = case["block_size"] * cfg["num_hidden_layers"] * 2 * cfg["hidden_size"] * dtype
    return (total - weights) / per_block


def rows() -> list[dict]:
    out = []
    for d in DIRS:
        for p in sorted(d.glob("*.json")):
            case = json.loads(p.read_text())
            if "num_gpu_blocks" not in case or not case.get("num_gpu_blocks"):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "config.json").write_text(json.dumps(case["config"]))
                code, stdout, err = run_cli(*estimate_argv(case, Path(tmp)))
            if not stdout.strip().startswith("{"):
                out.append({"name": case["name"], "error": err.strip()})
                continue
            doc = json.loads(stdout)
            kv = doc["kv_cache"]
            want = case["num_gpu_blocks"]
            ex = case.get("exact_bytes") or {}
            mem = doc["memory"]
            out.append(
                {
                    "name": case["name"],
                    "set": d.name if d.name != "vllm-0.26.0-h200" or "calibration" not in str(d) else "calibration",
                    "vllm_blocks": want,
                    "kvplan_blocks": kv["num_gpu_blocks"],
                    "err_pct": 100.0 * (kv["num_gpu_blocks"] - want) / want,
                    "vllm_tokens": case["gpu_kv_cache_tokens"],
                    "kvplan_tokens": kv["gpu_kv_cache_tokens"],
                    "naive_blocks": naive_blocks(case),
                    "components": {
                        k: (mem[p], ex.get(m))
                        for k, p, m in (
                            ("weights", "weights_bytes", "weights"),
                            ("activation", "activation_peak_bytes", "peak_activation"),
                            ("non_torch", "non_torch_bytes", "non_torch"),
                        )
                    }
                    if ex
                    else None,
                }
            )
    return out


def component_table(data: list[dict], md: bool) -> list[str]:
    """Predicted vs exact worker bytes (records with exact_bytes), in MiB."""
    out = ["", "Memory terms vs the worker's exact bytes (predicted - measured, MiB):"]
    if md:
        out += ["", "| case | weights | peak activation | non-torch |", "|---|---|---|---|"]
    for r in data:
        comp = r.get("components")
        if not comp:
            continue
        cells = []
        for key in ("weights", "activation", "non_torch"):
            pred, meas = comp[key]
            cells.append("n/a" if meas is None else f"{(pred - meas) / 2**20:+.1f}")
        if md:
            out.append(f"| {r['name']} | " + " | ".join(cells) + " |")
        else:
            out.append(f"{r['name']:34} " + " ".join(f"{c:>10}" for c in cells))
    return out


def main() -> None:
    md = "--markdown" in sys.argv
    data = rows()
    hdr = ("case", "vLLM blocks", "kvplan blocks", "error %", "vLLM tokens", "kvplan tokens", "naive formula (x too few)")
    lines = []
    if md:
        lines.append("| " + " | ".join(hdr) + " |")
        lines.append("|" + "---|" * len(hdr))
    else:
        lines.append(f"{hdr[0]:34} {hdr[1]:>11} {hdr[2]:>13} {hdr[3]:>8} {hdr[4]:>11} {hdr[5]:>13} {hdr[6]:>10}")
    for r in data:
        if "error" in r:
            lines.append(f"{r['name']}: ERROR {r['error']}")
            continue
        ratio = r["vllm_blocks"] / r["naive_blocks"] if r["naive_blocks"] > 0 else float("inf")
        cells = (
            r["name"],
            f"{r['vllm_blocks']:,}",
            f"{r['kvplan_blocks']:,}",
            f"{r['err_pct']:+.2f}",
            f"{r['vllm_tokens']:,}",
            f"{r['kvplan_tokens']:,}",
            f"{r['naive_blocks']:,.0f} ({ratio:.1f}x)",
        )
        if md:
            lines.append("| " + " | ".join(cells) + " |")
        else:
            lines.append(f"{cells[0]:34} {cells[1]:>11} {cells[2]:>13} {cells[3]:>8} {cells[4]:>11} {cells[5]:>13} {cells[6]:>10}")
    ok = [r for r in data if "error" not in r]
    errs = [abs(r["err_pct"]) for r in ok]
    if errs:
        exact = sum(1 for r in ok if r["vllm_blocks"] == r["kvplan_blocks"])
        lines.append("")
        lines.append(
            f"{len(ok)} cases: max |error| {max(errs):.2f}%, median {statistics.median(errs):.3f}%, "
            f"exact {exact}, within 1%: {sum(1 for e in errs if e <= 1)}; naive formula median "
            f"{statistics.median(r['vllm_blocks'] / r['naive_blocks'] for r in ok):.1f}x too few"
        )
    if "--components" in sys.argv:
        lines += component_table(ok, md)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
