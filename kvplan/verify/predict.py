"""What kvplan predicts for a verified start: engine arguments -> estimate options, the GPU, the plan.

Engine arguments are vLLM's keyword names (``LLM(...)``/``vllm serve``); the plan comes from
kvplan's estimate path (through kvplan.verify.core_api), on the GPU the start measured or
``--gpu``. Writes only temporary files (a generated GPU profile, a config.json to plan from).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from kvplan.errors import KvplanError
from kvplan.io.units import GiB, MiB
from kvplan.verify.log import VllmLog
from kvplan.verify.records import _slug
from kvplan.verify.versions import VERIFIED_VLLM

def _whole(value: Any) -> int:
    """An engine argument that vLLM takes as an int: an int, a whole finite float (8192.0) or its
    text. Raises ValueError for inf, nan, 8192.5, True/False and other text."""
    if isinstance(value, bool):
        raise ValueError("not a whole number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if not value.is_integer():
            raise ValueError("not a whole number")
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value.strip())
    raise TypeError("not a number")


def _finite(value: Any) -> float:
    """An engine argument that vLLM takes as a float; inf and nan raise ValueError."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    out = float(value)
    if not math.isfinite(out):
        raise ValueError("not a finite number")
    return out


# vLLM keyword -> (kvplan estimate option, converter). Names are vLLM's (EngineArgs fields).
_ENGINE_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "tensor_parallel_size": ("tensor_parallel_size", _whole),
    "pipeline_parallel_size": ("pipeline_parallel_size", _whole),
    "max_model_len": ("max_model_len", lambda v: -1 if str(v).lower() == "auto" else _whole(v)),
    "gpu_memory_utilization": ("gpu_memory_utilization", _finite),
    "kv_cache_dtype": ("kv_cache_dtype", str),
    "block_size": ("block_size", _whole),
    "dtype": ("dtype", lambda v: str(v).removeprefix("torch.")),
    "quantization": ("quantization", str),
    "max_num_seqs": ("max_num_seqs", _whole),
    "max_num_batched_tokens": ("max_num_batched_tokens", _whole),
    "enforce_eager": ("enforce_eager", bool),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", _whole),
    "kv_cache_memory": ("kv_cache_memory_bytes", _whole),
    "enable_prefix_caching": ("enable_prefix_caching", bool),
    "disable_hybrid_kv_cache_manager": ("disable_hybrid_kv_cache_manager", bool),
    "revision": ("revision", str),
    "limit_mm_per_prompt": ("limit_mm_per_prompt", lambda v: v if isinstance(v, str) else json.dumps(v)),
    # speculative decoding, LoRA, weight and KV offload (kvplan/capacity/addons.py sizes them)
    "speculative_config": ("speculative_config", lambda v: v if isinstance(v, str) else json.dumps(v)),
    "spec_method": ("spec_method", str),
    "spec_model": ("spec_model", str),
    "spec_tokens": ("spec_tokens", _whole),
    "enable_lora": ("enable_lora", bool),
    "max_loras": ("max_loras", _whole),
    "max_lora_rank": ("max_lora_rank", _whole),
    "max_cpu_loras": ("max_cpu_loras", _whole),
    "fully_sharded_loras": ("fully_sharded_loras", bool),
    "lora_dtype": ("lora_dtype", lambda v: str(v).removeprefix("torch.")),
    "cpu_offload_gb": ("cpu_offload_gb", _finite),
    "cpu_offload_params": ("cpu_offload_params", lambda v: v if isinstance(v, str) else ",".join(sorted(v))),
    "offload_group_size": ("offload_group_size", _whole),
    "offload_num_in_group": ("offload_num_in_group", _whole),
    "offload_prefetch_step": ("offload_prefetch_step", _whole),
    "offload_params": ("offload_params", lambda v: v if isinstance(v, str) else ",".join(sorted(v))),
    "kv_offloading_size": ("kv_offloading_size", _finite),
    "kv_offloading_backend": ("kv_offloading_backend", str),
    "kv_transfer_config": ("kv_transfer_config", lambda v: v if isinstance(v, str) else json.dumps(v)),
    # dummy weights: no checkpoint read, so an EAGLE/MTP draft keeps no head of its own (addons.py)
    "load_format": ("load_format", lambda v: str(v).rsplit(".", 1)[-1].lower()),
}
# Keywords that do not change memory (or are what verify itself sets).
_NO_MEMORY_EFFECT = frozenset(
    {
        "model", "model_tag", "tokenizer", "skip_tokenizer_init",
        "lora_modules",  # adapters load into the CPU cache (lora/worker_manager.py device="cpu"); GPU slots are max_loras "seed", "disable_log_stats",
        "trust_remote_code", "served_model_name", "host", "port", "api_key", "download_dir", "tokenizer_mode",
        "enable_log_requests", "disable_log_requests", "uvicorn_log_level", "allowed_local_media_path",
        "chat_template", "hf_token", "enable_auto_tool_choice", "tool_call_parser", "reasoning_parser",
        "default_chat_template_kwargs", "override_generation_config", "generation_config", "api_server_count",
        "enable_chunked_prefill", "tokenizer_revision", "ssl_keyfile", "ssl_certfile", "root_path",
        "disable_uvicorn_access_log", "middleware", "allowed_origins", "response_role", "config",
    }
)

