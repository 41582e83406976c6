"""Time of one vLLM engine step on one GPU, from bytes moved and FLOPs done (milliseconds).

One V1 engine step runs every scheduled token (prompt chunks and decodes alike) through one
forward pass. The model splits the pass into two phases and bounds each by the GPU's roofline:

    linear phase     weights read once per step        vs  2 x active params x tokens FLOPs
    attention phase  KV cache read (context) + written  vs  QK^T and PV FLOPs (causal pairs)

    gpu  = max(dense weights_ms, dense linear_compute_ms)
           + max(expert weights_ms, expert linear_compute_ms)        # MoE only
           + max(kv_ms, attention_compute_ms) + allreduce_ms (TP > 1)
           + step_overhead_ms + per_layer_us x layers / 1000
    host = per_request_us x requests / 1000
    step = max(gpu, host) with async scheduling, gpu + host without

Why max(gpu, host) with async scheduling: vLLM's engine core then schedules step N+1 and
processes step N-1's outputs while step N runs on the GPU (vLLM v1/engine/core.py
step_with_batch_queue, v1/core/sched/async_scheduler.py, read in the default version's source),
so the per-request host work
(scheduling, output processing, streaming each request's token) hides behind the GPU until it is
the longer of the two; without async scheduling it runs between steps and adds.

Why max within a phase and sum across them: within the GEMMs, the weight stream and the tensor
cores overlap (a GEMM is as slow as its slower resource); attention is a separate kernel after
the projections, so its time adds; the routed experts' grouped GEMMs (vLLM's fused MoE kernels)
are kernels of their own with their own achieved fractions (``expert_bandwidth_fraction``,
``expert_matmul_fraction``; by default the dense ones). Bytes go over ``bandwidth_fraction`` x the datasheet
bandwidth, FLOPs over ``matmul_fraction`` x the dense tensor peak of the dtype the GEMMs run in
(kvplan/perf/gpu_perf.py). ``per_layer_us`` is the GPU time every layer costs whatever its
size: its kernels' fixed launch-to-finish floor inside the CUDA graph (a deep model pays it more
often per step); ``moe_layer_us`` is the same for a MoE layer's extra kernels (router, top-k,
token sorting by expert, the weighted sum). The coefficients are kvplan/perf/coefficients.py's (priors,
"uncalibrated", unless a fit for this GPU and vLLM version exists, or one of the same architecture
and/or an earlier version to transfer: coefficients.resolve).

Terms, per TP rank (the sizes come from the selected vLLM version's rules, the same ones the
estimate uses: weights.weight_bytes_per_rank, kv_spec):
  * weights: every loaded parameter except the token embedding (a gather of a few rows), the
    rotary cache and the vision tower. MoE experts: with T routed tokens, uniform routing and
    top-k of E experts, an expert is untouched by one token with probability 1 - k/E, so the
    expected experts read per layer are E x (1 - (1 - k/E)^T): k at T = 1, all E at large T.
  * linear FLOPs: 2 x (dense params + k x params of one expert) x T, plus 2 x lm_head params per
    request (logits of one position per request).
  * KV: a request with c computed and n new tokens reads min(c + n, window) tokens' K/V and
    writes n, in every attention layer; recurrent layers (Mamba, GatedDeltaNet) read and write
    their state once per request per step.
  * attention FLOPs: causal pairs sum_{i=1..n} min(c + i, window) x 2 x heads x (d_qk + d_v) per
    layer (MLA: the expanded form for prompt chunks, the absorbed latent form for decodes).
  * TP > 1: two all-reduces per layer of T x hidden activations, ring cost 2(tp-1)/tp x bytes
    over the link bandwidth plus a fixed latency each. UNCALIBRATED: no TP > 1 measurement.

Input: the scheduler's StepBatch (kvplan/perf/batch.py: prefill chunks + decode count and their
summed/maximum context), or per-request (num_new_tokens, num_computed_tokens) pairs. Cheap: the
model is precomputed once (StepModel); a step costs a loop over its prefill chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Sequence

from kvplan.errors import KvplanError
from kvplan.gpus import GPUProfile
from kvplan.model.spec import LayerKind, ModelSpec
from kvplan.perf import gpu_perf
from kvplan.perf.coefficients import Efficiency, resolve
from kvplan.perf.recurrent import recurrent_cost, recurrent_layers

_RECURRENT_NAMES = {"mamba1": "Mamba", "mamba2": "Mamba-2", "gdn": "Gated DeltaNet (linear-attention)",
                    "short_conv": "short-conv"}

# Parts of weights.weight_bytes_per_rank's tally that are not streamed by every step.
_NOT_READ = frozenset({"embed_tokens", "embed_positions", "rotary_cache", "vision", "fp8_kv_overhead", "vllm_extra", "mla_absorbed"})
UNCALIBRATED = ("uncalibrated: efficiency priors, no fit for this GPU's architecture (compute capability) under this "
                "or an earlier vLLM version")
QUANT_UNFITTED = ("{dtype} GEMMs: the coefficients were fitted on bf16 runs only; on the held-out Llama-3.1-70B "
                  "online-FP8 record kvplan's TPOT was 10-15 % low and its throughput 9-22 % high")
EAGER_UNCHECKED = ("--enforce-eager: every step is launched kernel by kernel; its launch time was fitted on the "
                   "ungraphed steps of CUDA-graph runs and checked on one 4-layer eager record only")
TP_UNCALIBRATED = "TP > 1: the all-reduce term is uncalibrated (only TP = 1 was measured)"
HYBRID_UNCALIBRATED = ("hybrid model: its {kind} layers' state traffic and scan are costed from bytes and FLOPs "
                       "(kvplan/perf/recurrent.py) but uncalibrated: no hybrid model is in any fit")


@dataclass(frozen=True, slots=True)
class AttentionGroup:
    """Attention layers that cost the same per token (one TP rank).

    Attributes:
        layers: how many layers.
        kv_bytes_per_token: K+V (or MLA latent) bytes of one token in one layer.
        window: tokens a query sees (sliding window / attention chunk), 0 = the whole context.
        prefill_flops_per_pair: FLOPs of one (query, key) pair in one layer, prompt chunks.
        decode_flops_per_pair: the same for decodes.
    """

    layers: int
    kv_bytes_per_token: int
    window: int
    prefill_flops_per_pair: int
    decode_flops_per_pair: int


@dataclass(frozen=True, slots=True)
class StepTerms:
    """One step's named terms (ms unless named otherwise) and the quantities behind them."""

    weights_ms: float
    linear_compute_ms: float
    kv_ms: float
    attention_compute_ms: float
    allreduce_ms: float
    overhead_ms: float
    total_ms: float
    weight_bytes: float
    kv_bytes: float
    linear_flops: float
    attention_flops: float
    experts_touched: float
    tokens: int
    requests: int
    expert_weights_ms: float = 0.0
    expert_compute_ms: float = 0.0

    @property
    def linear_ms(self) -> float:
        """The linear phase: max(dense weights, dense GEMMs) + max(expert weights, expert GEMMs)
        (the routed experts' grouped GEMMs are kernels of their own; 0 without MoE)."""
        return (max(self.weights_ms - self.expert_weights_ms, self.linear_compute_ms - self.expert_compute_ms)
                + max(self.expert_weights_ms, self.expert_compute_ms))

    @property
    def attention_ms(self) -> float:
        """The attention phase: max(kv_ms, attention_compute_ms)."""
        return max(self.kv_ms, self.attention_compute_ms)


