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

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import memory as _v026
from kvplan.engines.vllm.v0_26.memory import (  # noqa: F401  (unchanged)
    NON_TORCH_MULTI_GPU_EXTRA,
    REDUNDANCY_BUFFER,
    requested_bytes,
)

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
class MemoryBudget(_v026.MemoryBudget):
    """0.26.0's budget fields; ``non_torch_bytes`` is everything consumed besides the weights
    (vLLM 0.33.0 prints weights + this as "consumed memory (weights + non-torch)");
    ``activation_peak_bytes`` is the transient peak; ``cudagraph_applied_bytes`` the subtracted
    graph estimate. The two --kv-cache-memory suggestions are 0.26.0's over ``_charged``."""

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


non_torch_bytes = override(
    _v026.non_torch_bytes,
    """The fitted single-GPU remainder plus 0.26.0's unverified NCCL term when more than one GPU
    takes part (bytes); no V1-runner graph term. 0.26.0's rule with this module's constants as
    defaults. The model-dependent part of consumed memory comes from activation.py's
    ``persistent_bytes``.""",
    single_gpu=NON_TORCH_SINGLE_GPU,
    v1_cudagraph_extra=NON_TORCH_V1_CUDAGRAPH_EXTRA,
)

budget = override(
    _v026.budget,
    """Compose the budget (module docstring): 0.26.0's rule into this version's MemoryBudget.
    ``non_torch``: consumed memory besides weights (bytes).""",
    budget_type=MemoryBudget,
)


def cuda_graph_headroom_bytes(budget: MemoryBudget, kv_allocated_bytes: int) -> int:
    """Free GPU memory when the real graph capture starts (after the KV cache): the snapshot's
    free memory minus consumed memory and the KV tensors."""
    return budget.free_at_start_bytes - budget.consumed_bytes - kv_allocated_bytes


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu_worker.py', 'Worker.init_device'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu_worker.py', 'Worker.compile_or_warm_up_model'),
    ('v1/worker/utils.py', 'request_memory'),
    ('utils/mem_utils.py', 'memory_profiling'),
)
