"""Would vLLM start? plan()'s failure step, in vLLM's order, over the planned pipeline stages.

The memory budget (utilization, --kv-cache-memory-bytes, no room for the KV cache), one
max-model-len request, not one token, CUDA graph capture; when it starts, the largest
--max-model-len every stage fits. Each failure is typed (capacity/outcomes.py Failure) and
names the flag that overflows. Pure: no I/O.
"""

from __future__ import annotations

from kvplan.capacity.outcomes import Failure, Note, NoteKind, StartOutcome
from kvplan.capacity.resolve import Resolved
from kvplan.capacity.stage import StagePlan
from kvplan.engines.vllm.args import EngineArgs
from kvplan.engines.vllm.rules import VllmRules


def start_failure(
    stages: list[StagePlan], args: EngineArgs, rules: VllmRules, r: Resolved, remarks: list[Note]
) -> tuple[Failure | None, int | None]:
    """(the first reason vLLM would not start, in vLLM's order; the largest --max-model-len that
    fits). Order: the memory budget (utilization, --kv-cache-memory-bytes, no room for the KV
    cache), one max-model-len request, not one token, CUDA graph capture; when it starts, the
    largest length every stage fits."""
    failure = _memory_failure(stages, args, rules)
    if failure is not None:
        return failure, 0
    failure, largest = _max_model_len_failure(stages, r)
    if failure is not None:
        return failure, largest
    failure = _cuda_graph_failure(stages, args, rules)
    if failure is not None:
        return failure, 0  # a shorter --max-model-len leaves the KV cache just as large
    # With VLLM_ALLOW_LONG_MAX_MODEL_LEN a length past the model's own is allowed.
    cap = max(r.derived_max_model_len, r.max_model_len)
    largest = min(
        s.layout.largest_max_model_len(avail, cap, r.max_in_flight) for s, avail in zip(stages, admission_bytes(stages))
    )
    _note_graphs_in_activation_memory(stages, remarks)
    return None, largest


def admission_bytes(stages: list[StagePlan]) -> list[int]:
    """Per stage, the bytes vLLM's start check compares one max-model-len request with, and
    over which it searches the largest length that fits (the version's
    MemoryBudget.admission_bytes: the KV bytes, or with vLLM 0.34.0's extensible KV cache the
    engine's final pool of min-over-stages blocks). The refusal, the largest --max-model-len
    and --max-model-len auto all use this one figure, so a recommended length always fits the
    pool the table reports. Units: bytes (int), >= 0."""
    if not stages:
        return []
    pool = min(s.num_blocks for s in stages)
    return [max(s.budget.admission_bytes(s.layout, pool), 0) for s in stages]


def kv_shortfall_text(s: StagePlan, available: int, max_model_len: int, max_in_flight: int) -> str:
    """"one N-token request needs X GiB of KV cache (B blocks ...) but only Y GiB is available
    (C blocks)": the block counts always differ where the GiB may round alike. ``available``:
    admission_bytes of the stage (bytes)."""
    bpb = max(s.layout.bytes_per_block, 1) if s.layout.groups else 1
    need_blocks = s.bytes_for_max_len // bpb
    null = need_blocks - s.layout.blocks_per_request(max(max_model_len, 1), max_in_flight)
    with_null = " incl. vLLM's null block" if null == 1 else ""
    return (
        f"one {max_model_len}-token request needs {s.bytes_for_max_len / 2**30:.2f} GiB of KV cache "
        f"({need_blocks:,} blocks{with_null}) but only {available / 2**30:.2f} GiB is available "
        f"({available // bpb:,} blocks)"
    )


def _where(s: StagePlan, pp: int) -> str:
    return f" on pipeline stage {s.pipeline_rank}" if pp > 1 else ""


