"""The sweep's memoization must not change a single number, and must undo itself."""

from __future__ import annotations


import pytest

from kvplan.cli.plan import load_spec
from kvplan.gpus import find_gpu, load_profiles
from kvplan.capacity.search import SearchSpace, Target, search


def _summary(result):
    return [
        (o.gpu.id, o.tensor_parallel_size, o.pipeline_parallel_size, o.data_parallel_size, o.kv_cache_dtype,
         o.quantization, o.plan.num_gpu_blocks, o.plan.largest_max_model_len, round(o.engine_concurrency, 6))
        for o in result.options + result.dominated
    ] + [(s.gpu, s.tensor_parallel_size, s.pipeline_parallel_size, s.kv_cache_dtype, s.quantization, s.category, s.reason)
         for s in result.skipped]


@pytest.mark.parametrize(
    "model, mml",
    [("meta-llama/Llama-3.3-70B-Instruct", 32768), ("google/gemma-3-27b-it", 8192), ("ai21labs/Jamba-v0.1", 8192),
     ("deepseek-ai/DeepSeek-V3", 8192)],
)
def test_cached_sweep_equals_cold_sweep(model, mml):
    from kvplan.capacity import estimate as planner

    profiles = load_profiles()
    gpus = tuple(find_gpu(g, profiles) for g in ("H200", "A100-80GB", "L40S", "B200"))
    space = SearchSpace(gpus=gpus, max_gpus=32)
    spec = load_spec(model, None)
    for f in (planner._weights_cached, planner._activation_cached, planner._layout_cached):
        f.cache_clear()
    cold = search(spec, Target(mml, 16), space)
    warm = search(spec, Target(mml, 16), space)
    assert _summary(cold) == _summary(warm)
    assert cold.evaluated == warm.evaluated


