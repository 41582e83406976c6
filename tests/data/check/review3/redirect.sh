#!/bin/sh
# kvplan: gpu=H100
vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 2048 > log 2>&1
