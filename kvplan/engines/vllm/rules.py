"""The rules object of one vLLM version: everything kvplan knows about how that version
behaves, chosen once per estimate (engines/vllm/versions.py select) and passed down.

A version's rules live in one package (engines/vllm/v0_26/ ...); its ``__init__`` builds one
frozen VllmRules. A new version is one new package plus one line in versions.SUPPORTED; a
version that differs from another in a few places can reuse the other's modules and replace
only those fields (dataclasses.replace), and reuse the other's functions with only a parameter
or a hook replaced (``override``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Callable


@dataclass(frozen=True)
class FittedCoefficients:
    """Empirical byte terms fitted on one version's real starts (each documented where the
    version's package defines it: memory.py, runner.py). Bytes per GPU (int).

    Attributes:
        non_torch_single_gpu: CUDA memory outside torch's allocator on one GPU.
        non_torch_v1_cudagraph_extra: extra non-torch memory with V1-runner CUDA graphs.
        non_torch_multi_gpu_extra: the NCCL/all-reduce part when more than one GPU takes part.
    """

    non_torch_single_gpu: int
    non_torch_v1_cudagraph_extra: int
    non_torch_multi_gpu_extra: int

    @classmethod
    def of(cls, memory: ModuleType) -> "FittedCoefficients":
        """The coefficients a version's memory module defines (NON_TORCH_* constants)."""
        return cls(
            non_torch_single_gpu=memory.NON_TORCH_SINGLE_GPU,
            non_torch_v1_cudagraph_extra=memory.NON_TORCH_V1_CUDAGRAPH_EXTRA,
            non_torch_multi_gpu_extra=memory.NON_TORCH_MULTI_GPU_EXTRA,
        )


@dataclass(frozen=True)
class Evidence:
    """What one estimate's numbers stand on: the real starts its version was checked on, and
    the rules it used that none of them checked.

    Attributes:
        version: the vLLM version ("X.Y.Z").
        real_starts: how many real starts of that version kvplan's rules were checked on (the
            version package's real_starts.STARTS).
        unchecked: the rules this estimate used that no real start checked (the version's
            real_starts.unchecked), in words; empty when every rule it used was checked.
        identical_release: the release the answer is for when it is not ``version`` but its
            sizing source is identical to ``version``'s (versions.VersionChoice.apply_to); "" otherwise.
    """

    version: str
    real_starts: int
    unchecked: tuple[str, ...] = ()
    identical_release: str = ""

    @property
    def checked(self) -> bool:
        """Every rule the estimate used was checked on a real start of its version."""
        return not self.unchecked

    def label(self) -> str:
        """"calibrated on N real starts", or "derived from the source, not yet checked on
        hardware: <rule>; <rule> (the rest calibrated on N real starts)" (without the
        parenthesis when no real start of the version is recorded)."""
        calibrated = f"calibrated on {self.real_starts} real vLLM {self.version} starts"
        if self.identical_release:  # "sizing source identical to vLLM X (no start of Y itself); its rules: ..."
            return (f"sizing source identical to vLLM {self.version} (no start of {self.identical_release} itself); "
                    f"its rules: {replace(self, identical_release='').label()}")
        if self.checked:
            return calibrated
        derived = "derived from the source, not yet checked on hardware: " + "; ".join(self.unchecked)
        if not self.real_starts:  # a version no real start has checked: nothing is calibrated
            return derived
        return derived + f" (the rest {calibrated})"

    def to_dict(self) -> dict:
        """JSON: {"checked", "real_starts", "unchecked", "label"}."""
        return {"checked": self.checked, "real_starts": self.real_starts, "unchecked": list(self.unchecked),
                "label": self.label()}


# what an estimate uses that no real start of any version checked -> the label's words
PARALLEL_UNCHECKED = ("tensor/pipeline parallel > 1 (NCCL and custom all-reduce memory; every real start "
                      "ran on one GPU)")
# the words every output carries for a number that depends on a multi-GPU layout rule
# (capacity/ranks.py): data/expert/context parallel, pipeline split, several nodes
MULTI_GPU_UNCHECKED = "derived from the vLLM source, not checked on multi-GPU hardware"


