"""Compose the add-ons (speculative decoding, LoRA, weight offload, KV offload) into one
estimate: read the flags once (engines/vllm/features.py), ask the version's rules
(``rules.addons``, engines/vllm/v0_26/addons.py and successors) what each costs, and hand
capacity/estimate.py plan() the pieces it adds to its steps. Pure: no I/O (the draft's config
was read by sources/draft.py and rides on ``spec.speculative_draft``).

The report (AddonReport) is what every output shows: the draft's weights and KV layers, the
lookahead slots, the ngram buffer, the LoRA slots, the offloaded weights, the CPU KV pool and
the host memory the offloads need.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvplan.capacity.outcomes import EstimateRefusal, RefusalKind
from kvplan.engines.vllm.features import Features, features_of
from kvplan.errors import KvplanError
from kvplan.model.spec import Approximation, ApproximationKind


@dataclass(frozen=True)
class AddonPlan:
    """The add-ons of one estimate before its stages are budgeted.

    Attributes:
        features: the settings read from the flags.
        draft: the DraftModel (None without one).
        draft_layer_specs: the draft's KV-cache layer specs (one rank), joining the target's.
        lookahead_tokens: per-request lookahead slots (K).
        approximations: why the figures are approximate (what kvplan does not size).
        v2: the model runner with these features.
    """

    features: Features
    draft: Any = None
    draft_layer_specs: tuple = ()
    lookahead_tokens: int = 0
    approximations: tuple[Approximation, ...] = ()
    v2: bool = True
    checkpoint_read: bool = True  # False with --load-format dummy (the draft's own heads are never loaded)


@dataclass(frozen=True)
class AddonReport:
    """What the add-ons did to one estimate (bytes per GPU of the worst stage unless named).

    Attributes:
        parts: name -> bytes (draft weights by part, LoRA slots, offloaded weights as negatives,
            the ngram history and the drafter's runner buffers, the drafter's and LoRA's profile
            bytes, and on 0.34.0 the drafter's share of the sizing step's P and G).
        draft_layers: the draft's KV layers per block (the block then holds target + these).
        lookahead_tokens: slots reserved per request past its tokens (not in vLLM's logged tokens).
        blocks_per_max_len_request: blocks one max-length request occupies with its lookahead
            (each KV group's blocks for max_model_len + lookahead tokens, the rule of the
            concurrency figure: KVCacheLayout.blocks_per_request).
        max_len_request_schedulable: False when the pool holds fewer blocks than that.
        kv_offload: the CPU KV pool (v0_26/addons.py KVOffloadCapacity) or None.
        host_bytes: host memory the offloads need on the node (pinned weights + CPU KV pool),
            None when a connector owns memory kvplan does not size.
        features: the settings (for labels).
    """

    parts: dict = field(default_factory=dict)
    draft_layers: int = 0
    lookahead_tokens: int = 0
    blocks_per_max_len_request: int | None = None
    max_len_request_schedulable: bool = True
    kv_offload: Any = None
    host_bytes: int | None = 0
    features: Features | None = None

    def to_dict(self) -> dict:
        """JSON form (bytes as int)."""
        f = self.features
        kvo = self.kv_offload
        return {
            "speculative": None if f is None or f.speculative is None else {
                "method": f.speculative.method, "num_speculative_tokens": f.speculative.num_speculative_tokens,
                "draft_model": f.speculative.model, "draft_kv_layers": self.draft_layers,
                "lookahead_tokens": self.lookahead_tokens,
                "blocks_per_max_len_request": self.blocks_per_max_len_request,
                "max_len_request_schedulable": self.max_len_request_schedulable,
            },
            "lora": None if f is None or f.lora is None else {
                "max_loras": f.lora.max_loras, "max_lora_rank": f.lora.max_lora_rank,
                "max_cpu_loras": f.lora.max_cpu_loras, "fully_sharded_loras": f.lora.fully_sharded_loras,
            },
            "kv_offload": None if kvo is None else {
                "connector": kvo.connector, "cpu_blocks": kvo.cpu_blocks, "cpu_tokens": kvo.cpu_tokens,
                "host_bytes": kvo.host_bytes, "host_rule": kvo.host_rule,
            },
            "host_bytes": self.host_bytes,
            "bytes": dict(self.parts),
        }


def _approx(reason: str) -> Approximation:
    return Approximation(kind=ApproximationKind.PARTIAL_RULES, reason=reason)


def plan_addons(spec, args, rules, resolved, tp: int, pp: int) -> AddonPlan | None:
    """The add-ons of ``args`` (EngineArgs) for ``spec`` under ``rules``; None when none is on.

    Raises:
        EstimateRefusal / KvplanError: a flag vLLM refuses (names it), or a draft model that was
            not read (the caller must attach it: sources/draft.py attach_draft).
    """
    ad = rules.addons
    if ad is None:
        return None
    try:
        feats = features_of(args, ad.MTP_METHODS)
    except KvplanError as exc:
        raise EstimateRefusal(RefusalKind.ADDON, exc.message, exc.hint,
                              flag=exc.message.split(" ", 1)[0].rstrip(":")) from None
    if not feats.any:
        return None
    approx: list[Approximation] = []
    sp = feats.speculative
    draft = getattr(spec, "speculative_draft", None)
    draft_specs: tuple = ()
    if sp is not None and sp.method is None and draft is not None:
        # vLLM detects the method from the draft (config/speculative.py): sources/draft.py did
        sp = replace(sp, method=draft.method)
        feats = replace(feats, speculative=sp)
    if sp is not None:
        if sp.method not in ad.SIZED_METHODS and not (sp.method is None and draft is not None):
            approx.append(_approx(f"--speculative-config method {sp.method!r}: kvplan does not size this drafter "
                                  "(its weights, KV layers and buffers are left out)"))
        elif sp.method in ("eagle", "eagle3", "mtp", "draft_model") or sp.model is not None:
            if draft is None:
                raise KvplanError(
                    f"--speculative-config: the draft model's config was not read ({sp.model or 'the target MTP layers'})",
                    hint="the CLI reads it with the model (sources/draft.py attach_draft)",
                )
            approx += [_approx(f"draft model: {a.reason}") for a in draft.spec.approximations]
            specs, _ = rules.kv_spec.layer_cache_specs(
                draft.spec, tensor_parallel_size=tp, block_size=resolved.block_size,
                kv_dtype_bytes_=resolved.kv_dtype_bytes, model_dtype_bytes=resolved.dtype_bytes,
            )
            draft_specs = tuple(specs)
            if pp > 1:
                approx.append(_approx("speculative decoding with --pipeline-parallel-size > 1: the draft's KV layers "
                                      "are placed on the last stage by vLLM; kvplan's per-stage projection leaves them out"))
    # what a real start of this version measured kvplan off on (engines/vllm/v0_34/addons.py)
    approx += [_approx(m) for m in getattr(ad, "measured_misses", lambda f, s=None: ())(feats, spec)]
    if feats.lora is not None and spec.is_multimodal:
        approx.append(_approx("LoRA on a multimodal model: the vision tower's LoRA slots are not sized"))
    kvo = feats.kv_offload
    if kvo is not None and kvo.connector not in ("OffloadingConnector", "SimpleCPUOffloadConnector"):
        approx.append(_approx(f"KV connector {kvo.connector}: its own memory (device buffers, CPU pool) is not sized; "
                              + ("it turns vLLM's hybrid KV-cache manager off, which kvplan does not apply"
                                 if spec.is_hybrid or any(k.value == "sliding_attention" for k in spec.layer_kinds) else
                                 "the GPU KV cache is sized as without it")))
    v2 = ad.uses_v2_runner(resolved.v2, feats, pp)
    return AddonPlan(features=feats, draft=draft, draft_layer_specs=draft_specs,
                     lookahead_tokens=ad.lookahead_tokens(feats), approximations=tuple(approx), v2=v2,
                     checkpoint_read=getattr(args, "load_format", None) != "dummy")


def speculative_tokens(addons: AddonPlan | None) -> int:
    """vLLM's ``num_speculative_tokens`` (any method; 1 when the config leaves it out, as
    lookahead_tokens reads it), 0 without speculative decoding."""
    sp = None if addons is None else addons.features.speculative
    return 0 if sp is None else (sp.num_speculative_tokens or 1)


def with_speculative_state_blocks(layout, num_speculative_tokens: int):
    """``layout`` (the version's KVCacheLayout) with every recurrent (Mamba / Gated-DeltaNet)
    group holding ``num_speculative_tokens`` more state pages per request.

    Rule (every supported vLLM version): model_executor/layers/mamba/abstract.py
    MambaBase.get_kv_cache_spec sets ``num_speculative_blocks = num_speculative_tokens``
    (the newest: 0 with --use-replayssm, which kvplan does not model), and
    v1/kv_cache_interface.py MambaSpec.max_memory_usage_bytes counts those pages, so they enter
    the start check, the concurrency and the logged tokens (get_max_concurrency_for_kv_cache_config).
    Attention groups are unchanged. Units: blocks."""
    if num_speculative_tokens <= 0 or not layout.groups or not any(g.cache_kind.one_state_block for g in layout.groups):
        return layout
    groups = tuple(
        replace(g, speculative_blocks=num_speculative_tokens) if g.cache_kind.one_state_block else g
        for g in layout.groups
    )
    return replace(layout, groups=groups)


def resolved_with_runner(resolved, addons: AddonPlan | None, pp: int):
    """``resolved`` with the runner the add-ons choose (and the in-flight tokens that follow:
    resolve.py's max_concurrent_batches rule)."""
    if addons is None or addons.v2 == resolved.v2:
        return resolved
    v2 = addons.v2
    batches = (pp + 1) if (resolved.async_scheduling and v2) else (2 if (resolved.async_scheduling and pp == 1) else pp)
    return replace(resolved, v2=v2, max_in_flight=batches * resolved.max_num_batched_tokens)


@dataclass(frozen=True)
class StageCosts:
    """What the add-ons add to one stage's budget (bytes): weight parts (negative = offloaded),
    consumed memory (``persistent``, by name in ``buffers``), the activation peak, graph layers
    and factor, host bytes pinned, and (a version with an extensible KV cache, v0_34/addons.py
    draft_sizing_bytes) what they add to its sizing step's transient peak P and torch
    reservation growth G."""

    weights: dict
    persistent: int
    activation: int
    graph_layers: int
    graph_factor: int
    host_bytes: int
    approximations: tuple = ()
    buffers: dict = field(default_factory=dict)
    sizing_peak: int = 0
    reserve_growth: int = 0


def stage_costs(spec, addons: AddonPlan | None, rules, resolved, *, tp: int, layers: range, first: bool, last: bool
                ) -> StageCosts | None:
    """The add-ons' costs on one GPU of the stage holding ``layers`` (version rules: rules.addons)."""
    if addons is None:
        return None
    ad, f, db = rules.addons, addons.features, resolved.dtype_bytes
    weights: dict[str, int] = {}
    buffers: dict[str, int] = {}
    activation = graph_layers = host = sizing_peak = reserve_growth = 0
    factor = 1
    approx: list[Approximation] = []
    if f.speculative is not None and last:
        if addons.draft is not None:
            weights.update(ad.draft_weight_parts(addons.draft, spec, rules.weights, tp=tp, dtype_bytes=db,
                                                 checkpoint_read=addons.checkpoint_read))
            activation += ad.draft_activation_bytes(addons.draft, spec, max_num_batched_tokens=resolved.max_num_batched_tokens,
                                                    dtype_bytes=db)
            graph_layers += ad.draft_graph_layers(len(addons.draft_layer_specs), f)
        buffers["ngram_token_history"] = ad.ngram_history_bytes(f, resolved.max_num_seqs, resolved.max_model_len)
        # a version whose runner keeps drafter buffers / sizes its cache on a drafter step (v0_34)
        if hasattr(ad, "draft_persistent_bytes"):
            buffers.update(ad.draft_persistent_bytes(addons.draft, spec, f, max_num_batched_tokens=resolved.max_num_batched_tokens,
                                                     max_num_seqs=resolved.max_num_seqs, dtype_bytes=db))
        if hasattr(ad, "draft_sizing_bytes"):
            sizing_peak, reserve_growth = ad.draft_sizing_bytes(activation)
    buffers = {k: v for k, v in buffers.items() if v}
    persistent = sum(buffers.values())
    if f.lora is not None:
        lora_db = db if f.lora.lora_dtype == "auto" else 2
        parts, unsized = ad.lora_slot_parts(spec, f.lora, tp=tp, dtype_bytes=lora_db, layers=layers, first=first, last=last)
        weights.update(parts)
        if unsized:
            approx.append(_approx("LoRA slots of " + ", ".join(unsized) + " layers are not sized"))
        activation += ad.lora_activation_bytes(f.lora, max_num_batched_tokens=resolved.max_num_batched_tokens)
        factor = ad.LORA_CAPTURE_CASES
    if f.offload is not None and not offload_ignored(ad, addons.v2):
        parts, pinned = ad.offload_parts(spec, f.offload, rules.weights, tp=tp, dtype_bytes=db, quant=resolved.quant,
                                         layers=layers)
        weights.update(parts)
        host += pinned
        if any(k.value not in ("full_attention", "sliding_attention", "chunked_attention") for k in
               (spec.layer_kinds[i] for i in layers)) or resolved.quant is not None:
            approx.append(_approx("--cpu-offload-gb: this model's layers are walked in parts, not parameter by "
                                  "parameter (quantized or non-attention layers): the offloaded bytes may differ by one part"))
    return StageCosts(weights=weights, persistent=persistent, activation=activation, graph_layers=graph_layers,
                      graph_factor=factor, host_bytes=host, approximations=tuple(approx), buffers=buffers,
                      sizing_peak=sizing_peak, reserve_growth=reserve_growth)


def offload_ignored(ad, v2: bool) -> str | None:
    """Why the version's runner ignores weight offload (``ad``: the version's addons rules; ``v2``:
    the model runs on the V2 runner), or None when offload works (v0_26/addons.py
    OFFLOAD_IGNORED_ON_V2_RUNNER)."""
    return getattr(ad, "OFFLOAD_IGNORED_ON_V2_RUNNER", None) if v2 else None


def with_sizing_costs(activation, costs: StageCosts | None):
    """``activation`` (the version's ActivationEstimate) with what the add-ons add to the
    extensible KV cache's sizing step (``costs.sizing_peak`` to P, ``costs.reserve_growth`` to G);
    unchanged without add-ons or on a version without those terms (before 0.34.0)."""
    if costs is None or not (costs.sizing_peak or costs.reserve_growth) or not hasattr(activation, "sizing_peak_bytes"):
        return activation
    return replace(activation, sizing_peak_bytes=activation.sizing_peak_bytes + costs.sizing_peak,
                   reserve_growth_bytes=activation.reserve_growth_bytes + costs.reserve_growth)


def report(addons: AddonPlan | None, rules, stages: list, costs: list, *, block_size: int, tp: int, pp: int,
           max_model_len: int, num_blocks: int, in_flight: int = 0) -> AddonReport | None:
    """The AddonReport of a finished estimate (stages: StagePlan per stage; costs: StageCosts)."""
    if addons is None:
        return None
    worst = min(range(len(stages)), key=lambda i: stages[i].num_blocks)
    parts: dict[str, int] = {}
    for c in costs:
        if c is None:
            continue
        for k, v in c.weights.items():  # per GPU: the largest over stages (the draft is on the last)
            parts[k] = v if abs(v) > abs(parts.get(k, 0)) else parts.get(k, v)
        parts.update(c.buffers)
        if c.sizing_peak:
            parts["sizing_peak_extra"] = max(parts.get("sizing_peak_extra", 0), c.sizing_peak)
        if c.reserve_growth:
            parts["reserve_growth_extra"] = max(parts.get("reserve_growth_extra", 0), c.reserve_growth)
        if c.activation:
            parts["profile_activation_extra"] = max(parts.get("profile_activation_extra", 0), c.activation)
    host_weights = sum(c.host_bytes for c in costs if c is not None) * tp
    layout = stages[worst].layout
    k = addons.lookahead_tokens
    need_blocks = None
    schedulable = True
    if k and layout.groups and max_model_len > 0:
        # the per-group rule of the concurrency figure (allocator.KVCacheLayout.blocks_per_request:
        # full attention cdiv(len, block), sliding windows their window, recurrent groups their
        # fixed state pages incl. the speculative ones), at the request's tokens plus the
        # lookahead slots the scheduler allocates with them (v1/core/sched/scheduler.py
        # allocate_slots(num_lookahead_tokens))
        need_blocks = layout.blocks_per_request(max_model_len + k, in_flight)
        schedulable = num_blocks >= need_blocks
    kvo = None
    host: int | None = host_weights
    f = addons.features
    if f.kv_offload is not None:
        page = layout.groups[0].page_size_bytes if layout.groups else 1
        kvo = rules.addons.kv_offload_capacity(f.kv_offload, bytes_per_block=layout.bytes_per_block,
                                               page_size_bytes=page, block_size=block_size, world_size=tp * pp)
        host = None if kvo.host_bytes is None else host_weights + kvo.host_bytes
    return AddonReport(parts=parts, draft_layers=len(addons.draft_layer_specs), lookahead_tokens=k,
                       blocks_per_max_len_request=need_blocks, max_len_request_schedulable=schedulable,
                       kv_offload=kvo, host_bytes=host, features=f)


def remarks(rep: AddonReport | None, max_model_len: int, starts: bool = True) -> list:
    """The warnings an AddonReport adds to the estimate (Note list). ``starts``: False when
    the estimate refuses the start (weights, memory, max-model-len ...): then no note may say
    "vLLM starts", so the one about a max-length request that can never be scheduled is left
    out (the refusal is the finding)."""
    from kvplan.capacity.outcomes import Note, NoteKind

    if rep is None:
        return []
    out = []
    if rep.lookahead_tokens:
        out.append(Note(NoteKind.ADDON, (
            f"speculative decoding reserves {rep.lookahead_tokens} lookahead slots per request that vLLM's logged "
            f"KV-cache tokens and concurrency leave out: a {max_model_len}-token request occupies "
            f"{rep.blocks_per_max_len_request} blocks")))
    if starts and not rep.max_len_request_schedulable:
        out.append(Note(NoteKind.ADDON, (
            f"the pool holds fewer blocks than one {max_model_len}-token request needs with its "
            f"{rep.lookahead_tokens} lookahead slots ({rep.blocks_per_max_len_request}): vLLM starts, but such a "
            "request can never be scheduled; lower --max-model-len")))
    kvo = rep.kv_offload
    if kvo is not None and kvo.cpu_tokens is not None:
        out.append(Note(NoteKind.ADDON, (
            f"KV offloading ({kvo.connector}): the CPU pool holds {kvo.cpu_tokens:,} tokens ({kvo.cpu_blocks:,} blocks); "
            f"it maps {kvo.host_bytes / 2**30:.2f} GiB of host memory ({kvo.host_rule})")))
    elif kvo is not None:
        out.append(Note(NoteKind.ADDON, f"KV offloading: {kvo.host_rule}"))
    return out


# --- /dev/shm ----------------------------------------------------------------------------------
# In the releases whose rules keep it there (engines/vllm/v0_33 on), on CUDA, the native CPU KV
# pool is one file in /dev/shm per engine (the version's addons.KV_OFFLOAD_HOST_LAYOUT "shared-region": v1/kv_offload/cpu/shared_offload_region.py
# SharedOffloadRegion; each data-parallel engine has its own engine_id, v1/engine/utils.py
# ``{engine_id}_dp{rank}``, so its own file). check.rules.shm compares it with a container's
# /dev/shm; the manifest writers (render/served.py) size the /dev/shm they mount from it.
SHARED_REGION = "shared-region"  # the version's addons.KV_OFFLOAD_HOST_LAYOUT for a /dev/shm pool


def engines_on_a_node(p) -> int:
    """The engines (each with its own region) one pod/node runs: --data-parallel-size-local with
    several nodes, else every DP engine of the serve line (capacity/ranks.py World)."""
    world = p.parallel.world if getattr(p, "parallel", None) is not None else None
    if world is None:
        return 1
    return max(world.data_parallel_size_local if world.nnodes > 1 else world.dp, 1)


def shm_region_bytes(p) -> int:
    """Bytes of /dev/shm the plan's KV offload pool maps on one node (0 when the version keeps the
    pool elsewhere, or there is none): the version's region per engine x the engines on the node."""
    rep = getattr(p, "addons", None)
    kvo = getattr(rep, "kv_offload", None)
    layout = getattr(getattr(p.rules, "addons", None), "KV_OFFLOAD_HOST_LAYOUT", None) if p.rules else None
    # SimpleCPUOffloadConnector (VLLM_USE_SIMPLE_KV_OFFLOAD) pins torch tensors instead
    # (v1/simple_kv_offload/worker.py _alloc_cpu_caches): no /dev/shm file
    if kvo is None or not kvo.host_bytes or layout != SHARED_REGION or kvo.connector != "OffloadingConnector":
        return 0
    return kvo.host_bytes * engines_on_a_node(p)
