"""vLLM 0.34.0's add-on rules (speculative decoding, LoRA, weight and KV offload): 0.33.0's
(engines/vllm/v0_33/addons.py; the 0.34.0 diff of config/lora.py, the LoRA layers, the offloaders
and kv_offload changed nothing they restate), plus what a drafter does to 0.34.0's extensible
KV-cache sizing, with what the real 0.34.0 H100 starts of tests/data/vllm-0.34.0-h100 showed.

* LoRA (llama31-8b_lora4x64: kvplan +0.11 % of num_gpu_blocks) and native KV offloading
  (llama31-8b_kvoffload16: exact; the log's 17.18 GB mmap is the 16 GiB host rule) are checked:
  CHECKED_FEATURES (tests/engines/test_addon_starts.py replays both).

Drafters and the extensible KV cache (eagle, eagle3, mtp; files under vllm/)
--------------------------------------------------------------------------------
The cache is sized from ``F + C - max(1 GiB, 0.75 P) - max(P, G)`` (v0_34/memory.py). A drafter
moves three of its terms, besides its weights and KV layers (0.26.0's rules, unchanged):

1. Memory the runner keeps (lowers F + C), DERIVED from the source:
   * v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py
     TargetDependentARSpeculator.__init__ (the base of EagleSpeculator, eagle/speculator.py, and
     MTPSpeculator, mtp/speculator.py) and multi_module_mtp/speculator.py
     MultiModuleMTPSpeculator.__init__: ``hidden_states``, [max_num_batched_tokens, draft
     hidden] in the model dtype, where propose() copies the drafter's input hidden states; the
     multi-module MTP speculator (several MTP layers and K > 1: config/speculative.py
     use_multi_module_mtp) also caches [max_num_seqs, K - 1, hidden] target hidden states.
   * v1/worker/gpu/model_runner.py load_model: ``decode_query_len`` = K + 1 sampled positions
     per request, and StructuredOutputsWorker (v1/worker/gpu/structured_outputs.py) holds a
     grammar bitmask of [max_num_seqs x decode_query_len, cdiv(vocab, 32)] int32 plus an int32
     logits index per row on the GPU: K more rows per request than without a drafter (the
     runner's own row is in the fitted non-torch memory).
   Both are allocated by the runner after the worker's start snapshot, so F + C loses them.
2. The transient peak P: v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup runs full-budget
   steps through execute_model / sample_tokens, which call the speculator's propose() after the
   target's forward on the same batch, exactly as the profile run does (model_runner.py
   _dummy_run -> speculator.propose). The drafter therefore adds the same transient above the
   target's peak in the sizing step as in the profile: ``draft_activation_bytes`` (0.26.0's
   rule; its 2 x hidden is fitted on the 0.26.0 EAGLE-3 start, and 0.34.0's profile peak of this
   start, 2,413,865,472 B, is kvplan's to 24,576 B).
3. The torch reservation growth G (v1/worker/gpu/warmup.py _measure_sizing_step: the step's
   peak reserved bytes less those before it and less what it leaves allocated): the drafter's
   transient is reserved in segments of its own; how many bytes depends on the caching
   allocator's fragmentation, which the source does not settle. FITTED on ONE start:
   DRAFTER_RESERVE_GROWTH_FACTOR.

Measured on llama31-8b_eagle3 (Llama-3.1-8B + a one-layer EAGLE-3 draft, K = 3, --enforce-eager,
max_model_len 8192, max_num_batched_tokens 16384, H100; its ``Memory after warmup`` line against
the plain Llama-3-8B / Llama-3.1-8B eager starts of the same folder, 0.01 GiB resolution):
P 2.31 GiB (plain 1.69, + the drafter's 0.625 GiB = 2.315), G 3.31 GiB (plain 2.00),
F + C 61.95 GiB (plain 62.71; the draft's weights are 0.594 GiB, the buffers of 1. 0.171 GiB).
With these rules kvplan gives vLLM's 7,056 blocks (each term within the log's rounding of the
measured one: F + C -17 MiB, which is the draft weights' -18 MiB, P -9 MiB, G +19 MiB, the plain
target's own G error); without them 7,216 (+2.27 %). G's factor is fitted on this one start, so every 0.34.0 drafter estimate still says
it is approximate (measured_misses); EAGLE (not 3) and MTP share the speculator code path
(TargetDependentARSpeculator.propose) and these rules, unchecked by a start of their own.
"""

from __future__ import annotations

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import addons as _v026
from kvplan.engines.vllm.v0_33.addons import *  # noqa: F401,F403  (0.33.0's rules, unchanged)
from kvplan.engines.vllm.v0_33.addons import MTP_METHODS
from kvplan.engines.vllm.v0_33.addons import VLLM_SOURCES as _V033_SOURCES

CHECKED_FEATURES: frozenset[str] = frozenset({"lora", "kv_offload"})

unchecked = override(
    _v026.unchecked,
    """The add-on rules an estimate uses that no real 0.34.0 start checked (CHECKED_FEATURES).""",
    checked=CHECKED_FEATURES,
)

# Methods whose speculator keeps the target's hidden states for the drafter (TargetDependentAR /
# multi-module MTP speculators: v1/worker/gpu/spec_decode/{eagle,mtp,multi_module_mtp}).
HIDDEN_STATE_METHODS = frozenset({"eagle", "eagle3", "mtp"})
# v1/worker/gpu/structured_outputs.py StructuredOutputsWorker: one int32 bitmask word per 32
# vocabulary entries and one int32 logits index, per sampled row.
BITMASK_TOKENS_PER_WORD = 32
BITMASK_WORD_BYTES = 4
LOGITS_INDEX_BYTES = 4