def multi_gpu_layout(args: Any, spec: Any = None) -> tuple[str, ...]:
    """The multi-GPU layout rules an estimate with ``args`` (EngineArgs) depends on beyond one
    TP engine (capacity/ranks.py restates them from vLLM's source; ``spec`` the ModelSpec, whose
    experts DP engines share): data parallel, expert
    parallel, decode / prefill context parallel, several nodes, and the pipeline split when one
    of those is on. Empty for a plain TP/PP engine (collective_unchecked covers it)."""
    dp = getattr(args, "data_parallel_size", None) or 1
    dcp = getattr(args, "decode_context_parallel_size", None) or 1
    pcp = getattr(args, "prefill_context_parallel_size", None) or 1
    nnodes = getattr(args, "nnodes", None) or 1
    # a dense model has no experts: --enable-expert-parallel changes nothing (vLLM's use_ep)
    ep = (bool(getattr(args, "enable_expert_parallel", False)) and getattr(spec, "moe", None) is not None
          and args.tensor_parallel_size * pcp * dp > 1)
    out = []
    if dp > 1:
        moe = getattr(spec, "moe", None) is not None
        out.append(f"data parallel {dp} ({'engines sharing the experts' if moe else 'independent engines'})")
    if ep:
        out.append("expert parallel (whole experts per GPU)")
    if dcp > 1:
        out.append(f"decode context parallel {dcp} (tokens per block)")
    if pcp > 1:
        out.append(f"prefill context parallel {pcp}")
    if nnodes > 1:
        out.append(f"{nnodes} nodes")
    if out and args.pipeline_parallel_size > 1:
        out.append(f"pipeline split over {args.pipeline_parallel_size} stages")
    return tuple(out)


def collective_unchecked(args: Any, spec: Any = None) -> str | None:
    """The evidence words for the NCCL / custom all-reduce memory of a worker in a process group
    of more than one GPU, naming what makes the group (None for a worker alone): TP x PP x PCP
    ranks of one engine, and a MoE model's DP engines, which share one world
    (capacity/ranks.py World.communicator_world); a dense model's DP engines are each their own
    group. A plain TP/PP engine keeps PARALLEL_UNCHECKED's words."""
    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    pcp = getattr(args, "prefill_context_parallel_size", None) or 1
    dp = getattr(args, "data_parallel_size", None) or 1
    moe_dp = getattr(spec, "moe", None) is not None and dp > 1
    world = tp * pp * pcp * (dp if moe_dp else 1)
    if world <= 1:
        return None
    if pcp == 1 and not moe_dp:
        return PARALLEL_UNCHECKED
    parts = [f"{name} {n}" for name, n in (("tensor parallel", tp), ("pipeline parallel", pp),
                                           ("prefill context parallel", pcp)) if n > 1]
    if moe_dp:
        parts.append(f"{dp} data-parallel engines of a MoE model in one world")
    return (f"a process group of {world} GPUs ({', '.join(parts)}): NCCL and custom all-reduce memory; "
            "every real start ran on one GPU")


PARTIAL_SPEC_UNCHECKED = ("a partial bundled config snapshot (keys it lacks take transformers' defaults; "
                          "for exact figures give the model's own config.json)")


def start_gpus(starts: dict[str, str]) -> frozenset[str]:
    """The GPU profile ids (kvplan/data/gpus.yaml, e.g. "h200", "h100-sxm") the real starts
    ``starts`` (a version's real_starts.STARTS: path -> profile id) ran on."""
    return frozenset(starts.values())


def _gpu_names(ids: frozenset[str]) -> str:
    """The GPU profile ids ``ids`` as the label names them ("H100-SXM and H200"), sorted: the id
    upper-cased (kvplan/data/gpus.yaml; the rules do not import the profiles, which import them)."""
    return " and ".join(sorted(i.upper() for i in ids))


