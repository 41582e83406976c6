#!/bin/sh
# kvplan: gpu=H100
vllm serve Qwen/Qwen2.5-7B-Instruct \
  `# the context length` \
  --max-model-len 8192 \
  -tp 3
