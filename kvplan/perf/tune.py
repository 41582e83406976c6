"""Scheduler flags for a latency target: the ``--max-num-seqs`` / ``--max-num-batched-tokens``
pair that maximises goodput (kvplan/perf/slo.py) on a stated workload.

The grid is small and around the plan's resolved defaults d_seqs, d_mbt:
``max_num_seqs`` in {d_seqs/4, d_seqs/2, d_seqs} (plus a closed loop's concurrency when below
d_seqs), ``max_num_batched_tokens`` in {d_mbt/4, d_mbt/2, d_mbt, 2 d_mbt}, keeping the pairs
vLLM accepts (vLLM config/scheduler.py verify_max_model_len, every version kvplan has rules for: max_num_batched_tokens >=
max_num_seqs always; >= max_model_len when chunked prefill is off). Each pair is planned again
(the pool changes with the token budget: the activation peak grows with it), emulated on the same
seeded requests, and ranked: goodput (higher first), then the worst target's value / limit
(lower first), then fewer changed flags, then smaller values.

Units: requests/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.perf.emulator import simulate
from kvplan.perf.metrics import Summary, summarize
from kvplan.perf.serving import Load, check_lengths, engine_config
from kvplan.perf.slo import SLO
from kvplan.perf.workload import Lengths, SharedPrefix, make_requests

# Requests per grid run (fewer than the main run when it is larger: every pair is one run).
TUNE_REQUESTS = 300


@dataclass(frozen=True)
class Candidate:
    """One (max_num_seqs, max_num_batched_tokens) pair tried.

    Attributes:
        max_num_seqs / max_num_batched_tokens: the flags.
        num_gpu_blocks: the pool with them (None when vLLM would not start).
        summary: the run's metrics (None when not run). meets: every target met.
        goodput: requests/s within the SLO. worst_ratio: largest value / limit.
        plan: the re-planned engine (for the serve line). skipped: why it was not run.
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    num_gpu_blocks: int | None
    summary: Summary | None
    meets: bool
    goodput: float
    worst_ratio: float
    plan: object = None
    skipped: str | None = None


@dataclass(frozen=True)
class Recommendation:
    """The grid's outcome: ``best`` (None when no pair meets the SLO), every candidate in rank
    order, the requests each grid run sent, and ``default``: the starting pair's own candidate."""

    best: Candidate | None
    candidates: tuple[Candidate, ...]
    requests_per_run: int
    default: Candidate | None = None
    # the grid's winner and the flags as given run again on the headline's requests (confirm):
    # best/default then carry those runs' figures, and this many requests (0: not run again)
    confirmed_requests: int = 0

    @property
    def keeps_given_flags(self) -> bool:
        """The best pair is the flags as given: nothing to recommend."""
        return self.best is not None and self.default is not None and (
            (self.best.max_num_seqs, self.best.max_num_batched_tokens)
            == (self.default.max_num_seqs, self.default.max_num_batched_tokens))


