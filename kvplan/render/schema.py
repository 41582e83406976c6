"""The JSON Schema of ``kvplan estimate --format json``, as pydantic models.

The models mirror ``kvplan.render.to_dict`` key for key (every object forbids unknown keys, so a
key added to or dropped from ``to_dict`` without this module fails tests/test_properties.py).
Types are strict: bytes, blocks, tokens and counts are JSON integers (never floats or strings).

Sizes are non-negative except the budget figures that are a *difference* and go negative when
the configuration does not start:

* ``memory.kv_cache_bytes`` / ``stages[].kv_cache_bytes``: requested - weights - activation -
  non-torch - graphs; negative = how far the memory is over-committed (``fits`` is false).
* ``memory.suggested_kv_cache_memory_bytes``: vLLM's suggestion, the same difference minus 150 MiB.
* ``memory.weights_breakdown["checkpoint_correction"]``: the gap between the checkpoint's tensors
  and kvplan's formula, negative when the checkpoint is smaller.

``estimate_json_schema()`` returns the JSON Schema (draft 2020-12, as pydantic writes it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kvplan.render.perf_schema import PerfSection

LayerKindName = Literal[
    "full_attention", "sliding_attention", "chunked_attention", "mla", "linear_attention", "mamba", "none"
]
# "gdn" / "mamba2": a Gated-DeltaNet / Mamba-2 state group in the newer version's align mode
# (engines/vllm/v0_33/kv_spec.py)
GroupKind = Literal["full", "sliding", "chunked", "mla", "mamba", "gdn", "mamba2"]
TorchDtype = Literal["float32", "float16", "bfloat16"]
KVCacheDtype = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]
MemoryQuality = Literal["measured", "cuda-exact", "torch-mib-floor", "vllm-log-gib", "estimate", "user"]

# A JSON array of two integers (tuples would reject JSON arrays in strict mode).
Pair = Annotated[list[int], Field(min_length=2, max_length=2)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class MLA(_Strict):
    """``model.mla``: DeepSeek multi-head latent attention shape (ModelSpec.mla)."""

    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(ge=0)
    qk_nope_head_dim: int = Field(ge=0)
    v_head_dim: int = Field(gt=0)
    q_lora_rank: Optional[int] = Field(ge=0)


class MoE(_Strict):
    """``model.moe``: mixture-of-experts shape (ModelSpec.moe)."""

    num_experts: int = Field(gt=0)
    top_k: int = Field(gt=0)
    moe_intermediate_size: int = Field(gt=0)
    shared_intermediate_size: int = Field(ge=0)
    shared_expert_gate: bool
    router_bias: bool
    expert_bias: bool
    gated: bool = Field(True, description="gate + up experts; written only when false (plain up/down experts)")


class Quantization(_Strict):
    """``model.quantization``: the checkpoint's weight quantization (ModelSpec.quantization)."""

    method: str = Field(min_length=1)
    bits: int = Field(gt=0)
    group_size: int = Field(ge=-1, description="elements per scale group; -1 = per channel")
    desc_act: bool
    zero_point: bool
    source: Literal["checkpoint", "runtime"]
    block_size: Optional[Pair]
    kv_cache_fp8: bool
    modules_to_not_convert: list[str]


class Model(_Strict):
    """``model``: the parsed config (whole model, before tensor parallelism)."""

    name: str
    architecture: str = Field(min_length=1)
    model_type: str = Field(min_length=1)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    layer_kinds: dict[LayerKindName, int] = Field(description="layer kind -> number of decoder layers of it")
    sliding_window: Optional[int] = Field(gt=0)
    mla: Optional[MLA]
    moe: Optional[MoE]
    checkpoint_dtype: TorchDtype
    quantization: Optional[Quantization]
    derived_max_model_len: int = Field(gt=0, description="vLLM's default --max-model-len for this config")
    source: dict[str, Any] = Field(description="where the config came from (origin, path, repo, revision, notes)")