def gpu_unchecked(starts: dict[str, str], gpu: Any) -> str | None:
    """The evidence words when ``gpu`` (GPUProfile) is not a GPU the real starts ``starts`` (path
    -> profile id) ran on, or is one of them with a memory total the user gave (--gpu-memory);
    None when a start ran on it. Profiles are compared by id, so every alias of one profile
    ("H100", "NVIDIA H100 80GB HBM3", "h100-sxm") is one GPU, and a GPU a log measured counts as
    the bundled profile its reported name matches (GPUProfile.base_id)."""
    ran_on = start_gpus(starts)
    if not ran_on:
        return None
    ran = ("every real start ran on the " if len(ran_on) == 1 else "the real starts ran on the ") + _gpu_names(ran_on)
    if not ran_on & {gpu.id, getattr(gpu, "base_id", None)}:
        return f"the {gpu.display_name} ({ran}, not this GPU)"
    if getattr(gpu, "memory_quality", None) == "user":
        # a user-given total (--gpu-memory) on the starts' profile: not the GPU they ran on
        return (f"a GPU of {gpu.memory_bytes / 2**30:.2f} GiB given by {gpu.memory_source} "
                f"({ran}, {'with its' if len(ran_on) == 1 else 'each with its'} own memory)")
    return None


def common_unchecked(starts: dict[str, str], spec: Any, gpu: Any, args: Any) -> tuple[str, ...]:
    """What an estimate of ``spec`` (ModelSpec) on ``gpu`` (GPUProfile) with ``args``
    (EngineArgs) uses that no start of ``starts`` checked, whatever the version: tensor or
    pipeline parallel > 1 (every start ran on one GPU: NCCL buffers and the custom all-reduce's
    memory, vLLM distributed/ and gpu_worker.py's non-torch figure, were never measured) and,
    first, a multi-GPU layout (data / expert / context parallel, nodes: multi_gpu_layout), a GPU
    none of them ran on or one whose memory the user gave (gpu_unchecked), a partial bundled snapshot (spec.snapshot_notes). In that
    order; empty when none applies."""
    out = []
    layout = multi_gpu_layout(args, spec)
    if layout:
        out.append(f"the multi-GPU layout ({', '.join(layout)}): {MULTI_GPU_UNCHECKED}")
    # NCCL / all-reduce memory: a worker in a process group of more than one GPU (a MoE model's
    # DP engines share one world; a dense model's are each their own: capacity/ranks.py)
    collective = collective_unchecked(args, spec)
    if collective:
        out.append(collective)
    on_gpu = gpu_unchecked(starts, gpu)
    if on_gpu:
        out.append(on_gpu)
    if getattr(spec, "snapshot_notes", ()):
        out.append(PARTIAL_SPEC_UNCHECKED)
    return tuple(out)


