"""Compose a Plan = f(ModelSpec, GPUProfile, EngineArgs) with the selected vLLM version's rules.

The planner resolves the effective engine arguments the way vLLM would (defaults that depend on
the GPU, dtype, quantization, block size), then for every pipeline stage computes the memory
budget, the KV-cache layout and the block count, and takes the minimum over stages as vLLM does
(v1/core/kv_cache_utils.py get_kv_cache_configs). Pure: no I/O.

The version's rules (engines/vllm/versions.py) are selected once, from ``args.vllm_version``,
and passed to every step; outcomes are typed (capacity/outcomes.py) beside their message text.
plan() reads top to bottom as its steps: the engine arguments resolved (capacity/resolve.py),
the KV-cache specs, every stage's budget and blocks, auto max-model-len, whether vLLM starts
(capacity/start_failure.py), the pool vLLM logs, the closing notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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
from kvplan.capacity import addons as addon_steps
from kvplan.capacity import ranks
from kvplan.capacity.resolve import Resolved, opening_remarks, resolve_engine_args, text_only_spec
from kvplan.capacity.stage import StagePlan
from kvplan.capacity.start_failure import admission_bytes, start_failure
from kvplan.engines.vllm.features import ignored_lora_flags
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
        parallel: the world of ranks planned (capacity/ranks.py LayoutPlan: every rank class,
            each DP engine's pool, the binding class); the top-level figures are the binding
            engine's.
        addons: what speculative decoding, LoRA, weight and KV offload did (capacity/addons.py
            AddonReport: draft layers, lookahead, slots, offloaded bytes, CPU KV pool, host
            memory); None when none of them is on.
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
    parallel: ranks.LayoutPlan | None = field(default=None, repr=False, compare=False)
    # speculative decoding, LoRA, weight and KV offload (capacity/addons.py AddonReport), None = none on
    addons: object = field(default=None, compare=False)
    # `vllm serve` flags kvplan did not size, kept in the written serve line as the user gave them
    # (tokens per flag; kvplan/cli/serve_extras.py)
    serve_extras: tuple = ()

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
    correction: int, machete: bool, max_num_batched_tokens: int = 0,
    expert_shards: int | None = None, local_experts: int | None = None,
):
    """Weight tally of one stage as (part, bytes) pairs; cached (ModelSpec is hashable).
    ``expert_shards`` / ``local_experts``: the GPU's share of the routed experts (ranks.RankClass)."""
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
        **({"expert_shards": expert_shards} if expert_shards is not None else {}),
        **({"local_experts": local_experts} if local_experts is not None else {}),
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
    rules: VllmRules, spec: ModelSpec, tp: int, block_size: int, kv_b: int, dtype_bytes: int, disable_hybrid: bool,
    num_speculative_tokens: int = 0,
):
    """(layer specs, effective block size, global KV-cache layout) of one rank; cached.
    ``num_speculative_tokens``: the recurrent states' conv rows for them (kv_spec)."""
    extra = {"num_speculative_tokens": num_speculative_tokens} if num_speculative_tokens else {}
    layer_specs, eff_block = rules.kv_spec.layer_cache_specs(
        spec,
        tensor_parallel_size=tp,
        block_size=block_size,
        kv_dtype_bytes_=kv_b,
        model_dtype_bytes=dtype_bytes,
        **extra,
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
                speculative_blocks=g.speculative_blocks,
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


@dataclass(frozen=True)
class _CacheSpecs:
    """Every KV-cache spec of one tensor-parallel rank and the layer each belongs to.

    ``layer_specs``: the version's per-layer cache specs (kv_spec.layer_cache_specs);
    ``spec_owner``: for each of them the decoder layer index it belongs to; ``global_layout``:
    the KV-cache grouping over every layer (allocator.build_layout); ``block_size``: tokens per
    block after a hybrid model's alignment.
    """

    layer_specs: tuple
    spec_owner: tuple[int, ...]
    global_layout: KVCacheLayout
    block_size: int


@dataclass(frozen=True)
class _Pool:
    """The KV-cache pool vLLM logs, at the plan's max_model_len.

    ``num_blocks`` (min over stages), ``block_size`` (tokens per block of the first group, as
    vLLM reports it), ``page_size_bytes``, ``bytes_per_token`` (KV bytes per token on one GPU of
    the stage with the fewest blocks), ``tokens`` ("GPU KV cache size"), ``concurrency``
    ("Maximum concurrency"), ``binding`` ("kv_cache" or "max_num_seqs"), ``prefix_caching``.
    """

    num_blocks: int
    block_size: int
    page_size_bytes: int
    bytes_per_token: int
    tokens: int
    concurrency: float
    binding: str
    prefix_caching: bool


def _blocks_min_over_world(rules: VllmRules, args: EngineArgs) -> bool:
    """Whether a MoE model's DP engines share one block count: the version's rule, which may
    depend on the sizing path (vLLM 0.34.0's extensible KV cache; engines/vllm/v0_XX/parallel.py)."""
    rule = getattr(rules.parallel, "blocks_min_over_world", None)
    return rule(args) if rule is not None else bool(getattr(rules.parallel, "BLOCKS_MIN_OVER_WORLD", False))


def plan(spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, env: Mapping[str, str] | None = None) -> Plan:
    """Predict vLLM's KV-cache allocation for ``spec`` on ``gpu`` with ``args``.

    ``env``: the environment vLLM would start with (only VLLM_ALLOW_LONG_MAX_MODEL_LEN is read;
    None = unset). The planner never reads os.environ itself.

    The steps, in vLLM's order: refuse what vLLM refuses before loading; resolve the engine
    arguments; lay out the KV-cache specs; budget every pipeline stage (weights, activation
    peak, non-torch memory -> KV bytes -> blocks); shorten an auto max-model-len to fit; find the
    first reason vLLM would not start; read off the pool vLLM logs. Every step appends its
    warnings and notes to ``remarks`` in the order vLLM's own checks run.

    Returns:
        a Plan (per-GPU figures; block counts are what every GPU allocates).
    Raises:
        KvplanError: an argument vLLM would reject before profiling (exit 2).
    Rule source: the rules of ``args.vllm_version`` (engines/vllm/versions.py select), chosen
    here once and passed down.
    """
    rules = versions.select(args.vllm_version)
    approximations = estimate_approximations(spec, args.limit_mm_per_prompt, rules)
    _validate_parallel(spec, args.tensor_parallel_size, args.pipeline_parallel_size)
    world = ranks.world_of(spec, args, rules.parallel)
    remarks = opening_remarks(spec, gpu)
    spec = text_only_spec(spec, args, rules, remarks)
    resolved = resolve_engine_args(spec, gpu, args, env, rules, remarks)
    # speculative decoding, LoRA, weight and KV offload (capacity/addons.py; None when none is on)
    addons = addon_steps.plan_addons(spec, args, rules, resolved, args.tensor_parallel_size, args.pipeline_parallel_size)
    resolved = addon_steps.resolved_with_runner(resolved, addons, args.pipeline_parallel_size)
    cache = _cache_specs(spec, args, rules, resolved, remarks, addons)
    classes = _plan_rank_classes(spec, gpu, args, rules, resolved, cache, remarks, world, addons)
    stages = _binding_stages(classes)
    stages, resolved = _auto_fit_max_model_len(stages, resolved, remarks)
    failure, largest = start_failure(stages, args, rules, resolved, remarks)
    pool = _pool(spec, args, rules, resolved, cache, stages)
    _closing_notes(spec, args, rules, resolved, remarks, world)
    layout = ranks.layout_plan(world, classes, stages, resolved.max_model_len, resolved.max_in_flight,
                               _blocks_min_over_world(rules, args))
    addon_report = addon_steps.report(
        addons, rules, stages, [s.addon_costs for s in stages], block_size=pool.block_size,
        tp=args.tensor_parallel_size, pp=args.pipeline_parallel_size, max_model_len=resolved.max_model_len,
        num_blocks=pool.num_blocks, in_flight=resolved.max_in_flight,
    )
    if addons is not None:
        approximations = approximations + addons.approximations + tuple(
            a for s in stages if s.addon_costs is not None for a in s.addon_costs.approximations)
        remarks += addon_steps.remarks(addon_report, resolved.max_model_len, starts=failure is None)
    return Plan(
        spec=spec,
        gpu=gpu,
        args=args,
        effective=_effective(spec, args, resolved, pool, rules),
        stages=stages,
        num_gpu_blocks=pool.num_blocks,
        block_size=pool.block_size,
        page_size_bytes=pool.page_size_bytes,
        bytes_per_token=pool.bytes_per_token,
        gpu_kv_cache_tokens=pool.tokens,
        max_concurrency=pool.concurrency,
        max_in_flight_tokens=resolved.max_in_flight,
        fits=failure is None,
        failure=failure.message if failure is not None else None,
        largest_max_model_len=largest,
        binding_limit=pool.binding,
        warnings=[n.message for n in remarks if not n.about_kvplan],
        runner="v2" if resolved.v2 else "v1",
        outcome=failure.kind if failure is not None else StartOutcome.STARTS,
        notes=[n.message for n in remarks if n.about_kvplan],
        allow_long_max_model_len=rules.defaults.allow_long_max_model_len(env),
        failure_info=failure,
        remarks=tuple(remarks),
        rules=rules,
        approximations=approximations,
        evidence=rules.evidence_for(spec, gpu, args),
        parallel=layout,
        addons=addon_report,
    )


# -- the KV-cache specs of one rank ---------------------------------------------------


def _cache_specs(
    spec: ModelSpec, args: EngineArgs, rules: VllmRules, r: Resolved, remarks: list[Note], addons=None
) -> _CacheSpecs:
    """Every layer's KV-cache spec on one tensor-parallel rank, the decoder layer each belongs
    to, and their global grouping (vLLM v1/core/kv_cache_utils.py get_kv_cache_groups)."""
    layer_specs, eff_block, global_layout = _layout_cached(
        rules,
        spec, args.tensor_parallel_size, r.block_size, r.kv_dtype_bytes, r.dtype_bytes,
        args.disable_hybrid_kv_cache_manager, addon_steps.speculative_tokens(addons) if spec.is_hybrid else 0,
    )
    if eff_block != r.block_size:
        remarks.append(Note(
            NoteKind.BLOCK_SIZE_HYBRID_ALIGNED,
            f"block_size raised from {r.block_size} to {eff_block} tokens so one attention page holds a "
            "recurrent state (vLLM aligns hybrid models this way)"
        ))
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
    if addons is not None and addons.draft_layer_specs:
        # the drafter's attention layers register with the target's (vLLM attn_utils.get_kv_cache_spec)
        # and join its KV groups; they live with the last decoder layer's stage
        layer_specs = list(layer_specs) + list(addons.draft_layer_specs)
        spec_owner = spec_owner + [spec.num_hidden_layers - 1] * len(addons.draft_layer_specs)
        global_layout = rules.allocator.build_layout(
            layer_specs, disable_hybrid_kv_cache_manager=args.disable_hybrid_kv_cache_manager)
    global_layout = addon_steps.with_speculative_state_blocks(global_layout, addon_steps.speculative_tokens(addons))
    return _CacheSpecs(
        layer_specs=tuple(layer_specs),
        spec_owner=tuple(spec_owner),
        global_layout=global_layout,
        block_size=eff_block,
    )


# -- every pipeline stage's memory budget and blocks ----------------------------------


def _plan_rank_classes(
    spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, rules: VllmRules, r: Resolved,
    cache: _CacheSpecs, remarks: list[Note], world: ranks.World, addons=None,
) -> list[ranks.ClassPlan]:
    """One StagePlan per rank class (ranks.World.rank_classes: each pipeline stage, vLLM
    weights.pp_layer_ranges = get_pp_indices, x each distinct share of the routed experts)."""
    tp = args.tensor_parallel_size
    said: list[str] = []
    correction = rules.quantization.checkpoint_correction(spec, tp, r.dtype_bytes, r.quant, said)
    remarks += [Note(NoteKind.CHECKPOINT_WEIGHTS, w) for w in said]
    stage_layers = rules.weights.pp_layer_ranges(spec.num_hidden_layers, args.pipeline_parallel_size)
    return [
        ranks.ClassPlan(c, _plan_stage(spec, gpu, args, rules, r, cache, c, correction, world, addons))
        for c in world.rank_classes(stage_layers)
    ]


def _binding_stages(classes: list[ranks.ClassPlan]) -> list[StagePlan]:
    """Per pipeline stage, the class with the least room for the KV cache (the heaviest expert
    share: the GPU that sets its engine's block count)."""
    out: dict[int, StagePlan] = {}
    for c in classes:
        s = c.stage
        if s.pipeline_rank not in out or s.num_blocks < out[s.pipeline_rank].num_blocks:
            out[s.pipeline_rank] = s
    return [out[k] for k in sorted(out)]


def _plan_stage(
    spec: ModelSpec, gpu: GPUProfile, args: EngineArgs, rules: VllmRules, r: Resolved,
    cache: _CacheSpecs, rank_class: ranks.RankClass, correction: int, world: ranks.World, addons=None,
) -> StagePlan:
    """One GPU of ``rank_class`` (its pipeline stage's decoder layers and expert share):
    weights, activation peak, CUDA graphs and non-torch memory -> the version's memory budget ->
    its KV layout and blocks. ``correction``: the checkpoint's extra weight bytes over the whole
    model (spread by layers)."""
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    rank, layers = rank_class.pipeline_rank, rank_class.layers
    machete = (gpu.compute_capability or "").startswith("9.")
    shards = rank_class.expert_shards if rank_class.expert_shards != tp else None
    w_parts = dict(
        _weights_cached(
            rules, spec, tp, rank, pp, r.dtype_bytes, r.quant, r.kv_dtype.startswith("fp8"), correction, machete,
            r.max_num_batched_tokens, shards, rank_class.local_experts,
        )
    )
    a = _activation_cached(
        rules,
        spec,
        tensor_parallel_size=tp,
        act_dtype_bytes=r.dtype_bytes,
        max_num_batched_tokens=r.max_num_batched_tokens,
        max_num_seqs=r.max_num_seqs,
        enforce_eager=args.enforce_eager,
        is_last_pp_rank=rank == pp - 1,
        layers=layers,
        sm_count=gpu.sm_count,
        moe_workspace_persists=r.quant is None or r.quant.method != "mxfp4",
        fp8_act_quant=rules.quantization.fp8_activation_group(r.quant),
        max_model_len=r.max_model_len,  # 0.34.0's sizing steps split at it (v0_34/reserve_growth.py)
        # a feature that moves the model to the other runner profiles on that runner (addons.py)
        **({"v2": r.v2} if addons is not None and r.v2 != rules.runner.uses_v2_runner(spec) else {}),
    )
    costs = addon_steps.stage_costs(spec, addons, rules, r, tp=tp, layers=layers, first=rank == 0, last=rank == pp - 1)
    a = addon_steps.with_sizing_costs(a, costs)  # a drafter's share of 0.34.0's sizing step (P, G)
    extra_layers, graph_factor, extra_peak, extra_consumed = 0, 1, 0, 0
    if costs is not None:
        w_parts.update(costs.weights)
        extra_layers, graph_factor = costs.graph_layers, costs.graph_factor
        extra_peak, extra_consumed = costs.activation, costs.persistent
    cg, cg_applied = rules.runner.cudagraph_bytes(spec, enforce_eager=args.enforce_eager,
                                                  num_layers=len(layers) + extra_layers)
    cg, cg_applied = cg * graph_factor, cg_applied * graph_factor
    b = rules.memory.budget(
        total_bytes=gpu.memory_bytes,
        # a version may default it by sizing mode (0.34.0: 1.0 with the extensible KV cache)
        gpu_memory_utilization=rules.gpu_memory_utilization(args),
        weights=sum(w_parts.values()),
        activation_peak=a.peak_bytes + extra_peak,
        # a version whose profile leaves tensors allocated (its activation's ``persistent_bytes``)
        # charges them with the non-torch memory as consumed memory
        non_torch=rules.non_torch_bytes(world.communicator_world, v1_cudagraphs=not r.v2 and not args.enforce_eager)
        + getattr(a, "persistent_bytes", 0) + extra_consumed,
        cudagraph=cg,
        cudagraph_applied=cg_applied,
        kv_cache_memory=args.kv_cache_memory_bytes,
        engine_args=args,
        activation=a,
    )
    layout = _stage_layout(spec, rules, cache, layers, pp)
    if world.dcp > 1:
        layout = ranks.DcpLayout(layout, world.dcp)
    return StagePlan(
        pipeline_rank=rank,
        layers=layers,
        budget=b,
        weights_breakdown=w_parts,
        activation=a,
        layout=layout,
        num_blocks=b.num_blocks(layout),
        bytes_for_max_len=layout.bytes_for_max_len(r.max_model_len, r.max_in_flight),
        addon_costs=costs,
    )


def _stage_layout(spec: ModelSpec, rules: VllmRules, cache: _CacheSpecs, layers: range, pp: int) -> KVCacheLayout:
    """The KV-cache layout of one pipeline stage: the global one without PP; a single mixed group
    rebuilt from the stage's own layers; otherwise the global groups projected onto them."""
    if pp == 1:
        return cache.global_layout
    if cache.global_layout.mixed_single_group:
        return rules.allocator.build_layout([s for o, s in zip(cache.spec_owner, cache.layer_specs) if o in layers])
    return _project(cache.global_layout, layers, rules)


# -- --max-model-len auto ---------------------------------------------------------------


def _auto_fit_max_model_len(
    stages: list[StagePlan], r: Resolved, remarks: list[Note]
) -> tuple[list[StagePlan], Resolved]:
    """With --max-model-len -1, the largest length every stage fits, capped at the model's
    (vLLM _auto_fit_max_model_len: smallest over stages); 0 when not even one token fits.
    Returns the stages re-sized for that length and the resolved arguments carrying it;
    unchanged without auto-fit."""
    if not r.auto_fit:
        return stages, r
    derived = r.derived_max_model_len
    fit = min(
        s.layout.largest_max_model_len(avail, derived, r.max_in_flight)
        for s, avail in zip(stages, admission_bytes(stages))
    )
    if fit <= 0:
        max_model_len = 0
    else:
        max_model_len = min(fit, derived)
        if max_model_len < derived:
            remarks.append(Note(
                NoteKind.MAX_MODEL_LEN_REDUCED,
                f"--max-model-len auto: reduced from {derived} to {max_model_len} tokens to fit",
            ))
    stages = [
        StagePlan(**{**s.__dict__, "bytes_for_max_len": s.layout.bytes_for_max_len(max(max_model_len, 1), r.max_in_flight)})
        for s in stages
    ]
    return stages, replace(r, max_model_len=max_model_len)


# -- the pool vLLM logs ----------------------------------------------------------------


def _pool(
    spec: ModelSpec, args: EngineArgs, rules: VllmRules, r: Resolved, cache: _CacheSpecs, stages: list[StagePlan]
) -> _Pool:
    """The blocks every GPU allocates (min over stages: v1/core/kv_cache_utils.py
    get_kv_cache_configs), the block size vLLM reports, and its logged tokens and concurrency
    at max_model_len (allocator.KVCacheLayout.kv_cache_tokens / max_concurrency)."""
    num_blocks = min(s.num_blocks for s in stages)
    first_layout = stages[0].layout
    page = first_layout.groups[0].page_size_bytes if first_layout.groups else 0
    group0_block = first_layout.groups[0].block_size if first_layout.groups else r.block_size
    prefix_caching = (
        args.enable_prefix_caching if args.enable_prefix_caching is not None
        else getattr(rules.defaults, "default_prefix_caching", lambda s: not s.is_hybrid)(spec)
    )
    if spec.attention_free:
        # the state group's reported block size (vLLM's mamba_block_size; kv_spec rule)
        group0_block = rules.kv_spec.attention_free_block_size(
            group0_block, r.max_model_len, enable_prefix_caching=prefix_caching
        )
    mml_for_conc = max(r.max_model_len, 1)
    conc = first_layout.max_concurrency(num_blocks, mml_for_conc, r.max_in_flight) if first_layout.groups else 0.0
    tokens = first_layout.kv_cache_tokens(num_blocks, mml_for_conc, r.max_in_flight) if first_layout.groups else 0
    # KV bytes one token costs on one GPU of the stage with the fewest blocks (its layers only).
    worst_layers = min(stages, key=lambda st: st.num_blocks).layers
    per_token = sum(
        s.per_token_bytes
        for o, s in zip(cache.spec_owner, cache.layer_specs)
        if o in worst_layers and s.stores_per_token_kv
    )
    return _Pool(
        num_blocks=num_blocks, block_size=group0_block, page_size_bytes=page, bytes_per_token=per_token,
        tokens=tokens, concurrency=conc, binding="kv_cache" if conc < r.max_num_seqs else "max_num_seqs",
        prefix_caching=prefix_caching,
    )


# -- what the figures leave out, and the effective arguments ---------------------------


def _closing_notes(
    spec: ModelSpec, args: EngineArgs, rules: VllmRules, r: Resolved, remarks: list[Note], world: ranks.World
) -> None:
    """The unverified parts of the estimate the user cannot act on (multi-GPU non-torch memory,
    V1 CUDA graphs), a multimodal encoder, replicated KV heads."""
    remarks.extend(Note(NoteKind.INEFFECTIVE_FLAG, m) for m in ranks.ineffective_flags(args, world))
    remarks.extend(Note(NoteKind.INEFFECTIVE_FLAG, m) for m in ignored_lora_flags(args))
    offload_off = addon_steps.offload_ignored(rules.addons, r.v2) if rules.addons is not None else None
    if offload_off and (args.cpu_offload_gb or args.offload_group_size):
        remarks.append(Note(NoteKind.INEFFECTIVE_FLAG, offload_off))
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    extra = rules.memory.NON_TORCH_MULTI_GPU_EXTRA / 2**30
    if world.communicator_world > tp * pp:  # PCP ranks, or a MoE model's DP engines in one world
        remarks.append(Note(
            NoteKind.PARALLEL_UNVERIFIED,
            f"a process group of {world.communicator_world} GPUs: the NCCL/all-reduce part of non-torch memory "
            f"({extra:.2f} GiB per GPU) is an unverified estimate"
        ))
    elif tp * pp > 1:
        remarks.append(Note(
            NoteKind.PARALLEL_UNVERIFIED,
            f"tensor/pipeline parallel ({tp}x{pp}): the NCCL/all-reduce part of non-torch memory "
            f"({extra:.2f} GiB per GPU) is an unverified estimate"
        ))
    if not args.enforce_eager and not r.v2:
        remarks.append(Note(
            NoteKind.V1_CUDAGRAPH_UNVERIFIED,
            "CUDA graphs on the V1 model runner (MoE/hybrid): vLLM subtracts its graph-memory estimate; "
            "kvplan's estimate for it is unverified"
        ))
    if spec.is_multimodal:
        remarks.append(Note(NoteKind.MULTIMODAL, multimodal_encoder_reason(spec)))
    if tp > spec.attention.num_key_value_heads and not spec.uses_mla:
        remarks.append(Note(
            NoteKind.KV_HEAD_REPLICATION,
            f"tensor-parallel-size {tp} > num_key_value_heads {spec.attention.num_key_value_heads}: "
            "each GPU holds a replicated copy of its KV head"
        ))


def _effective(spec: ModelSpec, args: EngineArgs, r: Resolved, pool: _Pool, rules: VllmRules) -> dict:
    """The resolved engine arguments as every output reports them (Plan.effective)."""
    return {
        "model": spec.name,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "max_model_len": r.max_model_len,
        "gpu_memory_utilization": rules.gpu_memory_utilization(args),
        "kv_cache_dtype": r.kv_dtype,
        "block_size": pool.block_size,
        "dtype": r.dtype,
        "quantization": r.quant.method if r.quant else None,
        "max_num_seqs": r.max_num_seqs,
        "max_num_batched_tokens": r.max_num_batched_tokens,
        "enforce_eager": args.enforce_eager,
        "kv_cache_memory_bytes": args.kv_cache_memory_bytes,
        "vllm_version": args.vllm_version,
        "usage": args.usage,
        "enable_prefix_caching": pool.prefix_caching,
        "model_runner": "v2" if r.v2 else "v1",
        "async_scheduling": r.async_scheduling,
    }


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