class GPU(_Strict):
    """``gpu``: the profile used, one device."""

    name: str = Field(min_length=1, description="profile id")
    display_name: str
    label: str = Field(
        description="the header's name for the GPU: display_name, or with --gpu-memory the size given and the "
        "profile whose other properties (fp8, bf16, compute capability) apply"
    )
    memory_bytes: int = Field(gt=0, description="CUDA-visible total of one GPU")
    memory_quality: MemoryQuality
    memory_source: Optional[str]
    count: int = Field(gt=0, description="GPUs used: tensor_parallel_size x pipeline_parallel_size")


class Engine(_Strict):
    """``engine``: the resolved engine arguments (planner.Plan.effective)."""

    model: str
    tensor_parallel_size: int = Field(gt=0)
    pipeline_parallel_size: int = Field(gt=0)
    max_model_len: int = Field(ge=0, description="tokens; 0 only when --max-model-len auto finds nothing that fits")
    gpu_memory_utilization: float = Field(gt=0, le=1)
    kv_cache_dtype: KVCacheDtype
    block_size: int = Field(gt=0)
    dtype: TorchDtype
    quantization: Optional[str]
    max_num_seqs: int = Field(gt=0)
    max_num_batched_tokens: int = Field(gt=0)
    enforce_eager: bool
    kv_cache_memory_bytes: Optional[int] = Field(gt=0)
    vllm_version: str
    usage: Literal["serve", "llm"]
    enable_prefix_caching: bool
    model_runner: Literal["v1", "v2"]
    async_scheduling: bool


class KVCacheSizing(_Strict):
    """``memory.kv_cache_sizing`` (vLLM 0.34.0 and later): which path sized the KV cache and,
    for the extensible KV cache, its terms (bytes; signed where memory may be over-committed)."""

    mode: Literal["extensible", "estimate"]
    free_after_warmup_bytes: Optional[int] = None
    transient_peak_bytes: Optional[int] = Field(default=None, ge=0)
    reserve_growth_bytes: Optional[int] = Field(default=None, ge=0)
    margin_bytes: Optional[int] = Field(default=None, ge=0)
    warmup_persistent_bytes: Optional[int] = Field(default=None, ge=0)
    capacity_bytes: Optional[int] = None


class Memory(_Strict):
    """``memory``: the budget of one GPU of the stage with the fewest blocks (bytes)."""

    total_bytes: int = Field(gt=0)
    requested_bytes: int = Field(ge=0)
    weights_bytes: int = Field(ge=0)
    activation_peak_bytes: int = Field(ge=0)
    non_torch_bytes: int = Field(ge=0)
    cudagraph_bytes: int = Field(ge=0)
    cudagraph_subtracted_bytes: int = Field(ge=0)
    kv_cache_bytes: int = Field(description="signed: negative when the memory is over-committed (fits is false)")
    kv_cache_memory_override: bool
    suggested_kv_cache_memory_bytes: int = Field(description="signed, like kv_cache_bytes")
    weights_breakdown: dict[str, int] = Field(
        description="part -> bytes; every part >= 0 except checkpoint_correction (signed)"
    )
    kv_cache_sizing: Optional[KVCacheSizing] = Field(
        default=None, description="vLLM 0.34.0 and later: the KV-cache sizing path and its terms"
    )


class Group(_Strict):
    """``kv_cache.groups[]``: one KV-cache group of the stage with the fewest blocks."""

    kind: GroupKind
    num_layers: int = Field(ge=0)
    padding_layers: int = Field(ge=0)
    block_size: int = Field(gt=0)
    page_size_bytes: int = Field(gt=0)
    sliding_window: Optional[int] = Field(gt=0)
    attention_chunk_size: Optional[int] = Field(gt=0)
    blocks_per_max_len_request: int = Field(gt=0)


class KVCache(_Strict):
    """``kv_cache``: vLLM's KV-cache figures (per GPU)."""

    num_gpu_blocks: int = Field(ge=0)
    block_size: int = Field(gt=0)
    page_size_bytes: int = Field(ge=0, description="0 only for a model without KV-cache layers")
    bytes_per_token: int = Field(ge=0)
    bytes_per_block: int = Field(gt=0)
    gpu_kv_cache_tokens: int = Field(ge=0)
    max_concurrency: float = Field(ge=0)
    max_model_len: int = Field(ge=0)
    padding_layers: int = Field(ge=0)
    groups: list[Group]


