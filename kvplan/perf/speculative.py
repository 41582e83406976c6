"""Speculative decoding's effect on decode speed, from the step model (kvplan/perf/step_time.py).

With K draft tokens per step, every decoding request runs 1 + K query tokens through the target
(the verification step: vLLM v1/worker/gpu_model_runner.py / gpu/model_runner.py schedule
``1 + num_speculative_tokens`` tokens per decode) and the drafter runs K one-token steps
(EAGLE/EAGLE-3/MTP/draft_model: its own layers; ngram: a lookup on the token history, no model).
A step then emits ``acceptance`` tokens per request on average (vLLM's "Mean acceptance length":
1 + the accepted draft tokens; between 1 and K + 1). So, at a decode batch of n requests of
context c:

    plain step     t1 = step(n decodes)
    spec step      tK = step(n requests of 1 + K new tokens) + K x draft_step(n decodes)
    TPOT           x tK / (acceptance x t1)
    decode tokens/s  x acceptance x t1 / tK

The acceptance is the user's (``--spec-acceptance``): it depends on the workload and the draft,
and kvplan has no default that would pretend to know it. The result is not emulated step by
step (the scheduler's token budget, prefill interleaving and rejected-token KV are left out) and
not calibrated on a speculative run: every output says so (LABEL).

``speculative_summary`` carries the effect into the run's headline metrics (what the SLO verdict,
goodput and every output read), per request of the plain emulation:

    TTFT  unchanged (the prompt's prefill is the same; the first token comes from it)
    E2E   TTFT + (E2E - TTFT) x tpot_factor          TPOT  x tpot_factor
    ITL   x tpot_factor x acceptance: vllm bench serve records one gap per streamed chunk, and
          a speculative step streams its ``acceptance`` tokens as one chunk (the step's time)
    duration  open loop: the first send to the last rescaled finish (the sends are the load's);
              closed loop: x mean E2E' / mean E2E (Little's law at the fixed concurrency)
    KV use, preemptions  the plain run's (rejected draft tokens' slots not counted)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.errors import KvplanError

LABEL = ("speculative decoding: the plain emulation scaled by the step model's verify-and-draft step over "
         "--spec-acceptance tokens per step (not emulated step by step; not calibrated on a speculative run)")


def headline_label(acceptance: float) -> str:
    """The approximate reason every output states when the headline metrics include speculative
    decoding (TTFT/TPOT/ITL/E2E, throughput, the SLO verdict and goodput)."""
    return (f"speculative decoding at a stated mean acceptance of {acceptance:g} tokens/step, uncalibrated: "
            "TPOT, ITL, E2E and throughput are the plain emulation's scaled by the step model's verify-and-draft "
            "step over the acceptance (TTFT, KV use and the saturation rate are the plain emulation's)")


@dataclass(frozen=True)
class SpeculativeEffect:
    """How speculative decoding scales decode latency and throughput.

    Attributes:
        method / num_speculative_tokens (K) / acceptance (tokens per step per request).
        batch: the decode batch (requests) and context (tokens) the steps were timed at.
        plain_step_ms / spec_step_ms / draft_ms: the step model's times (draft_ms: the K draft steps).
        tpot_factor: TPOT with speculation / without (< 1 is faster).
        throughput_factor: decode output tokens/s with / without.
        tpot_s / output_throughput: the plain prediction's median TPOT and output throughput scaled.
    """

    method: str
    num_speculative_tokens: int
    acceptance: float
    batch: int
    context: int
    plain_step_ms: float
    spec_step_ms: float
    draft_ms: float
    tpot_factor: float
    throughput_factor: float
    tpot_s: float | None = None
    output_throughput: float | None = None
    label: str = LABEL

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_acceptance(acceptance: float | None, k: int, method: str) -> float:
    """``acceptance`` within [1, K + 1].

    Raises:
        KvplanError: missing (no default pretends to know a workload's acceptance) or outside
            [1, K + 1] (names --spec-acceptance).
    """
    if acceptance is None:
        raise KvplanError(
            f"--spec-acceptance: needed with --speculative-config (method {method}, K = {k}): the mean tokens a "
            "step emits per request depends on the workload and the draft; kvplan does not guess it",
            hint=f"give vLLM's logged 'Mean acceptance length' of a similar run (between 1 and {k + 1})",
        )
    if not 1.0 <= acceptance <= k + 1:
        raise KvplanError(f"--spec-acceptance {acceptance}: must be between 1 and K + 1 = {k + 1} tokens per step")
    return float(acceptance)


def speculative_effect(plan, step_model, acceptance: float, *, batch: int, context: int,
                       draft_step_model=None) -> SpeculativeEffect:
    """The effect at a decode batch of ``batch`` requests with ``context`` tokens each.

    Args:
        plan: the estimate (its AddonReport names the method and K).
        step_model: the target's StepModel; draft_step_model: the draft's (None for ngram: free).
    Raises:
        KvplanError: the plan has no speculative decoding.
    """
    rep = getattr(plan, "addons", None)
    sp = rep.features.speculative if rep is not None and rep.features is not None else None
    if sp is None:
        raise KvplanError("--spec-acceptance: needs --speculative-config (there is no speculative decoding to scale)")
    k = sp.num_speculative_tokens or 1
    n, c = max(1, batch), max(1, context)
    plain = step_model.step_ms(num_decodes=n, decode_context_tokens=n * c, max_decode_context=c)
    verify = step_model.request_terms([(1 + k, c)] * n).total_ms
    draft = 0.0
    if draft_step_model is not None:
        draft = k * draft_step_model.step_ms(num_decodes=n, decode_context_tokens=n * c, max_decode_context=c)
    spec = verify + draft
    tpot_factor = spec / (acceptance * plain)
    return SpeculativeEffect(method=sp.method or "draft_model", num_speculative_tokens=k, acceptance=acceptance,
                             batch=n, context=c, plain_step_ms=plain, spec_step_ms=spec, draft_ms=draft,
                             tpot_factor=tpot_factor, throughput_factor=1.0 / tpot_factor)


def speculative_summary(result, effect: SpeculativeEffect, closed_loop: bool):
    """The client's metrics (metrics.Summary) of the plain emulation ``result``
    (emulator.SimulationResult) with speculative decoding's ``effect`` applied per request (see
    the module docstring for each metric's rule); its ``approximate`` ends with headline_label.

    Raises:
        KvplanError: the run has no requests.
    """
    from kvplan.perf.metrics import Distribution, summarize

    plain = summarize(result)
    f, chunk = effect.tpot_factor, effect.tpot_factor * effect.acceptance
    ttft, tpot, e2e, itl = [], [], [], []
    finish = []
    for r in result.requests:
        t = r.first_token_s - r.arrival_s
        e = t + (r.finish_s - r.first_token_s) * f
        ttft.append(t)
        e2e.append(e)
        finish.append(r.arrival_s + e)
        if r.output_tokens > 1:
            tpot.append((e - t) / (r.output_tokens - 1))
        times = r.token_times_s
        itl.extend((b - a) * chunk for a, b in zip(times, times[1:]))
    if closed_loop:
        duration = plain.duration_s * (sum(e2e) / max(sum(r.finish_s - r.arrival_s for r in result.requests), 1e-30))
    else:
        duration = max(finish) - min(r.arrival_s for r in result.requests)
    scale = plain.duration_s / duration if duration > 0 else 1.0
    return replace(
        plain,
        duration_s=duration,
        output_throughput=plain.output_throughput * scale,
        total_token_throughput=plain.total_token_throughput * scale,
        request_throughput=plain.request_throughput * scale,
        ttft=Distribution.of(ttft), tpot=Distribution.of(tpot), itl=Distribution.of(itl), e2e=Distribution.of(e2e),
        approximate=tuple(plain.approximate) + (headline_label(effect.acceptance),),
    )
