"""Peak activation memory of vLLM 0.26.0's profiling run, per GPU (the "peak activation" term).

What vLLM measures (v1/worker/gpu_worker.py determine_available_memory): the torch allocator's
``allocated_bytes.all.peak`` increase while ``profile_run`` does one forward pass over
``max_num_batched_tokens`` (T) tokens and then warms the sampler up on
``min(T, max_num_seqs)`` rows of logits. The peak is the larger of the two stages plus a fixed
32 MiB (the cuBLAS workspace, first touched in the pass). It does not depend on the number of
layers: the forward peak is reached inside one decoder layer.

Forward stage, elements per token live at the peak (H hidden, I intermediate per rank):
  dense MLP, Llama style (llama.py rebinds x, freeing gate_up):  3H + 3I
  dense MLP, gate_up kept until down_proj (qwen2.py, qwen3, deepseek_v2.py dense):  4H + 3I
  Gemma-2/3 (extra un-fused norms):  5H + 3I
  MoE (modular Triton fused-MoE, fused_moe/experts/triton_moe.py workspace_shapes):
      5.5H + top_k * (max(Ie, H) + max(2Ie, H)) + 5.5 * shared_intermediate
  Gated DeltaNet (Qwen3-Next):  3H + 12.9 fp32 copies of value_dim
  Mamba-1 (profiling pass, no scan):  3H + 3 d_inner
  Mamba-2 with its gated RMSNorm in torch:  2H + in_proj + d_inner, + 2 fp32 copies of d_inner
  Cohere's parallel block:  the gate_up-keeping MLP + the attention output (5H + 3I)
  Transformers backend (OLMo-2, SmolLM3, StarCoder2):  + H + 2 head_dim held by its loop
With torch.compile (no --enforce-eager) on the V2 runner: T * (3I + 0.31H) * 2 B + 95,500 B * H.

Sampler stage (v1/worker/gpu/model_runner.py vs v1/worker/gpu_model_runner.py
_dummy_sampler_run), R = min(T, max_num_seqs) rows of V logits: the V2 runner holds the bf16
logits (twice with final-logit softcapping). The V1 runner (MoE and hybrid models) runs its
top-k/top-p sampler on them (v1/sample/sampler.py, ops/topk_topp_sampler.py): bf16 logits,
their fp32 copy, the fp32 softmax and the fp32 exponential noise are live together (14 B per
logit), plus the Triton top-k/top-p kernel's per-SM scratch rows (``num_SMs x V`` fp32,
ops/topk_topp_triton.py; used when R >= 8). Both keep the forward's [T, H] output alive.
Fused-MoE workspaces persist into this stage: the modular MoE kernel takes them from vLLM's
global WorkspaceManager (v1/worker/workspace.py), which grows and never frees, so after the
profiling forward ``T x top_k x (max(Ie, H) + max(2Ie, H))`` elements stay allocated
(fused_moe/modular_kernel.py _allocate_buffers, experts/triton_moe.py workspace_shapes). The
MXFP4 experts of gpt-oss do not keep them (records gpt-oss-20b/120b_eager).

Every coefficient names the measurement it was fitted on: tests/data/calibration (14 handed-out
starts) and tests/data/vllm-0.26.0-h200 (starts recorded with `kvplan verify --record`, whose
exact worker bytes are in each record's ``exact_bytes``). Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvplan.engines.vllm.v0_26.family_quirks import (  # noqa: F401
    GEMMA_STYLE,
    MLP_KEEPS_GATE_UP,
    quirks,
    transformers_backend_held_elements,
)
from kvplan.engines.vllm.v0_26.runner import uses_v2_runner
from kvplan.model.spec import LayerKind, ModelSpec

GiB = 1 << 30
MiB = 1 << 20

# Fixed part of the peak: exact from the worker's peak_activation_memory minus the per-token
# terms: V2 runner 33,571,328 B (records llama3-8b_eager: 1,845,510,656 - 16384 x 110,592;
# p-llama70b-2L, p-phi3-4L, gemma3-1b_eager agree to the byte); V1 runner 33,554,432 B
# (p-mixtral-2L at 8192 and 16384 tokens).
FIXED_BYTES_V2 = 33_571_328
FIXED_BYTES_V1 = 33_554_432

# MoE forward: 5.5 hidden-size tensors besides the workspaces. p-mixtral-2L-t16384/t8192
# (V1): slope exactly 217,088 B/token = (5.5 x 4096 + 2 x (14336 + 28672)) x 2.
MOE_HIDDEN_TENSORS = 5.5
# Shared experts live during the routed ones: 5.5 x shared_intermediate, fitted on calibration
# dsv2-lite_eager (1.74 GiB at 16384 tokens, 2 shared experts x 1408).
MOE_SHARED_TENSORS = 5.5

# Gated DeltaNet (Qwen3-Next): fp32 copies of value_dim per token (chunked delta-rule states),
# fitted on calibration qwen3-next-80b_fp8_eager (3.46 GiB at 16384 tokens).
GDN_FP32_VALUE_COPIES = 12.9

# V1-runner sampler warm-up: bf16 logits (2) + fp32 logits (4) + fp32 probs (4) + fp32
# exponential noise (4) per logit, plus the Triton top-k/top-p scratch (SMs x V x 4 B). With the
# persisted MoE workspace below this reproduces the worker's exact peaks: granite4h-small_eager
# within 0.1 MB of 4,360,587,264 B, qwen3-30b-a3b_eager_serve and _graphs within 1.7 MB,
# gpt-oss-20b/120b_eager (no workspace) 14 MB over 3,114,590,208 B.
V1_SAMPLER_BYTES_PER_LOGIT = 14
TOPK_TOPP_SCRATCH_BYTES_PER_SM_LOGIT = 4
TOPK_TOPP_TRITON_MIN_ROWS = 8
# Below 8 rows vLLM sorts instead (apply_top_k_top_p_pytorch): fp32 sorted values + int64
# indices + two bool masks per logit. Read from the code, not measured (a few MB at most).
TOPK_TOPP_SORT_BYTES_PER_LOGIT = 14
# Streaming multiprocessors when the GPU profile does not say (the H200's, as measured here).
DEFAULT_SM_COUNT = 132

# torch.compile on the V2 runner (no --enforce-eager): the compiled MLP keeps ~3I + 0.31H
# elements per token (slope between calibration llama3-8b_default at 16384 tokens, 1.78 GiB, and
# llama3-4L_graphs_serve / llama3.1-8b_serve_defaults at 8192, 1,184,948,736 B) plus a part that
# does not grow with the tokens but with the model width: 95,500 B per hidden unit, a
# least-squares fit through the token-independent remainders of the exact peaks at H = 2048
# (tinyllama_serve_defaults, 153 MB), 4096 (llama3-4L_graphs_serve 426 MB, qwen3-8b_graphs_32k
# 424 MB), 5120 (p-phi4-4L-graphs 289 MB) and 8192 (p-llama70b-2L-graphs 885 MB). Residuals up
# to 200 MB (Phi-4): what inductor keeps is not traced to a source line; see docs/accuracy.md.
COMPILE_I_TENSORS = 3.0
COMPILE_H_TENSORS = 0.31
COMPILE_FIXED_BYTES_PER_HIDDEN = 95_500

# Which families keep gate_up alive through down_proj, and Gemma-2/3's 5H + 3I peak: see
# family_quirks.py (MLP_KEEPS_GATE_UP, GEMMA_STYLE are re-exported from there).


# W8A8 fp8 linears (checkpoint fp8, block-wise or per-tensor, and --quantization fp8) quantize
# their input on the fly into a new fp8 tensor plus fp32 scales (model_executor/layers/
# quantization/utils/fp8_utils.py per_token_group_quant_fp8 for 128-wide groups; a per-token
# scale otherwise). Only the MLPs that keep gate_up alive through down_proj (MLP_KEEPS_GATE_UP)
# hold it at their peak: Qwen3-32B-FP8 (record qwen3-32b-fp8_eager.log, 16384 tokens, I = 25600)
# peaked 0.372 GiB (+-0.01, from the log's 2-decimal figures) above the bf16 rule, this term gives
# 0.403 GiB; Llama's MLP frees gate_up first and the calibration llama3-70b_fp8_eager start is
# exact without it.
FP8_SCALE_BYTES = 4


def fp8_down_proj_input_bytes(inter_rank: int, group: int) -> float:
    """Bytes per token of down_proj's quantized input: one fp8 byte per element plus an fp32
    scale per ``group`` elements (-1: one per token)."""
    scales = FP8_SCALE_BYTES * (-(-inter_rank // group) if group > 0 else 1)
    return float(inter_rank + scales)


@dataclass(frozen=True)
class ActivationEstimate:
    """Peak activation bytes and how it was composed (per GPU)."""

    peak_bytes: int
    forward_bytes: int
    sampler_bytes: int
    fixed_bytes: int
    per_token_bytes: int
    bound_by: str  # "forward" or "sampler"


def _dense_elements(spec: ModelSpec, tp: int) -> float:
    h, inter = spec.hidden_size, spec.intermediate_size / tp
    if not spec.gated_mlp:
        return 3.0 * h + 2.0 * inter
    if quirks(spec.model_type).gemma_style_activation:
        return 5.0 * h + 3.0 * inter
    if quirks(spec.model_type).mlp_keeps_gate_up:
        return 4.0 * h + 3.0 * inter
    return 3.0 * h + 3.0 * inter


def mlp_bytes_per_token(
    spec: ModelSpec,
    tp: int,
    act_bytes: int,
    fp8_act_quant: int,
    is_moe: bool,
    moe_elements: float,
    extra_elements: float = 0.0,
) -> float:
    """Bytes per token a decoder layer's MLP holds at its peak: ``moe_elements`` (the version's MoE
    rule) for a MoE layer, else the dense rule (_dense_elements) or 3H without an MLP, plus
    ``extra_elements``, in the activation dtype (``act_bytes``); plus the quantized down_proj input
    of W8A8 fp8 MLPs that keep gate_up (fp8_down_proj_input_bytes)."""
    if is_moe:
        ffn = moe_elements
    elif spec.intermediate_size:
        ffn = _dense_elements(spec, tp)
    else:
        ffn = 3.0 * spec.hidden_size
    ffn += extra_elements
    ffn_bytes = ffn * act_bytes
    if fp8_act_quant and not is_moe and spec.intermediate_size and quirks(spec.model_type).mlp_keeps_gate_up:
        ffn_bytes += fp8_down_proj_input_bytes(spec.intermediate_size // tp, fp8_act_quant)
    return ffn_bytes


# In the profiling forward neither Mamba mixer runs its conv or scan: without attention metadata
# mamba_mixer2.py conv_ssm_forward only warms the SSD kernels up on a one-chunk dummy and copies
# the x/B/C part, and mamba_mixer.py forward_impl returns early (rule in _layer_bytes_per_token).
# Mamba-2 mixer whose gated RMSNorm runs in torch (vLLM 0.26.0 layers/mamba/mamba_mixer2.py
# Mixer2RMSNormGated.forward_cuda falls back to forward_native unless n_groups is 1 and divides
# by TP): ``x * silu(gate.to(float32))`` makes x an fp32 [T, d_inner] tensor, and each following
# step (the grouped variance, the rescale, the cast back) holds a second fp32 or two bf16
# copies beside it, so 2 fp32 copies of d_inner are live at its peak, plus the fp32 variance and
# its rsqrt per group. Around it live the layer's residual and normed input (mamba2.py
# Mamba2DecoderLayer: 2 hidden-size tensors), the in_proj output (2 d_inner + 2 n_groups
# d_state + heads, the gate a view of it) and the SSM output (d_inner), in the activation dtype.
# families/mamba-codestral-7b_eager: 135,488 B per token by this rule, the worker's exact peak
# 2,253,389,824 B = 33,554,432 + 16384 x 135,488 to the byte.
MAMBA1_PROFILE_HIDDEN_TENSORS = 3
MAMBA1_PROFILE_INNER_TENSORS = 3
MAMBA2_NORM_FP32_COPIES = 2
MAMBA2_NORM_FP32_PER_GROUP = 2


def mamba2_native_gated_norm(spec: ModelSpec, tp: int) -> bool:
    """Whether a Mamba-2 layer's gated RMSNorm takes vLLM's torch path (forward_native): it has a
    norm and n_groups is not 1 or does not divide by ``tp`` (mamba_mixer2.py forward_cuda)."""
    m = spec.mamba
    return m is not None and m.version == 2 and m.gated_norm_weight and (m.n_groups != 1 or m.n_groups % tp != 0)


def mamba2_native_norm_bytes_per_token(spec: ModelSpec, tp: int, act_bytes: int) -> float:
    """Bytes per token live at a Mamba-2 layer's peak when its gated RMSNorm runs in torch
    (MAMBA2_NORM_* above; d_inner, groups and heads per TP rank). Source: vLLM 0.26.0
    layers/mamba/mamba_mixer2.py MambaMixer2.forward and Mixer2RMSNormGated.forward_native."""
    m = spec.mamba
    d_in = m.intermediate_size / tp
    groups = m.n_groups / tp
    in_proj = 2 * d_in + 2 * groups * m.state_size + m.num_heads / tp
    held = (2.0 * spec.hidden_size + in_proj + d_in) * act_bytes
    return held + 4.0 * (MAMBA2_NORM_FP32_COPIES * d_in + MAMBA2_NORM_FP32_PER_GROUP * groups)


def _layer_bytes_per_token(spec: ModelSpec, i: int, tp: int, act_bytes: int, fp8_act_quant: int = 0) -> float:
    """Live bytes per token at the peak inside decoder layer ``i`` (eager).

    ``fp8_act_quant``: 0 without W8A8 fp8 linears, else the activation group size (128 for
    block-quantized checkpoints, -1 per token): see FP8 below."""
    h = spec.hidden_size
    kind = spec.layer_kinds[i]
    is_moe = spec.moe is not None and i < len(spec.moe_layers) and spec.moe_layers[i]
    moe_elements = 0.0
    if is_moe:
        m = spec.moe
        ie = m.moe_intermediate_size / tp
        w1_out = 2 * ie if m.gated else ie  # a *_no_mul activation keeps N = Ie (modular_kernel.py)
        moe_elements = MOE_HIDDEN_TENSORS * h + m.top_k * (max(ie, h) + max(w1_out, h))
        moe_elements += MOE_SHARED_TENSORS * m.shared_intermediate_size / tp
        if quirks(spec.model_type).router_fp32_scratch:
            moe_elements += m.num_experts * 4 / act_bytes
    ffn = mlp_bytes_per_token(
        spec, tp, act_bytes, fp8_act_quant, is_moe, moe_elements,
        extra_elements=quirks(spec.model_type).unfused_norm_hidden_tensors * h,
    ) if spec.has_ffn(i) else 0.0

    mixer_bytes = 0.0
    if kind == LayerKind.LINEAR and spec.gdn is not None:
        g = spec.gdn
        value_dim = g.num_v_heads * g.head_v_dim / tp
        mixer_bytes = 3.0 * h * act_bytes + GDN_FP32_VALUE_COPIES * value_dim * 4
    elif kind == LayerKind.MAMBA and spec.mamba is not None and mamba2_native_gated_norm(spec, tp):
        mixer_bytes = mamba2_native_norm_bytes_per_token(spec, tp, act_bytes)
    elif kind == LayerKind.MAMBA and spec.mamba is not None and spec.mamba.version == 1:
        # Mamba-1 in the profiling run (no attention metadata): mamba_mixer.py forward_impl
        # returns out_proj(contiguous copy of the x half of in_proj) without conv or scan, so the
        # layer holds residual + normed input + in_proj (2 d_inner) + the copy (d_inner) + the
        # output (H). families/mamba-2.8b_eager: 46,080 B per token, below its sampler stage,
        # which then sets the peak (100,736 B under the worker's exact 875,388,928 B).
        d_in = spec.mamba.intermediate_size / tp
        mixer_bytes = (MAMBA1_PROFILE_HIDDEN_TENSORS * h + MAMBA1_PROFILE_INNER_TENSORS * d_in) * act_bytes
    elif kind == LayerKind.MAMBA and spec.mamba is not None:
        d_in = spec.mamba.intermediate_size / tp
        mixer_bytes = (3.0 * h + 4.0 * d_in) * act_bytes
    elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
        a = spec.attention
        q = a.num_attention_heads // tp * a.head_dim
        kv = max(1, a.num_key_value_heads // tp) * a.head_dim
        mixer_bytes = (3.0 * h + q + 2 * kv + a.num_attention_heads // tp * a.head_dim_v) * act_bytes
    elif kind == LayerKind.MLA and spec.mla is not None:
        m = spec.mla
        heads = spec.attention.num_attention_heads // tp
        mixer_bytes = (
            3.0 * h + heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) * 2 + m.kv_lora_rank + heads * m.v_head_dim
        ) * act_bytes
    # the Transformers backend's loop holds its embeddings and rotary cos/sin through both
    held = transformers_backend_held_elements(spec.architecture, h, spec.attention.head_dim) * act_bytes
    return max(ffn + held if ffn else 0.0, mixer_bytes + held if mixer_bytes else 0.0)


def moe_workspace_bytes(spec: ModelSpec, tp: int, tokens: int, act_bytes: int, layers: range) -> int:
    """Bytes the fused-MoE workspace keeps after a forward over ``tokens`` tokens (0 without MoE
    layers in ``layers``). vLLM 0.26.0 fused_moe/modular_kernel.py _allocate_buffers asks the
    WorkspaceManager for two 256-byte-aligned views: max(workspace13, output) and workspace2,
    with workspace13 = [T, top_k, max(Ie, H)], workspace2 = [T, top_k, max(2Ie, H)] and output
    [T, H] (experts/triton_moe.py workspace_shapes; Ie = moe_intermediate_size / tp), in the
    activation dtype. Every MoE layer has the same shape, so one buffer serves them all."""
    m = spec.moe
    if m is None or not any(i < len(spec.moe_layers) and spec.moe_layers[i] for i in layers):
        return 0
    h = spec.hidden_size
    ie = m.moe_intermediate_size // tp

    def aligned(n: int) -> int:
        return -(-n * act_bytes // 256) * 256

    first = max(tokens * m.top_k * max(ie, h), tokens * h)
    second = tokens * m.top_k * max(2 * ie if m.gated else ie, h)
    return aligned(first) + aligned(second)


@dataclass(frozen=True)
class ProfileRun:
    """activation_peak's arguments on one GPU, as a version's peak rule reads them.

    Attributes:
        tp: tensor-parallel ranks. tokens: T = max_num_batched_tokens, the forward's tokens.
        layers: the decoder layers this pipeline stage holds. Others: as activation_peak's.
    """

    spec: ModelSpec
    tp: int
    act_dtype_bytes: int
    tokens: int
    max_num_seqs: int
    enforce_eager: bool
    is_last_pp_rank: bool
    layers: range
    sm_count: int | None
    moe_workspace_persists: bool
    fp8_act_quant: int
    v2: bool | None = None  # the model runner when a feature chose it (capacity/addons.py); None = the model's
    max_model_len: int | None = None  # resolved --max-model-len; read by 0.34.0's sizing-step rule only

    @property
    def rows(self) -> int:
        """R = min(T, max_num_seqs): the sampler's rows."""
        return min(self.tokens, self.max_num_seqs)