class Recommendation(_Strict):
    """``recommendations[flag]``: a flag value and why."""

    value: int | float | str | bool
    reason: str = Field(min_length=1)
    kind: Literal["fix", "pin", "option"] = Field(
        description="fix: needed for vLLM to start; pin: makes vLLM size what kvplan sized; option: raises the "
        "binding limit at a cost (listed, not put in serve_command)"
    )


class ServeFlag(_Strict):
    """``serve_flags[]``: one flag of serve_command and who put it there."""

    flag: str = Field(min_length=3, description="as `vllm serve` spells it (--no-X for a tri-state turned off)")
    value: int | float | str | bool = Field(description="the value as written on the line; true for a bare flag")
    origin: Literal["user", "recommended", "pinned"] = Field(
        description="user: a flag you set that differs from vLLM's default; recommended: kvplan's fix or pin "
        "(replaces your value of the same flag); pinned: the offline LLM class's batch sizes kvplan sized"
    )


class Stage(_Strict):
    """``stages[]``: one pipeline stage (per GPU of that stage)."""

    pipeline_rank: int = Field(ge=0)
    layers: Pair = Field(description="[first layer, last layer + 1)")
    num_gpu_blocks: int = Field(ge=0)
    weights_bytes: int = Field(ge=0)
    activation_peak_bytes: int = Field(ge=0)
    kv_cache_bytes: int = Field(description="signed, like memory.kv_cache_bytes")


class VllmChoice(_Strict):
    """``vllm``: which vLLM version's rules were used, and why (engines/vllm/versions.VersionChoice)."""

    version: str = Field(description="the version whose rules were used (engine.vllm_version)")
    reason: str = Field(
        min_length=1,
        description='why: "--vllm-version", "installed vllm X", "newest supported; no vllm installed", '
        '"given to the API", ...',
    )
    requested: Optional[str] = Field(
        default=None,
        description="the version the source named when kvplan has no rules for it (version is then the nearest "
        "supported one); absent otherwise",
    )


class EvidenceDoc(_Strict):
    """``evidence``: what the numbers stand on (engines/vllm/rules.Evidence)."""

    checked: bool = Field(description="every rule used was checked on a real start of this version")
    real_starts: int = Field(ge=0, description="real starts of this version kvplan's rules were checked on")
    unchecked: list[str] = Field(description="the rules used that no real start checked, in words")
    label: str = Field(
        min_length=1,
        description='"calibrated on N real vLLM X starts" or "derived from the source, not yet checked on hardware: ..."',
    )


class CurvePoint(_Strict):
    """One re-plan of the curves (kvplan.render.plots.CurvePoint)."""

    x: float = Field(description="--max-model-len in tokens (by_max_model_len) or a utilization fraction (by_utilization)")
    max_concurrency: float = Field(ge=0, description="vLLM's max concurrency for x-token requests; 0 when it does not start")
    fits: bool
    workload_requests: Optional[float] = Field(description="the --workload's requests that fit; null without --workload")
    workload_excluded: float = Field(ge=0, le=1, description="fraction of the workload longer than x (left out)")


class MemoryPart(_Strict):
    label: str
    bytes: int = Field(ge=0)


class Curves(_Strict):
    """``estimate --curves --format json``: kvplan.render.plots.pictures_dict."""

    by_max_model_len: list[CurvePoint]
    by_utilization: list[CurvePoint]
    memory: list[MemoryPart] = Field(description="per GPU of the worst stage, left to right, summing to the total")
    current_max_model_len: int = Field(ge=0)
    current_utilization: float
    max_num_seqs: int = Field(ge=1)


