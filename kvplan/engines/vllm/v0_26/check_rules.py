"""vLLM 0.26.0 rules that only `kvplan check` reads (the flag catalogue itself is in
engines/vllm/serve_flags.py).

Module of the version package engines/vllm/v0_26 (issue 11); kvplan.check.version.check_rules
selects it.
"""

from __future__ import annotations

# Switches whose vLLM 0.26.0 default is on (config/cache.py enable_prefix_caching,
# config/scheduler.py enable_chunked_prefill / async_scheduling=None -> auto, config/load.py
# use_tqdm_on_load, cli_args.py enable_log_deltas / enable_flash_late_interaction): `key: false`
# in a --config file is dropped by vLLM's loader, so it does not turn them off.
DEFAULT_ON_SWITCHES = frozenset(
    {
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "async-scheduling",
        "use-tqdm-on-load",
        "enable-log-deltas",
        "enable-flash-late-interaction",
    }
)


# The vLLM source this module restates: (file under vllm/, qualified name) pairs, fingerprinted
# per release by benchmarks/vllm_fingerprints.py (docs/versions.md "Every release").
VLLM_SOURCES: tuple[tuple[str, str], ...] = (
    ('distributed/device_communicators/shm_broadcast.py', 'ShmRingBuffer.__init__'),
    ('distributed/device_communicators/shm_broadcast.py', 'MessageQueue.__init__'),
    ('v1/executor/multiproc_executor.py', 'MultiprocExecutor._init_executor'),
    ('v1/executor/multiproc_executor.py', 'WorkerProc._init_message_queues'),
    ('distributed/parallel_state.py', 'GroupCoordinator.__init__'),
    ('config/cache.py', 'CacheConfig.enable_prefix_caching'),
    ('config/scheduler.py', 'SchedulerConfig.enable_chunked_prefill'),
    ('config/scheduler.py', 'SchedulerConfig.async_scheduling'),
    ('config/load.py', 'LoadConfig.use_tqdm_on_load'),
)


# --- the shared-memory rings of a multi-GPU engine (the /dev/shm it needs beside NCCL's) ---------
#
# vLLM 0.26.0 distributed/device_communicators/shm_broadcast.py ShmRingBuffer.__init__: one
# ring is a /dev/shm file of (max_chunk_bytes + 1 + n_local_readers) x max_chunks bytes (the
# chunks, then one written flag and one flag per local reader per chunk). Who creates them, for
# an engine run by the multiprocessing executor (config/parallel.py: the default whenever the
# world across data parallel is > 1 GPU; one GPU alone runs the in-process executor, no ring):
# * v1/executor/multiproc_executor.py MultiprocExecutor._init_executor: one rpc_broadcast_mq per
#   engine, MessageQueue(world_size, local_world_size, max_chunk_bytes =
#   VLLM_MQ_MAX_CHUNK_BYTES_MB (envs.py default 16) MiB), 10 chunks (MessageQueue's default);
# * WorkerProc: a worker_response_mq per worker, MessageQueue(1, 1): MessageQueue's defaults,
#   24 MiB x 10 chunks, one local reader;
# * distributed/parallel_state.py GroupCoordinator: an mq_broadcaster per tensor-parallel group
#   (and decode-context-parallel group) of more than one rank, create_from_process_group(cpu_group,
#   1 << 22, 6): 4 MiB x 6 chunks, the group's other local ranks reading.
# The files are sparse (pages are taken as messages are written), so the sum is what the rings
# can hold at most; this release creates each one without checking the free space.
RPC_CHUNK_BYTES = 16 * 2**20  # envs.VLLM_MQ_MAX_CHUNK_BYTES_MB default
RPC_CHUNKS = 10
RESPONSE_CHUNK_BYTES = 24 * 2**20  # MessageQueue(max_chunk_bytes=1024 * 1024 * 24)
RESPONSE_CHUNKS = 10
GROUP_CHUNK_BYTES = 1 << 22
GROUP_CHUNKS = 6
# vLLM 0.33.0 added check_shm_free_space to ShmRingBuffer.__init__ (v0_33/check_rules.py)
RING_FREE_SPACE_CHECKED = False


def ring_bytes(chunk_bytes: int, chunks: int, local_readers: int) -> int:
    """Bytes of one shm_broadcast.py ShmRingBuffer: (chunk_bytes + 1 + local_readers) x chunks."""
    return (chunk_bytes + 1 + local_readers) * chunks


def engine_rings(workers: int, tp: int, dcp: int = 1) -> tuple[int, ...]:
    """The /dev/shm rings (bytes each) one engine creates on a node where ``workers`` of its
    workers run (TP x PP x PCP of a single-node engine), under the multiprocessing executor
    (see above): its rpc_broadcast_mq, a worker_response_mq per worker, an mq_broadcaster per
    tensor-parallel group of ``tp`` > 1 ranks and per decode-context-parallel group of ``dcp``
    > 1 ranks on the node. Sizes as the defaults give them (VLLM_MQ_MAX_CHUNK_BYTES_MB unset)."""
    out = [ring_bytes(RPC_CHUNK_BYTES, RPC_CHUNKS, workers)]
    out += [ring_bytes(RESPONSE_CHUNK_BYTES, RESPONSE_CHUNKS, 1)] * workers
    for size in (tp, dcp):
        if size > 1 and workers >= size:
            out += [ring_bytes(GROUP_CHUNK_BYTES, GROUP_CHUNKS, size - 1)] * (workers // size)
    return tuple(out)


def node_rings(engine_gpus: int, tp: int, engines: int, workers_on_node: int | None = None,
               dcp: int = 1) -> tuple[int, ...]:
    """The /dev/shm rings (bytes each) on one node (pod) running ``engines`` engines of
    ``engine_gpus`` GPUs (TP x PP x PCP) each, ``workers_on_node`` of each engine's workers there
    (None: all of them); () for a single GPU alone (the in-process executor creates none).

    An engine split over several nodes creates smaller rings for its remote workers
    (WorkerProc._init_message_queues: the inner-DP group's 4 MiB x 6 broadcasters); the sizes
    here are the single-node ones, an upper bound for such a node."""
    if engine_gpus * engines <= 1:
        return ()
    workers = engine_gpus if workers_on_node is None else max(min(engine_gpus, workers_on_node), 1)
    return engine_rings(workers, tp, dcp) * engines

