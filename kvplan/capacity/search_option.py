"""One option of `kvplan plan`'s search (capacity/search.py): an engine planned by the estimate,
replicated or laid out with data parallel, and what it costs and serves; the target it meets.
Its own module so that the multi-GPU layout searches (capacity/search_layouts.py) can build
options without importing the search.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.gpus import GPUProfile


def count_text(n: float) -> str:
    """A count of requests as messages show it: a whole number with thousands separators
    (``100,000,000``, never ``1e+08``), else its decimals as given (``12.5``)."""
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,}"


@dataclass(frozen=True)
class Target:
    """What the deployment must do.

    Attributes:
        max_model_len: tokens per request (vLLM --max-model-len).
        concurrency: concurrent requests to serve.
    """

    max_model_len: int
    concurrency: float


@dataclass(frozen=True)
class Option:
    """One way to serve the target.

    Attributes:
        plan: the engine's Plan (per GPU of the engine).
        data_parallel_size: replicas of the engine.
        engine_concurrency: concurrent requests one engine serves.
        price_per_gpu_hour: USD, None when unknown.
        binding: what caps one engine ("kv_cache", "max_num_seqs", or a workload limit).
        workload: the engine's WorkloadCapacity when a workload was given.
    """

    plan: object
    data_parallel_size: int
    engine_concurrency: float
    price_per_gpu_hour: float | None
    binding: str
    target: Target
    gpus_per_node: int = 8
    workload: object | None = None

    @property
    def gpu(self) -> GPUProfile:
        return self.plan.gpu

    @property
    def tensor_parallel_size(self) -> int:
        return self.plan.effective["tensor_parallel_size"]

    @property
    def pipeline_parallel_size(self) -> int:
        return self.plan.effective["pipeline_parallel_size"]

    @property
    def engine_gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def num_gpus(self) -> int:
        return self.engine_gpus * self.data_parallel_size

    @property
    def kv_cache_dtype(self) -> str:
        return self.plan.args.kv_cache_dtype

    @property
    def quantization(self) -> str | None:
        return self.plan.args.quantization

    @property
    def hourly_cost(self) -> float | None:
        """USD per hour for all GPUs, None when the price is unknown."""
        return None if self.price_per_gpu_hour is None else self.price_per_gpu_hour * self.num_gpus

    @property
    def achieved(self) -> float:
        """Concurrent requests all replicas serve."""
        return self.engine_concurrency * self.data_parallel_size

    @property
    def headroom(self) -> float:
        """achieved / target - 1 (0.25 = 25% spare)."""
        return self.achieved / self.target.concurrency - 1 if self.target.concurrency else 0.0

    @property
    def multi_node(self) -> bool:
        return self.engine_gpus > self.gpus_per_node

    @property
    def accuracy_rank(self) -> int:
        """0 = the checkpoint as is; 1 = fp8 KV; 2 = fp8 weights; 3 = both (tie-break only)."""
        return (1 if self.kv_cache_dtype.startswith("fp8") else 0) + (2 if self.quantization else 0)

    def label(self) -> str:
        """e.g. '2x NVIDIA H200 (TP=2) kv=fp8'."""
        shape = f"TP={self.tensor_parallel_size}"
        if self.pipeline_parallel_size > 1:
            shape += f" PP={self.pipeline_parallel_size}"
        if self.data_parallel_size > 1:
            shape += f" DP={self.data_parallel_size}"
        if self.plan.args.enable_expert_parallel:
            shape += " EP"
        if (self.plan.args.decode_context_parallel_size or 1) > 1:
            shape += f" DCP={self.plan.args.decode_context_parallel_size}"
        extra = ""
        if self.kv_cache_dtype != "auto":
            extra += f" kv={self.kv_cache_dtype}"
        if self.quantization:
            extra += f" quant={self.quantization}"
        return f"{self.num_gpus}x {self.gpu.display_name} ({shape}){extra}"

    @property
    def link_warning(self) -> str | None:
        """A warning when the engine all-reduces over tensor parallel on GPUs without NVLink: the
        profile's ``perf.link`` (with ``perf.source``, the datasheet) names another link (PCIe,
        an optional bridge); None otherwise or when the profile does not say."""
        perf = self.gpu.perf
        if self.tensor_parallel_size <= 1 or perf is None or not perf.link or perf.link.startswith("NVLink"):
            return None
        return (f"--tensor-parallel-size {self.tensor_parallel_size} on {self.gpu.display_name}: no NVLink "
                f"({perf.link}; {perf.source or 'gpus.yaml'}); every layer's all-reduce crosses that link and is slow")

    def serve_command(self, revision: str | None = None) -> str:
        """The `vllm serve` line (the version's flags; --data-parallel-size for replicas)."""
        import shlex

        from kvplan.engines.vllm import flags

        a = self.plan.args
        explicit = {
            "tensor_parallel_size": a.tensor_parallel_size,
            "pipeline_parallel_size": a.pipeline_parallel_size,
            # EngineArgs' default is not the user's (vLLM 0.34.0 resolves an unset one per sizing path)
            "gpu_memory_utilization": a.gpu_memory_utilization if "gpu_memory_utilization" in a.model_fields_set else None,
            "kv_cache_dtype": a.kv_cache_dtype,
            "block_size": a.block_size,
            "dtype": a.dtype,
            "quantization": a.quantization,
            "max_num_seqs": a.max_num_seqs,
            "max_num_batched_tokens": a.max_num_batched_tokens,
            "enforce_eager": a.enforce_eager,
            "kv_cache_memory_bytes": a.kv_cache_memory_bytes,
        }
        if revision:
            explicit["revision"] = revision
        explicit = {k: v for k, v in explicit.items() if v is not None}
        args = flags.serve_args(explicit, self.plan.effective["max_model_len"], self.plan.rules.serve_flags)
        if self.data_parallel_size > 1:
            args += ["--data-parallel-size", str(self.data_parallel_size)]
        if a.enable_expert_parallel:
            args.append("--enable-expert-parallel")
        if (a.decode_context_parallel_size or 1) > 1:
            args += ["--decode-context-parallel-size", str(a.decode_context_parallel_size)]
        if a.enable_prefix_caching is not None and a.enable_prefix_caching == self.plan.spec.is_hybrid:
            args.append("--enable-prefix-caching" if a.enable_prefix_caching else "--no-enable-prefix-caching")
        if self.plan.spec.hf_overrides:  # the config was sized with them (sources.load_spec)
            args += ["--hf-overrides", self.plan.spec.hf_overrides]
        env = [f"{k}={v}" for k, v in self.plan.start_env().items()]
        return " ".join([*env, shlex.join(["vllm", "serve", self.plan.spec.name, *args])])

    def to_dict(self, revision: str | None = None) -> dict:
        """JSON-ready (bytes as ints)."""
        p = self.plan
        b = p.worst_stage.budget
        out = {
            "gpu": p.gpu.id,
            "gpu_name": p.gpu.display_name,
            "num_gpus": self.num_gpus,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "enable_expert_parallel": bool(self.plan.args.enable_expert_parallel),
            "decode_context_parallel_size": self.plan.args.decode_context_parallel_size or 1,
            "multi_node": self.multi_node,
            "kv_cache_dtype": p.effective["kv_cache_dtype"],
            "quantization": p.effective["quantization"],
            "price_per_gpu_hour_usd": self.price_per_gpu_hour,
            "hourly_cost_usd": None if self.hourly_cost is None else round(self.hourly_cost, 4),
            "price_known": self.price_per_gpu_hour is not None,
            "max_model_len": p.effective["max_model_len"],
            "engine_concurrency": round(self.engine_concurrency, 2),
            "achieved_concurrency": round(self.achieved, 2),
            "target_concurrency": self.target.concurrency,
            "headroom": round(self.headroom, 4),
            "binding_limit": self.binding,
            "num_gpu_blocks": p.num_gpu_blocks,
            "kv_cache_bytes_per_gpu": b.kv_cache_bytes,
            "weights_bytes_per_gpu": b.weights_bytes,
            "max_num_seqs": p.effective["max_num_seqs"],
            "serve_command": self.serve_command(revision),
            "warnings": list(p.warnings) + ([self.link_warning] if self.link_warning else []),
            # issue 12: False when the model has no kvplan family (sized from the standard keys)
            "fully_modelled": p.exact,
            "exact": p.exact,  # deprecated name of fully_modelled (render/schema.py), kept one release
            "evidence": p.evidence.to_dict() if p.evidence is not None else None,
        }
        if not p.exact:
            out["approximate"] = [a.reason for a in p.approximations]
        if self.workload is not None:
            out["workload"] = self.workload.to_dict()
        return out
