"""Multi-GPU communication of one engine step from link physics, and vLLM's DP balancer.

Units: bytes (int), bytes/s, seconds. Pure functions; the step-time model
(kvplan/perf/step_time.py) calls them per step, `kvplan perf` (kvplan/cli/perf.py) the balancer.

Collectives (bandwidth term of the standard ring algorithms over ``n`` GPUs, ``bw`` the link
bandwidth per direction of one GPU, kvplan/data/gpus.yaml ``perf.link_bandwidth_bytes_per_s``
with its datasheet; plus one fixed latency per collective, the step coefficients'
``allreduce_latency_us`` prior -- no datasheet gives a collective's latency):

    all-reduce of B bytes        2 (n - 1) / n x B / bw     (reduce-scatter + all-gather)
    all-gather, B bytes per rank (n - 1) x B / bw           (each rank receives n - 1 shares)
    reduce-scatter, the same     (n - 1) x B / bw

Where vLLM runs them (read in the release engines/vllm/v0_33/ restates):
  * TP: every decoder layer's attention output projection and MLP down projection are
    RowParallelLinear with reduce_results: two all-reduces of the [tokens, hidden] activations
    per layer (model_executor/layers/linear.py RowParallelLinear.forward).
  * a MoE model under DP > 1: the experts are one group over TP x DP (x PCP)
    (fused_moe/config.py FusedMoEParallelConfig.make); the default all2all backend
    ``allgather_reducescatter`` (config/parallel.py ParallelConfig.all2all_backend) dispatches by
    all-gathering every DP rank's hidden states over the DP group and combines by
    reduce-scattering the expert outputs back (distributed/device_communicators/all2all.py
    AgRsAll2AllManager.dispatch / combine), once each per MoE layer. Each rank's share is its
    token count padded to the largest across DP (v1/worker/dp_utils.py
    coordinate_batch_across_dp). The DeepEP backends (``--all2all-backend deepep_*``, not a flag
    kvplan takes) send only the routed copies instead, tokens x hidden x top_k x (ep - 1) / ep.
  * the DP engines of a MoE model step in lockstep: an engine with nothing to run executes a
    dummy batch so the collectives match (v1/engine/core.py DPEngineCoreProc.run_busy_loop,
    execute_dummy_batch), so every engine's step lasts as long as the slowest engine's.

Balancer (v1/engine/core_client.py DPLBAsyncMPClient.get_core_engine_for_request): each new
request goes to the engine with the lowest score max(in flight from this client, waiting +
running), scanning from a start index that rotates by one per request, ties to the first in the
scan; waiting requests are penalised only above 50 % KV-cache use. From empty engines this is
round-robin; under a steady closed loop it keeps every engine at C / N in flight.
"""

from __future__ import annotations

from typing import Sequence

MULTI_GPU_UNCALIBRATED = "uncalibrated: multi-GPU communication from link physics, no multi-GPU record"


def ring_allreduce_seconds(nbytes: float, n: int, bandwidth: float, latency_s: float) -> float:
    """Seconds of one ring all-reduce of ``nbytes`` (the tensor on every rank) over ``n`` GPUs:
    2 (n - 1) / n x nbytes / bandwidth + latency_s; 0 for n <= 1 or nothing to reduce."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return 2.0 * (n - 1) / n * nbytes / bandwidth + latency_s


def allgather_seconds(bytes_per_rank: float, n: int, bandwidth: float, latency_s: float) -> float:
    """Seconds of one all-gather (or reduce-scatter) whose every rank contributes
    ``bytes_per_rank``: (n - 1) x bytes_per_rank / bandwidth + latency_s; 0 for n <= 1."""
    if n <= 1 or bytes_per_rank <= 0:
        return 0.0
    return (n - 1) * bytes_per_rank / bandwidth + latency_s


def moe_dp_dispatch_combine_seconds(tokens: int, hidden_bytes_per_token: int, dp: int, bandwidth: float,
                                    latency_s: float) -> float:
    """Seconds of one MoE layer's dispatch (all-gather of the hidden states over the ``dp``
    ranks) and combine (reduce-scatter back) under vLLM's default allgather_reducescatter
    backend, ``tokens`` the (padded) tokens of each DP rank, ``hidden_bytes_per_token`` hidden
    size x activation dtype bytes. The router logits / top-k ids gathered with the hidden
    states are left out (top_k x 8 bytes a token against hidden x 2)."""
    share = tokens * hidden_bytes_per_token
    return 2.0 * allgather_seconds(share, dp, bandwidth, latency_s)


def balance(arrivals: int, engines: int, in_flight: Sequence[int] | None = None, start: int = 0) -> list[int]:
    """vLLM's DP balancer for ``arrivals`` new requests over ``engines`` engines that already
    have ``in_flight`` requests each (default none), the scan starting at engine ``start`` and
    rotating by one per request (core_client.py get_core_engine_for_request; the waiting-queue
    KV penalty is left out: engines are taken below 50 % KV use). Returns each engine's index
    per request, in arrival order.

    Raises:
        ValueError: engines < 1 or in_flight of another length.
    """
    if engines < 1:
        raise ValueError("engines must be >= 1")
    load = list(in_flight) if in_flight is not None else [0] * engines
    if len(load) != engines:
        raise ValueError("in_flight must give one count per engine")
    out = []
    for _ in range(arrivals):
        best, best_score = 0, None
        for i in range(engines):
            idx = (start + i) % engines
            if best_score is None or load[idx] < best_score:
                best, best_score = idx, load[idx]
        load[best] += 1
        out.append(best)
        start = (start + 1) % engines
    return out
