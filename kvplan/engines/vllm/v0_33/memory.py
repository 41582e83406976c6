"""vLLM 0.33.0's memory budget on one GPU: what is left for the KV cache.

Rule (vLLM 0.33.0 v1/worker/gpu_worker.py init_device + determine_available_memory,
utils/mem_utils.py memory_profiling, v1/worker/utils.py request_memory):

    requested = ceil(total_cuda_bytes * gpu_memory_utilization)   (minus external weight memory,
                                                                    0 unless load_format ipc_cache)
    non_kv    = total_consumed + transient_peak
              = weights + non_torch + persistent + peak_activation
    available = requested - non_kv - cudagraph_estimate           (estimate: runner.py)
    --kv-cache-memory B  ->  available = B

* total_consumed: device free memory at the worker's start snapshot minus free memory after the
  profile (cudaMemGetInfo). It holds the weights, every tensor made after the snapshot and still
  allocated (activation.py ``persistent_bytes``: the V2 sampler's per-request state and the
  fused-MoE workspace) and the memory outside torch's allocator (``non_torch``).
* peak_activation: the torch peak above what stays allocated after the profile (activation.py).
* cuBLAS handles/workspace and NCCL are created before the start snapshot, so they are not charged
  (they move into CUDA_CONTEXT_BYTES).

Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.v0_26.memory import (  # noqa: F401  (unchanged)
    NON_TORCH_MULTI_GPU_EXTRA,
    REDUNDANCY_BUFFER,
    requested_bytes,
)
from kvplan.engines.vllm.v0_26.memory import MemoryBudget as _MemoryBudget26

GiB = 1 << 30
MiB = 1 << 20

# Consumed memory that is neither weights nor a tensor kvplan models, on one GPU: fitted on the 4
# Llama-3-8B records of tests/data/vllm-0.33.0-h200 (consumed - weights - sampler state
# = 158,085,120 B at max_num_seqs 1024 and 158,085,376 B at 256). The other 5 records leave
# 97-197 MB here (Mixtral lowest, DeepSeek-V2-Lite highest): within +-0.3 % of their blocks.
NON_TORCH_SINGLE_GPU = 158_085_120
# No V1 runner in 0.33.0 (runner.py): no graph-dependent non-torch term.
NON_TORCH_V1_CUDAGRAPH_EXTRA = 0

# CUDA memory in use when the worker takes its start snapshot: 150,109,880,320 - 149,358,247,936
# = 751,632,384 B (init_free_memory of all 9 records; 0.26.0: 552,402,944). The extra 190 MiB is
# the cuBLAS warm-up and NCCL set-up that 0.33.0 does before the snapshot. vLLM refuses to start
# when the requested memory exceeds the free memory at the snapshot.
CUDA_CONTEXT_BYTES = 751_632_384


@dataclass(frozen=True)
class MemoryBudget(_MemoryBudget26):
    """0.26.0's budget fields; ``non_torch_bytes`` is everything consumed besides the weights
    (vLLM 0.33.0 prints weights + this as "consumed memory (weights + non-torch)");
    ``activation_peak_bytes`` is the transient peak; ``cudagraph_applied_bytes`` the subtracted
    graph estimate."""

    @property
    def free_at_start_bytes(self) -> int:
        """Free CUDA memory at the worker's start snapshot (total minus CUDA_CONTEXT_BYTES)."""
        return self.total_bytes - CUDA_CONTEXT_BYTES

    @property
    def consumed_bytes(self) -> int:
        """vLLM 0.33.0's "consumed memory (weights + non-torch)"."""
        return self.weights_bytes + self.non_torch_bytes

    @property
    def _charged(self) -> int:
        # vLLM 0.33.0 compile_or_warm_up_model: consumed + peak activation (which includes the
        # applied graph estimate) + the captured graphs, so graphs count twice there.
        return self.consumed_bytes + self.activation_peak_bytes + self.cudagraph_applied_bytes + self.cudagraph_bytes

    @property
    def fill_gpu_kv_cache_memory_bytes(self) -> int:
        """vLLM's "--kv-cache-memory=N to fully utilize gpu memory" suggestion."""
        return self.free_at_start_bytes - self._charged - REDUNDANCY_BUFFER

    @property
    def suggested_kv_cache_memory_bytes(self) -> int:
        """vLLM's "--kv-cache-memory=N to fit into requested memory" suggestion."""
        return self.requested_bytes - self._charged - REDUNDANCY_BUFFER


def non_torch_bytes(
    world_size: int,
    v1_cudagraphs: bool = False,
    *,
    single_gpu: int = NON_TORCH_SINGLE_GPU,
    v1_cudagraph_extra: int = NON_TORCH_V1_CUDAGRAPH_EXTRA,
    multi_gpu_extra: int = NON_TORCH_MULTI_GPU_EXTRA,
) -> int:
    """The fitted single-GPU remainder plus 0.26.0's unverified NCCL term when more than one GPU
    takes part (bytes). The model-dependent part of consumed memory comes from
    activation.py's ``persistent_bytes``."""
    return single_gpu + (v1_cudagraph_extra if v1_cudagraphs else 0) + (multi_gpu_extra if world_size > 1 else 0)


def budget(
    *,
    total_bytes: int,
    gpu_memory_utilization: float,
    weights: int,
    activation_peak: int,
    non_torch: int,
    cudagraph: int,
    cudagraph_applied: int,
    kv_cache_memory: int | None = None,
) -> MemoryBudget:
    """Compose the budget (module docstring). ``non_torch``: consumed memory besides weights."""
    req = requested_bytes(total_bytes, gpu_memory_utilization)
    if kv_cache_memory is not None:
        # --kv-cache-memory: no graph estimate is applied (gpu_worker.py).
        return MemoryBudget(
            total_bytes=total_bytes, requested_bytes=req, weights_bytes=weights,
            activation_peak_bytes=activation_peak, non_torch_bytes=non_torch, cudagraph_bytes=cudagraph,
            cudagraph_applied_bytes=0, kv_cache_bytes=int(kv_cache_memory), kv_cache_memory_override=True,
        )
    avail = req - weights - activation_peak - non_torch - cudagraph_applied
    return MemoryBudget(
        total_bytes=total_bytes, requested_bytes=req, weights_bytes=weights, activation_peak_bytes=activation_peak,
        non_torch_bytes=non_torch, cudagraph_bytes=cudagraph, cudagraph_applied_bytes=cudagraph_applied,
        kv_cache_bytes=avail,
    )


def cuda_graph_headroom_bytes(budget: MemoryBudget, kv_allocated_bytes: int) -> int:
    """Free GPU memory when the real graph capture starts (after the KV cache): the snapshot's
    free memory minus consumed memory and the KV tensors."""
    return budget.free_at_start_bytes - budget.consumed_bytes - kv_allocated_bytes
