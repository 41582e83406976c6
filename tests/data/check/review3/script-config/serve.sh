#!/bin/sh
# kvplan: gpu=H100
vllm serve --config deploy/chat.yaml -tp 3
