"""The child process of ``kvplan verify``: start vLLM once, print what it measured, exit.

Run as ``python -m kvplan.verify.child '<json>'`` (or ``python kvplan/verify/child.py '<json>'``:
this file imports only the standard library at module level, then torch and vLLM). The JSON:

    {"name": "llama3-8b_eager",            # record name (echoed)
     "model": "path/to/dir",               # what vLLM loads (a directory with config.json)
     "engine_args": {"max_model_len": 8192, "enforce_eager": true},   # LLM(...) keywords
     "usage": "llm" | "serve",             # entry point whose defaults to use (below)
     "dummy_weights": true,                # load_format="dummy", skip_tokenizer_init=True
     "expect_vllm": "X.Y.Z"}               # refuse (exit 3) on another vLLM version; null = any

usage "llm": ``vllm.LLM(model=..., seed=0, **engine_args)``, the offline class; its usage
context makes vLLM default max_num_batched_tokens to 16384 on GPUs with >= 70 GiB that are not
A100 (8192 otherwise) and sets disable_log_stats. usage "serve": the engine `vllm serve` would
build: ``EngineArgs(...)`` + ``LLMEngine.from_engine_args(usage_context=OPENAI_API_SERVER)``,
so max_num_batched_tokens defaults to 8192 (2048 on smaller GPUs). Both run the engine core in
this process (VLLM_ENABLE_V1_MULTIPROCESSING=0) so the worker's exact figures are readable.
Source: vLLM engine/arg_utils.py get_batch_defaults, entrypoints/llm.py LLM.__init__ (the
version rules in engines/vllm/v0_26).

Protocol (stdout, one line each, besides vLLM's own log lines):
    KVPLAN_STAGE <stage>         progress for the parent's spinner
    KVPLAN_CASE {json}           name, model, engine_args, usage as run
    KVPLAN_CONFIG {json}         the model's config.json (so the log alone can be re-planned)
    MEMINFO free=B total=B name=S    torch.cuda.mem_get_info before vLLM (run-case.py format)
    KVPLAN_ENV {json}            versions, device, compute capability, relevant env vars
    RESULT num_gpu_blocks=N block_size=N max_num_seqs=N max_num_batched_tokens=N startup_s=S
    KVPLAN_EXACT {json}          exact bytes read from vLLM's in-process worker (best effort)
    KVPLAN_ERROR {json}          {"kind": "environment"|"refused", "type", "message"}
Exit status: 0 started, 1 vLLM raised while starting (refused the config), 3 environment
missing (no torch, no CUDA GPU, no vLLM, another vLLM version), 2 unreadable request.

Where the exact figures come from (vLLM, the version of kvplan.verify.versions): ``LLM.llm_engine`` (v1/engine/llm_engine.py)
-> ``model_executor`` (UniProcExecutor, set when not multiprocess) -> ``driver_worker``
(WorkerWrapperBase) -> ``worker`` (v1/worker/gpu_worker.py Worker): ``requested_memory``,
``init_snapshot`` (free/total at start), ``non_torch_memory``, ``peak_activation_memory``,
``cudagraph_memory_estimate``, ``available_kv_cache_memory_bytes``; ``worker.model_runner``
(V2: v1/worker/gpu/model_runner.py, V1: v1/worker/gpu_model_runner.py) ``model_memory_usage``.
The captured CUDA-graph bytes are a local of ``compile_or_warm_up_model``: the child wraps the
runner's ``capture_model`` to read its return value. The scheduler's KVCacheConfig
(v1/engine/core.py EngineCore.scheduler.kv_cache_config) gives the group layout. The wrappers
only observe (call through, record the result); if vLLM's internals differ, a field is missing.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback

EXIT_OK, EXIT_REFUSED, EXIT_BAD_REQUEST, EXIT_ENVIRONMENT = 0, 1, 2, 3

_STATE: dict = {"errors": []}


def emit(tag: str, payload) -> None:
    """Print one protocol line (JSON payloads on one line) and flush."""
    text = payload if isinstance(payload, str) else json.dumps(payload, default=str, separators=(",", ":"))
    sys.stdout.write(f"{tag} {text}\n")
    sys.stdout.flush()


def stage(name: str) -> None:
    """Tell the parent which start-up stage vLLM is in (for its spinner)."""
    emit("KVPLAN_STAGE", name)


def fail(kind: str, exc_type: str, message: str, code: int) -> None:
    """Print the KVPLAN_ERROR line and exit with ``code`` (1 refused, 3 environment)."""
    emit("KVPLAN_ERROR", {"kind": kind, "type": exc_type, "message": message})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _guard(fn):
    """Run an observer; record (never raise) its failure."""

    @functools.wraps(fn)
    def inner(*a, **k):
        try:
            return fn(*a, **k)
        except Exception as exc:  # an observer must never break vLLM's start
            _STATE["errors"].append(f"{fn.__name__}: {type(exc).__name__}: {exc}")
            return None

    return inner


@_guard
def _instrument() -> None:
    """Wrap vLLM's Worker methods to see the worker object and the CUDA-graph bytes."""
    from vllm.v1.worker import gpu_worker

    worker_cls = gpu_worker.Worker

    def wrap(name, before=None, after=None):
        orig = getattr(worker_cls, name, None)
        if orig is None:
            _STATE["errors"].append(f"Worker.{name} not found")
            return

        @functools.wraps(orig)
        def wrapped(self, *a, **k):
            _STATE["worker"] = self
            if before:
                _guard(before)(self)
            result = orig(self, *a, **k)
            if after:
                _guard(after)(self, result)
            return result

        setattr(worker_cls, name, wrapped)

    def before_warmup(worker):
        stage("warming up")
        runner = worker.model_runner
        capture = runner.capture_model

        def capture_and_record(*a, **k):
            stage("capturing CUDA graphs")
            result = capture(*a, **k)
            _STATE["cudagraph_bytes"] = int(result) if result is not None else None
            return result

        runner.capture_model = capture_and_record

    def after_available(worker, result):
        _STATE["determine_available_memory_return"] = int(result)
        stage("allocating KV cache")

    wrap("load_model", before=lambda w: stage("loading weights"))
    wrap("determine_available_memory", before=lambda w: stage("profiling memory"), after=after_available)
    wrap("compile_or_warm_up_model", before=before_warmup)