def grid(default_seqs: int, default_mbt: int, max_model_len: int, *, chunked_prefill: bool = True,
         concurrency: int | None = None) -> list[tuple[int, int]]:
    """The (max_num_seqs, max_num_batched_tokens) pairs to try (see the module docstring), in
    ascending order."""
    seqs = {max(1, default_seqs // 4), max(1, default_seqs // 2), default_seqs}
    if concurrency is not None and concurrency < default_seqs:
        seqs.add(int(concurrency))
    mbts = {max(1, default_mbt // 4), max(1, default_mbt // 2), default_mbt, default_mbt * 2}
    out = []
    for s in sorted(seqs):
        for m in sorted(mbts):
            if m < s:
                continue
            if not chunked_prefill and m < max_model_len:
                continue
            out.append((s, m))
    return out


def _rank(c: Candidate, defaults: tuple[int, int]) -> tuple:
    changed = (c.max_num_seqs != defaults[0]) + (c.max_num_batched_tokens != defaults[1])
    return (-c.goodput, c.worst_ratio, changed, c.max_num_seqs, c.max_num_batched_tokens)


def recommend(plan, step_time, lengths: Lengths, load: Load, slo: SLO, *, seed: int = 0,
              shared_prefix: SharedPrefix | None = None, num_requests: int = TUNE_REQUESTS, replan=None,
              efficiency=None, adjust=None, confirm_requests: int = 0) -> Recommendation:
    """Search the grid for the pair maximising goodput under ``slo``.

    Args:
        plan: the estimate the search starts from (its defaults, model, GPU, other flags).
        step_time: seconds per StepBatch (a StepModel's ``seconds``); the step time does not
            depend on these two flags, only the schedule and the pool do.
        replan: ``f(max_num_seqs, max_num_batched_tokens) -> Plan`` (default: kvplan's estimate
            with the plan's other flags; tests pass a fixed pool).
        efficiency: the step model's coefficients, for the request path (serving.with_request_path;
            None: none).
        adjust: ``f(candidate plan, SimulationResult) -> Summary`` replacing the plain metrics
            (kvplan perf with speculative decoding: cli/perf.py speculative_adjuster); None: summarize.
        confirm_requests: the headline run's requests; when more than ``num_requests``, the
            grid's best pair and the flags as given are run again on that many (the headline's
            length, so the recommendation's goodput compares with the headline's) and ranked
            again: a pair that wins only on the shorter runs is not recommended.
    Raises:
        KvplanError: the starting plan does not start (exit 1); bad lengths (exit 2).
    """
    base = engine_config(plan, efficiency=efficiency)
    check_lengths(lengths, base.max_model_len)
    if replan is None:
        replan = _replanner(plan)
    defaults = (base.max_num_seqs, base.max_num_batched_tokens)
    conc = int(load.value) if load.kind == "closed" else None
    chunked = base.enable_chunked_prefill is not False
    reqs = tuple(make_requests(num_requests, lengths, seed=seed, shared_prefix=shared_prefix))

    def run(seqs: int, mbt: int, requests) -> Candidate:
        try:
            p = replan(seqs, mbt)
        except KvplanError as e:
            return Candidate(seqs, mbt, None, None, False, 0.0, float("inf"), skipped=e.message)
        if not p.fits:
            return Candidate(seqs, mbt, None, None, False, 0.0, float("inf"), p, skipped=p.failure)
        cfg = engine_config(p, max_num_seqs=seqs, max_num_batched_tokens=mbt, efficiency=efficiency)
        sim = simulate(cfg, step_time, load.workload(requests, seed))
        summ = summarize(sim) if adjust is None else adjust(p, sim)
        return Candidate(seqs, mbt, p.num_gpu_blocks, summ, slo.meets(summ), slo.goodput(summ), slo.worst_ratio(summ), p)

    out = [run(seqs, mbt, reqs) for seqs, mbt in grid(*defaults, base.max_model_len, chunked_prefill=chunked,
                                                      concurrency=conc)]
    out.sort(key=lambda c: _rank(c, defaults))
    best = next((c for c in out if c.meets), None)
    default = next((c for c in out if (c.max_num_seqs, c.max_num_batched_tokens) == defaults), None)
    confirmed = 0
    if best is not None and best is not default and confirm_requests > num_requests:
        # the headline's length: the winner and the flags as given again, ranked again
        long = tuple(make_requests(confirm_requests, lengths, seed=seed, shared_prefix=shared_prefix))
        best = run(best.max_num_seqs, best.max_num_batched_tokens, long)
        default = run(*defaults, long) if default is not None else None
        confirmed = confirm_requests
        if default is not None and default.meets and (not best.meets or _rank(default, defaults) <= _rank(best, defaults)):
            best = default
        elif not best.meets:
            best = None
    return Recommendation(best, tuple(out), num_requests, default, confirmed)


def _replanner(plan):
    """Re-plan ``plan``'s model and GPU with other --max-num-seqs / --max-num-batched-tokens
    (kvplan/capacity/estimate.py plan, the plan's other flags and environment)."""
    from kvplan.capacity.estimate import plan as estimate

    def replan(seqs: int, mbt: int):
        args = plan.args.model_copy(update={"max_num_seqs": seqs, "max_num_batched_tokens": mbt})
        return estimate(plan.spec, plan.gpu, args, env=plan.env)

    return replan


# Requests per option when `plan --slo` screens its options (one closed-loop run each).
PLAN_REQUESTS = 200
# A plan option's run sends at least this many times its concurrency (serving.CLOSED_LOOP_MIN_RATIO):
# fewer is mostly one wave of ramp-up and drain, not the steady state the SLO is about.


@dataclass(frozen=True)
class OptionPerf:
    """One `plan` option served under the SLO.

    Attributes:
        concurrency: requests in flight per engine (the target over the data-parallel replicas,
            rounded up).
        summary: the run's metrics (None when the option could not be predicted).
        meets: every target met. calibration: the step model's label. approximate: reasons.
        refused: why the option could not be predicted (then it does not count as meeting).
    """

    concurrency: int
    summary: Summary | None
    meets: bool
    calibration: str
    approximate: tuple[str, ...] = ()
    refused: str | None = None


def screen_options(options, lengths: Lengths, slo: SLO, target_concurrency: float, *,
                   shared_prefix: SharedPrefix | None = None, num_requests: int = PLAN_REQUESTS,
                   seed: int = 0, step_timer=None) -> list[OptionPerf]:
    """Serve ``lengths`` on each `plan` option (kvplan/capacity/search.py Option) in a closed loop
    at its share of the target concurrency and check the SLO, in the options' order; each run
    sends max(``num_requests``, 3 x its concurrency) requests (steady state, not one wave), at
    most serving.MAX_REQUESTS.

    Args:
        step_timer: ``plan -> (StepModel | None, seconds(StepBatch))`` (default: the step model
            of the option's model, GPU and flags; tests inject a constant).
    Returns:
        one OptionPerf per option; an option the step model or emulator refuses (pipeline
        parallelism, a Mamba group) carries the reason and does not meet the SLO.
    """
    import math

    from kvplan.perf.serving import CLOSED_LOOP_MIN_RATIO, MAX_REQUESTS, check_modelled, predict

    if step_timer is None:
        from kvplan.perf.step_time import step_model

        def step_timer(plan):
            sm = step_model(plan.spec, plan.gpu, plan.args, vllm_version=plan.effective["vllm_version"])
            return sm, sm.seconds

    out = []
    for o in options:
        conc = max(1, math.ceil(target_concurrency / o.data_parallel_size - 1e-9))
        try:
            check_modelled(o.plan)  # a layer kind kvplan does not model: its limitation, said as such
            model, timer = step_timer(o.plan)
            n = min(max(num_requests, CLOSED_LOOP_MIN_RATIO * conc), MAX_REQUESTS)  # a shorter run is labelled
            r = predict(o.plan, model, lengths, Load("closed", conc), num_requests=n, seed=seed,
                        shared_prefix=shared_prefix, saturation=False, step_time=timer)
        except KvplanError as e:
            out.append(OptionPerf(conc, None, False, "not predicted", (), e.message))
            continue
        out.append(OptionPerf(conc, r.summary, slo.meets(r.summary), r.calibration.label, r.approximate))
    return out
