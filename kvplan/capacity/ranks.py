"""The world of ranks: how vLLM lays a model over TP x PP x DP x PCP GPUs, and which rank binds.

One place derives every GPU's share (its pipeline stage's layers, its routed experts, its KV
share) from the parallel flags; the planner (capacity/estimate.py) asks it and budgets one GPU
of each rank class. Pure arithmetic, no I/O. Rule sources (the newest supported vLLM; the older
reads the same, checked file by file, except where a version's ``parallel`` rules module says
otherwise: engines/vllm/v0_26/parallel.py):

* world: config/parallel.py ``world_size = PP x TP x PCP`` per engine, ``world_size_across_dp``
  = world_size x DP; GPUs used = TP x PP x DP x PCP.
* data parallel: v1/engine/core.py run_engine_core: a dense model's DP ranks are independent
  engines (``reconfigure_for_independent_dp_rank``: each is a DP=1 deployment); a MoE model's
  are ``DPEngineCoreProc``s sharing one expert group. Each engine sizes and logs its own KV pool
  (v1/core/kv_cache_utils.py get_kv_cache_configs: the min is over one engine's workers).
* experts: model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make flattens
  ``tp = DP x PCP x TP`` (flatten_tp_across_dp_and_pcp, rank = dp_rank x PCP x TP + pcp_rank x TP
  + tp_rank). Without --enable-expert-parallel every GPU holds 1/(TP x PCP x DP) of every
  expert's intermediate (FusedMoEConfig.__post_init__ asserts it divides); with it, EP size =
  that product, expert TP = 1, and expert_map_manager.py determine_expert_map gives rank r
  ``(E + R) // ep`` whole experts, one more for the first ``(E + R) % ep`` ranks (R =
  --eplb-config num_redundant_experts; layer.py: global experts = E + R).
* pipeline: distributed/utils.py get_pp_indices (the version's weights.pp_layer_ranges).
* decode context parallel: v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes
  uses ``cdiv(max_model_len, dcp)``: a request's tokens are spread over dcp ranks, the page per
  rank is unchanged, so the same blocks hold dcp times the tokens (``DcpLayout``).
* prefill context parallel: config/parallel.py "PCP expands the process world size but does
  not increase the KV-cache shard count": PCP-only ranks replicate the KV cache.

Nothing here was checked on multi-GPU hardware: every estimate that uses a rule of this module
says so (rules.common_unchecked, MULTI_GPU_UNCHECKED).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from kvplan.capacity.outcomes import EstimateRefusal, RefusalKind
from kvplan.capacity.stage import StagePlan
from kvplan.engines.vllm.args import EngineArgs
from kvplan.model.spec import LayerKind, ModelSpec


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def configured_redundant_experts(args: EngineArgs) -> int | None:
    """``num_redundant_experts`` of ``--eplb-config`` (None when unset: the version's rule
    ``parallel.redundant_experts`` decides). vLLM config/parallel.py EPLBConfig. Raises nothing."""
    if not args.eplb_config:
        return None
    value = json.loads(args.eplb_config).get("num_redundant_experts")
    return None if value is None else int(value)


@dataclass(frozen=True)
class RankClass:
    """GPUs that hold the same share of the model (and so plan the same).

    Attributes:
        pipeline_rank: the stage (its decoder layers are ``layers``).
        local_experts: routed experts per MoE layer held whole (expert parallel), or None
            without EP (then every GPU holds a 1/``expert_shards`` slice of every expert).
        expert_shards: ways each expert's intermediate is split (TP x PCP x DP without EP, 1 with
            EP; TP for a dense model, where it is unused).
        gpus: GPUs of the whole deployment in this class.
    """

    pipeline_rank: int
    layers: range
    local_experts: int | None
    expert_shards: int
    gpus: int


@dataclass(frozen=True)
class World:
    """The parallel layout of one deployment (the flags resolved as vLLM resolves them).

    Sizes are vLLM's: ``tp``, ``pp``, ``dp`` (engines), ``pcp``, ``dcp``; ``expert_parallel``
    (--enable-expert-parallel with an expert group of more than one GPU); ``num_experts`` (the
    model's routed experts, 0 for a dense model) and ``redundant`` (EPLB replicas); ``nnodes``
    and ``data_parallel_size_local`` (engines per node).
    """

    tp: int
    pp: int
    dp: int = 1
    pcp: int = 1
    dcp: int = 1
    expert_parallel: bool = False
    num_experts: int = 0
    redundant: int = 0
    nnodes: int = 1
    data_parallel_size_local: int = 1

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def engine_gpus(self) -> int:
        """GPUs of one engine (vLLM's per-engine world_size): TP x PP x PCP."""
        return self.tp * self.pp * self.pcp

    @property
    def gpus(self) -> int:
        """GPUs the deployment uses: TP x PP x DP x PCP."""
        return self.engine_gpus * self.dp

    @property
    def communicator_world(self) -> int:
        """GPUs in one process group's world (the NCCL world a worker joins): a MoE model's DP
        engines share one world (world_size_across_dp), a dense model's DP engines do not."""
        return self.gpus if self.is_moe else self.engine_gpus

    @property
    def expert_group(self) -> int:
        """GPUs one MoE layer's experts are spread over: TP x PCP x DP (FusedMoEParallelConfig.make)."""
        return self.tp * self.pcp * self.dp

    @property
    def uses_ep(self) -> bool:
        """vLLM's ``use_ep``: --enable-expert-parallel and an expert group of more than one GPU."""
        return self.is_moe and self.expert_parallel and self.expert_group > 1

    @property
    def multi_gpu_rules(self) -> tuple[str, ...]:
        """The multi-GPU rules of this module the layout uses (for the evidence label)."""
        out = []
        if self.dp > 1:
            out.append(f"data parallel {self.dp}" + (" (one expert group across the engines)" if self.is_moe else ""))
        if self.uses_ep:
            out.append(f"expert parallel over {self.expert_group} GPUs")
        if self.pp > 1:
            out.append(f"pipeline split over {self.pp} stages")
        if self.dcp > 1:
            out.append(f"decode context parallel {self.dcp}")
        if self.pcp > 1:
            out.append(f"prefill context parallel {self.pcp}")
        if self.nnodes > 1:
            out.append(f"{self.nnodes} nodes")
        return tuple(out)

    @cached_property
    def experts_per_ep_rank(self) -> tuple[int, ...]:
        """Whole routed experts held by each EP rank (ep = TP x PCP x DP), in rank order:
        ``(E + R) // ep``, the first ``(E + R) % ep`` ranks one more (determine_expert_map);
        () without EP."""
        if not self.uses_ep:
            return ()
        total, ep = self.num_experts + self.redundant, self.expert_group
        base, extra = divmod(total, ep)
        return tuple(base + (1 if r < extra else 0) for r in range(ep))

    def engine_expert_counts(self, engine: int) -> tuple[int, ...]:
        """The EP ranks' expert counts of DP engine ``engine`` (its TP x PCP ranks:
        flattened rank = dp_rank x PCP x TP + ...); () without EP."""
        per = self.tp * self.pcp
        return self.experts_per_ep_rank[engine * per:(engine + 1) * per]

    def rank_classes(self, stage_layers: list[range]) -> list[RankClass]:
        """Every distinct GPU share: each pipeline stage x each distinct whole-expert count
        (EP), the heaviest first within a stage. ``stage_layers``: the version's
        pp_layer_ranges. GPUs per class are counted over the whole deployment."""
        shards = 1 if self.uses_ep else (self.expert_group if self.is_moe else self.tp)
        out = []
        for rank, layers in enumerate(stage_layers):
            if not self.uses_ep:
                out.append(RankClass(rank, layers, None, shards, self.tp * self.pcp * self.dp))
                continue
            counts = self.experts_per_ep_rank
            for n in sorted(set(counts), reverse=True):
                out.append(RankClass(rank, layers, n, 1, counts.count(n)))
        return out

    def engine_binding_experts(self) -> list[int | None]:
        """Per DP engine, the most whole experts one of its GPUs holds (that GPU sets the
        engine's block count, the min over its workers); None per engine without EP."""
        if not self.uses_ep:
            return [None] * self.dp
        return [max(self.engine_expert_counts(e)) for e in range(self.dp)]


def world_of(spec: ModelSpec, args: EngineArgs, parallel) -> World:
    """The World of ``args`` for ``spec``, validated as vLLM validates it (``validate``).

    ``parallel``: the version's multi-GPU rules module (VllmRules.parallel: ``PCP_WITH_DP``,
    ``redundant_experts``).
    Raises:
        EstimateRefusal (INVALID_PARALLEL): one line naming the flag vLLM refuses.
    """
    dp = args.data_parallel_size or 1
    nnodes = args.nnodes or 1
    tp, pcp = args.tensor_parallel_size, args.prefill_context_parallel_size or 1
    num_experts = spec.moe.num_experts if spec.moe is not None else 0
    w = World(
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        dp=dp,
        pcp=args.prefill_context_parallel_size or 1,
        dcp=args.decode_context_parallel_size or 1,
        expert_parallel=bool(args.enable_expert_parallel),
        num_experts=num_experts,
        redundant=parallel.redundant_experts(
            configured_redundant_experts(args), num_experts=num_experts, ep_size=tp * pcp * dp,
            enable_eplb=bool(args.enable_eplb),
        ),
        nnodes=nnodes,
        data_parallel_size_local=_dp_local(args, dp, nnodes),
    )
    validate(spec, args, w, pcp_with_dp=parallel.PCP_WITH_DP)
    return w


def _dp_local(args: EngineArgs, dp: int, nnodes: int) -> int:
    """--data-parallel-size-local as vLLM infers it (engine/arg_utils.py create_engine_config):
    the given value; with --nnodes > 1 the node's share of the world (at least 1); else DP."""
    if args.data_parallel_size_local is not None:
        return args.data_parallel_size_local
    if nnodes > 1:
        within = args.tensor_parallel_size * args.pipeline_parallel_size * (args.prefill_context_parallel_size or 1)
        return max((dp * within // nnodes) // within, 1)
    return dp


def _refuse(flag: str, message: str, hint: str | None = None) -> None:
    raise EstimateRefusal(RefusalKind.INVALID_PARALLEL, f"{flag}: {message}", hint=hint, flag=flag)


def validate(spec: ModelSpec, args: EngineArgs, w: World, pcp_with_dp: bool = True) -> None:
    """Refuse the layouts vLLM refuses, in its order, one line naming the flag.

    vLLM config/parallel.py ParallelConfig._validate_parallel_config (DP local <= DP; EPLB needs
    EP and an expert group > 1; redundant experts need EPLB; DCP divides TP, or spans PCP / TP x
    PCP; the version's PCP_WITH_DP) and __post_init__ (nnodes > 1 only with mp / uni /
    external_launcher); engine/arg_utils.py create_engine_config (nnodes divides the world;
    0 <= node rank < nnodes); config/model.py verify_with_parallel_config (DCP for GQA/MHA:
    TP > KV heads, dcp <= TP // KV heads, query heads per KV head divisible by dcp);
    v1/kv_cache_interface.py (DCP asserts no sliding window; the coordinator takes only
    full-attention groups); fused_moe/config.py FusedMoEConfig (the expert intermediate divides
    TP x PCP x DP without EP); entrypoints/cli/serve.py run_headless (a headless node runs >= 1
    engine). Raises EstimateRefusal."""
    if w.data_parallel_size_local > w.dp:
        _refuse("--data-parallel-size-local", f"{w.data_parallel_size_local} must be <= --data-parallel-size ({w.dp})")
    if args.enable_eplb:
        if not args.enable_expert_parallel:
            _refuse("--enable-eplb", "needs --enable-expert-parallel (vLLM: enable_expert_parallel must be True to use EPLB)")
        if w.expert_group <= 1:
            _refuse("--enable-eplb", f"needs tensor, prefill-context or data parallelism (TP={w.tp}, PCP={w.pcp}, DP={w.dp})")
    elif w.redundant:
        _refuse("--eplb-config", f"num_redundant_experts is {w.redundant} but EPLB is not enabled (add --enable-eplb)")
    if not pcp_with_dp and w.pcp > 1 and w.dp > 1:
        _refuse("--prefill-context-parallel-size", "this vLLM version does not support PCP with data parallelism")
    if w.pcp == 1 and w.tp % w.dcp:
        _refuse("--decode-context-parallel-size", f"{w.dcp} must divide --tensor-parallel-size ({w.tp})")
    if w.pcp > 1 and w.dcp not in (1, w.pcp, w.tp * w.pcp):
        _refuse("--decode-context-parallel-size",
                f"{w.dcp} with PCP {w.pcp}: must be 1, the PCP size or TP x PCP ({sorted({1, w.pcp, w.tp * w.pcp})})")
    backend = args.distributed_executor_backend
    if w.nnodes > 1 and backend is not None and backend not in ("mp", "uni", "external_launcher"):
        _refuse("--nnodes", f"{w.nnodes} needs --distributed-executor-backend mp (got {backend})")
    if w.nnodes > 1:
        if w.gpus % w.nnodes:
            _refuse("--nnodes", f"{w.nnodes} must divide the world size TP x PP x PCP x DP ({w.gpus})")
        if not 0 <= (args.node_rank or 0) < w.nnodes:
            _refuse("--node-rank", f"{args.node_rank} must be in 0..{w.nnodes - 1}")
    if args.headless and w.data_parallel_size_local <= 0:
        _refuse("--data-parallel-size-local", "must be > 0 with --headless")
    if w.dcp > 1:
        _validate_dcp(spec, w)
    if w.is_moe and not w.uses_ep and spec.moe.moe_intermediate_size % w.expert_group:
        flag = "--data-parallel-size" if w.dp > 1 else "--prefill-context-parallel-size"
        _refuse(flag, f"the expert intermediate size ({spec.moe.moe_intermediate_size}) must divide by TP x PCP x DP "
                f"({w.expert_group}) without --enable-expert-parallel", hint="add --enable-expert-parallel")


def ineffective_flags(args: EngineArgs, w: World) -> list[str]:
    """One warning per multi-GPU flag that vLLM accepts here but that does nothing (or serves
    nothing), so it never hides under a green verdict. Rules (the vLLM releases that take these flags):

    * --headless on one node (--nnodes 1): entrypoints/cli/serve.py run_headless starts the
      engines and no API server, so the deployment answers no request;
    * --node-rank > 0 with --nnodes 1: engine/arg_utils.py checks ``0 <= node_rank < nnodes``
      only when nnodes > 1, and config/parallel.py node_rank_within_dp is node_rank % 1 = 0,
      so vLLM starts as node 0 (a node-rank outside 0..nnodes-1 with --nnodes > 1 is refused
      in validate);
    * --enable-expert-parallel on a dense model: vLLM's use_ep needs MoE layers
      (FusedMoEParallelConfig.make), a dense model has none.
    """
    out = []
    if args.headless and w.nnodes <= 1:
        out.append("--headless on one node (no --nnodes > 1): vLLM starts the engines without an API server, "
                   "so this deployment serves no request; drop --headless, or run it on the worker nodes of "
                   "a --nnodes > 1 deployment")
    if (args.node_rank or 0) > 0 and w.nnodes <= 1:
        out.append(f"--node-rank {args.node_rank} without --nnodes > 1: vLLM ignores it (one node is node 0); "
                   "give --nnodes for a multi-node deployment")
    if args.enable_expert_parallel and not w.is_moe:
        out.append("--enable-expert-parallel on a dense model (no experts): vLLM ignores it, it has no effect")
    return out


def _validate_dcp(spec: ModelSpec, w: World) -> None:
    kinds = {k for k in spec.layer_kinds if k != LayerKind.NONE}
    if not kinds <= {LayerKind.FULL, LayerKind.MLA}:
        _refuse("--decode-context-parallel-size",
                f"{w.dcp}: vLLM shards only full-attention KV caches; this model has "
                + ", ".join(sorted(k.value for k in kinds - {LayerKind.FULL, LayerKind.MLA})) + " layers")
    if spec.uses_mla:
        return
    kv, heads = spec.attention.num_key_value_heads, spec.attention.num_attention_heads
    if w.tp <= kv:
        _refuse("--decode-context-parallel-size",
                f"{w.dcp} needs --tensor-parallel-size ({w.tp}) greater than the model's KV heads ({kv})")
    if w.dcp > w.tp // kv:
        _refuse("--decode-context-parallel-size", f"{w.dcp} exceeds TP // KV heads = {w.tp // kv}")
    if (heads // kv) % w.dcp:
        _refuse("--decode-context-parallel-size",
                f"{w.dcp} must divide the query heads per KV head ({heads // kv})")


@dataclass(frozen=True)
class DcpLayout:
    """One rank's KV-cache layout under decode context parallel: ``inner`` (the rank's own
    layout: the same pages and blocks) asked about ``cdiv(max_model_len, dcp)`` tokens per
    request, because each of the dcp ranks holds that share of every request's tokens (vLLM
    v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes). The logged tokens stay
    ``int(concurrency x max_model_len)`` (kv_cache_utils.get_kv_cache_capacity), so the same
    blocks log about dcp times the tokens. Units: bytes, tokens, blocks."""

    inner: object
    dcp: int

    def __getattr__(self, name):
        if name == "inner":  # not set yet (copy / unpickle): no delegation loop
            raise AttributeError(name)
        return getattr(self.inner, name)

    def num_blocks(self, available_bytes: int) -> int:
        return self.inner.num_blocks(available_bytes)

    def bytes_for_max_len(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        return self.inner.bytes_for_max_len(_cdiv(max_model_len, self.dcp), max_in_flight_tokens)

    def blocks_per_request(self, max_model_len: int, max_in_flight_tokens: int) -> int:
        return self.inner.blocks_per_request(_cdiv(max_model_len, self.dcp), max_in_flight_tokens)

    def max_concurrency(self, num_blocks: int, max_model_len: int, max_in_flight_tokens: int) -> float:
        return self.inner.max_concurrency(num_blocks, _cdiv(max_model_len, self.dcp), max_in_flight_tokens)

    def kv_cache_tokens(self, num_blocks: int, max_model_len: int, max_in_flight_tokens: int) -> int:
        return int(self.max_concurrency(num_blocks, max_model_len, max_in_flight_tokens) * max_model_len)

    def largest_max_model_len(self, available_bytes: int, upper: int, max_in_flight_tokens: int) -> int:
        """The largest length whose per-rank share fits: share x dcp, capped at ``upper``."""
        share = self.inner.largest_max_model_len(available_bytes, _cdiv(upper, self.dcp), max_in_flight_tokens)
        return min(upper, share * self.dcp)


@dataclass(frozen=True)
class ClassPlan:
    """One rank class and the plan of one of its GPUs (capacity/stage.py StagePlan: bytes,
    blocks)."""

    rank_class: RankClass
    stage: StagePlan


@dataclass(frozen=True)
class EnginePool:
    """The KV pool one DP engine allocates and logs ("GPU KV cache size: N tokens", "Maximum
    concurrency for L tokens per request: Cx"): the min over its own workers' blocks.

    Attributes: ``index`` (the DP rank); ``num_gpu_blocks``; ``gpu_kv_cache_tokens`` (tokens);
    ``max_concurrency`` (requests of max_model_len tokens); ``local_experts`` (the most whole
    routed experts one of its GPUs holds, None without EP)."""

    index: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int
    max_concurrency: float
    local_experts: int | None


@dataclass(frozen=True)
class LayoutPlan:
    """Every rank class planned, each DP engine's pool, and which class binds.

    ``binding``: the class with the fewest blocks (the least room for the KV cache); the Plan's
    top-level figures are its engine's. Cluster totals add the engines (each engine serves its
    own requests: vLLM's DP engines schedule independently)."""

    world: World
    classes: tuple[ClassPlan, ...]
    engines: tuple[EnginePool, ...]
    binding: ClassPlan

    @property
    def cluster_kv_cache_tokens(self) -> int:
        return sum(e.gpu_kv_cache_tokens for e in self.engines)

    @property
    def cluster_concurrency(self) -> float:
        return sum(e.max_concurrency for e in self.engines)

    @property
    def shown(self) -> bool:
        """Whether outputs show the layout: a layout beyond one engine of TP x PP (data, expert
        or context parallel, several nodes); a plain TP/PP engine prints as it always did."""
        w = self.world
        return w.dp > 1 or w.uses_ep or w.dcp > 1 or w.pcp > 1 or w.nnodes > 1


def layout_plan(
    world: World, classes: list[ClassPlan], stages: list[StagePlan], max_model_len: int, max_in_flight: int,
    min_over_world: bool = False,
) -> LayoutPlan:
    """The LayoutPlan of ``classes`` (every rank class planned) with ``stages`` (the binding
    class of each stage, after --max-model-len auto): each engine's blocks are the min over the
    classes its GPUs fall in (get_kv_cache_configs is per engine), its tokens and concurrency
    read off the first stage's layout at ``max_model_len`` (kv_cache_utils
    get_max_concurrency_for_kv_cache_config / get_kv_cache_capacity). ``min_over_world``: the
    version's ``parallel.BLOCKS_MIN_OVER_WORLD``: a MoE model's engines (one world) all take the
    min over every class."""
    layout = stages[0].layout
    mml = max(max_model_len, 1)
    engines = []
    for e, experts in enumerate(world.engine_binding_experts()):
        mine = [c for c in classes if min_over_world and world.is_moe or c.rank_class.local_experts == experts]
        blocks = min(c.stage.num_blocks for c in mine)
        conc = layout.max_concurrency(blocks, mml, max_in_flight) if layout.groups else 0.0
        tokens = layout.kv_cache_tokens(blocks, mml, max_in_flight) if layout.groups else 0
        engines.append(EnginePool(e, blocks, tokens, conc, experts))
    binding = min(classes, key=lambda c: (c.stage.num_blocks, c.stage.pipeline_rank))
    return LayoutPlan(world=world, classes=tuple(classes), engines=tuple(engines), binding=binding)
