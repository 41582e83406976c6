"""vLLM 0.34.0's transient activation peaks: the profiling run and, with the extensible KV
cache, the larger peak of the warm-up and sizing steps that the cache keeps free.

The profiling run is 0.33.0's rule (v0_33/activation.py: V2 profile with attention skipped, the
sampler warm-up, the persistent sampler state and MoE workspace), except under torch.compile:
the forward then follows the eager per-token rule and the sampler stage gains no compile term.
Fitted on the one 0.34.0 start with CUDA graphs, tests/data/vllm-0.34.0-h100/
v034-llama3-8b_serve_graphs (T = 8192, 1024 sampler rows): vLLM's peak activation 871,544,832 B
is the sampler stage, which the eager rule puts at 871,823,360 B (+0.03 %); 0.33.0's compiled
forward fit (0.26.0's) gave 1,262,991,360 B. The 0.34.0 diff of the profile run,
``_dummy_sampler_run`` and ``PenaltiesState`` changes nothing else kvplan models.

With the extensible KV cache (v1/worker/gpu_worker.py _compile_or_warm_up_model,
v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup, _measure_sizing_step,
v1/worker/extensible_kv_cache.py record_transient_peak) the cache keeps free

    P = max(profile transient, every warm-up / sizing-step transient)
    G = torch's reservation growth over a sizing step (fragmentation included); max(P, G) is kept

The sizing steps are a full-budget mixed prefill+decode step **with real attention** over
T = max_num_batched_tokens tokens, and a ``prompt_logprobs = max_logprobs`` (20) request (inside
that step, or its own step when max_model_len < T), computed in 1024-row chunks
(v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE).

kvplan's P and G, FITTED on real vLLM 0.34.0 starts (H100; their ``Memory after warmup`` lines
print P as "allocated at peak" and G as "torch reservation growth", to 0.01 GiB):

* P = the profile peak + SIZING_STEP_BYTES_PER_TOKEN x T, at least one prompt-logprobs chunk
  beside the step's hidden states. Fitted on v034-llama3-8b_eager (T 16384: P 1.69 GiB over the
  1,742,752,256 B profile peak); held out: v034-llama3-8b_serve_graphs (T 8192, sampler-bound
  profile) predicted 907.8 MB against 0.84 GiB = 901.9 MB logged (+0.6 %).
* G = P + TORCH_RESERVE_GROWTH_EXTRA_BYTES. Fitted on v034-llama3-8b_eager (G 2.00 GiB); held
  out: v034-llama3-8b_serve_graphs predicted 1.15 GiB against 1.18 GiB logged (-2.5 %).
These are one model family (Llama-3-8B) on one GPU: MoE, MLA and hybrid models are not covered
(real_starts.py labels them). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
# Bytes per logit of one prompt-logprobs chunk, by the source: bf16 logits + their fp32
# log-softmax. Never the largest term on the recorded starts (serve_graphs: 0.86 GB < P 0.90 GB).
PROMPT_LOGPROB_BYTES_PER_LOGIT = 6
# FITTED: what the sizing step adds over the profile peak per batched token (the profile skips
# attention): (1.69 GiB - 1,742,752,256 B) / 16,384 on v034-llama3-8b_eager; held out:
# v034-llama3-8b_serve_graphs (+6 MB of 0.84 GiB).
SIZING_STEP_BYTES_PER_TOKEN = 4_387
# FITTED: torch's reservation growth over a sizing step beyond P: 2.00 GiB - 1.69 GiB on
# v034-llama3-8b_eager (2,147,483,648 - 1,814,623,683 B); held out: v034-llama3-8b_serve_graphs
# (-32 MB of 1.18 GiB).
TORCH_RESERVE_GROWTH_EXTRA_BYTES = 332_859_965
# FITTED: bytes per batched token that warm-up and the sizing steps leave allocated (missing from
# the free memory after warm-up besides weights, consumed memory and graphs): 137.6 MB / 16,384
# on v034-llama3-8b_eager (init_free - F - C - consumed); held out: v034-llama3-8b_serve_graphs
# predicted 68.8 MB against 24 MB (+45 MB: 5 blocks of 8 MiB, +0.07 %). Not traced to a tensor.
WARMUP_PERSISTENT_BYTES_PER_TOKEN = 8_398


@dataclass(frozen=True)
class ActivationEstimate(_v033.ActivationEstimate):
    """0.33.0's fields plus the extensible KV cache's transient (per GPU).

    Attributes:
        sizing_peak_bytes: P, the largest transient of the profile, warm-up and sizing steps
            (module docstring); at least ``peak_bytes``.
        reserve_growth_bytes: G, torch's reservation growth over a sizing step (P plus a
            fitted constant).
        warmup_persistent_bytes: what warm-up and the sizing steps leave allocated
            (WARMUP_PERSISTENT_BYTES_PER_TOKEN x T).
    """

    sizing_peak_bytes: int = 0
    reserve_growth_bytes: int = 0
    warmup_persistent_bytes: int = 0


def sizing_step_bytes(run: ProfileRun, profile_peak_bytes: int) -> int:
    """P: the largest transient of the profile, warm-up and sizing steps (bytes): the profile peak
    plus SIZING_STEP_BYTES_PER_TOKEN per batched token, and (last pipeline rank) at least one
    prompt-logprobs chunk beside the step's [T, H] hidden states. Fitted: module docstring."""
    spec, t, act = run.spec, run.tokens, run.act_dtype_bytes
    p = profile_peak_bytes + SIZING_STEP_BYTES_PER_TOKEN * t
    if not run.is_last_pp_rank:
        return p
    chunk = min(PROMPT_LOGPROB_CHUNK_ROWS, t) * spec.vocab_size * PROMPT_LOGPROB_BYTES_PER_LOGIT
    return max(p, t * spec.hidden_size * act + chunk)


def _peak(run: ProfileRun) -> ActivationEstimate:
    """The profile peak (0.33.0's rule, the eager forward also under torch.compile), what it
    leaves allocated, and P and G (module docstring)."""
    est = _v033._peak(replace(run, enforce_eager=True))
    p = sizing_step_bytes(run, est.peak_bytes)
    return ActivationEstimate(
        **est.__dict__, sizing_peak_bytes=p, reserve_growth_bytes=p + TORCH_RESERVE_GROWTH_EXTRA_BYTES,
        warmup_persistent_bytes=WARMUP_PERSISTENT_BYTES_PER_TOKEN * run.tokens,
    )


activation_peak = override(
    _v026.activation_peak,
    """vLLM 0.34.0's profile peak (``peak_bytes``, 0.33.0's rule), what the profile leaves
    allocated (``persistent_bytes``) and the extensible KV cache's transient reserve
    (``sizing_peak_bytes`` P, ``reserve_growth_bytes`` G), in bytes per GPU. Same arguments as
    v0_26.activation.activation_peak.""",
    peak_rule=_peak,
)