class RankClassDoc(_Strict):
    """``parallel.rank_classes[]``: one GPU of a rank class (capacity/ranks.py RankClass)."""

    pipeline_rank: int = Field(ge=0)
    layers: Pair = Field(description="[first, last + 1] decoder layers of the stage (vLLM get_pp_indices)")
    local_experts: Optional[int] = Field(ge=0, description="whole routed experts per MoE layer (expert parallel); null without EP")
    expert_shards: Optional[int] = Field(ge=1, description="ways each expert is split (TP x PCP x DP without EP, 1 with); null for a dense model")
    gpus: int = Field(ge=1, description="GPUs of the deployment in this class")
    weights_bytes: int
    kv_cache_bytes: int
    num_gpu_blocks: int = Field(ge=0)
    binding: bool = Field(description="the class with the fewest blocks")


class EngineDoc(_Strict):
    """``parallel.engines[]``: one DP engine's pool, as that engine logs it."""

    data_parallel_rank: int = Field(ge=0)
    num_gpu_blocks: int = Field(ge=0)
    gpu_kv_cache_tokens: int = Field(ge=0)
    max_concurrency: float = Field(ge=0)
    local_experts: Optional[int] = Field(ge=0)


class LaunchDoc(_Strict):
    """``parallel.launch[]``: the command one node runs."""

    node_rank: int = Field(ge=0)
    headless: bool = Field(description="a worker node (no API server, not a server of its own)")
    command: str = Field(min_length=1)


class ClusterDoc(_Strict):
    """``parallel.cluster``: the engines added up (each serves its own requests)."""

    gpu_kv_cache_tokens: int = Field(ge=0)
    max_concurrency: float = Field(ge=0)


class ParallelDoc(_Strict):
    """``parallel``: the multi-GPU layout (render/parallel.py parallel_section; capacity/ranks.py)."""

    tensor_parallel_size: int = Field(ge=1)
    pipeline_parallel_size: int = Field(ge=1)
    data_parallel_size: int = Field(ge=1)
    prefill_context_parallel_size: int = Field(ge=1)
    decode_context_parallel_size: int = Field(ge=1)
    expert_parallel: bool
    expert_parallel_size: Optional[int] = Field(ge=1)
    num_experts: int = Field(ge=0)
    num_redundant_experts: int = Field(ge=0)
    gpus: int = Field(ge=1, description="GPUs used: TP x PP x DP x PCP")
    gpus_per_engine: int = Field(ge=1)
    nnodes: int = Field(ge=1)
    engines_per_node: int = Field(ge=0)
    engines_independent: bool = Field(description="a dense model's DP engines are independent DP 1 deployments")
    rank_classes: list[RankClassDoc] = Field(min_length=1)
    engines: list[EngineDoc] = Field(min_length=1)
    cluster: ClusterDoc
    launch: list[LaunchDoc] = Field(min_length=1, description="one per node")
    evidence: str = Field(min_length=1, description='"derived from the vLLM source, not checked on multi-GPU hardware"')


