"""The serve line omits a flag only when its value is the plan's own vLLM version's fixed default.

vLLM 0.33.0 config/cache.py: gpu_memory_utilization defaults to 0.92, so an explicit 0.92 changes
nothing and may be left out. vLLM 0.34.0 config/cache.py: it defaults to None, resolved to 1.0 with
the extensible KV cache (resolved_gpu_memory_utilization), so an explicit 0.92 caps the budget: a
serve line without it would run vLLM at 1.0, not what kvplan sized.
"""

from kvplan.capacity.estimate import plan
from kvplan.engines.vllm.args import EngineArgs
from kvplan.gpus import find_gpu, load_profiles
from kvplan.render.serve import serve_settings
from kvplan.cli.plan import load_spec


def _flags(version: str, **kw) -> list[str]:
    spec = load_spec("meta-llama/Meta-Llama-3-8B", None)
    p = plan(spec, find_gpu("H200", load_profiles()), EngineArgs(max_model_len=8192, vllm_version=version, **kw))
    return [t for s in serve_settings(p) for t in s["tokens"]]


def test_explicit_092_is_written_under_0_34():
    assert _flags("0.34.0", gpu_memory_utilization=0.92) == ["--gpu-memory-utilization", "0.92"]


def test_explicit_092_is_the_default_under_0_33():
    assert _flags("0.33.0", gpu_memory_utilization=0.92) == []


def test_another_value_is_written_under_both():
    assert _flags("0.33.0", gpu_memory_utilization=0.8) == ["--gpu-memory-utilization", "0.8"]
    assert _flags("0.34.0", gpu_memory_utilization=0.8) == ["--gpu-memory-utilization", "0.8"]


def test_unset_utilization_is_not_written_under_either():
    assert _flags("0.34.0") == []
    assert _flags("0.33.0") == []
