"""vLLM 0.26.0's memory budget on one GPU: what is left for the KV cache.

Rule (vllm/v1/worker/gpu_worker.py determine_available_memory, v1/worker/utils.py
request_memory, utils/mem_utils.py memory_profiling):

    requested   = ceil(total_cuda_bytes * gpu_memory_utilization)
    available   = requested - weights - peak_activation - non_torch - cudagraph_estimate_applied
    --kv-cache-memory B  ->  available = B (profiling still runs; utilization is ignored)

* weights: bytes allocated while loading (kvplan.engines.vllm.v0_26.weights).
* peak_activation: the torch allocator's peak increase during one dummy forward pass of
  ``max_num_batched_tokens`` tokens plus the sampler over ``min(max_num_batched_tokens,
  max_num_seqs)`` rows (kvplan.engines.vllm.v0_26.activation).
* non_torch: CUDA memory outside torch's allocator that appeared after start-up (cuBLAS/NCCL
  workspaces...). 0.22 GiB on every single-GPU H200 start in ../shared/calibration.
* CUDA graphs: vLLM 0.26.0 subtracts its graph-memory *estimate* only on the V1 model runner
  (MoE and hybrid models). The V2 runner, the default for dense models, returns 0 from
  profile_cudagraph_memory (v1/worker/gpu/model_runner.py), so graphs are captured afterwards
  outside the budget (calibration llama3-8b_default: 0.99 GiB of graphs, KV budget unchanged).

Units: bytes (int).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GiB = 1 << 30
MiB = 1 << 20

# Non-torch memory after profiling on one GPU (no NCCL): exactly 241,172,480 B (230 MiB) in the
# worker's non_torch_memory of 24 of 25 recorded starts (tests/data/vllm-0.26.0-h200, vLLM 0.26.0,
# torch 2.11, H200, TP=1); the handed-out calibration logs print it as 0.22 GiB.
NON_TORCH_SINGLE_GPU = 241_172_480
# With CUDA graphs on the V1 runner the profiled graph capture leaves 16 MiB more outside torch:
# 257,949,696 B on record qwen3-30b-a3b_graphs (the only V1 start with graphs).
NON_TORCH_V1_CUDAGRAPH_EXTRA = 16 * MiB
# Extra non-torch memory per GPU when TP*PP > 1 (NCCL communicators + custom all-reduce buffers).
# UNVERIFIED for 0.26.0: no multi-GPU start was available. Order of magnitude from the NCCL
# default buffers (NCCL_BUFFSIZE 4 MiB x channels x peers) and vLLM's custom all-reduce
# (8 MiB IPC buffer + metadata); older public report vllm PR #10511 shows TP=2 roughly doubling
# non-torch memory (1.79 -> 3.58 GiB in v0.6.5, which counted more under that name).
NON_TORCH_MULTI_GPU_EXTRA = int(0.40 * GiB)

# vLLM suggests --kv-cache-memory values leaving this buffer (gpu_worker.py, 150 MiB).
REDUNDANCY_BUFFER = 150 * MiB

# CUDA memory already in use when the worker takes its first snapshot (CUDA context, cuBLAS
# handles, NCCL init): 150,109,880,320 - 149,557,477,376 = 552,402,944 B on the lent H200
# (cuda_free_bytes_at_start of every calibration and recorded start, vLLM 0.26.0, torch 2.11).
# vLLM refuses to start when the requested memory exceeds the free memory
# (v1/worker/utils.py request_memory), so utilization close to 1.0 cannot start.
CUDA_CONTEXT_BYTES = 552_402_944


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU's memory plan, in bytes.

    Attributes:
        total_bytes: CUDA-visible memory (torch.cuda.mem_get_info total).
        requested_bytes: ceil(total * utilization), or total when --kv-cache-memory is set.
        weights_bytes / activation_peak_bytes / non_torch_bytes: the profiled terms.
        cudagraph_bytes: graph memory vLLM reports (captured after the KV cache is sized).
        cudagraph_applied_bytes: the part vLLM subtracts from the KV budget (V1 runner only).
        kv_cache_bytes: bytes available to the KV cache (may be <= 0: cannot start).
        kv_cache_memory_override: True when --kv-cache-memory set it directly.
    """

    total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_peak_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    cudagraph_applied_bytes: int
    kv_cache_bytes: int
    kv_cache_memory_override: bool = False

    @property
    def free_at_start_bytes(self) -> int:
        """Free CUDA memory when vLLM's worker starts (total minus the CUDA context)."""
        return self.total_bytes - CUDA_CONTEXT_BYTES

    @property
    def checks_free_memory(self) -> bool:
        """vLLM refuses to start when the requested memory exceeds the free memory at start
        (v1/worker/utils.py request_memory); always in 0.26.0 (a later version may not)."""
        return True

    def num_blocks(self, layout) -> int:
        """num_gpu_blocks of one rank for ``layout`` (the version's KVCacheLayout): the KV bytes
        floor-divided by bytes_per_block (layout.num_blocks; vLLM get_num_blocks)."""
        return layout.num_blocks(max(self.kv_cache_bytes, 0))

    def admission_bytes(self, layout, pool_blocks: int) -> int:
        """The bytes vLLM's "can one max-model-len request be served" start check (and its
        largest-length estimate) compares a request's bytes with: the KV bytes before flooring
        to blocks (vLLM 0.26.0 v1/core/kv_cache_utils.py get_kv_cache_configs ->
        check_enough_kv_cache_memory(available_memory)). ``layout`` and ``pool_blocks`` (the
        engine's final num_gpu_blocks) are unused here; a version that checks the final pool
        uses them."""
        return self.kv_cache_bytes

    @property
    def _charged(self) -> int:
        # What vLLM 0.26.0 compile_or_warm_up_model subtracts for its two suggestions: weights,
        # activation, non-torch and captured graphs (later versions override this term).
        return self.weights_bytes + self.activation_peak_bytes + self.non_torch_bytes + self.cudagraph_bytes

    @property
    def fill_gpu_kv_cache_memory_bytes(self) -> int:
        """vLLM's "--kv-cache-memory=N to fully utilize gpu memory" suggestion: free memory at
        start minus weights, activation, non-torch and captured graphs, minus 150 MiB
        (v1/worker/gpu_worker.py compile_or_warm_up_model)."""
        return self.free_at_start_bytes - self._charged - REDUNDANCY_BUFFER

    @property
    def suggested_kv_cache_memory_bytes(self) -> int:
        """vLLM's "--kv-cache-memory=N to fit into requested memory" suggestion."""
        return self.requested_bytes - self._charged - REDUNDANCY_BUFFER