@dataclass(frozen=True, eq=False)
class VllmRules:
    """How one vLLM version sizes memory and reads flags (compared and hashed by identity: one
    object per version, used as a cache key).

    Attributes:
        version: the vLLM version string ("X.Y.Z"), as `--vllm-version` spells it.
        evidence: what the rules were checked against (shown to users as provenance).
        flag_table: the version's `vllm serve` flags as data (flags by arity, short aliases,
            ignored, removed, cache dtypes, model dtypes, none-is-unset), read by
            engines/vllm/serve_flags.catalogue.
        serve_flags: EngineArgs field -> (`vllm serve` flag, the version's fixed default or None),
            used to write command lines (engines/vllm/flags.py).
        defaults: module: batch defaults, dtype and block-size resolution.
        quantization: module: accepted methods/dtypes, capability limits, checkpoint rules.
        kv_spec: module: bytes per page/token per layer-cache kind.
        allocator: module: KV-cache groups, blocks, tokens, concurrency.
        memory: module: the memory budget on one GPU.
        activation: module: the profiling run's activation peak.
        weights: module: weight bytes after loading.
        runner: module: which model runner, CUDA-graph memory.
        family_quirks: module: per-family quirks of this version's model implementations.
        coefficients: fitted byte terms the estimate reads from here (not from module globals).
        check_rules: module: rules only `kvplan check` reads (switches on by default ...).
        real_starts: module: STARTS (the real starts the rules were checked on) and
            ``unchecked(spec, gpu, args)`` (the rules an estimate uses that none of them checked).
        scheduler: module: the V1 scheduler's policy (``POLICY``) the perf emulator applies.
        parallel: module: the multi-GPU layout rules that differ by version (``PCP_WITH_DP``,
            ``redundant_experts``); the rest of the world of ranks is capacity/ranks.py.
        start_failures: model_type -> why this version cannot start that family at all (one
            line; the parse refuses such a config with it). Not inherited by a later version.
        kv_cache_dtype_ignored: model types whose model file builds its attention without the
            cache config, so the KV cache keeps the model dtype whatever --kv-cache-dtype says.
            Not inherited by a later version.
        removed_architectures: architecture -> the last vLLM release that served it, for the
            architectures this version's registry no longer serves (registry.py
            _PREVIOUSLY_SUPPORTED_MODELS) and kvplan has a family for: the parse refuses them.
        addons: module: speculative decoding, LoRA, weight and KV offload (v0_26/addons.py);
            inherited by a later version unless it replaces the module.
        unread_implementations: architecture -> why this version serves it from model code
            kvplan's rules were not checked against (one line); every estimate of it under this
            version is approximate with that reason. Not inherited by a later version.
    """

    version: str
    evidence: str
    flag_table: tuple
    serve_flags: dict
    defaults: ModuleType
    quantization: ModuleType
    kv_spec: ModuleType
    allocator: ModuleType
    memory: ModuleType
    activation: ModuleType
    weights: ModuleType
    runner: ModuleType
    family_quirks: ModuleType
    coefficients: FittedCoefficients
    check_rules: ModuleType
    real_starts: ModuleType
    scheduler: ModuleType | None = None
    parallel: ModuleType | None = None
    start_failures: dict = field(default_factory=dict)
    kv_cache_dtype_ignored: frozenset = frozenset()
    removed_architectures: dict = field(default_factory=dict)
    unread_implementations: dict = field(default_factory=dict)
    addons: ModuleType | None = None

    def evidence_for(self, spec: Any, gpu: Any, args: Any) -> Evidence:
        """The Evidence of an estimate of ``spec`` (ModelSpec) on ``gpu`` (GPUProfile) with
        engine ``args`` (EngineArgs) under these rules."""
        unchecked = tuple(self.real_starts.unchecked(spec, gpu, args))
        if self.addons is not None:
            from kvplan.engines.vllm.features import features_of

            feats = features_of(args, self.addons.MTP_METHODS)
            draft = getattr(spec, "speculative_draft", None)
            if feats.speculative is not None and feats.speculative.method is None and draft is not None:
                from dataclasses import replace as _replace  # the method vLLM detects from the draft

                feats = _replace(feats, speculative=_replace(feats.speculative, method=draft.method))
            unchecked += self.addons.unchecked(feats)
        return Evidence(self.version, len(self.real_starts.STARTS), unchecked)

    def gpu_memory_utilization(self, args: Any) -> float:
        """The gpu_memory_utilization this version uses for engine ``args`` (EngineArgs): the
        version's defaults.resolved_gpu_memory_utilization where its default depends on the
        sizing mode (vLLM 0.34.0: 1.0 with the extensible KV cache), else ``args``' value (the
        user's, or the version's fixed default). A fraction of total CUDA memory."""
        resolve = getattr(self.defaults, "resolved_gpu_memory_utilization", None)
        return resolve(args) if resolve is not None else args.gpu_memory_utilization

    def non_torch_bytes(self, world_size: int, v1_cudagraphs: bool = False) -> int:
        """Non-torch memory per GPU from this version's fitted coefficients (bytes); the rule is
        the version's memory.non_torch_bytes."""
        c = self.coefficients
        return self.memory.non_torch_bytes(
            world_size,
            v1_cudagraphs=v1_cudagraphs,
            single_gpu=c.non_torch_single_gpu,
            v1_cudagraph_extra=c.non_torch_v1_cudagraph_extra,
            multi_gpu_extra=c.non_torch_multi_gpu_extra,
        )


def override(rule: Callable[..., Any], doc: str, **changed: Any) -> Callable[..., Any]:
    """``rule`` (an earlier version's function) with only the keyword arguments in ``changed``
    (a fitted default, a hook) bound to this version's, documented by ``doc`` (the version's
    rule, its units and the vLLM source it restates). Callers may still pass those arguments."""
    bound = functools.partial(rule, **changed)
    bound.__doc__ = doc
    return bound