# ---------------------------------------------------------------------------------------------
# engine arguments
# ---------------------------------------------------------------------------------------------


def engine_kwargs_to_options(kwargs: dict) -> tuple[dict, list[str]]:
    """Map vLLM engine keywords (``LLM(...)``/``vllm serve`` names) to kvplan estimate options.

    Returns:
        (options, unmodelled): options for ``plan_from_options``; the keywords kvplan does not
        model but which may change memory (reported, never silently dropped).
    Raises:
        KvplanError: a value of a known keyword cannot be converted (names the keyword).
    """
    options: dict[str, Any] = {}
    unmodelled: list[str] = []
    for key, value in kwargs.items():
        if key in _ENGINE_OPTIONS:
            if value is None:
                continue
            option, conv = _ENGINE_OPTIONS[key]
            try:
                options[option] = conv(value)
            except (TypeError, ValueError, OverflowError) as exc:
                why = str(exc) if str(exc).startswith("not a") else "not a number of the kind vLLM takes"
                raise KvplanError(f"engine_args.{key}: cannot use {value!r} ({why})") from None
            if option == "kv_cache_dtype" and options[option] == "auto":
                del options[option]
            if option == "dtype" and options[option] == "auto":
                del options[option]
        elif key not in _NO_MEMORY_EFFECT:
            unmodelled.append(key)
    return options, unmodelled


def _check_logged_options(options: dict, *, skip: set) -> None:
    """Check engine options read from a log as ``kvplan estimate`` checks its flags (a
    max_model_len of -8192, a block_size of 7), except those in ``skip`` (the user's flags
    replace them).

    Raises:
        KvplanError: ``engine_args.KEY: ...`` naming the log's key, not a flag the user never typed.
    """
    from pydantic import ValidationError

    from kvplan.io.errors import engine_args_error
    from kvplan.engines.vllm.args import EngineArgs

    given = {k: v for k, v in options.items() if k in EngineArgs.model_fields and k not in skip}
    try:
        EngineArgs(**given)
    except ValidationError as exc:
        raise engine_args_error(exc, prefix="engine_args.") from None


def options_to_engine_kwargs(options: dict) -> dict:
    """kvplan estimate options the user set -> ``LLM(...)`` keywords (the names of vLLM's EngineArgs).

    ``max_model_len=-1`` (auto) stays -1, which vLLM accepts as auto-fit
    (config/model.py; version rules in engines/vllm/v0_26). Options equal to None, "auto" dtypes and ``enforce_eager=False`` are left
    to vLLM's defaults.
    """
    out: dict[str, Any] = {}
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "block_size",
        "dtype",
        "quantization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "kv_cache_memory_bytes",
        "enable_prefix_caching",
        "disable_hybrid_kv_cache_manager",
        "revision",
        "limit_mm_per_prompt",
        "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "fully_sharded_loras",
        "cpu_offload_gb", "offload_group_size", "offload_num_in_group", "offload_prefetch_step",
        "kv_offloading_size",
    ):
        v = options.get(key)
        if v is None or (key in ("kv_cache_dtype", "dtype") and v == "auto"):
            continue
        if key in ("tensor_parallel_size", "pipeline_parallel_size") and v == 1:
            continue
        out[key] = v
    if options.get("enforce_eager"):
        out["enforce_eager"] = True
    for key in ("speculative_config", "kv_transfer_config"):  # LLM(...) takes the mapping
        if options.get(key):
            out[key] = json.loads(options[key]) if isinstance(options[key], str) else options[key]
    for key, default in (("enable_lora", False), ("fully_sharded_loras", False), ("cpu_offload_gb", 0),
                         ("offload_group_size", 0)):
        if out.get(key) == default:
            del out[key]
    if isinstance(out.get("limit_mm_per_prompt"), str):
        out["limit_mm_per_prompt"] = json.loads(out["limit_mm_per_prompt"])  # LLM(...) takes the mapping
    return out


