"""The real vLLM 0.33.0 starts kvplan's 0.33.0 rules were checked on (paths under the repository's
tests/data, without the .log suffix), and the 0.33.0 rules none of them exercised.

The package does not read tests/: this table is the committed list, and
tests/engines/test_version_evidence.py checks that it names exactly the 0.33.0 starts
tests/data holds. Add a start here when its log is added there.

Not yet checked on hardware (docs/versions.md rows 6 and 7): every start above ran with
--enforce-eager (no CUDA-graph estimate) on an H200 (< 160 GiB: not the new batch-default tier).
Hybrid state pages were checked: Qwen3-Next's GDN layers (qwen3-next-80b_fp8_eager, block 576)
and a Mamba-2 hybrid's ``align`` pages (granite4h-small_eager: block 528, +0.24 %).
"""

from __future__ import annotations

# start (path under tests/data) -> the GPU it ran on (a bundled profile id, kvplan/data/gpus.yaml:
# the one a log's reported device name resolves to). The evidence label's GPU coverage is these values.
STARTS: dict[str, str] = {
    "vllm-0.33.0-h200/dsv2-lite_eager": "h200",
    "vllm-0.33.0-h200/gemma2-9b_eager": "h200",
    "vllm-0.33.0-h200/granite4h-small_eager": "h200",
    "vllm-0.33.0-h200/llama3-70b_fp8_eager": "h200",
    "vllm-0.33.0-h200/llama3-8b_eager": "h200",
    "vllm-0.33.0-h200/llama3-8b_eager_bs32": "h200",
    "vllm-0.33.0-h200/llama3-8b_eager_fp8kv": "h200",
    "vllm-0.33.0-h200/llama3-8b_eager_mbt16k": "h200",
    "vllm-0.33.0-h200/llama3-8b_eager_u05": "h200",
    "vllm-0.33.0-h200/mistral-7b_eager": "h200",
    "vllm-0.33.0-h200/mixtral-8x7b_eager": "h200",
    "vllm-0.33.0-h200/qwen2.5-7b_eager": "h200",
    "vllm-0.33.0-h200/qwen3-30b-a3b_eager": "h200",
    "vllm-0.33.0-h200/qwen3-30b-a3b_eager_serve": "h200",
    "vllm-0.33.0-h200/qwen3-next-80b_fp8_eager": "h200",
}

# what an estimate uses that no start above checked -> the label's words for it
CUDA_GRAPHS = "CUDA-graph memory estimate"
LARGE_TIER = "the >= 160 GiB batch-default tier (max_num_batched_tokens 16384, max_num_seqs 1024)"


def unchecked(spec, gpu, args) -> tuple[str, ...]:
    """The 0.33.0 rules an estimate of ``spec`` on ``gpu`` with engine ``args`` uses that no real
    0.33.0 start checked (the words above, in that order); empty when every rule it uses was.

    Rule sources (vLLM 0.33.0): v1/worker/gpu/model_runner.py profile_cudagraph_memory (CUDA
    graphs, used unless --enforce-eager), engine/arg_utils.py get_batch_defaults (the tier, used
    when the GPU's NVML total is >= 160 GiB and --max-num-batched-tokens or --max-num-seqs is
    left to it). Then what no start of any version checked (rules.common_unchecked: TP/PP > 1,
    a GPU other than the starts', a partial bundled spec).
    """
    from kvplan.engines.vllm.rules import common_unchecked
    from kvplan.engines.vllm.v0_33.defaults import LARGE_TIER_BYTES

    out = []
    if not args.enforce_eager:
        out.append(CUDA_GRAPHS)
    if gpu.nvml_total_bytes >= LARGE_TIER_BYTES and (args.max_num_batched_tokens is None or args.max_num_seqs is None):
        out.append(LARGE_TIER)
    return tuple(out) + common_unchecked(STARTS, spec, gpu, args)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = ()  # a list of starts, no vLLM rule