def requested_bytes(total_bytes: int, gpu_memory_utilization: float) -> int:
    """ceil(total * utilization) (vLLM 0.26.0 v1/worker/utils.py request_memory)."""
    return math.ceil(total_bytes * gpu_memory_utilization)


def non_torch_bytes(
    world_size: int,
    v1_cudagraphs: bool = False,
    *,
    single_gpu: int = NON_TORCH_SINGLE_GPU,
    v1_cudagraph_extra: int = NON_TORCH_V1_CUDAGRAPH_EXTRA,
    multi_gpu_extra: int = NON_TORCH_MULTI_GPU_EXTRA,
) -> int:
    """Non-torch memory per GPU: the measured single-GPU constant, +16 MiB for V1-runner CUDA
    graphs, plus an unverified NCCL term when more than one GPU takes part (bytes). The three
    terms default to this module's constants; VllmRules.non_torch_bytes passes its fitted
    coefficients."""
    return (
        single_gpu
        + (v1_cudagraph_extra if v1_cudagraphs else 0)
        + (multi_gpu_extra if world_size > 1 else 0)
    )


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
    budget_type: type[MemoryBudget] = MemoryBudget,
    engine_args=None,
    activation=None,
) -> MemoryBudget:
    """Compose the budget (see the module docstring for the rule). ``budget_type``: the version's
    MemoryBudget (a later version's subclass charges its suggestions differently).
    ``engine_args`` (EngineArgs) and ``activation`` (the version's ActivationEstimate) are read
    by later versions' budgets (v0_34/memory.py); 0.26.0's rule needs neither."""
    req = requested_bytes(total_bytes, gpu_memory_utilization)
    overridden = kv_cache_memory is not None
    # --kv-cache-memory: no graph estimate is applied (gpu_worker.py) and the KV cache gets B.
    applied = 0 if overridden else cudagraph_applied
    avail = int(kv_cache_memory) if overridden else req - weights - activation_peak - non_torch - cudagraph_applied
    return budget_type(
        total_bytes=total_bytes,
        requested_bytes=req,
        weights_bytes=weights,
        activation_peak_bytes=activation_peak,
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph,
        cudagraph_applied_bytes=applied,
        kv_cache_bytes=avail,
        kv_cache_memory_override=overridden,
    )


def cuda_graph_headroom_bytes(budget: MemoryBudget, kv_allocated_bytes: int) -> int:
    """Free GPU memory when vLLM 0.26.0 starts capturing CUDA graphs, bytes per GPU.

    Order (v1/worker/gpu_worker.py): the profiling pass's activations are freed, the KV cache is
    allocated (initialize_from_config: ``kv_allocated_bytes``, whole blocks), and capture_model
    empties torch's cache before capturing. What is left is the free memory at start minus
    weights, non-torch memory and the KV tensors. Negative when even that is over-committed."""
    return budget.free_at_start_bytes - budget.weights_bytes - budget.non_torch_bytes - kv_allocated_bytes


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu_worker.py', 'Worker.compile_or_warm_up_model'),
    ('v1/worker/utils.py', 'request_memory'),
    ('utils/mem_utils.py', 'memory_profiling'),
)