def forward_bytes(run: ProfileRun, layer_rule, compiled_mlp: bool) -> tuple[int, int]:
    """(bytes per token, forward-stage bytes) of the profiling forward: the largest
    ``layer_rule(spec, i, tp, act_bytes, fp8_act_quant)`` over the stage's layers times T; with
    torch.compile (no --enforce-eager) the compiled-MLP fit replaces it where ``compiled_mlp``
    (the V2 runner) holds for a dense model, and every compiled pass adds
    COMPILE_FIXED_BYTES_PER_HIDDEN x H."""
    spec, tp, t = run.spec, run.tp, run.tokens
    h = spec.hidden_size
    per_token = int(
        max((layer_rule(spec, i, tp, run.act_dtype_bytes, run.fp8_act_quant) for i in run.layers), default=3.0 * h)
    )
    forward = per_token * t
    compile_fixed = COMPILE_FIXED_BYTES_PER_HIDDEN * h
    if not run.enforce_eager and compiled_mlp and not spec.is_moe and spec.intermediate_size:
        compiled = int(t * (COMPILE_I_TENSORS * spec.intermediate_size / tp + COMPILE_H_TENSORS * h) * run.act_dtype_bytes)
        forward = compiled + compile_fixed
    elif not run.enforce_eager:
        forward += compile_fixed
    return per_token, forward


