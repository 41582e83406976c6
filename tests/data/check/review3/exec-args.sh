#!/bin/sh
# kvplan: gpu=H100
exec vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096 "$@"
