"""The real vLLM 0.34.0 starts kvplan's 0.34.0 rules were checked on (paths under the repository's
tests/data, without the .log suffix), and the 0.34.0 rules none of them exercised.

The package does not read tests/: this table is the committed list, and
tests/engines/test_version_evidence.py checks that it and NOT_USED together name exactly the
0.34.0 logs tests/data holds. Add a start here (and what it checked to CHECKED) when its log is
added there.

The starts so far (tests/data/vllm-0.34.0-h100, lead's device session 5) ran on ONE H100:
Llama-3-8B (eager / LLM class, CUDA graphs / `vllm serve`, --gpu-memory-utilization 0.92, fp8
weights, --kv-cache-memory-bytes, native KV offload), Qwen3-30B-A3B (MoE, eager) and Gemma-2-9B
(sliding window, eager). Their terms fitted activation.py / runner.py's constants
(benchmarks/fit_v034.py: fitted on one start per family, the rest held out; G, the torch
reservation growth, is derived from the eager allocation sequence, reserve_growth.py). Anything
outside that (another GPU, MLA or hybrid models, graphs of another model, SM100 grids) is
labelled, and so is a MoE model's G: the one MoE start logs 0.15 GiB more than the restated
sizing steps give (qwen3-30b-a3b_eager, one granule step: +0.53 % blocks).
"""

from __future__ import annotations

# start (path under tests/data) -> the GPU it ran on (a bundled profile id, kvplan/data/gpus.yaml:
# the one a log's reported device name resolves to). The evidence label's GPU coverage is these values.
STARTS: dict[str, str] = {
    "vllm-0.34.0-h100/gemma2-9b_eager": "h100-sxm",
    "vllm-0.34.0-h100/llama3-8b_eager": "h100-sxm",
    "vllm-0.34.0-h100/llama3-8b_eager_kvbytes": "h100-sxm",
    "vllm-0.34.0-h100/llama3-8b_eager_u092": "h100-sxm",
    "vllm-0.34.0-h100/llama3-8b_fp8_eager": "h100-sxm",
    "vllm-0.34.0-h100/llama3-8b_serve_graphs": "h100-sxm",
    "vllm-0.34.0-h100/llama31-8b_kvoffload16": "h100-sxm",
    "vllm-0.34.0-h100/qwen3-30b-a3b_eager": "h100-sxm",
}
_EXTENSIBLE = tuple(s for s in STARTS if not s.endswith("_kvbytes"))
# the other 0.34.0 logs of tests/data/vllm-0.34.0-h100, and why no rule was checked on them
NOT_USED: dict[str, str] = {
    "vllm-0.34.0-h100/dsv2-lite_eager": "did not finish (stopped during FlashInfer's JIT build)",
    "vllm-0.34.0-h100/llama31-70b_offload70": "did not finish (device time ran out during profiling)",
    # add-on starts: replayed by tests/engines/test_addon_starts.py, not part of the base rules' fits
    "vllm-0.34.0-h100/llama31-8b_eagle3": "EAGLE3: kvplan exact, by the drafter growth factor fitted on it (labelled approximate: v0_34/addons.py measured_misses)",
    "vllm-0.34.0-h100/llama31-8b_lora4x64": "LoRA 4 x 64: kvplan +0.11 % (v0_34/addons.py CHECKED_FEATURES)",
}

# what an estimate uses that no start above checked -> the label's words for it
EXTENSIBLE = ("the extensible KV cache (measured after warm-up and CUDA-graph capture; its margin, "
              "transient peak and granule rounding)")
ESTIMATE_PATH = "the 0.34.0 estimate path (--kv-cache-memory-bytes)"
CUDA_GRAPHS = "the CUDA-graph pool taken from the KV cache"
CUDA_GRAPH_ESTIMATE = "the CUDA-graph memory estimate"
SM100_GRAPHS = "the SM100 CUDA-graph capture grids (prefill to 8192 tokens, decode to max_num_seqs)"
BLOCK_SIZE = "the default block size 64"
HYBRID_ALIGN = "hybrid (Mamba / Gated-DeltaNet) block alignment from 64"
LARGE_TIER = "the >= 160 GiB batch-default tier (max_num_batched_tokens 16384, max_num_seqs 1024)"
NOT_COVERED = ("the 0.34.0 transient peak and warm-up memory of a {kind} model (fitted on dense, MoE and "
               "sliding-window starts only)")
