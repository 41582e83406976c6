"""vLLM 0.33.0 rules that only `kvplan check` reads: 0.26.0's (v0_26/check_rules.py), and the
shared-memory rings' free-space check.

vLLM 0.33.0 distributed/device_communicators/shm_broadcast.py ShmRingBuffer.__init__ calls
check_shm_free_space(total_bytes_of_buffer) before it creates each ring: when /dev/shm has less
free space than one ring, it raises "Insufficient space in /dev/shm ..." and vLLM does not start.
The rings' sizes and who creates them are 0.26.0's (the same MessageQueue defaults,
VLLM_MQ_MAX_CHUNK_BYTES_MB 16, GroupCoordinator's 1 << 22 x 6). 0.34.0 keeps both.
"""

from __future__ import annotations

from kvplan.engines.vllm.v0_26.check_rules import *  # noqa: F401,F403
from kvplan.engines.vllm.v0_26.check_rules import VLLM_SOURCES as _V026_SOURCES

RING_FREE_SPACE_CHECKED = True

VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    *_V026_SOURCES,
    ('distributed/device_communicators/shm_broadcast.py', 'check_shm_free_space'),
)