# FITTED on ONE real vLLM 0.34.0 start, tests/data/vllm-0.34.0-h100/llama31-8b_eagle3 (H100,
# Llama-3.1-8B + EAGLE-3, K = 3, max_num_batched_tokens 16384): the torch reservation growth G the
# drafter adds, as a multiple of its transient (draft_activation_bytes, 671,088,640 B there):
# (3.31 GiB - 2.00 GiB, G of this start and of the plain llama3-8b_eager / llama31-8b_kvoffload16
# starts) / 0.625 GiB = 2.096 (2.08 to 2.11 within the log's 0.01 GiB rounding). Not derived: the
# allocator's fragmentation (module docstring, 3.).
DRAFTER_RESERVE_GROWTH_FACTOR = 2.096


def _num_speculative_tokens(features, draft) -> int:
    """K: --speculative-config's num_speculative_tokens, else (MTP) the draft's layers, else 1
    (config/speculative.py resolves an unset K from the MTP layers)."""
    sp = features.speculative
    if sp.num_speculative_tokens:
        return sp.num_speculative_tokens
    if sp.method == "mtp" and draft is not None:
        return max(1, draft.spec.num_hidden_layers)
    return 1


def draft_persistent_bytes(draft, target, features, *, max_num_batched_tokens: int, max_num_seqs: int,
                           dtype_bytes: int) -> dict[str, int]:
    """The buffers a drafter makes the runner keep on the last pipeline stage (one GPU), bytes by
    name (module docstring, 1.):

    * ``speculator_hidden_states``: max_num_batched_tokens x draft hidden x dtype_bytes (eagle,
      eagle3, mtp), plus max_num_seqs x (K - 1) x hidden x dtype_bytes for a multi-module MTP
      drafter (more than one MTP layer and K > 1);
    * ``bitmask_rows_for_drafts``: max_num_seqs x K x (4 x cdiv(target vocab, 32) + 4) (every method
      with K draft tokens: the runner samples K + 1 positions per request).

    Rule source: vLLM 0.34.0 v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py
    TargetDependentARSpeculator.__init__, multi_module_mtp/speculator.py
    MultiModuleMTPSpeculator.__init__, v1/worker/gpu/model_runner.py GPUModelRunner.load_model
    (decode_query_len, StructuredOutputsWorker). Raises nothing."""
    sp = features.speculative
    if sp is None:
        return {}
    k = _num_speculative_tokens(features, draft)
    words = -(-target.vocab_size // BITMASK_TOKENS_PER_WORD)
    out = {"bitmask_rows_for_drafts": max_num_seqs * k * (words * BITMASK_WORD_BYTES + LOGITS_INDEX_BYTES)}
    if draft is not None and draft.method in HIDDEN_STATE_METHODS:
        h = draft.spec.hidden_size
        held = max_num_batched_tokens * h * dtype_bytes
        if draft.method == "mtp" and draft.spec.num_hidden_layers > 1 and k > 1:
            held += max_num_seqs * (k - 1) * h * dtype_bytes  # cached_target_hidden_states
        out["speculator_hidden_states"] = held
    return out


def draft_sizing_bytes(draft_activation: int) -> tuple[int, int]:
    """(P, G) a drafter adds to the extensible KV cache's sizing step, bytes, given its transient
    above the target's peak (``draft_activation_bytes``): P the same transient (the sizing step
    runs propose() after the target's forward as the profile does), G that times
    DRAFTER_RESERVE_GROWTH_FACTOR (fitted on one start). Rule source: vLLM 0.34.0
    v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup, _measure_sizing_step (module docstring,
    2. and 3.)."""
    return draft_activation, int(draft_activation * DRAFTER_RESERVE_GROWTH_FACTOR)


# drafter methods whose 0.34.0 sizing rests on a coefficient fitted on one real start
_DRAFTER_FIT = ("speculative decoding under vLLM 0.34.0: the drafter's share of the torch reservation growth "
                "that the extensible KV cache keeps free is fitted on one real start (Llama-3.1-8B + EAGLE3 K=3, "
                "H100: kvplan's num_gpu_blocks equal vLLM's 7,056 there, by that fit; 2.27 % high before it); other "
                "drafters, targets and GPUs are unchecked")


def measured_misses(features, spec=None) -> tuple[str, ...]:
    """Why an estimate with ``features`` is approximate beyond what its rules say: a drafter's
    0.34.0 sizing terms rest on a fit to one real start (module docstring)."""
    sp = features.speculative
    if sp is not None and (sp.method in ("eagle", "eagle3", "mtp", "draft_model") or sp.method in MTP_METHODS):
        return (_DRAFTER_FIT, *_v026.mtp_moe_miss(features, spec))
    return ()


# The vLLM source the rules above restate: 0.33.0's add-on table and the drafter's 0.34.0 terms,
# fingerprinted per release by benchmarks/vllm_fingerprints.py (docs/versions.md).
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    *_V033_SOURCES,
    ('v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py', 'TargetDependentARSpeculator.__init__'),
    ('v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py', 'TargetDependentARSpeculator.propose'),
    ('v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py', 'MultiModuleMTPSpeculator.__init__'),
    ('v1/worker/gpu/structured_outputs.py', 'StructuredOutputsWorker.__init__'),
    ('v1/worker/gpu/warmup.py', 'run_mixed_prefill_decode_warmup'),
)