MOE_GROWTH = ("the 0.34.0 torch reservation growth of a MoE model (the one MoE start, Qwen3-30B-A3B, logs "
              "0.15 GiB more than kvplan's restated sizing steps: +0.53 % blocks)")
GRAPHS_OTHER_MODEL = ("the 0.34.0 CUDA-graph pool of a model other than an unquantized Llama (one graph start: "
                      "Llama-3-8B bf16)")

# rule words -> the starts above that checked it (an empty tuple: none yet)
CHECKED: dict[str, tuple[str, ...]] = {
    EXTENSIBLE: _EXTENSIBLE,
    CUDA_GRAPHS: ("vllm-0.34.0-h100/llama3-8b_serve_graphs",),
    BLOCK_SIZE: tuple(STARTS),
    ESTIMATE_PATH: ("vllm-0.34.0-h100/llama3-8b_eager_kvbytes",),
    CUDA_GRAPH_ESTIMATE: (),
    SM100_GRAPHS: (),
    HYBRID_ALIGN: (),
    LARGE_TIER: (),
}


def _kind(spec) -> str | None:
    """What no start covered about ``spec``'s kind, in words (None when a start covered it): MLA
    and hybrid models (the starts: dense, MoE, sliding-window, fp8-weight Llama)."""
    kinds = [w for w, on in (("MLA", spec.uses_mla), ("hybrid", spec.is_hybrid)) if on]
    return "/".join(kinds) or None


def unchecked(spec, gpu, args) -> tuple[str, ...]:
    """The 0.34.0 rules an estimate of ``spec`` (ModelSpec) on ``gpu`` (GPUProfile) with engine
    ``args`` (EngineArgs) uses that no real 0.34.0 start checked (CHECKED; in the order of the
    words above), then what no start of any version checked (rules.common_unchecked: a GPU
    other than the starts', TP/PP > 1, a partial bundled spec).

    Rule sources (vLLM 0.34.0): config/vllm.py _resolve_extensible_kv_cache (which path),
    v1/worker/extensible_kv_cache.py measure_kv_cache_bytes (extensible), gpu_worker.py
    determine_available_memory (estimate path), v1/worker/gpu/model_runner.py capture_model
    (graphs, unless --enforce-eager), config/vllm.py _split_cudagraph_capture_sizes (SM100 grids),
    config/cache.py DEFAULT_BLOCK_SIZE, platforms/interface.py _align_hybrid_block_size,
    engine/arg_utils.py get_batch_defaults (the tier).
    """
    from kvplan.engines.vllm.rules import common_unchecked
    from kvplan.engines.vllm.v0_34.defaults import LARGE_TIER_BYTES, extensible_kv_cache

    extensible = extensible_kv_cache(args)
    used = [EXTENSIBLE if extensible else ESTIMATE_PATH]
    if not args.enforce_eager:
        used.append(CUDA_GRAPHS if extensible else CUDA_GRAPH_ESTIMATE)
        if (gpu.compute_capability or "").startswith("10."):
            used.append(SM100_GRAPHS)
    if args.block_size is None:
        used.append(BLOCK_SIZE)
    if spec.is_hybrid:
        used.append(HYBRID_ALIGN)
    if gpu.nvml_total_bytes >= LARGE_TIER_BYTES and (args.max_num_batched_tokens is None or args.max_num_seqs is None):
        used.append(LARGE_TIER)
    out = [w for w in used if not CHECKED.get(w)]
    kind = _kind(spec)
    if kind and extensible:
        out.append(NOT_COVERED.format(kind=kind))
    if spec.is_moe and extensible:
        out.append(MOE_GROWTH)
    quantized = spec.quantization is not None or bool(args.quantization)
    if extensible and not args.enforce_eager and (spec.architecture != "LlamaForCausalLM" or quantized):
        out.append(GRAPHS_OTHER_MODEL)
    return tuple(out) + common_unchecked(STARTS, spec, gpu, args)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = ()  # a list of starts, no vLLM rule
