"""Runs INSIDE aiconfigurator's own virtual environment (benchmarks/perf_vs_peers.py starts it).

stdin: a JSON list of points {model, tp, batch, isl, osl, system, backend, moe}; stdout: a JSON
list, one {"ttft": ms, "tpot": ms, "aic_model": ..., "aic_backend_version": ...} or
{"error": "..."} per point. Uses aiconfigurator.cli.api.cli_estimate in "static" mode (a static
batch of `batch` requests of isl/osl), only with models aiconfigurator bundles (its
model_configs/, so nothing is downloaded); kvplan's model ids are matched to those names
("meta-llama/Llama-3.1-8B-Instruct" -> "meta-llama/Meta-Llama-3.1-8B").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys


def _bundled_names() -> set[str]:
    import aiconfigurator_core

    d = os.path.join(os.path.dirname(aiconfigurator_core.__file__), "model_configs")
    return {f[: -len("_config.json")].replace("--", "/", 1) for f in os.listdir(d) if f.endswith("_config.json")}


def _match(model: str, names: set[str]) -> str | None:
    cands = [model, model.removesuffix("-Instruct")]
    for c in list(cands):
        org, _, rest = c.partition("/")
        if org == "meta-llama" and rest.startswith("Llama-3"):
            cands.append(f"meta-llama/Meta-{rest}")
            cands.append(f"meta-llama/Meta-{rest.replace('Llama-3-', 'Llama-3.1-')}")
    lower = {n.lower(): n for n in names}
    for c in cands:
        if c.lower() in lower:
            return lower[c.lower()]
    return None


def main() -> int:
    points = json.load(sys.stdin)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        from aiconfigurator.cli.api import cli_estimate

        names = _bundled_names()
        out = []
        cache: dict[tuple, dict] = {}
        for p in points:
            name = _match(p["model"], names)
            if name is None:
                out.append({"error": f"{p['model']} is not among aiconfigurator's bundled models"})
                continue
            key = (name, p["tp"], p["batch"], p["isl"], p["osl"], p["system"], p["backend"])
            if key not in cache:
                kw = {"moe_tp_size": p["tp"], "moe_ep_size": 1} if p.get("moe") else {}
                try:
                    r = cli_estimate(name, p["system"], mode="static", backend_name=p["backend"], isl=p["isl"],
                                     osl=p["osl"], batch_size=p["batch"], tp_size=p["tp"], **kw)
                    cache[key] = {"ttft": r.ttft, "tpot": r.tpot, "aic_model": name, "aic_backend_version": r.backend_version}
                except Exception as exc:  # noqa: BLE001 - reported per point, the table goes on
                    cache[key] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            out.append(cache[key])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
