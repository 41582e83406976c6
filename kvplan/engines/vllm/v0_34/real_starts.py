"""The real vLLM 0.34.0 starts kvplan's 0.34.0 rules were checked on (paths under the repository's
tests/data, without the .log suffix), and the 0.34.0 rules none of them exercised.

The package does not read tests/: this table is the committed list, and
tests/engines/test_version_evidence.py checks that it names exactly the 0.34.0 starts tests/data
holds. Add a start here when its log is added there.

Until real starts check them, every 0.34.0 rule is derived from the source: an estimate's
evidence says "derived from the source, not yet checked on hardware" and names the rules it used.
"""

from __future__ import annotations

STARTS: tuple[str, ...] = ()

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


def unchecked(spec, gpu, args) -> tuple[str, ...]:
    """The 0.34.0 rules an estimate of ``spec`` (ModelSpec) on ``gpu`` (GPUProfile) with engine
    ``args`` (EngineArgs) uses that no real 0.34.0 start checked (the words above, in that order),
    then what no start of any version checked (rules.common_unchecked). Never empty while no
    0.34.0 start is recorded (STARTS).

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
    out = [EXTENSIBLE if extensible else ESTIMATE_PATH]
    if not args.enforce_eager:
        out.append(CUDA_GRAPHS if extensible else CUDA_GRAPH_ESTIMATE)
        if (gpu.compute_capability or "").startswith("10."):
            out.append(SM100_GRAPHS)
    if args.block_size is None:
        out.append(BLOCK_SIZE)
    if spec.is_hybrid:
        out.append(HYBRID_ALIGN)
    if gpu.nvml_total_bytes >= LARGE_TIER_BYTES and (args.max_num_batched_tokens is None or args.max_num_seqs is None):
        out.append(LARGE_TIER)
    return tuple(out) + common_unchecked(STARTS, spec, gpu, args)