# ---------------------------------------------------------------------------------------------
# GPU and prediction
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuChoice:
    """Which GPU profile the prediction uses and why.

    Attributes:
        gpu: profile id for plan_from_options.
        gpu_memory: --gpu-memory override (bytes as text) or None.
        extra_profiles: profile files to load (the user's plus a generated one for this machine).
        source: one line saying where the figures come from.
    """

    gpu: str
    gpu_memory: Optional[str]
    extra_profiles: tuple[str, ...]
    source: str


def _machine_profile_file(
    name: str | None, total: int, compute_capability: str | None, user_profiles, nvml_total: int | None = None, quality: str = "measured"
) -> str:
    """Write a one-profile YAML for the GPU this log/child measured and return its path."""
    import yaml

    from kvplan.gpus import find_gpu, load_profiles

    base = None
    if name:
        try:
            base = find_gpu(name, load_profiles(list(user_profiles or [])))
        except KvplanError:
            base = None
    entry: dict[str, Any] = {
        "id": "measured-gpu",
        "name": name or (base.display_name if base else "measured GPU"),
        "reported_name": name,
        "memory_bytes": int(total),
        "memory_quality": quality,
        "memory_source": "the verified start (torch.cuda.mem_get_info total)" if quality == "measured" else "the vLLM log",
    }
    if nvml_total:
        entry["nvidia_smi_total_mib"] = int(nvml_total) // MiB
    if base is not None:
        entry["base_id"] = base.id
        entry["fp8_supported"] = base.fp8_supported
        entry["bf16_supported"] = base.bf16_supported
        entry["compute_capability"] = base.compute_capability
        if not nvml_total and base.nvidia_smi_total_mib:
            entry["nvidia_smi_total_mib"] = base.nvidia_smi_total_mib
    elif compute_capability:
        try:
            major, minor = (int(x) for x in compute_capability.split(".")[:2])
            entry["fp8_supported"] = (major, minor) >= (8, 9)
            entry["bf16_supported"] = major >= 8
            entry["compute_capability"] = compute_capability
        except ValueError:
            pass
    fd, path = tempfile.mkstemp(prefix="kvplan-gpu-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"gpus": [entry]}, fh)
    return path


def choose_gpu(log: VllmLog, *, gpu: Optional[str], gpu_memory: Optional[str], gpu_profiles, record_gpu: dict | None = None) -> GpuChoice:
    """Pick the GPU profile for the prediction.

    ``--gpu`` wins. Otherwise the GPU the run measured: the child's MEMINFO/KVPLAN_ENV line or a
    record's ``gpu.cuda_total_bytes`` (exact); else the log's total GiB when it matches exactly
    one known profile; else that rounded total itself.

    Raises:
        KvplanError: the log does not show the GPU memory and --gpu is not given.
    """
    user = tuple(gpu_profiles or ())
    if gpu:
        return GpuChoice(gpu, gpu_memory, user, f"--gpu {gpu}")
    env = log.env or {}
    total = None
    name = None
    if log.meminfo and log.meminfo.get("total"):
        total, name = log.meminfo["total"], log.meminfo.get("name")
    if record_gpu and record_gpu.get("cuda_total_bytes"):
        total = total or int(record_gpu["cuda_total_bytes"])
        name = name or record_gpu.get("name")
    if env.get("cuda_total_bytes"):
        total = total or int(env["cuda_total_bytes"])
        name = name or env.get("cuda_device")
    if total:
        path = _machine_profile_file(name, total, env.get("compute_capability"), user, env.get("nvml_total_bytes"))
        return GpuChoice("measured-gpu", gpu_memory, user + (path,), f"{name or 'GPU'}: {total:,} B measured by CUDA")
    if log.total_bytes:
        from kvplan.gpus import load_profiles

        res = log.resolution_bytes.get("total_bytes", int(0.005 * GiB))
        matches = [p for p in load_profiles(list(user)).values() if abs(p.memory_bytes - log.total_bytes) <= res]
        if len(matches) == 1:
            p = matches[0]
            return GpuChoice(p.id, gpu_memory, user, f"{p.id}: the only profile whose memory matches the log's {log.total_bytes / GiB:.2f} GiB")
        path = _machine_profile_file(None, log.total_bytes, None, user, quality="vllm-log-gib")
        return GpuChoice(
            "measured-gpu",
            gpu_memory,
            user + (path,),
            f"the log's total {log.total_bytes / GiB:.2f} GiB (rounded to 0.01 GiB by vLLM; give --gpu for exact bytes)",
        )
    raise KvplanError("--gpu: the log does not show the GPU's memory; name the GPU it ran on", hint="e.g. --gpu H100-80GB")


def predict(model: str, options: dict, choice: GpuChoice, *, revision: Optional[str] = None):
    """(Plan, ModelSource) for ``model`` with kvplan estimate ``options`` on ``choice``.

    Reuses plan_from_options (the same path as ``kvplan estimate``; kvplan.verify.core_api).
    Raises:
        KvplanError: bad options or model (exit 2).
    """
    from kvplan.verify.core_api import plan_from_options

    kw = dict(options)
    kw.pop("revision", None)
    return plan_from_options(
        model=model,
        gpu=choice.gpu,
        gpu_memory=choice.gpu_memory,
        gpu_profiles=list(choice.extra_profiles) or None,
        revision=revision,
        **kw,
    )


def plan_document(plan, source) -> dict:
    """The ``kvplan estimate --format json`` document of a plan (kvplan.render.to_dict)."""
    from kvplan import render

    return render.to_dict(plan, source.provenance | {"origin": source.origin})


def _materialize_model(model: str, revision: Optional[str], workdir: Path, dummy_weights: bool) -> tuple[str, dict | None]:
    """What vLLM should load, and the config kvplan reads.

    With dummy weights vLLM only needs config.json: a local directory is used as is; a bundled or
    Hub model's config is written to ``workdir/<name>/config.json``. Without dummy weights the
    model string goes to vLLM unchanged (it loads the real checkpoint).
    Raises:
        KvplanError: the model cannot be resolved.
    """
    from kvplan.sources import resolve_model

    path = Path(model).expanduser()
    if os.path.isdir(path):  # False for a name the file system refuses: resolve_model says why
        return str(path), None
    source = resolve_model(model, revision=revision)
    if not dummy_weights:
        return model, source.config
    target = workdir / _slug(source.name.replace("/", "__"))
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(source.config, indent=1), encoding="utf-8")
    return str(target), source.config


def _config_dir(config: dict, workdir: Path, name: str) -> str:
    target = workdir / _slug(name)
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return str(target)



def _predict_for(log: VllmLog, model_for_kvplan: str, options: dict, usage: str, *, gpu, gpu_memory, gpu_profiles, record_gpu=None, revision=None, vllm_version=VERIFIED_VLLM):
    """(plan, source, GpuChoice) or raises KvplanError."""
    choice = choose_gpu(log, gpu=gpu, gpu_memory=gpu_memory, gpu_profiles=gpu_profiles, record_gpu=record_gpu)
    opts = dict(options)
    opts["usage"] = usage
    opts.setdefault("vllm_version", vllm_version)
    try:
        plan, source = predict(model_for_kvplan, opts, choice, revision=revision)
    finally:
        for path in choice.extra_profiles[len(tuple(gpu_profiles or ())):]:  # the generated ones
            try:
                os.unlink(path)
            except OSError:
                pass
    return plan, source, choice

