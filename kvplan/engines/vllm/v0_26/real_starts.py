"""The real vLLM 0.26.0 starts kvplan's 0.26.0 rules were calibrated on and are replayed against
(paths under the repository's tests/data, without the .json/.log suffix; a record and its raw
log are one start). The package does not read tests/: this table is the committed list, and
tests/engines/test_version_evidence.py checks that it names exactly the starts tests/data holds.

Every 0.26.0 rule kvplan has was checked on some of them (H200, eager and CUDA graphs, serve
and LLM class, dense, MoE, MLA, sliding window, Mamba and GDN hybrids), so no part of 0.26.0
is labelled unchecked by itself. Every start ran on one GPU: an H200, and one H100 SXM start
(vllm-0.26.0-h100/gptoss20b_graphs, lead's device session 5: gpt-oss-20b, CUDA graphs,
num_gpu_blocks -0.13 %), so an estimate with tensor or pipeline parallel > 1, on a GPU none of
them ran on (STARTS' values) or from a partial bundled spec is (``unchecked``).
"""

from __future__ import annotations

# start (path under tests/data) -> the GPU it ran on (a bundled profile id, kvplan/data/gpus.yaml:
# the one a log's reported device name resolves to). The evidence label's GPU coverage is these values.
STARTS: dict[str, str] = {
    "calibration/vllm-0.26.0-h200/dsv2-lite_eager": "h200",
    "calibration/vllm-0.26.0-h200/gemma2-9b_eager": "h200",
    "calibration/vllm-0.26.0-h200/llama3-70b_fp8_eager": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_default": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager_bs32": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager_fp8kv": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager_mbt16k": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager_mbt8k_seqs256": "h200",
    "calibration/vllm-0.26.0-h200/llama3-8b_eager_u05": "h200",
    "calibration/vllm-0.26.0-h200/mistral-7b_eager": "h200",
    "calibration/vllm-0.26.0-h200/mixtral-8x7b_eager": "h200",
    "calibration/vllm-0.26.0-h200/qwen2.5-7b_eager": "h200",
    "calibration/vllm-0.26.0-h200/qwen3-next-80b_fp8_eager": "h200",
    "logs/device-h200-2026-11-29/gemma3-27b_eager": "h200",
    "logs/device-h200-2026-11-29/llama3-8b_eager_u012": "h200",
    "logs/device-h200-2026-11-29/p-jamba-8L": "h200",
    "vllm-0.26.0-h200/families/aya-23-8b_eager": "h200",
    "vllm-0.26.0-h200/families/dsv32-5L_eager": "h200",
    "vllm-0.26.0-h200/families/ernie4.5-21b-a3b_eager": "h200",
    "vllm-0.26.0-h200/families/exaone4-32b_eager": "h200",
    "vllm-0.26.0-h200/families/falcon-7b_eager": "h200",
    "vllm-0.26.0-h200/families/falcon-h1-7b_eager": "h200",
    "vllm-0.26.0-h200/families/gemma4-26b-a4b_eager": "h200",
    "vllm-0.26.0-h200/families/glm4.5-air-16L_eager": "h200",
    "vllm-0.26.0-h200/families/glm4.7-flash_eager": "h200",
    "vllm-0.26.0-h200/families/granitemoe-1b-a400m_eager": "h200",
    "vllm-0.26.0-h200/families/hunyuan-a13b-16L_eager": "h200",
    "vllm-0.26.0-h200/families/ling-lite-1.5_eager": "h200",
    "vllm-0.26.0-h200/families/mamba-2.8b_eager": "h200",
    "vllm-0.26.0-h200/families/mamba-codestral-7b_eager": "h200",
    "vllm-0.26.0-h200/families/minimax-m2.5-8L_eager": "h200",
    "vllm-0.26.0-h200/families/mistral-small-3.2-24b_eager": "h200",
    "vllm-0.26.0-h200/families/nemotron3-nano-30b-a3b_eager": "h200",
    "vllm-0.26.0-h200/families/olmo2-7b_eager": "h200",
    "vllm-0.26.0-h200/families/olmoe-1b-7b_eager": "h200",
    "vllm-0.26.0-h200/families/phi3.5-moe_eager": "h200",
    "vllm-0.26.0-h200/families/qwen3-vl-8b_eager": "h200",
    "vllm-0.26.0-h200/families/qwen3.5-35b-a3b_eager": "h200",
    "vllm-0.26.0-h200/families/smollm3-3b_eager": "h200",
    "vllm-0.26.0-h200/families/starcoder2-3b_eager": "h200",
    "vllm-0.26.0-h200/gemma2-27b_eager": "h200",
    "vllm-0.26.0-h200/gemma3-1b_eager": "h200",
    "vllm-0.26.0-h200/gpt-oss-120b_eager": "h200",
    "vllm-0.26.0-h200/gpt-oss-20b_eager": "h200",
    "vllm-0.26.0-h200/granite4h-small_eager": "h200",
    "vllm-0.26.0-h200/llama2-7b-gptq_eager": "h200",
    "vllm-0.26.0-h200/llama3-4L_graphs_serve": "h200",
    "vllm-0.26.0-h200/llama3-8b_eager": "h200",
    "vllm-0.26.0-h200/llama3.1-70b-awq_eager": "h200",
    "vllm-0.26.0-h200/llama3.1-70b-modelopt-fp8_eager": "h200",
    "vllm-0.26.0-h200/llama3.1-8b_eager_128k": "h200",
    "vllm-0.26.0-h200/llama3.1-8b_serve_defaults": "h200",
    "vllm-0.26.0-h200/mistral-7b-v0.1_eager_bs32": "h200",
    "vllm-0.26.0-h200/opt-125m_eager": "h200",
    "vllm-0.26.0-h200/p-dsv3-4L": "h200",
    "vllm-0.26.0-h200/p-gemma2-4L-t16384-s256": "h200",
    "vllm-0.26.0-h200/p-gemma2-4L-t2048-s1024": "h200",
    "vllm-0.26.0-h200/p-llama3-4L-t2048-s1024": "h200",
    "vllm-0.26.0-h200/p-llama70b-2L-graphs": "h200",
    "vllm-0.26.0-h200/p-llama70b-2L-t16384-s256": "h200",
    "vllm-0.26.0-h200/p-mixtral-2L-t16384-s256": "h200",
    "vllm-0.26.0-h200/p-mixtral-2L-t8192-s256": "h200",
    "vllm-0.26.0-h200/p-phi3-4L-t16384-s256": "h200",
    "vllm-0.26.0-h200/p-phi4-4L-graphs": "h200",
    "vllm-0.26.0-h200/p-qwen25-4L-t16384-s256": "h200",
    "vllm-0.26.0-h200/p-qwen25-4L-t2048-s1024": "h200",
    "vllm-0.26.0-h200/phi3-mini-4k_eager": "h200",
    "vllm-0.26.0-h200/phi4_eager": "h200",
    "vllm-0.26.0-h200/qwen3-30b-a3b_eager_serve": "h200",
    "vllm-0.26.0-h200/qwen3-30b-a3b_graphs": "h200",
    "vllm-0.26.0-h200/qwen3-32b-fp8_eager": "h200",
    "vllm-0.26.0-h200/qwen3-8b_eager_fp8kv": "h200",
    "vllm-0.26.0-h200/qwen3-8b_graphs_32k": "h200",
    "vllm-0.26.0-h200/tinyllama_serve_defaults": "h200",
    "vllm-0.26.0-h100/gptoss20b_graphs": "h100-sxm",
}

