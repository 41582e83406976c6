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
from kvplan.render.serve import _served_model, serve_env, serve_settings

FORMATS = ("k8s", "lws", "kserve", "llm-d", "compose")
GPUS_PER_NODE = 8  # kvplan.gpus.GPUS_PER_NODE: GPU profiles record no node size


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
    name = re.sub(r"[^a-z0-9-]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")[:50] or "vllm"
    return Served(
        model=model, flags=flags, flags_without_parallel=rest,
        tp=plan.effective["tensor_parallel_size"], pp=plan.effective["pipeline_parallel_size"],
        env=serve_env(plan, revision), image=f"vllm/vllm-openai:v{plan.effective['vllm_version']}",
        gpu=plan.gpu.id, name=name, replicas=replicas, gpus=gpus, nnodes=nnodes,
        dp=plan.parallel.world.dp if plan.parallel is not None else 1, node_flags=node_flags,
    )


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
