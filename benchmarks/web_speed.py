"""Speed of `kvplan web` (issue 24) as ratios to the CLI's own `kvplan estimate`, measured in one run.

Rows (median of N runs each):
  * kvplan estimate (CLI, json)        the yardstick: a whole `kvplan estimate` process
  * kvplan web start-up                spawn -> the URL printed -> GET / answered
  * first estimate request (at once)   POST /api/v1/estimate the moment a fresh server answers
                                       (it waits for the warm-up estimate to finish)
  * first estimate request (after 1 s) the same 1 s later, as a browser arrives
  * estimate request (warm)            POST /api/v1/estimate on a running server (a new
                                       --max-model-len each time, so nothing is a cached answer)
  * page's estimate request (+curves)  what the page asks for (the concurrency curve re-plans)

Goals (issue 24, on the machine the issue names): start-up under 1 s and an estimate request
under 100 ms. As ratios to the CLI's estimate here: start-up <= 2.5x and a warm request <= 0.25x.
The inputs are the acceptance case: Llama-3.1-70B on 4x A100-80GB at --max-model-len 8192.

Run: python benchmarks/web_speed.py [N]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

N = int(sys.argv[1]) if len(sys.argv) > 1 else 7
ARGV = ["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192"]
BODY = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "A100-80GB", "tensor_parallel_size": 4, "max_model_len": "8192"}
ENV = dict(os.environ, HF_HUB_OFFLINE="1")


def kvplan() -> str:
    return shutil.which("kvplan") or os.path.join(os.path.dirname(sys.executable), "kvplan")


def cli_estimate() -> float:
    t0 = time.perf_counter()
    subprocess.run([kvplan(), "estimate", *ARGV, "--format", "json"], check=True, capture_output=True, env=ENV)
    return time.perf_counter() - t0


def post(url: str, body: dict) -> float:
    req = urllib.request.Request(url + "api/v1/estimate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
        assert r.status == 200
    return time.perf_counter() - t0


def start_server() -> tuple[subprocess.Popen, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([kvplan(), "web", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=ENV)
    url = proc.stdout.readline().split()[4]
    with urllib.request.urlopen(url, timeout=30) as r:
        r.read()
    return proc, url, time.perf_counter() - t0


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def main() -> None:
    cli = statistics.median(cli_estimate() for _ in range(N))
    starts, firsts, settled = [], [], []
    for i in range(2 * N):
        proc, url, t = start_server()
        starts.append(t)
        if i % 2:  # as a browser arrives: after the page's own requests, the warm-up done
            time.sleep(1.0)
            settled.append(post(url, BODY))
        else:  # at once, racing the warm-up
            firsts.append(post(url, BODY))
        stop(proc)
    proc, url, _ = start_server()
    try:
        post(url, BODY)
        # a different --max-model-len each time: no answer is a cached one
        lengths = [str(4096 + 512 * i) for i in range(N * 3)]
        warm = statistics.median(post(url, BODY | {"max_model_len": n}) for n in lengths)
        curves = statistics.median(post(url, BODY | {"curves": True, "max_model_len": n}) for n in lengths[:N])
    finally:
        stop(proc)
    rows = [
        ("kvplan estimate (CLI, json)", cli, None),
        ("kvplan web start-up", statistics.median(starts), 2.5),
        ("first estimate request (at once)", statistics.median(firsts), None),
        ("first estimate request (after 1 s)", statistics.median(settled), 0.25),
        ("estimate request (warm)", warm, 0.25),
        ("page's estimate request (+curves)", curves, None),
    ]
    for name, t, goal in rows:
        verdict = "" if goal is None else ("  goal <= %.2fx: %s" % (goal, "met" if t / cli <= goal else "MISSED"))
        print(f"{name:36} {t * 1000:8.1f} ms  {t / cli:5.2f}x the CLI's estimate{verdict}")


if __name__ == "__main__":
    main()
