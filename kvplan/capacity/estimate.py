"""Compose a Plan = f(ModelSpec, GPUProfile, EngineArgs) with the selected vLLM version's rules.

The planner resolves the effective engine arguments the way vLLM would (defaults that depend on
the GPU, dtype, quantization, block size), then for every pipeline stage computes the memory
budget, the KV-cache layout and the block count, and takes the minimum over stages as vLLM does
(v1/core/kv_cache_utils.py get_kv_cache_configs). Pure: no I/O.

The version's rules (engines/vllm/versions.py) are selected once, from ``args.vllm_version``,
and passed to every step; outcomes are typed (capacity/outcomes.py) beside their message text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from kvplan.capacity.outcomes import (  # noqa: F401
    Approximation,
    ApproximationKind,
    EstimateRefusal,
    Failure,
    Note,
    NoteKind,
    RefusalKind,
    StartOutcome,
)
from kvplan.engines.vllm import versions
from kvplan.engines.vllm.args import EngineArgs
from kvplan.engines.vllm.rules import Evidence, VllmRules
from kvplan.engines.vllm.versions import VersionChoice
from kvplan.gpus import GPUProfile
from kvplan.model.spec import LayerKind, ModelSpec

# The default version's rule modules, for the types below and for importers that read them from
# here (QUANTIZATIONS, VLLM_ONLY_KV_CACHE_DTYPES ...); plan() uses the selected rules.
_DEFAULT = versions.default()
act_mod = _DEFAULT.activation
memory = _DEFAULT.memory
KVCacheGroup = _DEFAULT.allocator.KVCacheGroup
KVCacheLayout = _DEFAULT.allocator.KVCacheLayout
QUANTIZATIONS = _DEFAULT.quantization.QUANTIZATIONS
VLLM_ONLY_KV_CACHE_DTYPES = _DEFAULT.quantization.VLLM_ONLY_KV_CACHE_DTYPES
VLLM_DTYPES = _DEFAULT.quantization.VLLM_DTYPES
VLLM_QUANTIZATION_METHODS = _DEFAULT.quantization.VLLM_QUANTIZATION_METHODS
QUANT_MIN_CAPABILITY = _DEFAULT.quantization.QUANT_MIN_CAPABILITY
CHECKPOINT_GAP = _DEFAULT.quantization.CHECKPOINT_GAP
cuda_graph_headroom_bytes = _DEFAULT.memory.cuda_graph_headroom_bytes
allow_long_max_model_len = _DEFAULT.defaults.allow_long_max_model_len


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage (the figures are per GPU of that stage)."""

    pipeline_rank: int
    layers: range
    budget: memory.MemoryBudget
    weights_breakdown: dict[str, int]
    activation: act_mod.ActivationEstimate
    layout: KVCacheLayout
    num_blocks: int
    bytes_for_max_len: int