def causal_pairs(n: int, c: int, window: int) -> int:
    """(query, key) pairs of ``n`` new tokens after ``c`` computed ones, each query seeing at most
    ``window`` keys (0 = unlimited): sum over i = 1..n of min(c + i, window)."""
    if n <= 0:
        return 0
    if not window or c + n <= window:
        return n * c + n * (n + 1) // 2
    if c >= window:
        return n * window
    m = window - c  # queries i = 1..m still see c + i <= window keys
    return m * c + m * (m + 1) // 2 + (n - m) * window


def expected_experts(tokens: int, num_experts: int, top_k: int) -> float:
    """Expected distinct experts of one MoE layer that ``tokens`` tokens route to, each picking
    ``top_k`` of ``num_experts`` uniformly: E x (1 - (1 - k/E)^T)."""
    if tokens <= 0 or num_experts <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


@dataclass(frozen=True)
class StepModel:
    """The precomputed sizes and peaks of one (model, GPU, engine args); call ``step_ms``.

    Attributes (per TP rank):
        dense_weight_bytes: non-expert weight bytes read every step.
        expert_bytes: bytes of one expert summed over the MoE layers (0 without MoE).
        num_experts / top_k: routed experts and experts per token (0 without MoE).
        dense_params: non-expert parameters every token goes through (lm_head excluded).
        expert_params: parameters of one expert summed over the MoE layers.
        lm_head_params: output projection parameters (applied once per request).
        groups: the attention layer groups.
        state_bytes_per_request: recurrent-layer state bytes read + written per request per step.
        allreduces: all-reduces per step (0 at TP = 1); allreduce_bytes_per_token: hidden x dtype bytes.
        bandwidth / matmul_flops / attention_flops / link_bandwidth: peaks (bytes/s, FLOP/s).
        tp: tensor_parallel_size; matmul_dtype: the GEMMs' dtype.
        efficiency: the coefficients; labels: what the result must say about itself.
        host_overlap: async scheduling: a step lasts max(GPU, host) instead of their sum.
        num_layers: decoder layers (the per-layer fixed GPU time counts them).
        num_moe_layers: of them with routed experts (the MoE layer's extra fixed GPU time).
        cuda_graph_max_tokens: the most scheduled tokens vLLM runs as a captured CUDA graph (0:
            --enforce-eager, no graphs); a larger step is launched kernel by kernel and lasts at
            least the eager launch time (eager_layer_us, eager_moe_layer_us).
    """

    name: str
    gpu_id: str
    tp: int
    dense_weight_bytes: int
    expert_bytes: float
    num_experts: int
    top_k: int
    dense_params: int
    expert_params: float
    lm_head_params: int
    groups: tuple[AttentionGroup, ...]
    state_bytes_per_request: int
    allreduces: int
    allreduce_bytes_per_token: int
    bandwidth: float
    matmul_flops: float
    attention_flops: float
    link_bandwidth: float
    matmul_dtype: str
    efficiency: Efficiency
    approximations: tuple[str, ...] = ()
    host_overlap: bool = False
    num_layers: int = 0
    num_moe_layers: int = 0
    cuda_graph_max_tokens: int = 0
    scan_prefill_flops_per_token: float = 0.0
    scan_decode_flops_per_token: float = 0.0
    recurrent_kind: str = ""

    @property
    def hybrid(self) -> bool:
        """The model has recurrent (Mamba / GDN / short-conv) layers."""
        return bool(self.recurrent_kind)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every caveat a prediction from this model carries (empty = calibrated and exact)."""
        e = self.efficiency
        out = [] if e.calibrated else [e.transfer] if e.status == "transferred" and e.transfer else [UNCALIBRATED]
        out.extend(e.transfer_notes)
        if self.tp > 1:
            out.append(TP_UNCALIBRATED)
        if self.cuda_graph_max_tokens == 0:
            out.append(EAGER_UNCHECKED)
        if e.from_fit and self.matmul_dtype not in ("bf16", "fp16"):
            out.append(QUANT_UNFITTED.format(dtype=self.matmul_dtype))
        if self.hybrid:
            out.append(HYBRID_UNCALIBRATED.format(kind=_RECURRENT_NAMES.get(self.recurrent_kind, self.recurrent_kind)))
        return tuple(out) + self.approximations

    def with_efficiency(self, efficiency: Efficiency) -> "StepModel":
        """The same model with other coefficients (the fitter's loop)."""
        return replace(self, efficiency=efficiency)

    # --- the step ---------------------------------------------------------------------------
    def _raw(self, prefills: Iterable[Any], num_decodes: int, decode_context: int, max_decode_context: int):
        """Bytes and FLOPs of a step: (dense weight_bytes, dense linear_flops, kv_bytes,
        attn_flops, tokens, requests, experts_touched, expert weight bytes, expert FLOPs)."""
        tokens = num_decodes
        requests = num_decodes
        kv = 0.0
        attn = 0.0
        groups = self.groups
        for p in prefills:
            n = p.num_new_tokens
            c = p.num_computed_tokens
            tokens += n
            requests += 1
            for g in groups:
                seen = c + n if not g.window else min(c + n, g.window)
                kv += g.layers * g.kv_bytes_per_token * (seen + n)
                attn += g.layers * g.prefill_flops_per_pair * causal_pairs(n, c, g.window)
        if num_decodes:
            for g in groups:
                if not g.window or max_decode_context <= g.window:
                    seen = decode_context
                else:  # some decodes are past the window: at most window each (upper bound)
                    seen = min(decode_context, num_decodes * g.window)
                kv += g.layers * g.kv_bytes_per_token * (seen + num_decodes)
                attn += g.layers * g.decode_flops_per_pair * seen
        kv += self.state_bytes_per_request * requests
        if self.recurrent_kind:  # the recurrent layers' scan (kvplan/perf/recurrent.py)
            attn += self.scan_prefill_flops_per_token * (tokens - num_decodes) + self.scan_decode_flops_per_token * num_decodes
        touched = expected_experts(tokens, self.num_experts, self.top_k) if self.num_experts else 0.0
        expert_bytes = touched * self.expert_bytes
        expert_flops = 2.0 * self.top_k * self.expert_params * tokens
        linear = 2.0 * self.dense_params * tokens + 2.0 * self.lm_head_params * requests
        return self.dense_weight_bytes, linear, kv, attn, tokens, requests, touched, expert_bytes, expert_flops

    def _allreduce_ms(self, tokens: int) -> float:
        if not self.allreduces or not tokens:
            return 0.0
        ring = 2.0 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link_bandwidth
        return self.allreduces * (ring * 1e3 + self.efficiency.allreduce_latency_us / 1e3)

    def terms(self, prefills: Iterable[Any] = (), num_decodes: int = 0, decode_context_tokens: int = 0,
              max_decode_context: int = 0) -> StepTerms:
        """The named terms of one step.

        Args:
            prefills: prompt chunks, each with ``num_new_tokens`` and ``num_computed_tokens``.
            num_decodes: decode requests (one new token each).
            decode_context_tokens: sum over decodes of num_computed_tokens + 1.
            max_decode_context: the longest decode context (for sliding windows).
        Returns:
            StepTerms in ms; an empty step is 0 ms.
        """
        w, lin, kv, attn, tokens, requests, touched, ew, el = self._raw(prefills, num_decodes, decode_context_tokens, max_decode_context)
        if not requests:
            return StepTerms(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        e = self.efficiency
        bw = self.bandwidth * e.bandwidth_fraction
        dense_w_ms = w / bw * 1e3
        kv_ms = kv / bw * 1e3
        dense_lin_ms = lin / (self.matmul_flops * e.matmul_fraction) * 1e3
        attn_ms = attn / (self.attention_flops * e.matmul_fraction) * 1e3
        exp_w_ms = exp_lin_ms = 0.0
        if ew or el:
            exp_w_ms = ew / (self.bandwidth * e.expert_bandwidth_fraction) * 1e3
            exp_lin_ms = el / (self.matmul_flops * e.expert_matmul_fraction) * 1e3
        ar = self._allreduce_ms(tokens)
        host = e.per_request_us * requests / 1e3
        fixed = e.step_overhead_ms + (e.per_layer_us * self.num_layers + e.moe_layer_us * self.num_moe_layers) / 1e3
        over = fixed + host
        gpu = max(dense_w_ms, dense_lin_ms) + max(exp_w_ms, exp_lin_ms) + max(kv_ms, attn_ms) + ar + fixed
        if tokens > self.cuda_graph_max_tokens:  # launched kernel by kernel: the host's issue time bounds it
            gpu = max(gpu, (e.eager_layer_us * self.num_layers + e.eager_moe_layer_us * self.num_moe_layers) / 1e3)
        total = max(gpu, host) if self.host_overlap else gpu + host
        return StepTerms(dense_w_ms + exp_w_ms, dense_lin_ms + exp_lin_ms, kv_ms, attn_ms, ar, over, total, w + ew, kv,
                         lin + el, attn, touched, tokens, requests, exp_w_ms, exp_lin_ms)

    def step_ms(self, prefills: Iterable[Any] = (), num_decodes: int = 0, decode_context_tokens: int = 0,
                max_decode_context: int = 0) -> float:
        """Milliseconds of one step (``terms(...).total_ms``)."""
        return self.terms(prefills, num_decodes, decode_context_tokens, max_decode_context).total_ms

    def seconds(self, batch: Any) -> float:
        """Seconds of one step of the scheduler's StepBatch (kvplan/perf/batch.py: ``prefills``,
        ``num_decodes``, ``decode_context_tokens``, ``max_decode_context``); the emulator's
        ``step_time`` callable."""
        return self.step_ms(batch.prefills, batch.num_decodes, batch.decode_context_tokens, batch.max_decode_context) / 1e3

    def request_terms(self, requests: Sequence[tuple[int, int]]) -> StepTerms:
        """The terms of a step given per request as (num_new_tokens, num_computed_tokens); a
        request with one new token after a computed context is a decode, the rest prompt chunks."""
        prefills = []
        nd = ctx = mx = 0
        for n, c in requests:
            if n == 1 and c > 0:
                nd += 1
                ctx += c + 1
                mx = max(mx, c + 1)
            else:
                prefills.append(Chunk(n, c))
        return self.terms(prefills, nd, ctx, mx)

    def fit_row(self, prefills: Iterable[Any] = (), num_decodes: int = 0, decode_context_tokens: int = 0,
                max_decode_context: int = 0) -> tuple[float, float, int, float]:
        """The step as a linear function of the fitted coefficients, with each phase's bound side
        chosen at the current coefficients: (bandwidth_ms, matmul_ms, requests, fixed_ms), where
        step_ms = bandwidth_ms / bandwidth_fraction + matmul_ms / matmul_fraction
        + step_overhead_ms + per_request_us x requests / 1000 + fixed_ms (all-reduce).
        A host-bound step under ``host_overlap`` is (0, 0, requests, -step_overhead_ms): only the
        per-request term counts (the offset cancels the overhead at the current coefficients,
        so the fitter's fixed point is exact)."""
        t = self.terms(prefills, num_decodes, decode_context_tokens, max_decode_context)
        if not t.requests:
            return 0.0, 0.0, 0, 0.0
        e = self.efficiency
        host = e.per_request_us * t.requests / 1e3
        if self.host_overlap and host > t.total_ms - 1e-12 and host > 0:
            return 0.0, 0.0, t.requests, -e.step_overhead_ms
        b = m = 0.0
        dw, dl = t.weights_ms - t.expert_weights_ms, t.linear_compute_ms - t.expert_compute_ms
        if dw >= dl:
            b += dw * e.bandwidth_fraction
        else:
            m += dl * e.matmul_fraction
        if t.kv_ms >= t.attention_compute_ms:
            b += t.kv_ms * e.bandwidth_fraction
        else:
            m += t.attention_compute_ms * e.matmul_fraction
        # the experts' phase has its own coefficients (fitted through the emulator): a constant here
        return b, m, t.requests, (t.allreduce_ms + max(t.expert_weights_ms, t.expert_compute_ms)
                                  + (e.per_layer_us * self.num_layers + e.moe_layer_us * self.num_moe_layers) / 1e3)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A prompt chunk: ``num_new_tokens`` computed after ``num_computed_tokens`` (same fields as
    the scheduler's PrefillChunk)."""

    num_new_tokens: int
    num_computed_tokens: int


def runner_change(spec: ModelSpec, fitted_version: str, rules: Any) -> str | None:
    """What differs between how vLLM ``fitted_version`` and ``rules.version`` run ``spec``'s
    steps, for a transferred fit's label: the model runner each picks (vX_Y/runner.py
    uses_v2_runner, restating each version's config/vllm.py use_v2_model_runner: older versions
    give MoE and hybrid models the V1 runner, newer ones every model V2); None when both pick the
    same."""
    from kvplan.engines.vllm import versions

    if fitted_version not in versions.SUPPORTED:
        return None
    old = versions.select(fitted_version).runner.uses_v2_runner(spec)
    new = rules.runner.uses_v2_runner(spec)
    if old == new:
        return None
    name = lambda v2: "V2" if v2 else "V1"  # noqa: E731
    return (f"{spec.name} runs vLLM {rules.version}'s {name(new)} model runner but ran {fitted_version}'s {name(old)} "
            f"(config/vllm.py use_v2_model_runner): the fit's host-side and eager-launch terms are {name(old)}'s")


def moe_tile_change(spec: ModelSpec, gpu: GPUProfile, tp: int, quant: Any, rules: Any, fit_gpu: str,
                    fit_version: str) -> str | None:
    """For an unquantized MoE model, whether vLLM runs its routed experts with a tuned Triton
    tile config on one of (the fit's GPU under the fit's version, ``gpu`` under ``rules``) and
    the default tiles on the other (vX_Y/runner.py has_tuned_moe_config: vLLM fused_moe.py
    get_config_file_name). The expert fractions were fitted on the fit's kernel, so the label
    names the change; None when both are the same, the model is not MoE or is quantized (not
    checked), or a version lacks the table."""
    from kvplan.engines.vllm import versions
    from kvplan.gpus import bundled_profiles

    moe = spec.moe
    if moe is None or (quant is not None and quant.method != "none") or fit_version not in versions.SUPPORTED:
        return None
    here = getattr(rules.runner, "has_tuned_moe_config", None)
    there = getattr(versions.select(fit_version).runner, "has_tuned_moe_config", None)
    fit_prof = bundled_profiles().get(fit_gpu)
    if here is None or there is None or fit_prof is None or not fit_prof.reported_name or not gpu.reported_name:
        return None
    n = moe.moe_intermediate_size // tp
    a, b = there(moe.num_experts, n, fit_prof.reported_name), here(moe.num_experts, n, gpu.reported_name)
    if a == b:
        return None
    name = lambda t: "a tuned" if t else "the default (untuned)"  # noqa: E731
    return (f"routed experts: vLLM {rules.version} runs {name(b)} Triton MoE tile config for E={moe.num_experts},N={n} on "
            f"{gpu.id}, the fit ran {name(a)} one on {fit_gpu} (fused_moe/configs): the fitted expert-GEMM "
            "fractions may not carry over")


def transfer_caveats(spec: ModelSpec, gpu: GPUProfile, tp: int, quant: Any, rules: Any, fit_gpu: str,
                     fit_version: str) -> list[str]:
    """What a transferred fit's labels add for this model: the model-runner change between the
    versions (runner_change) and the MoE tile-config change between the GPUs (moe_tile_change)."""
    out = [runner_change(spec, fit_version, rules), moe_tile_change(spec, gpu, tp, quant, rules, fit_gpu, fit_version)]
    return [x for x in out if x]


def _window(spec: ModelSpec, kind: LayerKind) -> int:
    if kind == LayerKind.SLIDING:
        return spec.sliding_window or 0
    if kind == LayerKind.CHUNKED:
        return spec.attention_chunk_size or 0
    return 0


def step_model(spec: ModelSpec, gpu: GPUProfile, args: Any = None, *, vllm_version: str | None = None,
               efficiency: Efficiency | None = None, async_scheduling: bool | None = None) -> StepModel:
    """Precompute the step-time model of ``spec`` on ``gpu`` under ``args``.

    Args:
        spec: the parsed model.
        gpu: the GPU profile (its ``perf`` block: bandwidth, dense TFLOPS, link).
        args: EngineArgs (kvplan.engines.vllm.args); None = defaults. Reads dtype, quantization,
            kv_cache_dtype, tensor_parallel_size, pipeline_parallel_size.
        vllm_version: whose rules size the weights and KV cache (None = the default version).
        efficiency: coefficients; None = fitted for (gpu.id, version) if bundled, else the priors.
        async_scheduling: whether host work overlaps the GPU (max instead of sum); None = the
            version's scheduler default (engines/vllm/vX_Y/scheduler.py POLICY.async_scheduling).
    Returns:
        a StepModel.
    Raises:
        KvplanError: the GPU profile lacks a number the model needs, pipeline_parallel_size > 1,
            or the estimate's own refusals for dtype/quantization.
    Rule sources: the version's weights.weight_bytes_per_rank / kv_spec (sizes), the vLLM
    version's V1 GPU model runner (one forward pass per step, logits of one position per request).
    """
    from kvplan.engines.vllm import versions
    from kvplan.engines.vllm.args import EngineArgs

    rules = versions.select(vllm_version) if vllm_version else versions.default()
    args = args if args is not None else EngineArgs()
    if args.pipeline_parallel_size and args.pipeline_parallel_size > 1:
        raise KvplanError("--pipeline-parallel-size: the step-time model covers one pipeline stage; use 1")
    tp = args.tensor_parallel_size or 1
    dtype = rules.defaults.resolve_dtype(args.dtype, spec.dtype, bf16_supported=gpu.bf16_supported)
    db = rules.kv_spec.DTYPE_BYTES[dtype]
    quant = rules.quantization.effective_quant(spec, args, gpu, [])
    kv_dtype = args.kv_cache_dtype
    if kv_dtype == "auto" and quant is not None and quant.kv_cache_fp8:
        kv_dtype = "fp8"
    kv_b = rules.kv_spec.kv_dtype_bytes(kv_dtype, dtype)
    machete = (gpu.compute_capability or "").startswith("9.")
    tally = rules.weights.weight_bytes_per_rank(spec, tensor_parallel_size=tp, dtype_bytes=db, quant=quant, machete=machete).parts
    params = rules.weights.weight_bytes_per_rank(spec, tensor_parallel_size=tp, dtype_bytes=1, quant=None).parts

    approx: list[str] = []
    lm_bytes = tally.get("lm_head", 0)
    lm_params = params.get("lm_head", 0)
    if not lm_params:  # tied embeddings: the embedding matrix is the output projection
        lm_bytes, lm_params = tally.get("embed_tokens", 0), params.get("embed_tokens", 0)
    dense_bytes = sum(v for k, v in tally.items() if k not in _NOT_READ and k not in ("experts", "lm_head")) + lm_bytes
    dense_params = sum(v for k, v in params.items() if k not in _NOT_READ and k not in ("experts", "lm_head"))
    moe = spec.moe
    experts = moe.num_experts if moe is not None and tally.get("experts") else 0
    top_k = moe.top_k if experts else 0

    a = spec.attention
    q_heads = a.num_attention_heads // tp
    groups: dict[tuple, int] = {}
    for i, kind in enumerate(spec.layer_kinds):
        if kind == LayerKind.MLA and spec.mla is not None:
            m = spec.mla
            key = (rules.kv_spec.mla_per_token_bytes(spec, kv_b), 0,
                   2 * q_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim),
                   2 * q_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim))
        elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
            la = spec.attention_of(i)  # the layer's own heads and head sizes (ModelSpec.layer_attention)
            flops = 2 * (la.num_attention_heads // tp) * (la.head_dim + la.head_dim_v)
            key = (rules.kv_spec.attention_per_token_bytes(spec, tp, kv_b, layer=i), _window(spec, kind), flops, flops)
            if kind == LayerKind.CHUNKED:
                approx.append("chunked local attention is costed as a sliding window of the chunk size (upper bound)")
        elif kind in (LayerKind.LINEAR, LayerKind.MAMBA):
            continue  # recurrent: kvplan/perf/recurrent.py
        else:
            raise KvplanError(f"{spec.name}: layer kind {kind.value!r} has no step-time rule")
        groups[key] = groups.get(key, 0) + 1
    state_one = 0
    if recurrent_layers(spec):  # the state as the version sizes it (the SSM state's own dtype where the family names one)
        ssm = rules.kv_spec.ssm_state_dtype_bytes(spec, db)
        state_one = rules.kv_spec.mamba_state_bytes(spec, tp, db, ssm_dtype_bytes=ssm)
    rec = recurrent_cost(spec, tp, state_one)
    mm_dtype, note = gpu_perf.matmul_dtype(dtype, quant, gpu)
    if note:
        approx.append(note)
    act = "fp16" if dtype == "float16" else "bf16"
    eff = efficiency if efficiency is not None else resolve(
        gpu.id, gpu.compute_capability, rules.version,
        runner_note=lambda g, v: transfer_caveats(spec, gpu, tp, quant, rules, g, v))
    layers = spec.num_hidden_layers
    return StepModel(
        name=spec.name,
        gpu_id=gpu.id,
        tp=tp,
        dense_weight_bytes=int(dense_bytes),
        expert_bytes=tally.get("experts", 0) / experts if experts else 0.0,
        num_experts=experts,
        top_k=top_k,
        dense_params=int(dense_params),
        expert_params=params.get("experts", 0) / experts if experts else 0.0,
        lm_head_params=int(lm_params),
        groups=tuple(AttentionGroup(n, *key) for key, n in groups.items()),
        state_bytes_per_request=rec.state_bytes_per_request,
        scan_prefill_flops_per_token=rec.prefill_flops_per_token,
        scan_decode_flops_per_token=rec.decode_flops_per_token,
        recurrent_kind=rec.kind,
        allreduces=2 * layers if tp > 1 else 0,
        allreduce_bytes_per_token=spec.hidden_size * db,
        bandwidth=gpu_perf.memory_bandwidth(gpu),
        matmul_flops=gpu_perf.matmul_flops(gpu, mm_dtype),
        attention_flops=gpu_perf.matmul_flops(gpu, act),
        link_bandwidth=gpu_perf.link_bandwidth(gpu) if tp > 1 else math.inf,
        matmul_dtype=mm_dtype,
        efficiency=eff,
        approximations=tuple(dict.fromkeys(approx)),
        host_overlap=(rules.scheduler.POLICY.async_scheduling if rules.scheduler is not None else False)
        if async_scheduling is None else bool(async_scheduling),
        num_layers=layers,
        num_moe_layers=sum(1 for x in spec.moe_layers if x) if experts else 0,
        cuda_graph_max_tokens=rules.runner.cuda_graph_max_tokens(args, gpu.compute_capability),
    )
