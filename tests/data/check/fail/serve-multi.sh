#!/bin/sh
# Two model servers on one A100 node.
# kvplan: gpu=A100-80GB
vllm serve Qwen/Qwen2.5-7B-Instruct \
  -tp 3 \
  --max-model-len 16384 &

# legacy entry point, copied from an old runbook
python3 -m vllm.entrypoints.openai.api_server \
  --model meta-llama/Llama-2-7b-hf \
  --max-model-len 8192 \
  --gpu-memory-utilization 1.2 \
  --swap-space 4 \
  --kv-cache-dtype fp8 \
  --max-num-sequences 64 &
wait
