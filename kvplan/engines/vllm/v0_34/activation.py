"""vLLM 0.34.0's transient activation peaks: the profiling run (0.33.0's, unchanged) and, with
the extensible KV cache, the larger peak of the warm-up and sizing steps that the cache keeps
free.

The profiling run is 0.33.0's (v0_33/activation.py: V2 profile with attention skipped, the
sampler warm-up, the persistent sampler state and MoE workspace); its transient peak is vLLM's
"peak activation" and sizes the KV cache on the estimate path. The 0.34.0 diff of the profile
run, ``_dummy_sampler_run`` and ``PenaltiesState`` changes nothing kvplan models.

With the extensible KV cache (v1/worker/gpu_worker.py _compile_or_warm_up_model,
v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup, _measure_sizing_step,
v1/worker/extensible_kv_cache.py record_transient_peak), the transient the cache keeps free is

    P = max(profile transient, every warm-up / sizing-step transient)

where the sizing steps are a full-budget mixed prefill+decode step **with real attention** over
T = max_num_batched_tokens tokens, and a ``prompt_logprobs = max_logprobs`` (20) request, run
inside that step or, when max_model_len < T, as its own single-prompt step. Prompt logprobs are
computed in chunks of 1024 rows (v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE): the
chunk's logits and their fp32 log-softmax live beside the step's [T, H] hidden states.
``G`` (torch's reservation growth over a sizing step, fragmentation included) is kept when it
exceeds P.

kvplan's P and G are PROVISIONAL (derived from the source, not yet checked on a real 0.34.0
start): the attention kernels add nothing kvplan models to the forward's per-token bytes, the
prompt-logprob chunk costs PROMPT_LOGPROB_BYTES_PER_LOGIT per logit, and G is taken as at most
P. Each constant is to be fitted on real 0.34.0 starts' ``Memory after warmup`` lines, which
print P ("allocated at peak") and G ("torch reservation growth"). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import activation as _v026
from kvplan.engines.vllm.v0_33 import activation as _v033
from kvplan.engines.vllm.v0_33.activation import (  # noqa: F401  (unchanged rules)
    FORWARD_OFFSET_BYTES,
    GDN_FP32_VALUE_COPIES,
    PER_REQUEST_STATE_BYTES,
    SAMPLER_EXTRA_BYTES,
    ProfileRun,
    penalty_state_bytes,
)

# v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE: rows of one prompt-logprobs chunk.
PROMPT_LOGPROB_CHUNK_ROWS = 1024
# PROVISIONAL, to be fitted on real 0.34.0 starts: bytes per logit of one prompt-logprobs chunk
# (bf16 logits 2 + their fp32 log-softmax 4 + one fp32 working copy 4), derived from the source.
PROMPT_LOGPROB_BYTES_PER_LOGIT = 10
# PROVISIONAL, to be fitted on real 0.34.0 starts: what the full-budget sizing step's real
# attention adds to the profile forward's per-token peak (the profile skips attention), in
# bytes per token. FlashAttention writes into the [T, heads x head_dim] output the layer already
# holds, so 0 by the source.
SIZING_ATTENTION_BYTES_PER_TOKEN = 0


@dataclass(frozen=True)
class ActivationEstimate(_v033.ActivationEstimate):
    """0.33.0's fields plus the extensible KV cache's transient (per GPU).

    Attributes:
        sizing_peak_bytes: P, the largest transient of the profile, warm-up and sizing steps
            (module docstring); at least ``peak_bytes``.
        reserve_growth_bytes: G, torch's reservation growth over a sizing step (provisional:
            taken as P).
    """

    sizing_peak_bytes: int = 0
    reserve_growth_bytes: int = 0


def sizing_step_bytes(run: ProfileRun, forward_bytes: int) -> int:
    """The transient of the full-budget sizing step (bytes): the forward with real attention,
    then (last pipeline rank) one prompt-logprobs chunk beside the step's [T, H] hidden states
    and the sampler's rows. Provisional constants: see the module docstring."""
    spec, t, act = run.spec, run.tokens, run.act_dtype_bytes
    forward = forward_bytes + SIZING_ATTENTION_BYTES_PER_TOKEN * t
    if not run.is_last_pp_rank:
        return forward
    chunk = min(PROMPT_LOGPROB_CHUNK_ROWS, t) * spec.vocab_size * PROMPT_LOGPROB_BYTES_PER_LOGIT
    return max(forward, t * spec.hidden_size * act + chunk)


def _peak(run: ProfileRun) -> ActivationEstimate:
    """0.33.0's profile peak and what it leaves allocated, plus P and G (module docstring)."""
    est = _v033._peak(run)
    p = max(est.peak_bytes, sizing_step_bytes(run, est.forward_bytes))
    return ActivationEstimate(**est.__dict__, sizing_peak_bytes=p, reserve_growth_bytes=p)


activation_peak = override(
    _v026.activation_peak,
    """vLLM 0.34.0's profile peak (``peak_bytes``, 0.33.0's rule), what the profile leaves
    allocated (``persistent_bytes``) and the extensible KV cache's transient reserve
    (``sizing_peak_bytes`` P, ``reserve_growth_bytes`` G), in bytes per GPU. Same arguments as
    v0_26.activation.activation_peak.""",
    peak_rule=_peak,
)