def _peak(run: ProfileRun) -> ActivationEstimate:
    """vLLM 0.26.0's peak for one profiling run (activation_peak's rule, module docstring)."""
    spec, t, act = run.spec, run.tokens, run.act_dtype_bytes
    h = spec.hidden_size
    v2 = uses_v2_runner(spec) if run.v2 is None else run.v2
    per_token, forward = forward_bytes(run, _layer_bytes_per_token, compiled_mlp=v2)
    compile_fixed = COMPILE_FIXED_BYTES_PER_HIDDEN * h
    sampler = 0
    if run.is_last_pp_rank:
        rows = run.rows
        logits = rows * spec.vocab_size
        if v2:
            sampler = logits * act * (2 if spec.logit_softcapping else 1) + rows * h * act
            if not run.enforce_eager:
                sampler += compile_fixed
        else:
            sampler = logits * V1_SAMPLER_BYTES_PER_LOGIT + 2 * rows * h * act
            if rows >= TOPK_TOPP_TRITON_MIN_ROWS:
                sms = run.sm_count or DEFAULT_SM_COUNT
                sampler += min(sms, rows) * spec.vocab_size * TOPK_TOPP_SCRATCH_BYTES_PER_SM_LOGIT
            else:
                sampler += logits * TOPK_TOPP_SORT_BYTES_PER_LOGIT
        sampler += t * h * act  # the forward's output is still referenced
        if run.moe_workspace_persists:
            sampler += moe_workspace_bytes(spec, run.tp, t, act, run.layers)
    fixed = FIXED_BYTES_V2 if v2 else FIXED_BYTES_V1
    peak = max(forward, sampler) + fixed
    return ActivationEstimate(
        peak_bytes=peak,
        forward_bytes=forward,
        sampler_bytes=sampler,
        fixed_bytes=fixed,
        per_token_bytes=per_token,
        bound_by="forward" if forward >= sampler else "sampler",
    )


