"""What every serving-stack writer (render/k8s.py, kserve.py, llmd.py, compose.py) puts in its
manifest: the model, the `vllm serve` flags of the serve line (kvplan.render.serve), the
environment vLLM needs, the image of the plan's vLLM release, the GPUs, and the
``# kvplan: gpu=`` comment that makes `kvplan check` size the file on the same GPU.

The round trip is the point: `kvplan check` on a written file reads back the same model,
flags, GPU and vLLM version (the image tag), so its figures are the estimate's
(tests/render/test_stack_writers.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.capacity.estimate import Plan
from kvplan.errors import KvplanError
from kvplan.capacity.addons import shm_region_bytes
from kvplan.render.serve import _served_model, serve_env, serve_settings

FORMATS = ("k8s", "lws", "kserve", "llm-d", "compose")
GPUS_PER_NODE = 8  # kvplan.gpus.GPUS_PER_NODE: GPU profiles record no node size
# Room a written /dev/shm keeps beside what vLLM's source sizes (the KV offload region, the
# shm_broadcast.py MessageQueue rings of a multi-GPU engine: the version's check_rules.node_rings)
# for what it does not: NCCL's shared-memory transport and other processes' segments. A writer's
# choice, not a prediction.
SHM_HEADROOM_GIB = 1


@dataclass(frozen=True)
class Served:
    """One engine as a manifest writes it.

    Attributes:
        model: what `vllm serve` loads (Hub id or directory).
        flags: the serve line's flag tokens, in order (without the model).
        tp / pp: tensor / pipeline parallel sizes.
        env: NAME -> value vLLM needs in its environment (serve_env).
        image: vllm/vllm-openai:v<the plan's vLLM version>.
        gpu: the GPU profile id, for the ``# kvplan: gpu=`` comment.
        name: a Kubernetes-safe name for the objects.
    """

    model: str
    flags: tuple[str, ...]
    flags_without_parallel: tuple[str, ...]
    tp: int
    pp: int
    env: dict
    image: str
    gpu: str
    name: str
    replicas: int = 1  # copies of the serve line behind the stack's load balancing (never a DP in the line)
    gpus: int = 1  # GPUs the serve line runs on: TP x PP x DP x PCP (capacity/ranks.py World.gpus)
    dp: int = 1  # --data-parallel-size: engines of the serve line
    nnodes: int = 1  # --nnodes: the serve line runs on this many nodes (pods)
    # one serve line per node (without `vllm serve` and the model) when nnodes > 1: node rank 0
    # first, then one worker's (every worker pod alike): render/parallel.py launch_lines
    node_flags: tuple[tuple[str, ...], ...] = ()
    dp_local: int = 1  # --data-parallel-size-local: the engines on one node (pod) (capacity/ranks.py World)
    expert_parallel: bool = False  # --enable-expert-parallel
    engine_gpus: int = 1  # TP x PP x PCP: the GPUs of one engine
    # (field, tokens) of every flag of the serve line, in order (render/serve.py serve_settings)
    settings: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # bytes of /dev/shm vLLM's CPU KV offload region(s) take on one pod (check.rules.shm
    # shm_region_bytes: 0 when none, or the version keeps the pool elsewhere)
    shm_region: int = 0
    # bytes of /dev/shm the multi-GPU engines' shared-memory rings can take on one pod (the
    # version's check_rules.node_rings, summed; 0 for one GPU alone)
    shm_rings: int = 0

    def flags_without(self, *fields: str) -> tuple[str, ...]:
        """The serve line's flag tokens without the flags of ``fields`` (serve_settings names)."""
        return tuple(t for f, toks in self.settings if f not in fields for t in toks)

    @property
    def shm_size_limit(self) -> str | None:
        """The sizeLimit of the /dev/shm emptyDir a written pod mounts ("12Gi"), None when vLLM
        keeps nothing there (one GPU, no KV offload region): the region and the rings rounded up
        to whole GiB, plus SHM_HEADROOM_GIB."""
        need = self.shm_region + self.shm_rings
        if not need:
            return None
        return f"{-(-need // 2**30) + SHM_HEADROOM_GIB}Gi"

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one node (pod): all of them on one node, else the node's share of the world
        (kvplan.check.rules.hardware gpus_needed counts the same)."""
        return -(-self.gpus // self.nnodes)


def served(plan: Plan, revision: str | None = None, replicas: int = 1) -> Served:
    """The engine of ``plan`` as the manifest writers need it.

    Raises:
        KvplanError: the plan was sized with a --gpu-memory override (no manifest can say it,
            so `kvplan check` would size a different GPU)."""
    if getattr(plan.gpu, "memory_overridden", False):
        raise KvplanError("--format: a --gpu-memory override cannot be written in a manifest",
                          hint="drop --gpu-memory, or add a GPU profile with --gpu-profiles")
    settings = serve_settings(plan, revision)
    flags = tuple(t for s in settings for t in s["tokens"])
    parallel = {"tensor_parallel_size", "pipeline_parallel_size"}
    rest = tuple(t for s in settings if s["field"] not in parallel for t in s["tokens"])
    model = _served_model(plan.spec.name)
    gpus, nnodes, node_flags = _layout(plan, model, revision)
    world = plan.parallel.world if plan.parallel is not None else None
    name = re.sub(r"[^a-z0-9-]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")[:50] or "vllm"
    return Served(
        model=model, flags=flags, flags_without_parallel=rest,
        tp=plan.effective["tensor_parallel_size"], pp=plan.effective["pipeline_parallel_size"],
        env=serve_env(plan, revision), image=f"vllm/vllm-openai:v{plan.effective['vllm_version']}",
        gpu=plan.gpu.id, name=name, replicas=replicas, gpus=gpus, nnodes=nnodes,
        dp=plan.parallel.world.dp if plan.parallel is not None else 1, node_flags=node_flags,
        dp_local=world.data_parallel_size_local if world is not None else 1,
        expert_parallel=bool(world is not None and world.uses_ep),
        engine_gpus=world.engine_gpus if world is not None else gpus,
        settings=tuple((st["field"], tuple(st["tokens"])) for st in settings),
        shm_region=shm_region_bytes(plan),
        shm_rings=_rings(plan, gpus, nnodes),
    )


def pod_gpus(gpus: int, nnodes: int, dp: int) -> int:
    """GPUs of one written pod: the node's share with --nnodes; for one engine of TP x PP over
    more than GPUS_PER_NODE GPUs without data parallel (the LeaderWorkerSet's Ray pattern),
    ceil(GPUs / ceil(GPUs / GPUS_PER_NODE)) (every pod alike); else all of them."""
    if nnodes > 1:
        return -(-gpus // nnodes)
    if gpus > GPUS_PER_NODE and dp == 1:
        return -(-gpus // -(-gpus // GPUS_PER_NODE))
    return gpus


def _rings(plan: Plan, gpus: int, nnodes: int) -> int:
    """Bytes the plan's multi-GPU engines' /dev/shm rings can take on one pod (the version's
    check_rules.node_rings, summed): every engine on the node, each with its workers there."""
    from kvplan.capacity.addons import engines_on_a_node

    world = plan.parallel.world if plan.parallel is not None else None
    tp = plan.effective["tensor_parallel_size"]
    engine = world.engine_gpus if world is not None else tp * plan.effective["pipeline_parallel_size"]
    dp = world.dp if world is not None else 1
    dcp = world.dcp if world is not None else 1
    on_pod = pod_gpus(gpus, nnodes, dp)
    rings = plan.rules.check_rules.node_rings(engine, tp, engines_on_a_node(plan), min(engine, on_pod), dcp)
    return sum(rings)


def _layout(plan: Plan, model: str, revision: str | None) -> tuple[int, int, tuple[tuple[str, ...], ...]]:
    """(GPUs, nodes, per-node flags) of the serve line: vLLM starts TP x PP x PCP workers per
    engine and DP engines (config/parallel.py world_size x data_parallel_size), all of them
    GPUs of this one serve line (a MoE model's DP engines are one deployment; a dense model's
    are independent engines, but `vllm serve -dp N` still starts all N). With --nnodes N every
    node runs the line with its --node-rank (the leader's first, then a worker's:
    render/parallel.py launch_lines)."""
    import shlex

    from kvplan.render.parallel import launch_lines
    from kvplan.render.serve import serve_command

    world = plan.parallel.world if plan.parallel is not None else None
    if world is None:
        return plan.effective["tensor_parallel_size"] * plan.effective["pipeline_parallel_size"], 1, ()
    if world.nnodes <= 1:
        return world.gpus, 1, ()
    lines = launch_lines(plan, serve_command(plan, revision))
    flags = []
    for ln in lines[:2]:  # the leader's and one worker's
        toks = shlex.split(ln["command"])
        start = next(i for i in range(len(toks) - 1) if toks[i:i + 2] == ["vllm", "serve"]) + 3  # past NAME=VALUE.. vllm serve MODEL
        flags.append(tuple(toks[start:]))
    return world.gpus, world.nnodes, tuple(flags)


def header(s: Served, fmt: str) -> str:
    """The comment lines every written manifest starts with: what wrote it and the GPU check
    sizes it on (a ``# kvplan:`` directive, kvplan.check.sources.shell.find_directives)."""
    copies = f"{s.replicas} replicas of " if s.replicas > 1 else ""
    nodes = f" ({s.nnodes} nodes of {s.gpus_per_node})" if s.nnodes > 1 else ""
    return (f"# written by `kvplan ... --format {fmt}`: {copies}{s.model} on {s.gpus} x {s.gpu}{nodes}\n"
            f"# kvplan: gpu={s.gpu}\n")


def dump(doc) -> str:
    """YAML without anchors/aliases (a manifest is read by people and by other tools)."""
    import yaml

    class _Plain(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    return yaml.dump(doc, Dumper=_Plain, sort_keys=False, width=1000)


def hub_uri(s: Served, fmt: str) -> str:
    """``hf://MODEL`` for the stacks that download the model themselves.

    Raises:
        KvplanError: the model is a local directory (the stack cannot fetch it)."""
    if s.model.startswith((".", "/")) or s.model.count("/") != 1:
        raise KvplanError(f"--format {fmt}: {s.model} is not a Hugging Face model id the stack can download",
                          hint="estimate a Hub model id, or use --format k8s / compose and mount the directory")
    return f"hf://{s.model}"


# the flags a stack's multi-node template writes itself (KServe's data-parallel worker template),
# or a multi-node launch line sets per node (render/parallel.py launch_lines)
MULTINODE_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "data_parallel_size_local",
                    "enable_expert_parallel", "nnodes", "node_rank", "headless", "data_parallel_address",
                    "master_addr", "data_parallel_rpc_port", "data_parallel_start_rank")


def refuse_multinode_layout(s: Served, fmt: str, how: str) -> None:
    """Refuse a --nnodes layout a stack whose pods each run whole data-parallel engines cannot write.

    ``how``: the stack's multi-node pattern, in words (with its source), for the message.

    Raises:
        KvplanError: one engine over several nodes (--tensor-parallel-size or
            --pipeline-parallel-size / --prefill-context-parallel-size past one node), or nodes
            with unequal engine counts (--data-parallel-size not a multiple of --nnodes)."""
    if s.nnodes <= 1:
        return
    flag = None
    if s.pp > 1:
        flag = f"--pipeline-parallel-size {s.pp}"
    elif s.engine_gpus > s.tp:
        flag = f"--prefill-context-parallel-size {s.engine_gpus // max(s.tp * s.pp, 1)}"
    elif s.engine_gpus > s.gpus_per_node:
        flag = f"--tensor-parallel-size {s.tp}"
    elif s.dp_local * s.tp * s.nnodes != s.gpus:
        flag = f"--data-parallel-size {s.dp}"
    if flag is not None:
        raise KvplanError(f"{flag} over --nnodes {s.nnodes}: --format {fmt} cannot write this layout ({how})",
                          hint="use --format lws (a LeaderWorkerSet running vLLM's own multi-node launch)")

