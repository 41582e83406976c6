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
        tp / pp: tensor / pipeline parallel sizes (GPUs = tp x pp).
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
    replicas: int = 1  # copies of the engine behind the stack's load balancing (plan's data_parallel_size)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


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
    name = re.sub(r"[^a-z0-9-]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")[:50] or "vllm"
    return Served(
        model=model, flags=flags, flags_without_parallel=rest,
        tp=plan.effective["tensor_parallel_size"], pp=plan.effective["pipeline_parallel_size"],
        env=serve_env(plan, revision), image=f"vllm/vllm-openai:v{plan.effective['vllm_version']}",
        gpu=plan.gpu.id, name=name, replicas=replicas,
    )


def header(s: Served, fmt: str) -> str:
    """The comment lines every written manifest starts with: what wrote it and the GPU check
    sizes it on (a ``# kvplan:`` directive, kvplan.check.sources.shell.find_directives)."""
    copies = f"{s.replicas} replicas of " if s.replicas > 1 else ""
    return (f"# written by `kvplan ... --format {fmt}`: {copies}{s.model} on {s.gpus} x {s.gpu}\n"
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
