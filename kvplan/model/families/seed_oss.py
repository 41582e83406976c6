"""Seed-OSS (SeedOssForCausalLM): a Llama-shaped decoder (grouped-query attention with an
explicit ``head_dim``, gated MLP, two RMSNorms per layer) whose q/k/v projections always carry
biases and whose o_proj and MLP never do. transformers' SeedOssConfig reads ``attention_bias``
(default True), ``attention_out_bias`` (default False) and ``mlp_bias`` (default False); vLLM's
model file builds the fixed layout, so those flags change nothing in what vLLM allocates.

Read from vLLM (the release kvplan/engines/vllm/v0_26 follows) model_executor/models/seed_oss.py (SeedOssAttention: QKVParallelLinear
bias=True, RowParallelLinear o_proj bias=False; SeedOssMLP: bias=False)."""

from __future__ import annotations

from kvplan.model.family import Family


class SeedOss(Family):
    model_types = ("seed_oss",)
    transformers_class = "SeedOssConfig"
    transformers_defaults = {"vocab_size": 155136, "tie_word_embeddings": False}
    qkv_bias = True
    reads_attention_bias = False
    reads_mlp_bias = False


SEED_OSS = SeedOss()