def _num(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _find_worker(engine):
    """The in-process Worker: engine.model_executor.driver_worker.worker (as in kvplan.verify.versions' vLLM)."""
    try:
        return engine.model_executor.driver_worker.worker
    except AttributeError:
        return _STATE.get("worker")


def _kv_layout(engine, worker) -> dict | None:
    """The KV-cache groups and tensors: the worker's own KVCacheConfig (its groups keep vLLM's
    UniformTypeKVCacheSpecs), else the scheduler's copy (v1/core/kv_cache_utils.py
    generate_scheduler_kv_cache_config)."""
    cfg = getattr(getattr(worker, "model_runner", None), "kv_cache_config", None)
    source = "worker.model_runner.kv_cache_config"
    if cfg is None:
        try:
            cfg = engine.engine_core.engine_core.scheduler.kv_cache_config
            source = "engine_core.scheduler.kv_cache_config"
        except AttributeError:
            return None
    groups = []
    for g in cfg.kv_cache_groups:
        spec = g.kv_cache_spec
        entry = {
            "spec": type(spec).__name__,
            "num_layers": len(g.layer_names),
            "first_layer": g.layer_names[0] if g.layer_names else None,
            "block_size": _num(getattr(spec, "block_size", None)),
        }
        for attr in ("page_size_bytes", "sliding_window", "attention_chunk_size", "num_kv_heads", "head_size"):
            try:
                value = getattr(spec, attr)
            except Exception:  # some specs compute these lazily and may raise
                continue
            if value is not None:
                entry[attr] = _num(value)
        if hasattr(spec, "dtype"):
            entry["dtype"] = str(spec.dtype)
        groups.append(entry)
    tensors = [{"size": int(t.size), "shared_by": len(t.shared_by)} for t in cfg.kv_cache_tensors]
    padding = 0
    if len(groups) > 1:
        padding = sum(max(0, len(groups) - t["shared_by"]) for t in tensors)
    return {
        "source": source,
        "num_blocks": int(cfg.num_blocks),
        "groups": groups,
        "num_tensors": len(tensors),
        "tensor_bytes_total": sum(t["size"] for t in tensors),
        "tensor_sizes": sorted({t["size"] for t in tensors}),
        "padding_layers": padding,
    }


def collect_exact(engine, startup_s: float) -> dict:
    """Exact figures from the running engine; each field guarded (missing = not reachable)."""
    out: dict = {"startup_s": round(startup_s, 1)}

    def put(key, fn):
        try:
            value = fn()
        except Exception as exc:
            _STATE["errors"].append(f"{key}: {type(exc).__name__}: {exc}")
            return
        if value is not None:
            out[key] = value

    worker = _find_worker(engine)
    vc = getattr(engine, "vllm_config", None)
    if worker is not None:
        runner = getattr(worker, "model_runner", None)
        put("weights", lambda: int(runner.model_memory_usage))
        put("peak_activation", lambda: int(worker.peak_activation_memory))
        put("non_torch", lambda: int(worker.non_torch_memory))
        put("available_kv_cache_memory_bytes", lambda: int(worker.available_kv_cache_memory_bytes))
        put("cudagraph_memory_estimate", lambda: int(worker.cudagraph_memory_estimate))
        put("requested_memory", lambda: int(worker.requested_memory))
        put("init_free_memory", lambda: int(worker.init_snapshot.free_memory))
        put("init_total_memory", lambda: int(worker.init_snapshot.total_memory))
        put("model_runner", lambda: f"{type(runner).__module__}.{type(runner).__qualname__}")
        put("use_v2_model_runner", lambda: bool(worker.use_v2_model_runner))
        # vLLM 0.34.0's extensible KV cache (v1/worker/extensible_kv_cache.py): P, G, the commit
        # granule and the committed bytes, exact (the "Memory after warmup" line rounds them)
        kv = getattr(runner, "extensible_kv_cache", None) if runner is not None else None
        if kv is not None:
            put("extensible_transient_peak", lambda: int(kv.reserved_headroom_bytes))
            put("extensible_reserve_growth", lambda: int(kv.torch_reserve_growth_bytes))
            put("extensible_granule", lambda: int(kv.buffer.granularity))
            put("extensible_committed_bytes", lambda: int(kv.physical_bytes))
    if "cudagraph_bytes" in _STATE:
        out["cudagraph_bytes"] = _STATE["cudagraph_bytes"]
    elif vc is not None and getattr(vc.model_config, "enforce_eager", False):
        out["cudagraph_bytes"] = 0  # no capture in eager mode
    if "determine_available_memory_return" in _STATE:
        out["determine_available_memory_return"] = _STATE["determine_available_memory_return"]
    if vc is not None:
        put("num_gpu_blocks", lambda: int(vc.cache_config.num_gpu_blocks))
        put("block_size", lambda: int(vc.cache_config.block_size))
        # vLLM 0.34.0 leaves the field None when unset; its resolved_gpu_memory_utilization says what it used
        put("gpu_memory_utilization", lambda: float(getattr(vc.cache_config, "resolved_gpu_memory_utilization", None)
                                                    or vc.cache_config.gpu_memory_utilization))
        put("kv_cache_memory_bytes", lambda: _num(vc.cache_config.kv_cache_memory_bytes))
        put("cache_dtype", lambda: str(vc.cache_config.cache_dtype))
        put("gpu_kv_cache_tokens", lambda: _num(getattr(vc.cache_config, "kv_cache_size_tokens", None)))
        put("max_concurrency", lambda: getattr(vc.cache_config, "kv_cache_max_concurrency", None))
        put("max_num_seqs", lambda: int(vc.scheduler_config.max_num_seqs))
        put("max_num_batched_tokens", lambda: int(vc.scheduler_config.max_num_batched_tokens))
        put("max_model_len", lambda: int(vc.model_config.max_model_len))
        put("dtype", lambda: str(vc.model_config.dtype).removeprefix("torch."))
        put("quantization", lambda: vc.model_config.quantization)
        put("enforce_eager", lambda: bool(vc.model_config.enforce_eager))
        put("cudagraph_mode", lambda: str(vc.compilation_config.cudagraph_mode))
        put("compilation_mode", lambda: str(vc.compilation_config.mode))
        put("max_cudagraph_capture_size", lambda: _num(vc.compilation_config.max_cudagraph_capture_size))
        put("num_cudagraph_capture_sizes", lambda: len(vc.compilation_config.cudagraph_capture_sizes or []))
    put("kv_cache_layout", lambda: _kv_layout(engine, worker))

    def after_init():
        import torch

        free, total = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()
        return {
            "free": int(free),
            "total": int(total),
            "torch_allocated": int(stats.get("allocated_bytes.all.current", 0)),
            "torch_reserved": int(stats.get("reserved_bytes.all.current", 0)),
        }

    put("after_init_memory", after_init)
    if _STATE["errors"]:
        out["unavailable"] = list(_STATE["errors"])
    return out


def _partial_exact() -> dict | None:
    """What the worker had measured before vLLM refused (profiling results survive a refusal)."""
    worker = _STATE.get("worker")
    if worker is None:
        return None
    out: dict = {"partial": True}
    for key, fn in (
        ("weights", lambda: int(worker.model_runner.model_memory_usage)),
        ("peak_activation", lambda: int(worker.peak_activation_memory)),
        ("non_torch", lambda: int(worker.non_torch_memory)),
        ("available_kv_cache_memory_bytes", lambda: int(worker.available_kv_cache_memory_bytes)),
        ("cudagraph_memory_estimate", lambda: int(worker.cudagraph_memory_estimate)),
        ("requested_memory", lambda: int(worker.requested_memory)),
        ("init_free_memory", lambda: int(worker.init_snapshot.free_memory)),
        ("init_total_memory", lambda: int(worker.init_snapshot.total_memory)),
    ):
        try:
            out[key] = fn()
        except Exception:
            continue
    if "determine_available_memory_return" in _STATE:
        out["determine_available_memory_return"] = _STATE["determine_available_memory_return"]
    return out


def _environment(expect_vllm: str | None) -> dict:
    """Import torch and vLLM, check the GPU and version; exit 3 with a clear message if missing."""
    stage("importing torch")
    try:
        import torch
    except Exception as exc:  # ImportError or a broken install
        fail("environment", type(exc).__name__, f"torch cannot be imported ({exc}); install kvplan-vllm[verify]", EXIT_ENVIRONMENT)
    if not torch.cuda.is_available():
        fail("environment", "NoGPU", "no CUDA GPU is visible to torch (torch.cuda.is_available() is False)", EXIT_ENVIRONMENT)
    free, total = torch.cuda.mem_get_info()
    name = torch.cuda.get_device_name(0)
    print(f"MEMINFO free={free} total={total} name={name}", flush=True)
    stage("importing vllm")
    try:
        import vllm
    except Exception as exc:
        fail("environment", type(exc).__name__, f"vLLM cannot be imported ({exc}); pip install 'kvplan-vllm[verify]'", EXIT_ENVIRONMENT)
    version = getattr(vllm, "__version__", "unknown")
    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "vllm": version,
        "cuda_device": name,
        "cuda_device_count": torch.cuda.device_count(),
        "compute_capability": "{}.{}".format(*torch.cuda.get_device_capability(0)),
        "cuda_total_bytes": int(total),
        "cuda_free_bytes": int(free),
        "cuda_runtime": getattr(torch.version, "cuda", None),
        "env": {
            k: os.environ[k]
            for k in sorted(os.environ)
            if k.startswith(("VLLM_", "CUDA_VISIBLE", "PYTORCH_CUDA_ALLOC"))
        },
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        drv = pynvml.nvmlSystemGetDriverVersion()
        env["driver"] = drv.decode() if isinstance(drv, bytes) else str(drv)
        # vLLM platforms/cuda.py get_device_total_memory reads NVML's total (it decides
        # the default batch sizes); map CUDA device 0 to its physical index as vLLM does.
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        index = int(visible) if visible.isdigit() else 0
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        env["nvml_total_bytes"] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except Exception:
        pass
    emit("KVPLAN_ENV", env)
    if expect_vllm and version != expect_vllm:
        fail(
            "environment",
            "VersionMismatch",
            f"vLLM {version} is installed; kvplan verify checks against vLLM {expect_vllm}",
            EXIT_ENVIRONMENT,
        )
    return env


def _read_config(model: str) -> dict | None:
    """config.json of a model directory, with ModelOpt's hf_quant_config.json (when present)
    under ``_hf_quant_config`` as the bundled specs keep it: vLLM reads both files, so a log
    re-planned from this line alone must see both. None when config.json cannot be read."""
    def load(name: str):
        try:
            with open(os.path.join(model, name), encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    config = load("config.json")
    if isinstance(config, dict) and "_hf_quant_config" not in config:
        quant = load("hf_quant_config.json")
        if isinstance(quant, dict):
            config = {**config, "_hf_quant_config": quant}
    return config


def run(request: dict) -> int:
    """Start vLLM as ``request`` says and print the protocol lines (see the module docstring)."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    model = request["model"]
    engine_args = dict(request.get("engine_args") or {})
    usage = request.get("usage", "llm")
    emit("KVPLAN_CASE", {"name": request.get("name"), "model": model, "engine_args": engine_args, "usage": usage})
    config = _read_config(model)
    if config is not None:
        emit("KVPLAN_CONFIG", config)
    _environment(request.get("expect_vllm"))

    kw = {"model": model, "seed": 0}
    if request.get("dummy_weights", True):
        kw.update(load_format="dummy", skip_tokenizer_init=True)
    kw.update(engine_args)
    _instrument()
    stage("starting engine")
    start = time.time()
    try:
        if usage == "serve":
            from vllm import EngineArgs, LLMEngine
            from vllm.usage.usage_lib import UsageContext

            args = EngineArgs(**kw)
            try:
                from vllm.entrypoints.serve.utils.api_utils import log_non_default_args

                log_non_default_args(args)
            except Exception:
                pass
            engine = LLMEngine.from_engine_args(engine_args=args, usage_context=UsageContext.OPENAI_API_SERVER)
        else:
            from vllm import LLM

            engine = LLM(**kw).llm_engine
    except BaseException as exc:  # vLLM refused (ValueError...), ran out of memory, or crashed
        traceback.print_exc()
        sys.stderr.flush()
        partial = _partial_exact()
        if partial:
            emit("KVPLAN_EXACT", partial)
        if isinstance(exc, KeyboardInterrupt):
            os._exit(130)
        fail("refused", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, EXIT_REFUSED)
        return EXIT_REFUSED
    startup_s = time.time() - start
    stage("measured")
    cc, sc = engine.vllm_config.cache_config, engine.vllm_config.scheduler_config
    print(
        f"RESULT num_gpu_blocks={cc.num_gpu_blocks} block_size={cc.block_size} "
        f"max_num_seqs={sc.max_num_seqs} max_num_batched_tokens={sc.max_num_batched_tokens} "
        f"startup_s={startup_s:.1f}",
        flush=True,
    )
    emit("KVPLAN_EXACT", collect_exact(engine, startup_s))
    stage("stopping")
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Entry point: one JSON request argument; exits 0/1/2/3 (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m kvplan.verify.child '<json request>'", file=sys.stderr)
        os._exit(EXIT_BAD_REQUEST)
    try:
        request = json.loads(argv[0])
        if not isinstance(request, dict) or "model" not in request:
            raise ValueError("expected a JSON object with 'model'")
    except ValueError as exc:
        print(f"kvplan.verify.child: bad request: {exc}", file=sys.stderr)
        os._exit(EXIT_BAD_REQUEST)
    code = run(request)
    sys.stdout.flush()
    sys.stderr.flush()
    # Exit without interpreter teardown: vLLM's shutdown hooks can take long; the parent kills
    # this process group anyway, and the CUDA driver frees the memory when the process ends.
    os._exit(code)


if __name__ == "__main__":
    main()
