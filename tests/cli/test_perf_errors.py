"""docs/errors.md's `kvplan perf`, `estimate --perf` and `plan --slo` rows, run through the real
command line (in-process): the documented exit code and message, and the page quotes each."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
M = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
L = ["--input-len", "128", "--output-len", "8", "--concurrency", "1", "--num-requests", "4"]
V = ["--vllm-version", "0.26.0"]

ROWS = [
    ("perf-slo-unknown-key", ["perf", M, *L, "--slo", "ttft_p95=2s"], 2, "error: --slo: unknown key 'ttft_p95'"),
    ("perf-slo-no-unit", ["perf", M, *L, "--slo", "ttft_p99=2"], 2,
     "error: --slo: ttft_p99: expected a time with its unit (2s, 50ms, 800us), got '2'"),
    ("perf-slo-zero", ["perf", M, *L, "--slo", "tpot_p50=0ms"], 2, "error: --slo: tpot_p50: must be a time > 0, got '0ms'"),
    ("perf-slo-twice", ["perf", M, *L, "--slo", "ttft_p99=2s,ttft_p99=1s"], 2, "error: --slo: ttft_p99: given twice"),
    ("perf-slo-no-value", ["perf", M, *L, "--slo", "ttft_p99"], 2, "error: --slo: ttft_p99: expected KEY=TIME, got 'ttft_p99'"),
    ("perf-slo-empty-entry", ["perf", M, *L, "--slo", "ttft_p99=2s,,tpot_p50=50ms"], 2,
     "error: --slo: empty entry in 'ttft_p99=2s,,tpot_p50=50ms'"),
    ("perf-load-both", ["perf", M, "--input-len", "128", "--output-len", "8", "--concurrency", "2", "--request-rate", "3"], 2,
     "error: --concurrency/--request-rate: give exactly one (a closed loop at C or an open loop at R requests/s)"),
    ("perf-load-none", ["perf", M, "--input-len", "128", "--output-len", "8"], 2, "error: --concurrency/--request-rate: give exactly one"),
    ("perf-request-rate-zero", ["perf", M, "--input-len", "128", "--output-len", "8", "--request-rate", "0"], 2,
     "error: --request-rate: must be > 0 requests/s, got 0.0"),
    ("perf-concurrency-zero", ["perf", M, "--input-len", "128", "--output-len", "8", "--concurrency", "0"], 2,
     "error: --concurrency: must be >= 1, got 0"),
    ("perf-num-requests-zero", ["perf", M, *L, "--num-requests", "0"], 2, "error: --num-requests/--num-prompts: must be >= 1, got 0"),
    ("perf-lengths-missing", ["perf", M, "--concurrency", "1"], 2,
     "error: --input-len/--output-len: give both (tokens in and out per request) or --workload"),
    ("perf-lengths-and-workload", ["perf", M, *L, "--workload", "prompt=100 output=10"], 2,
     "error: --workload: give it or --input-len/--output-len, not both"),
    ("perf-request-too-long", ["perf", M, "--input-len", "2000", "--output-len", "100", "--concurrency", "1"], 2,
     "error: --input-len/--output-len: a request of 2000 + 100 tokens exceeds --max-model-len 2048"),
    ("perf-workload-too-long", ["perf", M, "--workload", "prompt=2000 output=100", "--concurrency", "1"], 2,
     "error: --workload: a request of 2000 + 100 tokens exceeds --max-model-len 2048"),
    ("perf-shared-prefix-malformed", ["perf", M, *L, "--shared-prefix", "half:100"], 2,
     "error: --shared-prefix: expected FRACTION:TOKENS (e.g. 0.5:512), got 'half:100'"),
    ("perf-shared-prefix-fraction", ["perf", M, *L, "--shared-prefix", "1.5:100"], 2,
     "error: --shared-prefix: expected FRACTION:TOKENS with FRACTION in 0..1 and TOKENS >= 0, got '1.5:100'"),
    ("perf-format", ["perf", M, *L, "--format", "yaml"], 2, "error: --format: unknown value 'yaml'"),
    ("perf-does-not-start", ["perf", M, *L, "--gpu-memory-utilization", "0.01"], 1, "error: vLLM would not start: no memory left for the KV cache"),
    ("perf-num-requests-cap", ["perf", M, *L, "--num-requests", "10000000"], 2,
     "error: --num-requests/--num-prompts: at most 100,000 requests are emulated, got 10,000,000"),
    ("perf-shared-prefix-too-long",
     ["perf", M, "--input-len", "100", "--output-len", "8", "--concurrency", "1", "--shared-prefix", "0.5:200"], 2,
     "error: --shared-prefix: the 200-token prefix is longer than the 100-token prompt (--input-len)"),
    ("workload-unquoted", ["perf", M, "--workload", "prompt=100,50", "output=10", "--concurrency", "1"], 2,
     "error: Got unexpected extra argument(s) (output=10)"),
    ("perf-pipeline-parallel", ["perf", M, *L, "-pp", "2"], 2,
     "error: --pipeline-parallel-size: the step-time model covers one pipeline stage; use 1"),
    ("perf-gpu-without-tflops", ["perf", M, *L, "--gpu", "A10G"], 2,
     "error: --gpu a10g: the GPU profile has no perf.dense_tflops.bf16, which the step-time model needs"),
    ("estimate-perf-needs-workload", ["estimate", M, "--perf"], 2, "error: --perf: needs --workload (the request lengths to serve)"),
    ("plan-slo-needs-workload", ["plan", M, "--slo", "ttft_p99=2s"], 2,
     "error: --slo: needs --workload (the request lengths the targets are for)"),
    ("plan-slo-bad", ["plan", M, "--workload", "prompt=100 output=10", "--slo", "ttft_p95=2s"], 2, "error: --slo: unknown key 'ttft_p95'"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_row(row):
    _, argv, code, message = row
    got, out, err = run_cli(*argv, *V)
    assert got == code, (got, out, err)
    assert out == ""
    first = err.splitlines()[0]
    assert first.startswith(message), err
    assert "Traceback" not in err


def test_every_row_is_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for rid, _, _, message in ROWS:
        assert f"`{rid}`" in text, rid
        assert message in text, rid