def activation_peak(
    spec: ModelSpec,
    *,
    tensor_parallel_size: int,
    act_dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool,
    is_last_pp_rank: bool = True,
    layers: range | None = None,
    sm_count: int | None = None,
    moe_workspace_persists: bool = True,
    fp8_act_quant: int = 0,
    peak_rule: Callable[[ProfileRun], ActivationEstimate] = _peak,
    v2: bool | None = None,
    max_model_len: int | None = None,
) -> ActivationEstimate:
    """Predict vLLM 0.26.0's "GiB for peak activation" on one GPU.

    Args:
        max_num_batched_tokens: tokens of the profiling forward pass.
        max_num_seqs: caps the sampler rows (min(tokens, seqs)).
        enforce_eager: False = torch.compile + CUDA graphs.
        layers: the decoder layers this pipeline stage holds (default: all).
        sm_count: the GPU's streaming multiprocessors (the V1 sampler's scratch rows);
            None = DEFAULT_SM_COUNT.
        moe_workspace_persists: False for MoE kernels that allocate their own scratch (MXFP4).
        fp8_act_quant: W8A8 fp8 linears' activation group size (128 block-wise, -1 per token),
            0 without them.
        peak_rule: the version's rule over the resolved ProfileRun (a later version binds its
            own: rules.override).
        v2: the model runner when a feature chose it (a speculative method the V2 runner lacks:
            capacity/addons.py); None = the model's default runner.
        max_model_len: the resolved --max-model-len (tokens); unused by this version's rule
            (vLLM 0.34.0's sizing steps split at it: v0_34/reserve_growth.py).
    Returns:
        ActivationEstimate (bytes).
    """
    run = ProfileRun(
        spec=spec,
        tp=tensor_parallel_size,
        act_dtype_bytes=act_dtype_bytes,
        tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        enforce_eager=enforce_eager,
        is_last_pp_rank=is_last_pp_rank,
        layers=layers if layers is not None else range(spec.num_hidden_layers),
        sm_count=sm_count,
        moe_workspace_persists=moe_workspace_persists,
        fp8_act_quant=fp8_act_quant,
        v2=v2,
        max_model_len=max_model_len,
    )
    return peak_rule(run)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu/model_runner.py', 'GPUModelRunner._dummy_sampler_run'),
    ('v1/worker/gpu_model_runner.py', 'GPUModelRunner._dummy_sampler_run'),
    ('model_executor/layers/fused_moe/modular_kernel.py', 'FusedMoEKernelModularImpl._allocate_buffers'),
    ('model_executor/layers/fused_moe/experts/triton_moe.py', 'TritonExperts.workspace_shapes'),
    ('model_executor/models/llama.py', 'LlamaMLP.forward'),
    ('model_executor/models/qwen2.py', 'Qwen2MLP.forward'),
    ('model_executor/layers/quantization/utils/fp8_utils.py', 'per_token_group_quant_fp8'),
    ('model_executor/layers/mamba/mamba_mixer2.py', 'MambaMixer2.forward'),
    ('model_executor/layers/mamba/mamba_mixer2.py', 'MambaMixer2.conv_ssm_forward'),
    ('model_executor/layers/mamba/mamba_mixer2.py', 'Mixer2RMSNormGated.forward_cuda'),
    ('model_executor/layers/mamba/mamba_mixer.py', 'MambaMixer.forward_impl'),
)
