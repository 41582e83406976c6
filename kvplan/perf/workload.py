"""Request streams for the scheduler emulator: lengths (fixed or a ``--workload`` distribution),
arrivals (closed loop at a concurrency, open loop at a Poisson rate, seeded) and a shared-prefix
fraction.

The arrival models follow vLLM's benchmark client (vllm bench serve,
benchmarks/serve.py): an open loop draws exponential inter-arrival gaps at ``--request-rate``
(``inf`` sends everything at t=0); ``--max-concurrency`` keeps at most c requests in flight, the
next one sent when one finishes — with an infinite rate that is a closed loop at c.

Units: tokens (int), seconds (float), requests per second (float).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from kvplan.capacity.workload_input import Workload
from kvplan.errors import KvplanError


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request the client sends.

    Attributes:
        prompt_tokens: prompt length (>= 1), shared prefix included.
        output_tokens: tokens generated (>= 1; the benchmark sets ignore_eos, so exactly this).
        prefix_group: requests with the same group id (>= 0) start with the same
            ``shared_prefix_tokens`` tokens; -1 = no shared prefix.
        shared_prefix_tokens: length of that shared prefix (<= prompt_tokens).
    """

    prompt_tokens: int
    output_tokens: int
    prefix_group: int = -1
    shared_prefix_tokens: int = 0


class Lengths:
    """Draws (prompt_tokens, output_tokens) pairs, reproducibly from ``seed``.

    Build with ``Lengths.fixed(prompt, output)`` or ``Lengths.from_workload(workload)`` (the
    weighted pairs of a ``--workload`` file or MEAN,P95 distribution, kvplan/capacity/
    workload_input.py).
    """

    def __init__(self, pairs: list[tuple[int, int]], weights: list[float] | None, description: str):
        if not pairs:
            raise KvplanError("workload: no (prompt_tokens, output_tokens) pairs")
        for p, o in pairs:
            if p < 1 or o < 1:
                raise KvplanError(f"workload: prompt and output tokens must be >= 1, got ({p}, {o})")
        self.pairs = pairs
        self.weights = weights
        self.description = description
        self._cum = None
        if weights is not None:
            acc, cum = 0.0, []
            for w in weights:
                acc += w
                cum.append(acc)
            self._cum = cum

    @classmethod
    def fixed(cls, prompt_tokens: int, output_tokens: int) -> "Lengths":
        """Every request ``prompt_tokens`` in, ``output_tokens`` out."""
        return cls([(int(prompt_tokens), int(output_tokens))], None, f"fixed {prompt_tokens}/{output_tokens}")

    @classmethod
    def from_workload(cls, workload: Workload) -> "Lengths":
        """Pairs drawn with the workload's weights."""
        pairs = [(p, o) for p, o, _ in workload.pairs]
        return cls(pairs, [w for _, _, w in workload.pairs], workload.description)

    def draw(self, rng: random.Random) -> tuple[int, int]:
        """One pair (a fixed workload draws nothing from ``rng``)."""
        if len(self.pairs) == 1:
            return self.pairs[0]
        if self._cum is None:
            return self.pairs[rng.randrange(len(self.pairs))]
        return rng.choices(self.pairs, cum_weights=self._cum, k=1)[0]


@dataclass(frozen=True)
class SharedPrefix:
    """A fraction of the requests starting with the same prefix.

    Attributes:
        fraction: share of requests (0..1) that carry the prefix; chosen per request by the
            seeded generator.
        tokens: prefix length; a request's prompt keeps its drawn length and the prefix is
            ``min(tokens, prompt_tokens)`` of it.
    """

    fraction: float
    tokens: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise KvplanError(f"shared prefix fraction: must be within 0..1, got {self.fraction}")
        if self.tokens < 0:
            raise KvplanError(f"shared prefix tokens: must be >= 0, got {self.tokens}")


def make_requests(
    num_requests: int, lengths: Lengths, *, seed: int = 0, shared_prefix: SharedPrefix | None = None
) -> list[RequestSpec]:
    """``num_requests`` request specs drawn from ``lengths`` (seeded, reproducible).

    Raises:
        KvplanError: num_requests < 1.
    """
    if num_requests < 1:
        raise KvplanError(f"num_requests: must be >= 1, got {num_requests}")
    rng = random.Random(seed)
    out = []
    for _ in range(num_requests):
        p, o = lengths.draw(rng)
        if shared_prefix and shared_prefix.tokens and rng.random() < shared_prefix.fraction:
            out.append(RequestSpec(p, o, 0, min(shared_prefix.tokens, p)))
        else:
            out.append(RequestSpec(p, o))
    return out


@dataclass(frozen=True)
class OpenLoop:
    """Requests sent at a Poisson rate regardless of completions.

    Attributes:
        requests: the requests, in sending order.
        request_rate: mean requests per second (``math.inf``: all at t=0).
        seed: seed of the exponential inter-arrival gaps.
    """

    requests: tuple[RequestSpec, ...]
    request_rate: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.request_rate > 0:
            raise KvplanError(f"request_rate: must be > 0 requests/s, got {self.request_rate}")

    def arrival_times(self) -> list[float]:
        """Send times (s): cumulative exponential gaps of mean 1/rate from t=0, the first request
        at 0 (vllm bench serve sends the first request immediately)."""
        n = len(self.requests)
        if math.isinf(self.request_rate):
            return [0.0] * n
        rng = random.Random(self.seed)
        t, out = 0.0, []
        for i in range(n):
            if i:
                t += rng.expovariate(self.request_rate)
            out.append(t)
        return out


@dataclass(frozen=True)
class ClosedLoop:
    """``concurrency`` requests in flight: c sent at t=0, the next sent the moment one finishes.

    Attributes:
        requests: the requests, in sending order.
        concurrency: requests kept in flight (>= 1).
    """

    requests: tuple[RequestSpec, ...]
    concurrency: int

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise KvplanError(f"concurrency: must be >= 1, got {self.concurrency}")


@dataclass(frozen=True)
class TraceLoop:
    """Requests sent at given times regardless of completions (an open loop replayed from a
    benchmark record: the send times the client really used, not a new Poisson draw).

    Attributes:
        requests: the requests, in sending order.
        send_times: seconds from the start, one per request, non-decreasing.

    Raises:
        KvplanError: lengths differ, a time is negative, or times go backwards.
    """

    requests: tuple[RequestSpec, ...]
    send_times: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.send_times) != len(self.requests):
            raise KvplanError(f"send_times: {len(self.send_times)} times for {len(self.requests)} requests")
        prev = 0.0
        for t in self.send_times:
            if t < prev:
                raise KvplanError(f"send_times: must be >= 0 and non-decreasing, got {t} after {prev}")
            prev = t

    def arrival_times(self) -> list[float]:
        """The recorded send times (s)."""
        return list(self.send_times)
