"""vLLM 0.34.0's add-on rules (speculative decoding, LoRA, weight and KV offload): 0.33.0's
(engines/vllm/v0_33/addons.py; the 0.34.0 diff of config/lora.py, the LoRA layers, the offloaders
and kv_offload changed nothing they restate), with what the real 0.34.0 H100 starts of
tests/data/vllm-0.34.0-h100 showed:

* LoRA (llama31-8b_lora4x64: kvplan +0.11 % of num_gpu_blocks) and native KV offloading
  (llama31-8b_kvoffload16: exact; the log's 17.18 GB mmap is the 16 GiB host rule) are checked:
  CHECKED_FEATURES (tests/engines/test_addon_starts.py replays both).
* EAGLE-style drafters (llama31-8b_eagle3, EAGLE3 K=3): kvplan's blocks were 2.27 % HIGH (7,216
  against vLLM's 7,056), the unsafe direction: the draft's weights and profile peak match, the gap
  is 0.34.0's extensible-cache warm-up, which runs spec-decode steps (greedy and sampled) and the
  draft's FULL decode graphs (gpu/warmup.py, spec_decode/autoregressive/speculator.py) that
  kvplan does not model. measured_misses says so as an approximation in every output.
"""

from __future__ import annotations

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import addons as _v026
from kvplan.engines.vllm.v0_33.addons import *  # noqa: F401,F403  (0.33.0's rules, unchanged)
from kvplan.engines.vllm.v0_33.addons import MTP_METHODS, VLLM_SOURCES  # noqa: F401

CHECKED_FEATURES: frozenset[str] = frozenset({"lora", "kv_offload"})

unchecked = override(
    _v026.unchecked,
    """The add-on rules an estimate uses that no real 0.34.0 start checked (CHECKED_FEATURES).""",
    checked=CHECKED_FEATURES,
)

# drafter methods whose 0.34.0 sizing a real start measured off: method -> what it showed
_EAGLE_MISS = ("speculative decoding under vLLM 0.34.0: on the one real start (Llama-3.1-8B + EAGLE3 K=3, "
               "H100) kvplan's num_gpu_blocks were 2.27 % high; the drafter's warm-up steps and FULL decode "
               "graphs in 0.34.0's extensible KV-cache sizing are not modelled, so the pool is smaller than shown")


def measured_misses(features) -> tuple[str, ...]:
    """Why an estimate with ``features`` is approximate beyond what its rules say: the add-ons a
    real 0.34.0 start measured kvplan off on (module docstring)."""
    sp = features.speculative
    if sp is not None and (sp.method in ("eagle", "eagle3", "mtp", "draft_model") or sp.method in MTP_METHODS):
        return (_EAGLE_MISS,)
    return ()
