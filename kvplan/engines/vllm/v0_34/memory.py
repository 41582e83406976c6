"""vLLM 0.34.0's memory budget on one GPU: what is left for the KV cache, on either sizing path.

**Extensible KV cache** (the default on CUDA; defaults.extensible_kv_cache). The cache is a
virtual-memory reservation whose physical size is measured after warm-up, the sizing steps and
CUDA-graph capture (vLLM 0.34.0 v1/worker/gpu_worker.py _compile_or_warm_up_model,
v1/worker/extensible_kv_cache.py measure_kv_cache_blocks / measure_kv_cache_bytes):

    requested   = ceil(total x util)          util default 1.0 (defaults.py); no free-memory
                                              check (v1/worker/utils.py request_memory)
    F + C       = free memory after warm-up and capture, plus the bytes already committed to
                  the KV cache = init_free - non_kv_used
    non_kv_used = weights + non-torch + persistent tensors + the captured graph pool
                  + what warm-up leaves allocated (activation.py warmup_persistent_bytes)
    KV bytes    = min(requested - non_kv_used, F + C - max(1 GiB, 0.75 P)) - max(P, G)
    num_blocks  = min(capacity, the most blocks whose granule-rounded mapping fits in KV bytes)
                  (allocator.KVCacheLayout.blocks_within), then the minimum over the world group
    capacity    = (requested - consumed - profile transient) // bytes_per_block: the address
                  space reserved from the profile, with no CUDA-graph estimate
                  (gpu_worker.determine_available_memory; V2 profile_cudagraph_memory returns 0)

P and G: activation.py (``sizing_peak_bytes``, ``reserve_growth_bytes``). init_free is the total
minus the memory in use at the worker's start snapshot (CUDA context, cuBLAS, NCCL), which 0.34.0
never charges: at util 1.0 the second term of the min binds, so the KV cache takes everything
free after capture less the margin. An explicit --gpu-memory-utilization (0.92 ...) caps it
through the first term.

**Estimate path** (--kv-cache-memory-bytes; in vLLM also num_gpu_blocks_override, elastic EP, an
LMCache multi-process connector, a custom memory pool, a failed VMM probe): 0.33.0's rule
(v0_33/memory.py) with util default 0.92; 0.34.0's extra ``empty_cache`` before the graph
measurement (model_runner.capture_model) makes vLLM's graph estimate slightly smaller, by an
amount the source does not settle (kvplan keeps 0.33.0's estimate).

Checked on real 0.34.0 starts (tests/data/vllm-0.34.0-h100, H100): given the logged F + C, P and
G, this formula and the granule rounding give vLLM's block count exactly on every extensible
start. kvplan's own terms: CUDA_CONTEXT_BYTES and the consumed memory (0.33.0's fits; the
logged "consumed memory" matches them within the log's rounding), the graph pool (runner.py),
P and what warm-up leaves allocated (activation.py), each fitted on named starts, and G derived
from the sizing steps' allocation sequence (reserve_growth.py).
Units: bytes (int).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.rules import override
from kvplan.engines.vllm.v0_26 import memory as _v026
from kvplan.engines.vllm.v0_33 import memory as _v033
from kvplan.engines.vllm.v0_33.memory import (  # noqa: F401  (unchanged)
    NON_TORCH_MULTI_GPU_EXTRA,
    NON_TORCH_SINGLE_GPU,
    NON_TORCH_V1_CUDAGRAPH_EXTRA,
    REDUNDANCY_BUFFER,
    non_torch_bytes,
    requested_bytes,
)

GiB = 1 << 30
MiB = 1 << 20

# CUDA memory in use at the worker's start snapshot: 751,632,384 B, 0.33.0's figure (every start
# of tests/data/vllm-0.33.0-h200), and the same on every 0.34.0 start of
# tests/data/vllm-0.34.0-h100 (KVPLAN_EXACT init_total_memory - init_free_memory =
# 85,017,493,504 - 84,265,861,120).
CUDA_CONTEXT_BYTES = _v033.CUDA_CONTEXT_BYTES
# What warm-up, the sizing steps and capture leave allocated besides the graph pool:
# activation.py ``warmup_persistent_bytes`` (fitted per batched token).

# v1/worker/extensible_kv_cache.py (CUDA values): the margin's floor and share of P.
KV_CACHE_MARGIN_FLOOR_BYTES = 1 * GiB
KV_CACHE_MARGIN_FRACTION = 0.75


@dataclass(frozen=True)
class MemoryBudget(_v033.MemoryBudget):
    """0.33.0's budget fields, plus the extensible path's terms (bytes per GPU).

    Attributes:
        extensible: the KV cache is sized by the extensible KV cache (else the estimate path).
        capacity_bytes: the reserved address space's bytes (requested - consumed - profile
            transient), which caps the blocks; 0 on the estimate path.
        sizing_peak_bytes / reserve_growth_bytes: P and G (activation.py).
        margin_bytes: max(1 GiB, 0.75 P).
        headroom_bytes: F + C, the free memory after warm-up plus the committed KV prefix.
        warmup_persistent_bytes: what warm-up and the sizing steps leave allocated.
    On the extensible path ``cudagraph_applied_bytes`` equals ``cudagraph_bytes``: the captured
    pool is taken from the KV cache, because the cache is measured after capture.
    """

    extensible: bool = False
    capacity_bytes: int = 0
    sizing_peak_bytes: int = 0
    reserve_growth_bytes: int = 0
    margin_bytes: int = 0
    headroom_bytes: int = 0
    warmup_persistent_bytes: int = 0

    @property
    def free_at_start_bytes(self) -> int:
        """Free CUDA memory at the worker's start snapshot (total minus CUDA_CONTEXT_BYTES)."""
        return self.total_bytes - CUDA_CONTEXT_BYTES

    @property
    def checks_free_memory(self) -> bool:
        """vLLM refuses to start when the requested memory exceeds the free memory at start:
        only on the estimate path in 0.34.0 (request_memory: "the budget is only a cap")."""
        return not self.extensible

    @property
    def _charged(self) -> int:
        # vLLM 0.34.0 compile_or_warm_up_model's suggestion: consumed + peak activation (the
        # profile transient plus the graph estimate, 0 when extensible) + the captured graphs.
        if self.extensible:
            return self.consumed_bytes + self.activation_peak_bytes + self.cudagraph_bytes
        return super()._charged

    def num_blocks(self, layout) -> int:
        """num_gpu_blocks of one rank for ``layout`` (allocator.KVCacheLayout): the estimate
        path's floor, or the extensible path's granule-rounded count capped at the capacity."""
        if not self.extensible:
            return super().num_blocks(layout)
        if not layout.groups:
            return 1
        capacity = max(self.capacity_bytes, 0) // layout.bytes_per_block
        return layout.blocks_within(max(self.kv_cache_bytes, 0), capacity)

    def admission_bytes(self, layout, pool_blocks: int) -> int:
        """The bytes the start check compares one max-model-len request with (bytes).

        Extensible path: vLLM 0.34.0 v1/core/kv_cache_planning.py finalize_extensible_kv_cache
        settles the engine's block count (the minimum the workers measured) and
        shrink_kv_cache_configs then checks ``(num_blocks - 1) x bytes_per_block`` (the null
        block held back) against _max_memory_usage_bytes_from_groups, and prints
        _estimate_max_model_len_from_groups over that same figure as the "estimated maximum
        model length". The check is on the final, granule-rounded pool, not on the measured
        bytes: ``pool_blocks x bytes_per_block`` here, since the layout's bytes_for_max_len
        already adds the null block (v0_33/allocator.py). The earlier check at reservation
        time uses the reserved capacity, never fewer blocks, so this one binds.
        Estimate path: 0.33.0's (the KV bytes)."""
        if not self.extensible:
            return super().admission_bytes(layout, pool_blocks)
        if not layout.groups:
            return max(self.kv_cache_bytes, 0)
        return max(pool_blocks, 0) * layout.bytes_per_block


