#!/bin/sh
# Two nodes of 8x H200 launched by hand: DeepSeek-V3 DP 16 (8 per node) + expert parallel;
# the worker runs --headless (part of the leader's deployment, not a server of its own)
# node 0 (leader)
vllm serve deepseek-ai/DeepSeek-V3 --data-parallel-size 16 --data-parallel-size-local 8 --enable-expert-parallel --nnodes 2 --node-rank 0 --data-parallel-address 10.0.0.1
# node 1 (worker)
vllm serve deepseek-ai/DeepSeek-V3 --data-parallel-size 16 --data-parallel-size-local 8 --enable-expert-parallel --nnodes 2 --node-rank 1 --headless --data-parallel-address 10.0.0.1
