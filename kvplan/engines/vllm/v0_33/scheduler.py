"""vLLM 0.33.0's scheduling rules: 0.26.0's (kvplan/engines/vllm/v0_26/scheduler.py) with only
what changed replaced. Checked against the vLLM 0.33.0 source, v1/core/sched/scheduler.py and
config/scheduler.py:

* ``long_prefill_token_threshold`` is not applied when only one request is queued or running
  ("nobody to starve"); the threshold may be floored at a fair share
  (``long_prefill_token_threshold_adaptive``, off by default, not modelled).
* ``max_num_active_seqs`` (new, default None = ``max_num_seqs``) limits how many requests may be
  RUNNING without shrinking the runner.
* Unchanged: FCFS preemption of the last RUNNING request, waiting admission only in steps that
  preempted nobody, ``scheduler_reserve_full_isl`` True, watermark 0.0, chunked prefill on,
  async scheduling on by default, the null block, unhashed freed blocks reused first.
  ``prefill_schedule_interval`` (default 1) and the API-server queue limits
  (``max_num_queued_reqs``/``tokens``, default None) do nothing at their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.v0_26 import scheduler as _v0_26


@dataclass(frozen=True)
class SchedulerPolicy(_v0_26.SchedulerPolicy):
    """0.26.0's policy with 0.33.0's ``max_num_active_seqs`` admission limit."""

    def admission_limit(self, max_num_seqs: int, max_num_active_seqs: int | None = None) -> int:
        """How many requests may be RUNNING: ``max_num_active_seqs`` when set (it must not exceed
        ``max_num_seqs``), else ``max_num_seqs`` (vLLM 0.33.0 scheduler.py max_num_active_reqs)."""
        if max_num_active_seqs is None:
            return max_num_seqs
        return min(max_num_active_seqs, max_num_seqs)


POLICY = SchedulerPolicy(**{**_v0_26.POLICY.__dict__, "version": "0.33.0", "long_prefill_cap_when_alone": False})


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('v1/core/sched/scheduler.py', 'Scheduler.schedule'),
    ('config/scheduler.py', 'SchedulerConfig.long_prefill_token_threshold'),
    ('config/scheduler.py', 'SchedulerConfig.enable_chunked_prefill'),
)
