#!/usr/bin/env bash
set -euo pipefail
# kvplan: gpu=H100 gpu_count=2
MODEL="${MODEL:-Qwen/Qwen2.5-32B}"
PORT=8000

exec vllm serve "$MODEL" \
    --tensor-parallel-size=2 \
    --max-model-len 32k \
    --kv-cache-memory 40G \
    --enable-chunked-prefill \
    --port "$PORT" 2>&1 | tee /var/log/vllm.log