# the other 0.26.0 logs of tests/data/vllm-0.26.0-h100, and why no base rule counts them
NOT_USED: dict[str, str] = {
    # an add-on start: replayed by tests/engines/test_addon_starts.py; the EAGLE-3 drafter's growth
    # factor was fitted on it (v0_26/addons.py), so it is not an independent check of the base rules
    "vllm-0.26.0-h100/v026-llama31-8b_eagle3": "EAGLE-3 add-on start (v0_26/addons.py fitted on it)",
    # session 6's add-on starts, replayed by tests/engines/test_addon_starts.py
    "vllm-0.26.0-h100/v026-llama31-8b_ngram128k": "ngram add-on start: kvplan +3.69 % (v0_26/addons.py measured_misses)",
    "vllm-0.26.0-h100/v026-dsv3-4L_mtp": "DeepSeek MTP add-on start: kvplan +10.7 % (v0_26/addons.py measured_misses)",
    "vllm-0.26.0-h100/v026-llama31-70b_offload80": "--cpu-offload-gb start: out of memory while loading, as the "
                                                     "V2 runner installs no offloader (v0_26/addons.py)",
}


def unchecked(spec, gpu, args) -> tuple[str, ...]:
    """What an estimate of ``spec`` on ``gpu`` with ``args`` uses that no real 0.26.0 start
    checked: no 0.26.0 rule of its own (module docstring), but what no start of any version
    checked (rules.common_unchecked: TP/PP > 1, a GPU other than the starts', a partial bundled
    spec); empty when none applies."""
    from kvplan.engines.vllm.rules import common_unchecked

    return common_unchecked(STARTS, spec, gpu, args)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = ()  # a list of starts, no vLLM rule
