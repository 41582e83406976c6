"""vLLM 0.33.0: the add-on rules of 0.26.0 (v0_26/addons.py: draft weights and KV layers,
lookahead, LoRA slots and graphs, UVA and prefetch weight offload) with what changed:

* Runner: config/vllm.py _get_v2_model_runner_unsupported_features (0.33.0) sends only the
  suffix and custom_class methods (and parallel drafting) to the V1 runner: ngram, ngram_gpu and
  draft_model now run on the V2 runner like eagle/eagle3/mtp.
* ngram: the V2 runner keeps all_token_ids dense on the GPU for ngram and ngram_gpu
  (v1/worker/gpu/model_runner.py use_dense_all_token_ids = speculative_config.use_ngram();
  v1/worker/gpu/states.py RequestState: [max_num_reqs, max_model_len] int32, UVA otherwise):
  4 x max_num_seqs x max_model_len bytes, charged as consumed memory.
* MTP names: config/speculative.py MTPModelTypes gained dots3_note_mtp, qwen4_exp_mtp,
  bailing_hybrid_v3_mtp, kimi_k3_mtp, step5_mtp, hy_v4_mtp, inkling_mtp, glm5_next_mtp.
* KV offloading host memory: on CUDA the CPU pool is one /dev/shm region
  (v1/kv_offload/cpu/spec.py create_worker -> shared_offload_region.py SharedOffloadRegion:
  num_chunks x chunk bytes, chunks aligned to mmap.PAGESIZE; CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT),
  no power-of-two rounding (vllm-project/vllm PR #50094). It counts against the container's
  memory limit as shmem.
* Lookahead: config/vllm.py num_lookahead_tokens: K for eagle/eagle3/mtp/draft_model, K + 1 for
  dflash and fill-in dspark, 0 for ngram (the same values as 0.26.0's scheduler).

A later version reuses this module as its ``addons`` (dataclasses.replace keeps it) and replaces
only what changed, e.g. a module that re-exports these names and binds its own
``draft_graph_layers`` (0.34.0's draft FULL graphs on a request grid for K >= 2) or
``draft_activation_bytes`` (the extensible path's warm-up runs spec-decode steps).
"""

from __future__ import annotations

from dataclasses import replace  # noqa: F401  (kept for a later version's overrides)

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import addons as _v026
from kvplan.engines.vllm.v0_26.addons import (  # noqa: F401  (the unchanged rules, re-exported)
    LORA_CAPTURE_CASES,
    SIZED_METHODS,
    UNCHECKED_WORDS,
    AddonCosts,
    KVOffloadCapacity,
    draft_activation_bytes,
    draft_graph_layers,
    draft_weight_parts,
    layer_parameters,
    lookahead_tokens,
    lora_activation_bytes,
    lora_slot_parts,
    next_pow2,
    offload_parts,
    uva_offloaded,
)

MTP_METHODS = _v026.MTP_METHODS | frozenset({
    "dots3_note_mtp", "qwen4_exp_mtp", "bailing_hybrid_v3_mtp", "kimi_k3_mtp", "step5_mtp", "hy_v4_mtp",
    "inkling_mtp", "glm5_next_mtp",
})
V1_METHODS = frozenset({"suffix", "custom_class"})
DENSE_HISTORY_METHODS = frozenset({"ngram", "ngram_gpu"})
KV_OFFLOAD_CHUNK_ALIGNMENT = 4096  # mmap.PAGESIZE on x86-64 Linux
KV_OFFLOAD_HOST_LAYOUT = "shared-region"
CHECKED_FEATURES: frozenset[str] = frozenset()


def uses_v2_runner(v2_default: bool, features, pipeline_parallel_size: int = 1) -> bool:
    """vLLM 0.33.0: V2 unless a speculative method in V1_METHODS (or parallel drafting)."""
    sp = features.speculative
    if sp is None:
        return v2_default
    if sp.method in V1_METHODS or sp.raw.get("parallel_drafting"):
        return False
    return v2_default


def ngram_history_bytes(features, max_num_seqs: int, max_model_len: int) -> int:
    """4 x max_num_seqs x max_model_len bytes for ngram and ngram_gpu (module docstring)."""
    sp = features.speculative
    if sp is None or sp.method not in DENSE_HISTORY_METHODS:
        return 0
    return 4 * max_num_seqs * max_model_len


kv_offload_capacity = override(
    _v026.kv_offload_capacity,
    """vLLM 0.33.0's CPU KV pool: 0.26.0's chunk count with chunks aligned to the page size,
    held in one /dev/shm region of num_chunks x chunk bytes (module docstring).""",
    chunk_alignment=KV_OFFLOAD_CHUNK_ALIGNMENT,
    host_layout=KV_OFFLOAD_HOST_LAYOUT,
)

unchecked = override(
    _v026.unchecked,
    """The add-on rules an estimate uses that no real 0.33.0 start checked.""",
    checked=CHECKED_FEATURES,
)


# The vLLM functions these rules restate (file under vllm/, qualified name), fingerprinted per
# release by benchmarks/vllm_fingerprints.py: 0.26.0's, plus the V2 runner's embedding sharing.
def measured_misses(features, spec=None) -> tuple[str, ...]:
    """What real starts measured kvplan off on for ``features`` of ``spec`` under this version's
    rules: the MTP-on-MoE drafter profile miss (v0_26/addons.py MTP_MOE_MISS; 0.26.0's ngram miss
    is its V1 runner's, not this version's)."""
    return _v026.mtp_moe_miss(features, spec)


# 0.33.0's V2 runner installs the weight offloader too (v1/worker/gpu/model_runner.py load_model
# calls set_offloader(create_offloader(...))): offload works on either runner.
OFFLOAD_IGNORED_ON_V2_RUNNER: str | None = None

VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    *_v026.VLLM_SOURCES,
    ('v1/worker/gpu/spec_decode/eagle/utils.py', 'maybe_share_target_embed'),
)
