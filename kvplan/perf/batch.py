"""What one engine step runs, as the step-time model sees it, and the step-time stubs.

The emulator (kvplan/perf/emulator.py) hands every step it schedules to a step-time function
``step_time(batch: StepBatch) -> float`` (seconds). The physics/fitted model is built elsewhere;
here are the input type and a constant stub for tests.

Units: tokens (int), seconds (float).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True, slots=True)
class PrefillChunk:
    """One request's prompt (or recompute) chunk in a step.

    Attributes:
        num_new_tokens: tokens computed this step (>= 1).
        num_computed_tokens: tokens of the request already in the KV cache before this step
            (prefix-cache hits and earlier chunks); attention reads them.
    """

    num_new_tokens: int
    num_computed_tokens: int


@dataclass(frozen=True, slots=True)
class StepBatch:
    """The requests one engine step computes.

    A request is a *decode* when it computes exactly one token and all its prompt is already
    computed (the token it sampled last step); anything else — a prompt chunk, a preempted
    request recomputing its prompt and outputs — is a *prefill chunk*.

    Attributes:
        prefills: the prefill chunks, in scheduling order.
        num_decodes: decode requests in the step (one new token each).
        decode_context_tokens: sum over the decodes of their context length including the new
            token (num_computed_tokens + 1): the KV tokens the decode attention reads.
        max_decode_context: the longest decode context (0 without decodes).
    """

    prefills: tuple[PrefillChunk, ...]
    num_decodes: int
    decode_context_tokens: int
    max_decode_context: int = 0

    @property
    def num_prefill_tokens(self) -> int:
        """Tokens of the prefill chunks."""
        return sum(c.num_new_tokens for c in self.prefills)

    @property
    def num_tokens(self) -> int:
        """Tokens computed this step (prefill tokens + one per decode) <= max_num_batched_tokens."""
        return self.num_prefill_tokens + self.num_decodes

    @property
    def num_seqs(self) -> int:
        """Requests in the step (<= max_num_seqs)."""
        return len(self.prefills) + self.num_decodes


StepTime = Callable[[StepBatch], float]


def constant_step_time(seconds: float) -> StepTime:
    """A step-time function that answers ``seconds`` for every non-empty step (tests, and
    scheduling studies independent of the GPU).

    Raises:
        ValueError: ``seconds`` is not > 0.
    """
    if not seconds > 0:
        raise ValueError(f"step time must be > 0 seconds, got {seconds!r}")

    def step_time(batch: StepBatch) -> float:
        return seconds

    return step_time


def linear_step_time(base_s: float, per_token_s: float, per_context_token_s: float = 0.0) -> StepTime:
    """A step-time stub linear in the step's tokens: ``base + per_token * num_tokens +
    per_context_token * decode_context_tokens`` seconds. Not a model of any GPU; for tests and
    examples only."""

    def step_time(batch: StepBatch) -> float:
        return base_s + per_token_s * batch.num_tokens + per_context_token_s * batch.decode_context_tokens

    return step_time
