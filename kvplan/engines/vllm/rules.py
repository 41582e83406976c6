"""The rules object of one vLLM version: everything kvplan knows about how that version
behaves, chosen once per estimate (engines/vllm/versions.py select) and passed down.

A version's rules live in one package (engines/vllm/v0_26/ ...); its ``__init__`` builds one
frozen VllmRules. A new version is one new package plus one line in versions.SUPPORTED; a
version that differs from another in a few places can reuse the other's modules and replace
only those fields (dataclasses.replace), and reuse the other's functions with only a parameter
or a hook replaced (``override``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable


@dataclass(frozen=True)
class FittedCoefficients:
    """Empirical byte terms fitted on one version's real starts (each documented where the
    version's package defines it: memory.py, runner.py). Bytes per GPU (int).

    Attributes:
        non_torch_single_gpu: CUDA memory outside torch's allocator on one GPU.
        non_torch_v1_cudagraph_extra: extra non-torch memory with V1-runner CUDA graphs.
        non_torch_multi_gpu_extra: the NCCL/all-reduce part when more than one GPU takes part.
    """

    non_torch_single_gpu: int
    non_torch_v1_cudagraph_extra: int
    non_torch_multi_gpu_extra: int

    @classmethod
    def of(cls, memory: ModuleType) -> "FittedCoefficients":
        """The coefficients a version's memory module defines (NON_TORCH_* constants)."""
        return cls(
            non_torch_single_gpu=memory.NON_TORCH_SINGLE_GPU,
            non_torch_v1_cudagraph_extra=memory.NON_TORCH_V1_CUDAGRAPH_EXTRA,
            non_torch_multi_gpu_extra=memory.NON_TORCH_MULTI_GPU_EXTRA,
        )


@dataclass(frozen=True)
class Evidence:
    """What one estimate's numbers stand on: the real starts its version was checked on, and
    the rules it used that none of them checked.

    Attributes:
        version: the vLLM version ("X.Y.Z").
        real_starts: how many real starts of that version kvplan's rules were checked on (the
            version package's real_starts.STARTS).
        unchecked: the rules this estimate used that no real start checked (the version's
            real_starts.unchecked), in words; empty when every rule it used was checked.
    """

    version: str
    real_starts: int
    unchecked: tuple[str, ...] = ()

    @property
    def checked(self) -> bool:
        """Every rule the estimate used was checked on a real start of its version."""
        return not self.unchecked

    def label(self) -> str:
        """"calibrated on N real starts", or "derived from the source, not yet checked on
        hardware: <rule>; <rule> (the rest calibrated on N real starts)"."""
        calibrated = f"calibrated on {self.real_starts} real vLLM {self.version} starts"
        if self.checked:
            return calibrated
        return ("derived from the source, not yet checked on hardware: " + "; ".join(self.unchecked)
                + f" (the rest {calibrated})")

    def to_dict(self) -> dict:
        """JSON: {"checked", "real_starts", "unchecked", "label"}."""
        return {"checked": self.checked, "real_starts": self.real_starts, "unchecked": list(self.unchecked),
                "label": self.label()}


@dataclass(frozen=True, eq=False)
class VllmRules:
    """How one vLLM version sizes memory and reads flags (compared and hashed by identity: one
    object per version, used as a cache key).

    Attributes:
        version: the vLLM version string ("X.Y.Z"), as `--vllm-version` spells it.
        evidence: what the rules were checked against (shown to users as provenance).
        flag_table: the version's `vllm serve` flags as data (flags by arity, short aliases,
            ignored, removed, cache dtypes, model dtypes, none-is-unset), read by
            engines/vllm/serve_flags.catalogue.
        serve_flags: EngineArgs field -> (`vllm serve` flag, the version's fixed default or None),
            used to write command lines (engines/vllm/flags.py).
        defaults: module: batch defaults, dtype and block-size resolution.
        quantization: module: accepted methods/dtypes, capability limits, checkpoint rules.
        kv_spec: module: bytes per page/token per layer-cache kind.
        allocator: module: KV-cache groups, blocks, tokens, concurrency.
        memory: module: the memory budget on one GPU.
        activation: module: the profiling run's activation peak.
        weights: module: weight bytes after loading.
        runner: module: which model runner, CUDA-graph memory.
        family_quirks: module: per-family quirks of this version's model implementations.
        coefficients: fitted byte terms the estimate reads from here (not from module globals).
        check_rules: module: rules only `kvplan check` reads (switches on by default ...).
        real_starts: module: STARTS (the real starts the rules were checked on) and
            ``unchecked(spec, gpu, args)`` (the rules an estimate uses that none of them checked).
        scheduler: module: the V1 scheduler's policy (``POLICY``) the perf emulator applies.
        start_failures: model_type -> why this version cannot start that family at all (one
            line; the parse refuses such a config with it). Not inherited by a later version.
    """

    version: str
    evidence: str
    flag_table: tuple
    serve_flags: dict
    defaults: ModuleType
    quantization: ModuleType
    kv_spec: ModuleType
    allocator: ModuleType
    memory: ModuleType
    activation: ModuleType
    weights: ModuleType
    runner: ModuleType
    family_quirks: ModuleType
    coefficients: FittedCoefficients
    check_rules: ModuleType
    real_starts: ModuleType
    scheduler: ModuleType | None = None
    start_failures: dict = field(default_factory=dict)

    def evidence_for(self, spec: Any, gpu: Any, args: Any) -> Evidence:
        """The Evidence of an estimate of ``spec`` (ModelSpec) on ``gpu`` (GPUProfile) with
        engine ``args`` (EngineArgs) under these rules."""
        return Evidence(self.version, len(self.real_starts.STARTS), tuple(self.real_starts.unchecked(spec, gpu, args)))

    def non_torch_bytes(self, world_size: int, v1_cudagraphs: bool = False) -> int:
        """Non-torch memory per GPU from this version's fitted coefficients (bytes); the rule is
        the version's memory.non_torch_bytes."""
        c = self.coefficients
        return self.memory.non_torch_bytes(
            world_size,
            v1_cudagraphs=v1_cudagraphs,
            single_gpu=c.non_torch_single_gpu,
            v1_cudagraph_extra=c.non_torch_v1_cudagraph_extra,
            multi_gpu_extra=c.non_torch_multi_gpu_extra,
        )


def override(rule: Callable[..., Any], doc: str, **changed: Any) -> Callable[..., Any]:
    """``rule`` (an earlier version's function) with only the keyword arguments in ``changed``
    (a fitted default, a hook) bound to this version's, documented by ``doc`` (the version's
    rule, its units and the vLLM source it restates). Callers may still pass those arguments."""
    bound = functools.partial(rule, **changed)
    bound.__doc__ = doc
    return bound