class EstimateDocument(_Strict):
    """The whole ``kvplan estimate --format json`` document (kvplan.render.to_dict)."""

    # ``approximate`` is there exactly when ``fully_modelled`` (and its deprecated twin ``exact``)
    # is false (the JSON Schema says it with if/then/else; the validator below says it to pydantic).
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True,
        json_schema_extra={
            "if": {"properties": {"fully_modelled": {"const": False}}},
            "then": {"required": ["approximate"], "properties": {"exact": {"const": False}}},
            "else": {"not": {"required": ["approximate"]}, "properties": {"exact": {"const": True}}},
        },
    )

    @model_validator(mode="after")
    def _approximate_iff_not_fully_modelled(self) -> "EstimateDocument":
        if self.fully_modelled == bool(self.approximate):
            raise ValueError("'approximate' must list the reasons exactly when 'fully_modelled' is false")
        if self.__dict__["exact"] != self.fully_modelled:  # read without the deprecation warning
            raise ValueError("'exact' (deprecated) must equal 'fully_modelled'")
        return self

    kvplan_version: str
    fully_modelled: bool = Field(
        description="true when kvplan has a rule for every part of this estimate; false when it assumed "
        "something (an architecture without a kvplan family sized from the standard keys, a partial bundled "
        "snapshot, a memory term or a `vllm serve` flag it does not model: the reasons are in approximate). "
        "It is no claim that real starts checked the numbers: that is evidence"
    )
    exact: bool = Field(
        deprecated=True,
        description="DEPRECATED (kvplan 0.1.x; removed in the next release): the same value as fully_modelled, "
        "under its old name. It never meant 'checked on hardware' (see evidence)",
    )
    approximate: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        min_length=1,
        description="why the estimate is approximate, one line per reason (kvplan.model.spec.Approximation); "
        "present exactly when fully_modelled is false",
    )
    vllm: VllmChoice
    evidence: Optional[EvidenceDoc] = Field(description="what the numbers stand on; null only from the Python API without rules")
    model: Model
    gpu: GPU
    engine: Engine
    memory: Memory
    kv_cache: KVCache
    binding_limit: Literal["kv_cache", "max_num_seqs"]
    fits: bool
    outcome: Literal[
        "starts",
        "utilization_refused",
        "kv_cache_memory_oom",
        "no_kv_cache_memory",
        "max_model_len_too_long",
        "no_kv_tokens",
        "cuda_graph_capture_oom",
    ] = Field(description="what vLLM does at start-up (kvplan.capacity.estimate.StartOutcome); fits is outcome == starts")
    failure: Optional[str] = Field(description="why vLLM would not start; null when it fits")
    largest_max_model_len: Optional[int] = Field(ge=0)
    recommendations: dict[str, Recommendation] = Field(description="flag (as vllm serve spells it) -> value, reason")
    serve_command: str = Field(min_length=1)
    serve_flags: list[ServeFlag] = Field(description="serve_command's flags in order, each with its origin")
    serve_env: Optional[dict[str, str]] = Field(
        default=None,
        description="environment variables vLLM must start with for this plan, which serve_command sets before "
        "`vllm serve` (VLLM_ALLOW_LONG_MAX_MODEL_LEN when --max-model-len is above the model's derived max "
        "length); absent when none is needed",
    )
    parallel: Optional[ParallelDoc] = Field(
        default=None,
        description="the multi-GPU layout (data / expert / context parallel, several nodes): every rank class, "
        "each DP engine's pool, the cluster, each node's launch line; absent for one TP/PP engine",
    )
    warnings: list[str]
    notes: list[str] = Field(description="kvplan's own uncertainty the user cannot act on (estimate --verbose)")
    stages: list[Stage] = Field(min_length=1)
    workload: Optional[dict[str, Any]] = Field(
        default=None,
        description="added by `estimate` only with --workload/--n/--shared-prefix-tokens/--plot/--curves "
        "(kvplan.capacity.workload CapacityReport.to_dict); absent otherwise",
    )
    curves: Optional[Curves] = Field(
        default=None,
        description="added by `estimate --curves` only (kvplan.render.plots.pictures_dict): max concurrency "
        "re-planned over --max-model-len and --gpu-memory-utilization, and the memory parts; absent otherwise",
    )
    addons: Optional[dict[str, Any]] = Field(
        default=None,
        description="added only with speculative decoding, LoRA, weight or KV offload flags "
        "(kvplan.capacity.addons AddonReport.to_dict): draft KV layers, lookahead, bytes by part, CPU KV pool, "
        "host memory; absent otherwise",
    )
    perf: Optional[PerfSection] = Field(
        default=None,
        description="added by `estimate --workload ... --perf` only (kvplan/render/perf_schema.py PerfSection): "
        "the workload served in a closed loop at the concurrency that fits; absent otherwise",
    )


def estimate_json_schema() -> dict:
    """The JSON Schema of the ``kvplan estimate --format json`` document.

    Returns:
        a JSON-serialisable dict (pydantic's JSON Schema of EstimateDocument, validation mode).
    Raises:
        nothing.
    """
    schema = EstimateDocument.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kvplan estimate --format json"
    return schema
