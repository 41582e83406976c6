"""vLLM 0.33.0's profiling run: the transient activation peak, and what the run leaves allocated.

0.33.0 charges memory differently from 0.26.0 (utils/mem_utils.py memory_profiling,
v1/worker/gpu_worker.py determine_available_memory):

    non_kv = total_consumed + transient_peak
    total_consumed = free memory at the worker's start snapshot - free memory after profiling
                     (weights, every tensor still allocated, non-torch memory)
    transient_peak = torch peak during the profile - torch allocated after it

So the "peak activation" vLLM 0.33.0 reports is only the part of the peak that is freed again;
what the profile leaves allocated (the fused-MoE workspace, the V2 sampler's per-request state)
is charged as consumed memory. kvplan returns the two apart: ``peak_bytes`` (vLLM's "peak
activation") and ``persistent_bytes`` (consumed memory that is neither weights nor non-torch);
the estimate adds the second to the non-torch term.

Profile pass (V2 runner for every model, runner.py): one forward over T = max_num_batched_tokens
tokens with attention skipped, then the sampler twice over R = min(T, max_num_seqs) rows: the plain
pass and a warm-up pass with every sampling feature on (SamplingParams.for_sampler_warmup), which
makes an fp32 copy of the logits (sample/sampler.py): R x V x (2 bf16 + 4 fp32) bytes, with the
forward's [T, H] output still referenced. cuBLAS handles and workspace are created before the
start snapshot (gpu_worker.py init_device), so the 32 MiB cuBLAS workspace that 0.26.0 counted in
its peak is baseline now.

Forward per-token bytes: 0.26.0's per-layer rules (v0_26/activation.py), except that the fused-MoE
workspace is persistent (below), not transient, and the Gated-DeltaNet mixer (FlashInfer GDN
prefill on Hopper in 0.33.0) keeps fewer fp32 value copies.

Fitted coefficients (each says on which records; tests/data/vllm-0.33.0-h200, KVPLAN_EXACT
worker bytes): FORWARD_OFFSET_BYTES, SAMPLER_EXTRA_BYTES, GDN_FP32_VALUE_COPIES,
PER_REQUEST_STATE_BYTES. Nothing is fitted per case. Units: bytes (int).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import activation as _v026
from kvplan.engines.vllm.v0_26.activation import (  # noqa: F401  (unchanged rules)
    COMPILE_FIXED_BYTES_PER_HIDDEN,
    MOE_HIDDEN_TENSORS,
    MOE_SHARED_TENSORS,
    ActivationEstimate as _ActivationEstimate26,
    ProfileRun,
    forward_bytes,
    mlp_bytes_per_token,
    moe_workspace_bytes,
)
from kvplan.model.spec import LayerKind, ModelSpec

MiB = 1 << 20

# The forward peak lies this much below 0.26.0's per-token rule x T: fitted on the 4 Llama-3-8B
# records (llama3-8b_eager, _fp8kv, _u05: 1,742,752,256 B; _mbt16k 1,742,736,896 B; all at
# T = 16384, rule 110,592 B/token). Of it, 32 MiB is the cuBLAS workspace (now baseline); the
# rest stays allocated after the pass and is charged in consumed memory (PER_REQUEST_STATE_BYTES
# and memory.NON_TORCH_SINGLE_GPU absorb it). The same offset reproduces DeepSeek-V2-Lite's
# MoE-layer peak to the byte (dsv2-lite_eager: 807,422,464 B).
FORWARD_OFFSET_BYTES = -69_187_072

# Sampler warm-up stage: R x V x 6 + T x H x 2 + R x H x 2 + this, fitted on qwen3-30b-a3b_eager
# (T 16384) and _eager_serve (T 8192): both exact with 8,321,024 B (logprobs / top-k scratch of
# the warm-up pass; not traced to one tensor).
SAMPLER_EXTRA_BYTES = 8_321_024
SAMPLER_LOGIT_BYTES = 2 + 4  # bf16 logits + their fp32 copy (sample/sampler.py)

# Gated DeltaNet (Qwen3-Next) mixer on 0.33.0: 3H bf16 + this many fp32 copies of value_dim per
# token, fitted on qwen3-next-80b_fp8_eager (1,682,000,384 B at T = 16384; 0.26.0's V1 runner
# with the Triton/FLA kernel needed 12.9).
GDN_FP32_VALUE_COPIES = 5.774

# GPU tensors the V2 runner keeps per request slot besides the penalty bins (bad-word,
# allowed-token, logit-bias and stop-token tables of sample/bad_words.py and logit_bias.py:
# 17,412 B by the source; logprob and state tables): fitted slope between llama3-8b_eager
# (max_num_seqs 1024) and llama3-8b_eager_mbt16k (256): 30,731 B per request.
PER_REQUEST_STATE_BYTES = 30_731


def penalty_state_bytes(vocab_size: int, max_num_seqs: int) -> int:
    """The V2 sampler's PenaltiesState (v1/worker/gpu/sample/penalties.py): prompt_bin_mask
    [R, ceil(V/32)] int32 + output_bin_counts [R, V] int32, allocated when the runner is built
    (after the start snapshot), so charged as consumed memory. Source-derived."""
    return max_num_seqs * (4 * vocab_size + 4 * math.ceil(vocab_size / 32))


@dataclass(frozen=True)
class ActivationEstimate(_ActivationEstimate26):
    """0.26.0's fields plus what the profile leaves allocated (per GPU).

    Attributes:
        persistent_bytes: consumed memory besides weights and non-torch: the sampler's
            per-request state (last pipeline rank) and the fused-MoE workspace.
        sampler_state_bytes / moe_workspace_bytes: its two parts.
    """

    persistent_bytes: int = 0
    sampler_state_bytes: int = 0
    moe_workspace_bytes: int = 0


def _layer_bytes_per_token(spec: ModelSpec, i: int, tp: int, act_bytes: int, fp8_act_quant: int = 0) -> float:
    """Transient live bytes per token inside decoder layer ``i`` on 0.33.0 (eager)."""
    h = spec.hidden_size
    kind = spec.layer_kinds[i]
    is_moe = spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]
    if spec.is_moe and not is_moe and spec.has_ffn(i):
        # The dense layers of a MoE model (DeepSeek's first_k_dense_replace) did not set the peak on
        # dsv2-lite_eager (the MoE-layer rule is exact there); checked on that one record.
        return 0.0
    moe_elements = 0.0
    if is_moe:
        # The top_k workspaces are the persistent WorkspaceManager buffer: not transient.
        moe_elements = MOE_HIDDEN_TENSORS * h + MOE_SHARED_TENSORS * spec.moe.shared_intermediate_size / tp
    # a layer without a feed-forward (NemotronH's Mamba and attention blocks) has only its mixer
    ffn_bytes = mlp_bytes_per_token(spec, tp, act_bytes, fp8_act_quant, is_moe, moe_elements) if spec.has_ffn(i) else 0.0
    mixer = 0.0
    if kind == LayerKind.LINEAR and spec.gdn is not None:
        g = spec.gdn
        mixer = 3.0 * h * act_bytes + GDN_FP32_VALUE_COPIES * g.num_v_heads * g.head_v_dim / tp * 4
    elif kind == LayerKind.MAMBA and spec.mamba is not None:
        mixer = (3.0 * h + 4.0 * spec.mamba.intermediate_size / tp) * act_bytes
    # Attention is skipped by the V2 profile pass (no attention metadata): no attention term.
    return max(ffn_bytes, mixer)


def _peak(run: ProfileRun) -> ActivationEstimate:
    """vLLM 0.33.0's "GiB for peak activation" on one GPU (``peak_bytes``) and what the profile
    leaves allocated (``persistent_bytes``), for one profiling run (module docstring; the V2
    sampler has no per-SM scratch, so ``sm_count`` is unused)."""
    spec, t, act = run.spec, run.tokens, run.act_dtype_bytes
    h = spec.hidden_size
    # torch.compile: 0.26.0's V2 fit (not checked on 0.33.0); every model runs V2 here.
    per_token, forward = forward_bytes(run, _layer_bytes_per_token, compiled_mlp=True)
    compile_fixed = COMPILE_FIXED_BYTES_PER_HIDDEN * h
    forward += FORWARD_OFFSET_BYTES
    sampler = 0
    state = 0
    if run.is_last_pp_rank:
        rows = run.rows
        logit_bytes = SAMPLER_LOGIT_BYTES + (act if spec.logit_softcapping else 0)
        sampler = rows * spec.vocab_size * logit_bytes + t * h * act + rows * h * act
        sampler += SAMPLER_EXTRA_BYTES
        if not run.enforce_eager:
            sampler += compile_fixed
        state = penalty_state_bytes(spec.vocab_size, run.max_num_seqs) + PER_REQUEST_STATE_BYTES * run.max_num_seqs
    ws = moe_workspace_bytes(spec, run.tp, t, act, run.layers) if run.moe_workspace_persists else 0
    peak = max(forward, sampler, 0)
    return ActivationEstimate(
        peak_bytes=peak,
        forward_bytes=forward,
        sampler_bytes=sampler,
        fixed_bytes=0,
        per_token_bytes=per_token,
        bound_by="forward" if forward >= sampler else "sampler",
        persistent_bytes=state + ws,
        sampler_state_bytes=state,
        moe_workspace_bytes=ws,
    )


activation_peak = override(
    _v026.activation_peak,
    """vLLM 0.33.0's "GiB for peak activation" on one GPU (``peak_bytes``) and what the profile
    leaves allocated (``persistent_bytes``), in bytes. Same arguments as
    v0_26.activation.activation_peak, whose rule this version replaces (``peak_rule``: the V2
    profile, sampler warm-up and persistent state of the module docstring).""",
    peak_rule=_peak,
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu_worker.py', 'Worker.init_device'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('utils/mem_utils.py', 'memory_profiling'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner.profile_run'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner._dummy_sampler_run'),
    ('v1/worker/gpu/sample/penalties.py', 'PenaltiesState'),
    ('model_executor/layers/fused_moe/modular_kernel.py', 'FusedMoEKernelModularImpl._allocate_buffers'),
    ('model_executor/layers/fused_moe/experts/triton_moe.py', 'TritonExperts.workspace_shapes'),
    ('model_executor/models/llama.py', 'LlamaMLP.forward'),
    ('model_executor/models/qwen2.py', 'Qwen2MLP.forward'),
)
