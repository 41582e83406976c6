#!/bin/sh
# kvplan: gpu=H100
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 65536
