#!/bin/bash
# On the GPU machine: benchmark vLLM's OpenAI server on one model with `kvplan verify --bench`
# (one server start, the whole grid), then bundle the record and the server log into one tarball.
#
# The device runner (README.md here) calls it for every case of kind "bench", with OUT=/tmp/logs/bench,
# GRID and BENCH_TIMEOUT from the case. By hand (from the project root, vLLM on PYTHONPATH):
#   PYTHONPATH=/tmp/site-0.26.0 bash benchmarks/device/bench.sh MODEL_DIR NAME [vllm serve flags...]
#   e.g. bash benchmarks/device/bench.sh /tmp/models/llama31-8b llama31-8b_bf16 --max-model-len 10240
# env: GRID (full|quick, default full), SECONDS_PER_POINT (default: the grid's, 8 s for full),
#      TOKEN_LIMIT (skip closed-loop points with concurrency x input_len above it; default 600000),
#      BENCH_TIMEOUT (s, default 560: the whole run gets SIGINT then, so vLLM is stopped cleanly and
#      the points finished so far stay in the record), OUT (output folder; the device's $OUT).
# MODEL_DIR needs only config.json (weights are --load-format dummy, no tokenizer is loaded).
# Writes $OUT/NAME.tar.gz holding NAME.json (the record), NAME.log (vLLM's server log) and
# NAME.stderr (kvplan's progress lines). A MoE config gets
# VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random in the server's environment (recorded).
#
# Expected wall time on one H200, full grid (estimates, not measurements; the grid's sending budget
# is 8 s per point, then the requests in flight finish, at most 90 s):
#   Llama-3.1-8B bf16 with torch.compile + CUDA graphs: start ~60 s, warm-up ~5 s, 11 closed-loop
#     points ~8 s + 1-6 s tail each (~130 s), 4 open-loop points ~8 s + up to ~10 s of queue each
#     (~60 s): ~4 min.
#   Llama-3.x-70B FP8 (one H200, ~45 GB of KV cache): pass TOKEN_LIMIT=140000 (skips the c=256
#     2048-token and the c>=64 8192-token points, whose prefills alone take over a minute); start
#     ~60 s, tails longer (ITL ~15-40 ms, c=256 at 128/512 preempts): ~6 min.
#   Qwen3-30B-A3B bf16: between the two (~4.5 min).
# Keep BENCH_TIMEOUT under the device's 600 s per call.
set -u
MODEL_DIR=${1:?usage: bench.sh MODEL_DIR NAME [vllm serve flags...]}
NAME=${2:?usage: bench.sh MODEL_DIR NAME [vllm serve flags...]}
shift 2
[ -d "$MODEL_DIR" ] && MODEL_DIR=$(cd "$MODEL_DIR" && pwd)  # absolute: the script changes directory
OUT=${OUT:-/tmp/bench-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0}
EXTRA=()
[ -n "${SECONDS_PER_POINT:-}" ] && EXTRA+=(--bench-seconds "$SECONDS_PER_POINT")
[ -n "${TOKEN_LIMIT:-}" ] && EXTRA+=(--bench-token-limit "$TOKEN_LIMIT")
WORK="$OUT/$NAME.d"  # inside $OUT: a run cut short still brings back the points it finished
rm -rf "$WORK" && mkdir -p "$WORK"
echo "[bench.sh] $(date -u +%FT%TZ) $NAME: $MODEL_DIR grid=${GRID:-full} flags: $*"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader 2>/dev/null || true
cd "$ROOT"
timeout -s INT -k 30 "${BENCH_TIMEOUT:-560}" python3 -m kvplan verify --bench "$MODEL_DIR" --grid "${GRID:-full}" \
  --record "$WORK/$NAME.json" "${EXTRA[@]}" "$@" 2> >(tee "$WORK/$NAME.stderr" >&2)
rc=$?
sleep 1
echo "[bench.sh] $(date -u +%FT%TZ) $NAME: kvplan exit status $rc"
[ -f "$WORK/$NAME.log" ] && tail -n 25 "$WORK/$NAME.log"
tar -C "$WORK" -czf "$OUT/$NAME.tar.gz" . && ls -la "$OUT/$NAME.tar.gz"
rm -rf "$WORK"
exit $rc