def extensible_kv_cache_bytes(*, requested: int, non_kv_used: int, free_at_start: int, p: int, g: int) -> tuple[int, int, int]:
    """(KV bytes, margin, F + C) of the extensible KV cache (vLLM 0.34.0 measure_kv_cache_bytes):
    ``min(requested - non_kv_used, F + C - max(1 GiB, 0.75 p)) - max(p, g)`` with
    F + C = free_at_start - non_kv_used. Not clamped at 0 (<= 0: no memory for the cache)."""
    headroom = free_at_start - non_kv_used
    margin = max(KV_CACHE_MARGIN_FLOOR_BYTES, int(p * KV_CACHE_MARGIN_FRACTION))
    return min(requested - non_kv_used, headroom - margin) - max(p, g), margin, headroom


_estimate_budget = override(
    _v026.budget,
    "0.33.0's estimate-path budget into this version's MemoryBudget.",
    budget_type=MemoryBudget,
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
    engine_args=None,
    activation=None,
) -> MemoryBudget:
    """One GPU's budget under vLLM 0.34.0 (module docstring), bytes.

    Args: as v0_26.memory.budget (``gpu_memory_utilization``: the resolved one,
        defaults.resolved_gpu_memory_utilization); ``activation``: this version's
        ActivationEstimate (P and G); ``engine_args``: unused (the sizing mode follows
        ``kv_cache_memory``, defaults.extensible_kv_cache).
    Raises nothing: a budget <= 0 is the caller's "cannot start".
    """
    if kv_cache_memory is not None:
        return _estimate_budget(
            total_bytes=total_bytes, gpu_memory_utilization=gpu_memory_utilization, weights=weights,
            activation_peak=activation_peak, non_torch=non_torch, cudagraph=cudagraph,
            cudagraph_applied=cudagraph_applied, kv_cache_memory=kv_cache_memory,
        )
    req = requested_bytes(total_bytes, gpu_memory_utilization)
    p = max(getattr(activation, "sizing_peak_bytes", 0), activation_peak)
    g = getattr(activation, "reserve_growth_bytes", 0)
    left = getattr(activation, "warmup_persistent_bytes", 0)
    non_kv_used = weights + non_torch + cudagraph + left
    kv, margin, headroom = extensible_kv_cache_bytes(
        requested=req, non_kv_used=non_kv_used, free_at_start=total_bytes - CUDA_CONTEXT_BYTES, p=p, g=g
    )
    return MemoryBudget(
        total_bytes=total_bytes,
        requested_bytes=req,
        weights_bytes=weights,
        activation_peak_bytes=activation_peak,
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph,
        cudagraph_applied_bytes=cudagraph,
        kv_cache_bytes=kv,
        extensible=True,
        capacity_bytes=req - weights - non_torch - activation_peak,
        sizing_peak_bytes=p,
        reserve_growth_bytes=g,
        margin_bytes=margin,
        headroom_bytes=headroom,
        warmup_persistent_bytes=left,
    )


def cuda_graph_headroom_bytes(budget: MemoryBudget, kv_allocated_bytes: int) -> int:
    """Free GPU memory when CUDA-graph capture starts, bytes per GPU. Estimate path: 0.33.0's
    (after the KV tensors). Extensible: capture runs with only the null block committed, before
    the cache is extended, so the KV cache takes no room from the graphs."""
    if budget.extensible:
        return budget.free_at_start_bytes - budget.consumed_bytes
    return _v033.cuda_graph_headroom_bytes(budget, kv_allocated_bytes)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/worker/gpu_worker.py', 'Worker.init_device'),
    ('v1/worker/gpu_worker.py', 'Worker.determine_available_memory'),
    ('v1/worker/gpu_worker.py', 'Worker._compile_or_warm_up_model'),
    ('v1/worker/extensible_kv_cache.py', 'measure_kv_cache_blocks'),
    ('v1/worker/extensible_kv_cache.py', 'measure_kv_cache_bytes'),
    ('v1/worker/utils.py', 'request_memory'),
    ('utils/mem_utils.py', 'memory_profiling'),
)