def _memory_failure(stages: list[StagePlan], args: EngineArgs, rules: VllmRules) -> Failure | None:
    """The first stage whose budget vLLM refuses: --gpu-memory-utilization above the free
    memory, --kv-cache-memory-bytes that does not fit beside the rest (gpu_worker.py: the KV
    tensors are then allocated on top of weights, activation and non-torch memory), or no room
    left for the KV cache ('No available memory for the cache blocks')."""
    pp = args.pipeline_parallel_size
    for s in stages:
        where = _where(s, pp)
        b = s.budget
        if b.requested_bytes > b.free_at_start_bytes and not b.kv_cache_memory_override and b.checks_free_memory:
            return Failure(
                StartOutcome.UTILIZATION_REFUSED,
                f"--gpu-memory-utilization {rules.gpu_memory_utilization(args)}: requests {b.requested_bytes / 2**30:.2f} GiB but "
                f"only about {b.free_at_start_bytes / 2**30:.2f} GiB is free when vLLM starts (the CUDA context holds "
                f"{rules.memory.CUDA_CONTEXT_BYTES / 2**20:.0f} MiB); vLLM refuses to start",
                flag="--gpu-memory-utilization",
            )
        if b.kv_cache_memory_override:
            need = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.kv_cache_bytes
            if need > b.free_at_start_bytes:
                return Failure(
                    StartOutcome.KV_CACHE_MEMORY_OOM,
                    f"--kv-cache-memory-bytes {b.kv_cache_bytes:,}: with weights {b.weights_bytes / 2**30:.2f} GiB, "
                    f"activation {b.activation_peak_bytes / 2**30:.2f} GiB and non-torch {b.non_torch_bytes / 2**30:.2f} GiB "
                    f"it needs {need / 2**30:.2f} GiB{where} but about {b.free_at_start_bytes / 2**30:.2f} GiB is free "
                    f"when vLLM starts; "
                    "vLLM would run out of memory allocating the KV cache",
                    flag="--kv-cache-memory-bytes",
                )
        if b.kv_cache_bytes <= 0:
            return Failure(
                StartOutcome.NO_KV_CACHE_MEMORY,
                f"no memory left for the KV cache{where}: weights "
                f"{b.weights_bytes / 2**30:.2f} GiB + activation {b.activation_peak_bytes / 2**30:.2f} GiB "
                f"+ non-torch {b.non_torch_bytes / 2**30:.2f} GiB exceed the requested "
                f"{b.requested_bytes / 2**30:.2f} GiB (vLLM: 'No available memory for the cache blocks')",
            )
    return None


def _max_model_len_failure(stages: list[StagePlan], r: Resolved) -> tuple[Failure | None, int | None]:
    """One max_model_len request does not fit some stage's KV cache (the last such stage's
    message; the smallest largest-length over them), or not even one token fits."""
    failure, largest = None, None
    if r.max_model_len > 0:
        for s, avail in zip(stages, admission_bytes(stages)):
            if s.bytes_for_max_len > avail:
                lim = s.layout.largest_max_model_len(avail, r.max_model_len, r.max_in_flight)
                largest = lim if largest is None else min(largest, lim)
                failure = Failure(
                    StartOutcome.MAX_MODEL_LEN_TOO_LONG,
                    kv_shortfall_text(s, avail, r.max_model_len, r.max_in_flight)
                    + (f"; the largest max-model-len that fits is {lim}" if lim > 0 else ""),
                    flag="--max-model-len",
                )
        return failure, largest
    return Failure(StartOutcome.NO_KV_TOKENS, "not even one token of KV cache fits", flag="--max-model-len"), 0


def _cuda_graph_failure(stages: list[StagePlan], args: EngineArgs, rules: VllmRules) -> Failure | None:
    """CUDA graphs are captured after the KV cache is allocated (gpu_worker.py
    compile_or_warm_up_model -> capture_model); on the V2 runner nothing reserved room for them,
    so a graph pool larger than what is left raises CUDA out of memory there."""
    pp = args.pipeline_parallel_size
    for s in stages:
        b = s.budget
        if not b.cudagraph_bytes:
            continue
        left = rules.memory.cuda_graph_headroom_bytes(b, s.num_blocks * s.layout.bytes_per_block)
        if b.cudagraph_bytes > left:
            return Failure(
                StartOutcome.CUDA_GRAPH_CAPTURE_OOM,
                f"CUDA graphs need about {b.cudagraph_bytes / 2**30:.2f} GiB{_where(s, pp)} but only "
                f"{max(left, 0) / 2**30:.2f} GiB is left once the KV cache is allocated "
                f"(--gpu-memory-utilization {rules.gpu_memory_utilization(args)} requests "
                f"{b.requested_bytes / 2**30:.2f} GiB of {b.total_bytes / 2**30:.2f} GiB); vLLM allocates the "
                "KV cache first and then runs out of memory capturing the graphs, so it does not start",
                flag="--gpu-memory-utilization",
            )
    return None


def _note_graphs_in_activation_memory(stages: list[StagePlan], remarks: list[Note]) -> None:
    """CUDA graphs that fit only in the memory the profiling pass's activations used (the
    first such stage): a full prefill needs that memory again while serving."""
    for s in stages:
        b = s.budget
        if b.cudagraph_bytes and not b.cudagraph_applied_bytes and b.requested_bytes + b.cudagraph_bytes > b.free_at_start_bytes:
            remarks.append(Note(
                NoteKind.CUDA_GRAPHS_IN_ACTIVATION_MEMORY,
                f"CUDA graphs (~{b.cudagraph_bytes / 2**30:.2f} GiB) fit beside the KV cache only in the memory "
                "the profiling pass's activations used: a full --max-num-batched-tokens prefill needs that memory "
                "again and may run out of CUDA memory while serving",
            ))
            return
