"""Typed outcomes of an estimate: why vLLM would not start, what the estimate notes, why an
argument is refused. The message texts are the ones kvplan prints; code that needs to tell
outcomes apart reads ``kind`` (and ``flag``) instead of parsing the text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.model.spec import Approximation, ApproximationKind

# Why an estimate is approximate (Plan.approximations): made by the model parse, which alone
# knows what it assumed (kvplan.model.parse), and typed there so the model layer does not import
# this one; re-exported here beside the other outcomes of an estimate.
__all__ = [
    "Approximation", "ApproximationKind", "EstimateRefusal", "Failure", "Note", "NoteKind", "RefusalKind",
    "StartOutcome", "UNVERIFIED_NOTES",
]


class StartOutcome(str, enum.Enum):
    """What vLLM does at start-up with this model, GPU and flags (the typed outcome other
    code branches on; ``Plan.failure`` is its sentence for people).

    In vLLM's order (v1/worker/gpu_worker.py init_device, determine_available_memory,
    v1/core/kv_cache_utils.py check_enough_kv_cache_memory, then initialize_from_config and
    compile_or_warm_up_model):

    * ``starts``: vLLM starts and serves.
    * ``utilization_refused``: the requested share is more than is free at start-up.
    * ``kv_cache_memory_oom``: --kv-cache-memory-bytes does not fit beside the rest (OOM while
      allocating the KV cache).
    * ``no_kv_cache_memory``: weights + activation + non-torch leave nothing for the KV cache.
    * ``max_model_len_too_long``: one max_model_len request does not fit the KV cache.
    * ``no_kv_tokens``: --max-model-len auto found not even one token that fits.
    * ``cuda_graph_capture_oom``: the KV cache is allocated, then capturing CUDA graphs needs more
      memory than is left on the GPU: torch raises CUDA out of memory in capture_model and the
      engine core fails to start (nothing in vLLM catches it; version rules in engines/vllm/v0_26).
    """

    STARTS = "starts"
    UTILIZATION_REFUSED = "utilization_refused"
    KV_CACHE_MEMORY_OOM = "kv_cache_memory_oom"
    NO_KV_CACHE_MEMORY = "no_kv_cache_memory"
    MAX_MODEL_LEN_TOO_LONG = "max_model_len_too_long"
    NO_KV_TOKENS = "no_kv_tokens"
    CUDA_GRAPH_CAPTURE_OOM = "cuda_graph_capture_oom"


@dataclass(frozen=True)
class Failure:
    """Why vLLM would not start.

    Attributes:
        kind: which check failed (never StartOutcome.STARTS; Plan.outcome is this kind).
        message: the one line kvplan prints (Plan.failure).
        flag: the `vllm serve` flag to change ("--gpu-memory-utilization" ...), or None.
    """

    kind: StartOutcome
    message: str
    flag: str | None = None


class NoteKind(str, enum.Enum):
    """What an estimate's note (Plan.warnings) is about."""

    MODEL_SOURCE = "model_source"  # from parsing the config / the model source (ModelSpec.notes)
    BUNDLED_SNAPSHOT = "bundled_snapshot"  # a partial bundled snapshot (kvplan's own uncertainty)
    GPU_PROFILE = "gpu_profile"  # from the GPU profile (GPUProfile.warnings)
    GPU_MEMORY_ESTIMATED = "gpu_memory_estimated"  # CUDA-visible memory is not a reading
    FP8_KV_UNSUPPORTED_GPU = "fp8_kv_unsupported_gpu"  # fp8 KV cache on a GPU without fp8
    GPTQ_UNQUANTIZED = "gptq_unquantized"  # config-only GPTQ loads unquantized
    BLOCK_SIZE_BACKEND = "block_size_backend"  # the MLA backend's preferred block size
    BLOCK_SIZE_HYBRID_ALIGNED = "block_size_hybrid_aligned"  # raised so a state fits a page
    CHECKPOINT_WEIGHTS = "checkpoint_weights"  # checkpoint tensors override the formula
    MAX_MODEL_LEN_REDUCED = "max_model_len_reduced"  # --max-model-len auto reduced it
    LONG_MAX_MODEL_LEN = "long_max_model_len"  # beyond the trained length (VLLM_ALLOW_LONG_MAX_MODEL_LEN)
    CUDA_GRAPHS_IN_ACTIVATION_MEMORY = "cuda_graphs_in_activation_memory"  # graphs fit only in that memory
    PARALLEL_UNVERIFIED = "parallel_unverified"  # kvplan's NCCL term is unverified
    V1_CUDAGRAPH_UNVERIFIED = "v1_cudagraph_unverified"  # kvplan's V1 graph estimate is unverified
    MULTIMODAL = "multimodal"  # the vision encoder's profile is not modelled
    KV_HEAD_REPLICATION = "kv_head_replication"  # TP above num_key_value_heads
    ADDON = "addon"  # speculative decoding / LoRA / offload (capacity/addons.py)
    INEFFECTIVE_FLAG = "ineffective_flag"  # a multi-GPU flag that does nothing here (ranks.ineffective_flags)


# Notes about kvplan's own confidence rather than about the deployment (Plan.notes; the rest
# are Plan.warnings).
UNVERIFIED_NOTES = frozenset({NoteKind.BUNDLED_SNAPSHOT, NoteKind.PARALLEL_UNVERIFIED, NoteKind.V1_CUDAGRAPH_UNVERIFIED})


@dataclass(frozen=True)
class Note:
    """One note of an estimate.

    Attributes:
        kind: what it is about.
        message: the line kvplan prints (the same string is in Plan.warnings or Plan.notes).
    """

    kind: NoteKind
    message: str

    @property
    def about_kvplan(self) -> bool:
        """True for notes on kvplan's own uncertainty (Plan.notes), not on the deployment (Plan.warnings)."""
        return self.kind in UNVERIFIED_NOTES


class RefusalKind(str, enum.Enum):
    """Why the estimate refuses the arguments before sizing (vLLM would refuse them too)."""

    INVALID_PARALLEL = "invalid_parallel"  # TP/PP does not divide the model
    DTYPE = "dtype"
    QUANTIZATION = "quantization"
    MAX_MODEL_LEN = "max_model_len"
    MAX_NUM_BATCHED_TOKENS = "max_num_batched_tokens"
    ADDON = "addon"  # a speculative/LoRA/offload flag vLLM refuses (engines/vllm/features.py)


class EstimateRefusal(KvplanError):
    """A KvplanError (exit 2) raised by the estimate itself, typed.

    Attributes:
        kind: a RefusalKind.
        flag: the `vllm serve` flag the message names ("--tensor-parallel-size" ...), or None.
    """

    def __init__(self, kind: RefusalKind, message: str, hint: str | None = None, *, flag: str | None = None):
        super().__init__(message, hint)
        self.kind = kind
        self.flag = flag
