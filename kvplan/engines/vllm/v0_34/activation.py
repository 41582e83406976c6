"""vLLM 0.34.0's transient activation peaks: the profiling run and, with the extensible KV
cache, the larger peak of the warm-up and sizing steps that the cache keeps free.

The profiling run is 0.33.0's rule (v0_33/activation.py: V2 profile with attention skipped, the
sampler warm-up, the persistent sampler state and MoE workspace), except that final-logit
softcapping adds no logits copy to the sampler stage (see _peak), and under torch.compile:
the forward then follows the eager per-token rule and the sampler stage gains no compile term.
Fitted on the one 0.34.0 start with CUDA graphs, tests/data/vllm-0.34.0-h100/
llama3-8b_serve_graphs (T = 8192, 1024 sampler rows): vLLM's peak activation 871,544,832 B
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

kvplan's P and G (H100 starts of tests/data/vllm-0.34.0-h100; their ``Memory after warmup`` lines
print P as "allocated at peak" and G as "torch reservation growth", to 0.01 GiB; every start's
error: benchmarks/fit_v034.py, docs/versions.md):

* P = max(the profile peak, the profile's forward stage + SIZING_STEP_BYTES_PER_TOKEN x T), at
  least one prompt-logprobs chunk beside the step's hidden states. The sizing steps run the
  forward with attention but sample only their few rows, so they raise the forward stage, never
  a sampler-bound profile peak (Qwen3-30B-A3B: P logged 0.94 GiB = its sampler-bound profile
  peak 1,013,118,976 B). The per-token term is FITTED (below).
* G = reserve_growth.py: the caching allocator's growth over the sizing steps, derived from the
  eager forward's allocation sequence (no fitted term); where that sequence is not restated
  (MLA, hybrid, shared-expert MoE, other architectures, TP > 1) G = P x the FITTED
  TORCH_RESERVE_GROWTH_RATIO.
* what warm-up leaves allocated = WARMUP_PERSISTENT_HIDDEN_COPIES [T, hidden] tensors (FITTED).
The starts are dense Llama-3-8B (eager, graphs, fp8 weights), Qwen3-30B-A3B (MoE, eager) and
Gemma-2-9B (sliding window, eager) on one H100; MLA, hybrid, other GPUs are not covered
(real_starts.py labels them). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import activation as _v026
from kvplan.engines.vllm.v0_33 import activation as _v033
from kvplan.engines.vllm.v0_34 import reserve_growth
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


def prompt_logprob_chunk_bytes(vocab_size: int, rows: int, act: int, tp: int, softcap: bool = False) -> int:
    """One prompt-logprobs chunk's logits at their peak (bytes per GPU): [rows, vocab] in the
    activation dtype (v1/worker/gpu/sample/logprob.py compute_token_logprobs reads them in place,
    with no fp32 log-softmax copy); under TP the LM head's [rows, vocab / tp] shard, the
    all-gather's [rows, vocab] output and its reordered copy are alive at once
    (model_executor/layers/logits_processor.py _gather_logits,
    distributed/device_communicators/base_device_communicator.py all_gather); final-logit
    softcapping (Gemma-2) keeps two [rows, vocab] tensors alive while it divides, tanh's and
    multiplies. Never the largest term on the recorded starts (all TP 1)."""
    per_logit = (act if tp == 1 else act * 2 + act / tp) + (act if softcap else 0)
    return int(rows * vocab_size * per_logit)


# FITTED (benchmarks/fit_v034.py) on the FIT starts of tests/data/vllm-0.34.0-h100 whose P the
# sizing step set (P logged above the profile peak): llama3-8b_eager and gemma2-9b_eager
# (qwen3-30b-a3b_eager, the third FIT start, has P = its sampler-bound profile peak and says
# nothing about it); the other starts there are held out (docs/versions.md gives every error).
# What the sizing step's forward (real attention) holds over the profile's forward stage per
# batched token: mean of (P - kvplan's forward stage) / T = 4,387 (Llama), 4,264 (Gemma-2).
SIZING_STEP_BYTES_PER_TOKEN = 4_325
# Torch's reservation growth over a sizing step as a multiple of P, used only where
# reserve_growth.py does not restate the layer sequence (none of the recorded starts): FITTED as
# the mean of G / P = 1.183, 1.117, 1.312 on llama3-8b_eager, qwen3-30b-a3b_eager, gemma2-9b_eager.
TORCH_RESERVE_GROWTH_RATIO = 1.20409
# What warm-up and the sizing steps leave allocated, in copies of a [T, hidden] activation tensor
# (the residual of F + C after weights, consumed memory and graphs): 1.03, 1.07, 1.69 on FIT.
WARMUP_PERSISTENT_HIDDEN_COPIES = 1.2544


@dataclass(frozen=True)
class ActivationEstimate(_v033.ActivationEstimate):
    """0.33.0's fields plus the extensible KV cache's transient (per GPU).

    Attributes:
        sizing_peak_bytes: P, the largest transient of the profile, warm-up and sizing steps
            (module docstring); at least ``peak_bytes``.
        reserve_growth_bytes: G, torch's reservation growth over the sizing steps: derived from
            the eager forward's allocation sequence (reserve_growth.py) where that covers the
            model on one GPU, else P times the fitted TORCH_RESERVE_GROWTH_RATIO.
        reserve_growth_derived: G came from reserve_growth.py (not the ratio).
        warmup_persistent_bytes: what warm-up and the sizing steps leave allocated
            (WARMUP_PERSISTENT_HIDDEN_COPIES x T x hidden x activation bytes).
    """

    sizing_peak_bytes: int = 0
    reserve_growth_bytes: int = 0
    reserve_growth_derived: bool = False
    warmup_persistent_bytes: int = 0


def sizing_step_bytes(run: ProfileRun, profile_peak_bytes: int, forward_bytes: int) -> int:
    """P: the largest transient of the profile, warm-up and sizing steps (bytes): the profile peak,
    or the profile's forward stage plus SIZING_STEP_BYTES_PER_TOKEN per batched token when larger,
    and (last pipeline rank) at least one prompt-logprobs chunk beside the step's [T, H] hidden
    states. Rule source: vLLM 0.34.0 v1/worker/gpu/warmup.py run_kv_cache_sizing_warmup, fitted
    term: module docstring."""
    spec, t, act = run.spec, run.tokens, run.act_dtype_bytes
    p = max(profile_peak_bytes, forward_bytes + SIZING_STEP_BYTES_PER_TOKEN * t)
    if not run.is_last_pp_rank:
        return p
    chunk = prompt_logprob_chunk_bytes(spec.vocab_size, min(PROMPT_LOGPROB_CHUNK_ROWS, t), act, run.tp,
                                       spec.logit_softcapping)
    return max(p, t * spec.hidden_size * act + chunk)


def _peak(run: ProfileRun) -> ActivationEstimate:
    """The profile peak (0.33.0's rule, the eager forward also under torch.compile), what it
    leaves allocated, and P and G (module docstring)."""
    # Final-logit softcapping (model_executor/layers/logits_processor.py: tanh(logits / cap) * cap)
    # frees its temporaries before the sampler's fp32 copy, so it adds nothing to the sampler stage:
    # Gemma-2-9B's profile peak is 1,893,747,200 B on both 0.33.0 and 0.34.0 (tests/data
    # vllm-0.33.0-h200 and vllm-0.34.0-h100 gemma2-9b_eager), the forward's, where 0.33.0's rule
    # (one more bf16 logits copy) gives a sampler stage of 2,230,253,568 B.
    spec = run.spec.model_copy(update={"logit_softcapping": None}) if run.spec.logit_softcapping else run.spec
    est = _v033._peak(replace(run, enforce_eager=True, spec=spec))
    p = sizing_step_bytes(run, est.peak_bytes, est.forward_bytes)
    left = int(WARMUP_PERSISTENT_HIDDEN_COPIES * run.tokens * run.spec.hidden_size * run.act_dtype_bytes)
    g = reserve_growth.reserve_growth_bytes(
        run.spec, tokens=run.tokens, max_model_len=run.max_model_len, act=run.act_dtype_bytes,
        fp8_act_quant=bool(run.fp8_act_quant), last_pp_rank=run.is_last_pp_rank,
    ) if run.tp == 1 else None
    return ActivationEstimate(
        **est.__dict__, sizing_peak_bytes=p,
        reserve_growth_bytes=int(p * TORCH_RESERVE_GROWTH_RATIO) if g is None else g,
        reserve_growth_derived=g is not None, warmup_persistent_bytes=left,
    )


activation_peak = override(
    _v026.activation_peak,
    """vLLM 0.34.0's profile peak (``peak_bytes``, 0.33.0's rule), what the profile leaves
    allocated (``persistent_bytes``) and the extensible KV cache's transient reserve
    (``sizing_peak_bytes`` P, ``reserve_growth_bytes`` G), in bytes per GPU. Same arguments as
    v0_26.activation.activation_peak.""",
    peak_rule=_peak,
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_run'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner._dummy_sampler_run'),
    ('v1/worker/gpu/warmup.py', 'run_kv_cache_sizing_warmup'),
    ('v1/worker/gpu/warmup.py', '_measure_sizing_step'),
    ('v1/worker/extensible_kv_cache.py', 'ExtensibleKVCache.record_transient_peak'),
    ('v1/worker/gpu/sample/penalties.py', 'PenaltiesState'),
)