@dataclass(frozen=True)
class Plan:
    """What vLLM would do with this model, GPU and flags.

    Attributes:
        effective: the resolved engine arguments (every default filled in).
        stages: one StagePlan per pipeline stage.
        num_gpu_blocks: min over stages (vLLM's num_gpu_blocks).
        block_size: tokens per block of the first group (hybrid models may raise it).
        page_size_bytes: bytes of one page of one layer (uniform across groups).
        bytes_per_token: KV bytes one token costs across all layers on one GPU (full-attention
            equivalent: every layer that stores per-token KV).
        gpu_kv_cache_tokens / max_concurrency: as vLLM logs them at max_model_len.
        fits: vLLM would start (``outcome is StartOutcome.STARTS``).
        failure: why it would not start (None when it fits), a sentence for people: the message
            of ``failure_info``.
        outcome: the typed start-up outcome (StartOutcome); branch on this, never on failure's text.
        warnings: what the user can act on (shown in the table).
        notes: kvplan's own uncertainty the user cannot act on (an unverified constant, a partial
            bundled snapshot): `estimate --verbose` and the JSON ``notes`` show them.
        largest_max_model_len: the largest --max-model-len that fits (vLLM's own estimate).
        binding_limit: what caps concurrency: "kv_cache" or "max_num_seqs".
        failure_info: the typed failure (kind = outcome, message = failure, flag), None when it fits.
        remarks: the typed warnings and notes (kind, message) in order; ``warnings`` are those
            not ``about_kvplan``, ``notes`` the others.
        rules: the vLLM version's rules the estimate used.
        approximations: why the figures are approximate (the spec's: an architecture without a
            kvplan family, sized from the standard keys); empty when exact.
        evidence: what the numbers stand on (rules.evidence_for): the real starts of the
            version and the rules used that none of them checked.
        version_choice: which vLLM version and why (versions.VersionChoice), set by the caller
            that chose it (the CLI); None = the version was given to the API directly.
    """

    spec: ModelSpec
    gpu: GPUProfile
    args: EngineArgs
    effective: dict
    stages: list[StagePlan]
    num_gpu_blocks: int
    block_size: int
    page_size_bytes: int
    bytes_per_token: int
    gpu_kv_cache_tokens: int
    max_concurrency: float
    max_in_flight_tokens: int
    fits: bool
    failure: str | None
    largest_max_model_len: int | None
    binding_limit: str
    warnings: list[str] = field(default_factory=list)
    runner: str = "v2"
    outcome: StartOutcome = StartOutcome.STARTS
    notes: list[str] = field(default_factory=list)
    allow_long_max_model_len: bool = False
    failure_info: Failure | None = None
    remarks: tuple[Note, ...] = ()
    rules: VllmRules | None = field(default=None, repr=False, compare=False)
    approximations: tuple[Approximation, ...] = ()
    evidence: Evidence | None = None
    version_choice: VersionChoice | None = None

    @property
    def version_label(self) -> str:
        """"vLLM X.Y.Z (installed vllm X.Y.Z)": the version used and why."""
        if self.version_choice is not None:
            return self.version_choice.label()
        return f"vLLM {self.effective['vllm_version']}"

    @property
    def exact(self) -> bool:
        """kvplan has rules for every layer and weight of the model (no approximations); every
        output shows it (estimate JSON ``exact`` / ``approximate``, the table, plan, check)."""
        return not self.approximations

    @property
    def env(self) -> dict[str, str]:
        """The planner environment that gives this plan again (for re-planning with other flags)."""
        return {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if self.allow_long_max_model_len else {}

    def start_env(self, max_model_len: int | None = None) -> dict[str, str]:
        """The environment vLLM must start with for this plan: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
        when ``max_model_len`` (tokens; default the plan's effective one) is above the model's
        derived max length, {} otherwise. vLLM config/model.py _get_and_verify_max_len
        refuses such a length unless the variable is set. Raises nothing."""
        mml = self.effective["max_model_len"] if max_model_len is None else max_model_len
        return {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if mml > self.spec.derived_max_model_len else {}

    @property
    def worst_stage(self) -> StagePlan:
        return min(self.stages, key=lambda s: s.num_blocks)

    @property
    def layout(self) -> KVCacheLayout:
        return self.stages[0].layout


@lru_cache(maxsize=8192)
def _weights_cached(
    rules: VllmRules, spec: ModelSpec, tp: int, rank: int, pp: int, dtype_bytes: int, quant, fp8_kv: bool,
    correction: int, machete: bool, max_num_batched_tokens: int = 0
):
    """Weight tally of one stage as (part, bytes) pairs; cached (ModelSpec is hashable)."""
    w = rules.weights.weight_bytes_per_rank(
        spec,
        tensor_parallel_size=tp,
        pipeline_rank=rank,
        pipeline_parallel_size=pp,
        dtype_bytes=dtype_bytes,
        quant=quant,
        fp8_kv_cache=fp8_kv,
        machete=machete,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    layers = rules.weights.pp_layer_ranges(spec.num_hidden_layers, pp)[rank]
    if correction:
        w.add("checkpoint_correction", correction * len(layers) // spec.num_hidden_layers)
    return tuple(w.parts.items())


@lru_cache(maxsize=8192)
def _activation_cached(rules: VllmRules, spec: ModelSpec, **kw):
    """The version's activation peak of one stage; cached."""
    return rules.activation.activation_peak(spec, **kw)


@lru_cache(maxsize=2048)
def _layout_cached(
    rules: VllmRules, spec: ModelSpec, tp: int, block_size: int, kv_b: int, dtype_bytes: int, disable_hybrid: bool
):
    """(layer specs, effective block size, global KV-cache layout) of one rank; cached."""
    layer_specs, eff_block = rules.kv_spec.layer_cache_specs(
        spec,
        tensor_parallel_size=tp,
        block_size=block_size,
        kv_dtype_bytes_=kv_b,
        model_dtype_bytes=dtype_bytes,
    )
    return tuple(layer_specs), eff_block, rules.allocator.build_layout(
        layer_specs, disable_hybrid_kv_cache_manager=disable_hybrid
    )


def _tp_refusal(spec: ModelSpec, tp: int) -> str | None:
    """Why vLLM refuses ``--tensor-parallel-size tp`` for this model (one line naming the flag),
    or None when it accepts it. The one predicate behind both the refusal and its hint's list of
    valid sizes (vLLM model_executor/layers/linear.py + attention head sharding)."""
    heads = spec.attention.num_attention_heads
    if heads % tp:
        return f"--tensor-parallel-size {tp}: must divide the model's num_attention_heads ({heads})"
    kv = spec.attention.num_key_value_heads
    if not spec.uses_mla and tp > kv and tp % kv:
        return f"--tensor-parallel-size {tp}: larger than num_key_value_heads ({kv}) and not a multiple of it"
    if not spec.uses_mla and tp <= kv and kv % tp:
        return f"--tensor-parallel-size {tp}: must divide num_key_value_heads ({kv})"
    if spec.moe is not None and spec.moe.moe_intermediate_size % tp:
        return f"--tensor-parallel-size {tp}: must divide the expert intermediate size ({spec.moe.moe_intermediate_size})"
    return None


def multimodal_encoder_reason(spec: ModelSpec) -> str:
    """The one line saying a multimodal model's encoder profile is not modelled (Plan warning
    and Approximation reason alike)."""
    return (
        f"{spec.architecture} is multimodal: vLLM also profiles its vision encoder on the largest image "
        "batch, which kvplan does not model; the activation peak may be higher and the KV cache smaller"
    )


def estimate_approximations(spec: ModelSpec, limit_mm_per_prompt: str | None, rules: VllmRules) -> tuple[Approximation, ...]:
    """Why an estimate of ``spec`` with ``--limit-mm-per-prompt`` (normalized JSON or None) under
    ``rules`` (a version's VllmRules) is not exact: the model parse's reasons
    (spec.approximations), then the memory terms the estimate leaves unmodelled, each also a
    warning or note of the estimate:

    * a multimodal model not run text-only (``--limit-mm-per-prompt`` 0 for every modality,
      weights.text_only): vLLM profiles its vision encoder (vLLM v1/worker/gpu_model_runner.py
      profile_run, both supported versions, the encoder's dummy batch), which kvplan does
      not model;
    * a bundled config snapshot that is not complete (sources/bundled.py find_bundled): keys it
      lacks take transformers' defaults;
    * an architecture the version serves from model code kvplan's rules were not checked against
      (the rules' ``unread_implementations``).

    Returns: the reasons, empty when the estimate is exact. Raises nothing."""
    out = list(spec.approximations)
    if spec.is_multimodal and not rules.weights.text_only(spec, limit_mm_per_prompt):
        out.append(Approximation(kind=ApproximationKind.UNMODELLED_MEMORY, reason=multimodal_encoder_reason(spec)))
    out += [Approximation(kind=ApproximationKind.PARTIAL_SNAPSHOT, reason=n) for n in spec.snapshot_notes]
    unread = getattr(rules, "unread_implementations", {}).get(spec.architecture)
    if unread:
        out.append(Approximation(kind=ApproximationKind.PARTIAL_RULES, reason=unread))
    return tuple(out)


def valid_tensor_parallel_sizes(spec: ModelSpec, most: int = 64) -> list[int]:
    """The sizes 1..min(most, num_attention_heads) that _tp_refusal accepts (for hints)."""
    heads = spec.attention.num_attention_heads
    return [d for d in range(1, min(heads, most) + 1) if _tp_refusal(spec, d) is None]


def _block_size_note(block_size: int, kv_dtype: str, gpu: GPUProfile, default_block_size: int) -> str:
    """Why the default block size is not vLLM's usual 16 (see the version's
    defaults.default_block_size: vLLM picks the MLA attention backend's preferred block size)."""
    cc = gpu.compute_capability or "9.0"
    backend = "FLASHMLA" if cc.startswith("9.") and kv_dtype.startswith("fp8") else "FLASHINFER_MLA"
    return (
        f"block_size {block_size} (not the usual {default_block_size}): on compute capability {cc} "
        f"with --kv-cache-dtype {kv_dtype}, vLLM picks the {backend} attention backend for this MLA model and "
        f"uses its preferred block size; pass --block-size to choose another"
    )


def _validate_parallel(spec: ModelSpec, tp: int, pp: int) -> None:
    why = _tp_refusal(spec, tp)
    if why is not None:
        valid = valid_tensor_parallel_sizes(spec)
        raise EstimateRefusal(
            RefusalKind.INVALID_PARALLEL,
            why,
            hint=("valid sizes: " + ", ".join(map(str, valid))) if valid else None,
            flag=why.split(" ", 1)[0],
        )
    if pp > spec.num_hidden_layers:
        raise EstimateRefusal(
            RefusalKind.INVALID_PARALLEL,
            f"--pipeline-parallel-size {pp}: more stages than the model's {spec.num_hidden_layers} layers",
            flag="--pipeline-parallel-size",
        )


def _project(layout: KVCacheLayout, layers: range, rules: VllmRules) -> KVCacheLayout:
    """The global grouping restricted to one pipeline stage's layers (vLLM
    _project_kv_cache_groups_to_worker + get_kv_cache_config_from_groups)."""
    keep = set(layers)
    if layout.mixed_single_group:
        return layout  # handled by recomputing on the stage's layers
    groups = []
    for g in layout.groups:
        members = tuple(i for i in g.layer_indices if i in keep)
        groups.append(
            rules.allocator.KVCacheGroup(
                kind=g.kind,
                num_layers=len(members),
                padding_layers=0,
                block_size=g.block_size,
                page_size_bytes=g.page_size_bytes,
                sliding_window=g.sliding_window,
                chunk_size=g.chunk_size,
                layer_indices=members,
            )
        )
    size = max((g.num_layers for g in groups), default=0)
    groups = [
        rules.allocator.KVCacheGroup(**{**g.__dict__, "padding_layers": size - g.num_layers})
        for g in groups
        if g.num_layers or size
    ]
    page = layout.groups[0].page_size_bytes if layout.groups else 1
    return rules.allocator.KVCacheLayout(groups=tuple(groups), group_size=size, bytes_per_block=max(1, page * size))


def plan(spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, env: Mapping[str, str] | None = None) -> Plan:
    """Predict vLLM's KV-cache allocation for ``spec`` on ``gpu`` with ``args``.

    ``env``: the environment vLLM would start with (only VLLM_ALLOW_LONG_MAX_MODEL_LEN is read;
    None = unset). The planner never reads os.environ itself.

    Returns:
        a Plan (per-GPU figures; block counts are what every GPU allocates).
    Raises:
        KvplanError: an argument vLLM would reject before profiling (exit 2).
    Rule source: the rules of ``args.vllm_version`` (engines/vllm/versions.py select), chosen
    here once and passed down.
    """
    rules = versions.select(args.vllm_version)
    approximations = estimate_approximations(spec, args.limit_mm_per_prompt, rules)
    defaults, runner, memory, quantization = rules.defaults, rules.runner, rules.memory, rules.quantization
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    _validate_parallel(spec, tp, pp)
    # What parsing, the model source and the GPU profile already know is uncertain comes first.
    # A partial bundled snapshot (sources/bundled.py) is kvplan's own uncertainty, not the user's
    # to fix: a note, not a warning (Note.about_kvplan).
    remarks: list[Note] = [
        Note(NoteKind.BUNDLED_SNAPSHOT if n in spec.snapshot_notes else NoteKind.MODEL_SOURCE, n)
        for n in spec.notes
    ]
    remarks += [Note(NoteKind.GPU_PROFILE, w) for w in gpu.warnings]

    def note(kind: NoteKind, message: str) -> None:
        remarks.append(Note(kind, message))

    if rules.weights.text_only(spec, args.limit_mm_per_prompt):
        note(
            NoteKind.MULTIMODAL,
            f"--limit-mm-per-prompt sets every modality of {spec.architecture} ({', '.join(spec.mm_modalities)}) to 0: "
            "vLLM runs it text-only, with no vision tower loaded or profiled",
        )
        spec = spec.model_copy(update={"vision_params": 0, "is_multimodal": False})
    dtype = defaults.resolve_dtype(args.dtype, spec.dtype, bf16_supported=gpu.bf16_supported)
    if dtype == "bfloat16" and not gpu.bf16_supported:
        raise EstimateRefusal(
            RefusalKind.DTYPE,
            f"--dtype bfloat16: {gpu.display_name} does not support bfloat16",
            hint="use --dtype float16",
            flag="--dtype",
        )
    dtype_bytes = rules.kv_spec.DTYPE_BYTES[dtype]
    said: list[str] = []
    quant = quantization.effective_quant(spec, args, gpu, said)
    remarks += [Note(NoteKind.GPTQ_UNQUANTIZED, w) for w in said]

    kv_dtype = args.kv_cache_dtype
    if kv_dtype == "auto" and quant is not None and quant.kv_cache_fp8:
        kv_dtype = "fp8"
    if kv_dtype != "auto" and spec.model_type in rules.kv_cache_dtype_ignored:
        note(
            NoteKind.MODEL_SOURCE,
            f"--kv-cache-dtype {kv_dtype}: vLLM {rules.version}'s {spec.architecture} builds its attention "
            "without the cache config, so its KV cache keeps the model dtype (sized so)"
        )
        kv_dtype = "auto"
    if gpu.is_estimate:
        note(
            NoteKind.GPU_MEMORY_ESTIMATED,
            f"{gpu.display_name}: its CUDA-visible memory is an estimate, not a reading "
            "(see `kvplan gpus`); pass --gpu-memory with torch.cuda.mem_get_info()'s total for exact blocks"
        )
    if kv_dtype.startswith("fp8") and not gpu.fp8_supported:
        note(
            NoteKind.FP8_KV_UNSUPPORTED_GPU,
            f"--kv-cache-dtype {kv_dtype} on {gpu.display_name} (no fp8 tensor cores): vLLM stores fp8 but "
            "attention backends may refuse or run slowly"
        )
    kv_b = rules.kv_spec.kv_dtype_bytes(kv_dtype, dtype)

    # max_model_len
    derived = spec.derived_max_model_len
    limit = spec.max_len_limit  # above the default for longrope models
    auto_fit = args.max_model_len == -1
    if args.max_model_len is None or auto_fit:
        max_model_len = derived
    else:
        max_model_len = args.max_model_len
        if max_model_len > limit and defaults.allow_long_max_model_len(env):
            # vLLM config/model.py _get_and_verify_max_len: with the variable set it logs a
            # warning and keeps the user's length.
            note(
                NoteKind.LONG_MAX_MODEL_LEN,
                f"--max-model-len {max_model_len}: beyond the model's trained length ({limit} tokens); "
                "vLLM accepts it because VLLM_ALLOW_LONG_MAX_MODEL_LEN is set, but positions past "
                f"{limit} may give NaNs (RoPE) or out-of-bounds errors (absolute positions)",
            )
        elif max_model_len > limit:
            raise EstimateRefusal(
                RefusalKind.MAX_MODEL_LEN,
                f"--max-model-len {max_model_len}: larger than the model's limit ({limit} tokens, "
                "from max_position_embeddings and rope scaling); vLLM refuses it",
                hint=f"use --max-model-len {limit} or less (or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in vLLM)",
                flag="--max-model-len",
            )

    # batch defaults
    mbt_default, seqs_default = defaults.batch_defaults(gpu.nvml_total_bytes, gpu.vllm_device_name, args.usage)
    max_num_seqs = args.max_num_seqs or seqs_default
    mbt = defaults.resolve_max_num_batched_tokens(
        user_value=args.max_num_batched_tokens,
        default=mbt_default,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
    )
    if mbt < max_num_seqs:
        raise EstimateRefusal(
            RefusalKind.MAX_NUM_BATCHED_TOKENS,
            f"--max-num-batched-tokens {mbt}: smaller than --max-num-seqs {max_num_seqs}; vLLM refuses it",
            flag="--max-num-batched-tokens",
        )

    block_size = args.block_size or defaults.default_block_size(
        uses_mla=spec.uses_mla, kv_cache_dtype=kv_dtype, compute_capability=gpu.compute_capability,
        sparse_mla_indexer=any(spec.indexer_layers),
    )
    if args.block_size is None and block_size != defaults.DEFAULT_BLOCK_SIZE:
        note(NoteKind.BLOCK_SIZE_BACKEND, _block_size_note(block_size, kv_dtype, gpu, defaults.DEFAULT_BLOCK_SIZE))
    v2 = runner.uses_v2_runner(spec)
    async_sched = True
    max_concurrent_batches = (pp + 1) if (async_sched and v2) else (2 if (async_sched and pp == 1) else pp)
    max_in_flight = max_concurrent_batches * mbt

    layer_specs, eff_block, global_layout = _layout_cached(
        rules,
        spec, tp, block_size, kv_b, dtype_bytes, args.disable_hybrid_kv_cache_manager
    )
    layer_specs = list(layer_specs)
    if eff_block != block_size:
        note(
            NoteKind.BLOCK_SIZE_HYBRID_ALIGNED,
            f"block_size raised from {block_size} to {eff_block} tokens so one attention page holds a "
            "recurrent state (vLLM aligns hybrid models this way)"
        )
    # Map per-layer specs back to layer indices (layers without KV keep no entry).
    kv_layer_idx = [i for i, k in enumerate(spec.layer_kinds) if k != LayerKind.NONE]
    # the decoder layer each cache spec belongs to: one per caching layer, then the extra cache
    # layers some layers own (Falcon-H1's parallel Mamba mixers, DeepSeek-V3.2's indexers, after
    # them in layer_cache_specs in that order)
    spec_owner = kv_layer_idx + [
        i for i, k in enumerate(spec.layer_kinds) if spec.parallel_mamba and k == LayerKind.FULL
    ] + [
        i for i in kv_layer_idx if i < len(spec.indexer_layers) and spec.indexer_layers[i]
    ]
    spec_owner = spec_owner[: len(layer_specs)]

    said = []
    correction = quantization.checkpoint_correction(spec, tp, dtype_bytes, quant, said)
    remarks += [Note(NoteKind.CHECKPOINT_WEIGHTS, w) for w in said]
    machete = (gpu.compute_capability or "").startswith("9.")

    stages: list[StagePlan] = []
    for rank, layers in enumerate(rules.weights.pp_layer_ranges(spec.num_hidden_layers, pp)):
        first, last = rank == 0, rank == pp - 1
        w_parts = dict(
            _weights_cached(
                rules, spec, tp, rank, pp, dtype_bytes, quant, kv_dtype.startswith("fp8"), correction, machete, mbt
            )
        )
        a = _activation_cached(
            rules,
            spec,
            tensor_parallel_size=tp,
            act_dtype_bytes=dtype_bytes,
            max_num_batched_tokens=mbt,
            max_num_seqs=max_num_seqs,
            enforce_eager=args.enforce_eager,
            is_last_pp_rank=last,
            layers=layers,
            sm_count=gpu.sm_count,
            moe_workspace_persists=quant is None or quant.method != "mxfp4",
            fp8_act_quant=quantization.fp8_activation_group(quant),
        )
        cg, cg_applied = runner.cudagraph_bytes(spec, enforce_eager=args.enforce_eager, num_layers=len(layers))
        b = memory.budget(
            total_bytes=gpu.memory_bytes,
            gpu_memory_utilization=args.gpu_memory_utilization,
            weights=sum(w_parts.values()),
            activation_peak=a.peak_bytes,
            # a version whose profile leaves tensors allocated (its activation's ``persistent_bytes``)
            # charges them with the non-torch memory as consumed memory
            non_torch=rules.non_torch_bytes(tp * pp, v1_cudagraphs=not v2 and not args.enforce_eager)
            + getattr(a, "persistent_bytes", 0),
            cudagraph=cg,
            cudagraph_applied=cg_applied,
            kv_cache_memory=args.kv_cache_memory_bytes,
        )
        if pp == 1:
            stage_layout = global_layout
        elif global_layout.mixed_single_group:
            stage_layout = rules.allocator.build_layout([s for o, s in zip(spec_owner, layer_specs) if o in layers])
        else:
            stage_layout = _project(global_layout, layers, rules)
        nb = stage_layout.num_blocks(max(b.kv_cache_bytes, 0))
        stages.append(
            StagePlan(
                pipeline_rank=rank,
                layers=layers,
                budget=b,
                weights_breakdown=w_parts,
                activation=a,
                layout=stage_layout,
                num_blocks=nb,
                bytes_for_max_len=stage_layout.bytes_for_max_len(max_model_len, max_in_flight),
            )
        )

    # auto-fit max_model_len (vLLM _auto_fit_max_model_len): smallest over stages.
    if auto_fit:
        fit = min(
            s.layout.largest_max_model_len(max(s.budget.kv_cache_bytes, 0), derived, max_in_flight) for s in stages
        )
        if fit <= 0:
            max_model_len = 0
        else:
            max_model_len = min(fit, derived)
            if max_model_len < derived:
                note(NoteKind.MAX_MODEL_LEN_REDUCED, f"--max-model-len auto: reduced from {derived} to {max_model_len} tokens to fit")
        stages = [
            StagePlan(**{**s.__dict__, "bytes_for_max_len": s.layout.bytes_for_max_len(max(max_model_len, 1), max_in_flight)})
            for s in stages
        ]

    num_blocks = min(s.num_blocks for s in stages)
    first_layout = stages[0].layout
    page = first_layout.groups[0].page_size_bytes if first_layout.groups else 0
    group0_block = first_layout.groups[0].block_size if first_layout.groups else block_size
    prefix_caching = (
        args.enable_prefix_caching if args.enable_prefix_caching is not None
        else getattr(defaults, "default_prefix_caching", lambda s: not s.is_hybrid)(spec)
    )
    if spec.attention_free:
        # the state group's reported block size (vLLM's mamba_block_size; kv_spec rule)
        group0_block = rules.kv_spec.attention_free_block_size(
            group0_block, max_model_len, enable_prefix_caching=prefix_caching
        )

    # failure modes, in vLLM's order
    failure = None
    largest = None
    for s in stages:
        where = f" on pipeline stage {s.pipeline_rank}" if pp > 1 else ""
        b = s.budget
        if b.requested_bytes > b.free_at_start_bytes and not b.kv_cache_memory_override:
            failure = Failure(
                StartOutcome.UTILIZATION_REFUSED,
                f"--gpu-memory-utilization {args.gpu_memory_utilization}: requests {b.requested_bytes / 2**30:.2f} GiB but "
                f"only about {b.free_at_start_bytes / 2**30:.2f} GiB is free when vLLM starts (the CUDA context holds "
                f"{memory.CUDA_CONTEXT_BYTES / 2**20:.0f} MiB); vLLM refuses to start",
                flag="--gpu-memory-utilization",
            )
            largest = 0
            break
        if b.kv_cache_memory_override:
            # --kv-cache-memory-bytes skips the utilization budget; the KV tensors are then
            # allocated on top of weights, activation and non-torch memory (gpu_worker.py).
            need = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.kv_cache_bytes
            if need > b.free_at_start_bytes:
                failure = Failure(
                    StartOutcome.KV_CACHE_MEMORY_OOM,
                    f"--kv-cache-memory-bytes {b.kv_cache_bytes:,}: with weights {b.weights_bytes / 2**30:.2f} GiB, "
                    f"activation {b.activation_peak_bytes / 2**30:.2f} GiB and non-torch {b.non_torch_bytes / 2**30:.2f} GiB "
                    f"it needs {need / 2**30:.2f} GiB{where} but about {b.free_at_start_bytes / 2**30:.2f} GiB is free "
                    f"when vLLM starts; "
                    "vLLM would run out of memory allocating the KV cache",
                    flag="--kv-cache-memory-bytes",
                )
                largest = 0
                break
        if b.kv_cache_bytes <= 0:
            failure = Failure(
                StartOutcome.NO_KV_CACHE_MEMORY,
                f"no memory left for the KV cache{where}: weights "
                f"{b.weights_bytes / 2**30:.2f} GiB + activation {b.activation_peak_bytes / 2**30:.2f} GiB "
                f"+ non-torch {b.non_torch_bytes / 2**30:.2f} GiB exceed the requested "
                f"{b.requested_bytes / 2**30:.2f} GiB (vLLM: 'No available memory for the cache blocks')",
            )
            largest = 0
            break
    if failure is None and max_model_len > 0:
        for s in stages:
            if s.bytes_for_max_len > s.budget.kv_cache_bytes:
                lim = s.layout.largest_max_model_len(s.budget.kv_cache_bytes, max_model_len, max_in_flight)
                largest = lim if largest is None else min(largest, lim)
                failure = Failure(
                    StartOutcome.MAX_MODEL_LEN_TOO_LONG,
                    f"one {max_model_len}-token request needs {s.bytes_for_max_len / 2**30:.2f} GiB of KV cache but only "
                    f"{s.budget.kv_cache_bytes / 2**30:.2f} GiB is available"
                    + (f"; the largest max-model-len that fits is {lim}" if lim > 0 else ""),
                    flag="--max-model-len",
                )
    if failure is None and max_model_len <= 0:
        failure = Failure(StartOutcome.NO_KV_TOKENS, "not even one token of KV cache fits", flag="--max-model-len")
        largest = 0
    if failure is None:
        # CUDA graphs are captured after the KV cache is allocated (gpu_worker.py
        # compile_or_warm_up_model -> capture_model); on the V2 runner nothing reserved room
        # for them, so a graph pool larger than what is left raises CUDA out of memory there.
        for s in stages:
            b = s.budget
            if not b.cudagraph_bytes:
                continue
            left = memory.cuda_graph_headroom_bytes(b, s.num_blocks * s.layout.bytes_per_block)
            if b.cudagraph_bytes > left:
                where = f" on pipeline stage {s.pipeline_rank}" if pp > 1 else ""
                failure = Failure(
                    StartOutcome.CUDA_GRAPH_CAPTURE_OOM,
                    f"CUDA graphs need about {b.cudagraph_bytes / 2**30:.2f} GiB{where} but only "
                    f"{max(left, 0) / 2**30:.2f} GiB is left once the KV cache is allocated "
                    f"(--gpu-memory-utilization {args.gpu_memory_utilization} requests "
                    f"{b.requested_bytes / 2**30:.2f} GiB of {b.total_bytes / 2**30:.2f} GiB); vLLM allocates the "
                    "KV cache first and then runs out of memory capturing the graphs, so it does not start",
                    flag="--gpu-memory-utilization",
                )
                largest = 0  # a shorter --max-model-len leaves the KV cache just as large
                break
    if failure is None:
        # With VLLM_ALLOW_LONG_MAX_MODEL_LEN a length past the model's own is allowed.
        cap = max(derived, max_model_len)
        largest = min(
            s.layout.largest_max_model_len(s.budget.kv_cache_bytes, cap, max_in_flight) for s in stages
        )
        for s in stages:
            b = s.budget
            if b.cudagraph_bytes and not b.cudagraph_applied_bytes and b.requested_bytes + b.cudagraph_bytes > b.free_at_start_bytes:
                note(
                    NoteKind.CUDA_GRAPHS_IN_ACTIVATION_MEMORY,
                    f"CUDA graphs (~{b.cudagraph_bytes / 2**30:.2f} GiB) fit beside the KV cache only in the memory "
                    "the profiling pass's activations used: a full --max-num-batched-tokens prefill needs that memory "
                    "again and may run out of CUDA memory while serving",
                )
                break

    mml_for_conc = max(max_model_len, 1)
    conc = first_layout.max_concurrency(num_blocks, mml_for_conc, max_in_flight) if first_layout.groups else 0.0
    tokens = first_layout.kv_cache_tokens(num_blocks, mml_for_conc, max_in_flight) if first_layout.groups else 0
    binding = "kv_cache" if conc < max_num_seqs else "max_num_seqs"

    # KV bytes one token costs on one GPU of the stage with the fewest blocks (its layers only).
    worst_layers = min(stages, key=lambda st: st.num_blocks).layers
    per_token = sum(
        s.per_token_bytes for o, s in zip(spec_owner, layer_specs) if o in worst_layers and s.stores_per_token_kv
    )
    if tp * pp > 1:
        note(
            NoteKind.PARALLEL_UNVERIFIED,
            f"tensor/pipeline parallel ({tp}x{pp}): the NCCL/all-reduce part of non-torch memory "
            f"({memory.NON_TORCH_MULTI_GPU_EXTRA / 2**30:.2f} GiB per GPU) is an unverified estimate"
        )
    if not args.enforce_eager and not v2:
        note(
            NoteKind.V1_CUDAGRAPH_UNVERIFIED,
            "CUDA graphs on the V1 model runner (MoE/hybrid): vLLM subtracts its graph-memory estimate; "
            "kvplan's estimate for it is unverified"
        )
    if spec.is_multimodal:
        note(NoteKind.MULTIMODAL, multimodal_encoder_reason(spec))
    if tp > spec.attention.num_key_value_heads and not spec.uses_mla:
        note(
            NoteKind.KV_HEAD_REPLICATION,
            f"tensor-parallel-size {tp} > num_key_value_heads {spec.attention.num_key_value_heads}: "
            "each GPU holds a replicated copy of its KV head"
        )

    effective = {
        "model": spec.name,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_cache_dtype": kv_dtype,
        "block_size": group0_block,
        "dtype": dtype,
        "quantization": quant.method if quant else None,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": mbt,
        "enforce_eager": args.enforce_eager,
        "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
        "vllm_version": args.vllm_version,
        "usage": args.usage,
        "enable_prefix_caching": prefix_caching,
        "model_runner": "v2" if v2 else "v1",
        "async_scheduling": async_sched,
    }
    return Plan(
        spec=spec,
        gpu=gpu,
        args=args,
        effective=effective,
        stages=stages,
        num_gpu_blocks=num_blocks,
        block_size=group0_block,
        page_size_bytes=page,
        bytes_per_token=per_token,
        gpu_kv_cache_tokens=tokens,
        max_concurrency=conc,
        max_in_flight_tokens=max_in_flight,
        fits=failure is None,
        failure=failure.message if failure is not None else None,
        largest_max_model_len=largest,
        binding_limit=binding,
        warnings=[n.message for n in remarks if not n.about_kvplan],
        runner="v2" if v2 else "v1",
        outcome=failure.kind if failure is not None else StartOutcome.STARTS,
        notes=[n.message for n in remarks if n.about_kvplan],
        allow_long_max_model_len=defaults.allow_long_max_model_len(env),
        failure_info=failure,
        remarks=tuple(remarks),
        rules=rules,
        approximations=approximations,
        evidence=rules.evidence_for(spec, gpu, args),
    )


def with_version_choice(p: Plan, choice: VersionChoice) -> Plan:
    """``p`` with the vLLM version choice that produced it (``choice.version`` is
    ``p.effective["vllm_version"]``): every output then says which version and why. A
    substitute (the installed package, a log or an image tag names a version kvplan has no rules
    for) adds its warning, and its evidence names that version as unchecked: the numbers are the
    nearest supported version's, never presented as the wanted one's."""
    evidence = p.evidence
    warnings = list(p.warnings)
    if choice.substituted:
        warnings.append(choice.warning())
    # a substitute's evidence names it as unchecked; an identical release's says so (VersionChoice.apply_to)
    return replace(p, version_choice=choice, warnings=warnings, evidence=choice.apply_to(evidence))

