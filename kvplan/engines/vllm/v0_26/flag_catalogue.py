"""The `vllm serve` flags of vLLM 0.26.0, as data (see kvplan.engines.vllm.serve_flags for how
they are read and kvplan.engines.vllm.flags for how a plan is written as flags).

The names and arities below were read out of vLLM 0.26.0's argument definitions with a one-off
AST walk (nothing imported) and pasted here:

* ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args``
  (explicit ``add_argument`` calls; a config-dataclass field typed ``bool`` becomes a
  ``--flag/--no-flag`` pair through ``argparse.BooleanOptionalAction`` in ``_compute_kwargs``,
  ``list[...]`` fields take ``nargs="+"``, config-dataclass fields take one JSON value);
* ``vllm/entrypoints/openai/cli_args.py`` ``make_arg_parser`` (``--config``, ``--headless``,
  ``--api-server-count``, ``--grpc``) and the fields of ``BaseFrontendArgs``/``FrontendArgs``
  (``--host``, ``--port``, ``--api-key`` ...).
"""

from __future__ import annotations

# Arity: "value" takes one value; "bool" is a bare switch (store_true); "negatable" is a switch
# with a --no-<name> twin (BooleanOptionalAction); "optional" takes a value or none (nargs="?");
# "list" takes one or more values (nargs="+"); "json" takes one JSON value (config dataclass).
FLAGS = {
    "value": """
        additional-config all2all-backend allowed-headers allowed-local-media-path
        allowed-methods allowed-origins api-server-count attention-backend block-size
        chat-template chat-template-content-format code-revision config config-format convert
        cp-kv-cache-interleave-size cpu-distributed-timeout-seconds cpu-offload-gb
        data-parallel-address data-parallel-backend data-parallel-rank data-parallel-rpc-port
        data-parallel-size data-parallel-size-local data-parallel-start-rank
        data-parallel-supervisor-port dbo-decode-token-threshold dbo-prefill-token-threshold
        dcp-comm-backend dcp-kv-cache-interleave-size decode-context-parallel-size
        default-chat-template-kwargs default-mm-loras device-ids
        disable-access-log-for-endpoints distributed-executor-backend
        distributed-timeout-seconds download-dir dp-supervisor-probe-failure-threshold
        dp-supervisor-probe-interval-s dp-supervisor-probe-timeout-s dtype
        expert-placement-strategy fingerprint-mode fingerprint-value gdn-prefill-backend
        generation-config gpu-memory-utilization h11-max-header-count
        h11-max-incomplete-event-size hf-config-path hf-overrides host io-processor-plugin
        jit-monitor-mode kv-cache-dtype kv-cache-memory-bytes kv-cache-metrics-sample
        kv-offloading-backend kv-offloading-size limit-mm-per-prompt linear-backend load-format
        log-config-file logprobs-mode long-prefill-token-threshold lora-dtype mamba-backend
        mamba-block-size mamba-cache-dtype mamba-cache-mode mamba-cache-philox-rounds
        mamba-ssm-cache-dtype master-addr master-port max-cpu-loras max-cudagraph-capture-size
        max-log-len max-logprobs max-long-partial-prefills max-lora-rank max-loras max-model-len
        max-num-batched-tokens max-num-partial-prefills max-num-scheduled-tokens max-num-seqs
        max-parallel-loading-workers media-io-kwargs middleware mm-encoder-attn-backend
        mm-encoder-attn-dtype mm-encoder-fp8-scale-path mm-encoder-fp8-scale-save-margin
        mm-encoder-fp8-scale-save-path mm-encoder-tp-mode mm-ipc-gpu-memory-gb
        mm-processor-cache-gb mm-processor-cache-type mm-processor-kwargs
        mm-shm-cache-max-object-size-mb mm-tensor-ipc model model-class-overrides model-impl
        model-loader-extra-config moe-backend nnodes node-rank num-gpu-blocks-override
        offload-backend offload-group-size offload-num-in-group offload-prefetch-step
        optimization-level otlp-traces-endpoint override-attention-dtype
        override-generation-config performance-mode pipeline-parallel-size port
        prefill-context-parallel-size prefill-schedule-interval prefix-caching-hash-algo
        prefix-match-unit pt-load-map-location quantization quantization-config reasoning-parser
        reasoning-parser-plugin renderer-num-workers response-role revision root-path runner
        safetensors-load-strategy safetensors-prefetch-block-size
        safetensors-prefetch-num-threads scheduler-cls scheduling-policy seed
        show-hidden-metrics-for-version shutdown-timeout spec-method spec-model spec-tokens
        ssl-ca-certs ssl-cert-reqs ssl-certfile ssl-ciphers ssl-keyfile stream-interval
        tensor-parallel-size tokenizer tokenizer-mode tokenizer-revision tool-call-parser
        tool-parser-plugin tool-server ubatch-size uds uvicorn-log-level video-pruning-rate
        watermark worker-cls worker-extension-cls
    """,
    "bool": """
        aggregate-engine-logging data-parallel-multi-port-external-lb disable-log-stats grpc
        headless
    """,
    "negatable": """
        allow-credentials allow-deprecated-quantization async-scheduling calculate-kv-scales
        cudagraph-metrics data-parallel-external-lb data-parallel-hybrid-lb disable-cascade-attn
        disable-chunked-mm-input disable-custom-all-reduce disable-fastapi-docs
        disable-hybrid-kv-cache-manager disable-nccl-for-dp-synchronization
        disable-sliding-window disable-uvicorn-access-log enable-auto-tool-choice
        enable-bf16x3-router-gemm enable-chunked-prefill enable-cumem-allocator enable-dbo
        enable-elastic-ep enable-ep-weight-filter enable-eplb enable-expert-parallel
        enable-flash-late-interaction enable-flashinfer-autotune enable-force-include-usage
        enable-layerwise-nvtx-tracing enable-log-deltas enable-log-outputs enable-log-requests
        enable-logging-iteration-details enable-lora enable-mamba-cache-stochastic-rounding
        enable-mfu-metrics enable-mixed-moe-lora-format enable-mm-embeds enable-moe-shared-loras
        enable-offline-docs enable-per-request-metrics enable-prefix-caching
        enable-prompt-embeds enable-prompt-tokens-details enable-request-id-headers
        enable-return-routed-experts enable-server-load-tracking enable-sleep-mode
        enable-ssl-refresh enable-tokenizer-info-endpoint enable-tower-connector-lora
        enforce-eager exclude-tools-when-tool-choice-none fail-on-environ-validation
        fully-sharded-loras interleave-mm-strings jit-monitor-verbose kv-cache-metrics
        kv-sharing-fast-prefill language-model-only log-error-stack mm-encoder-only numa-bind
        ray-workers-use-nsight return-tokens-as-token-ids scheduler-reserve-full-isl
        skip-mm-profiling skip-tokenizer-init specialize-active-lora tokens-only
        trust-remote-code trust-request-chat-template use-fp64-gumbel use-tqdm-on-load
    """,
    "optional": """
        hf-token
    """,
    "list": """
        allowed-media-domains api-key collect-detailed-traces cpu-offload-params
        cudagraph-capture-sizes ignore-patterns kv-cache-dtype-skip-layers logits-processors
        lora-modules lora-target-modules numa-bind-cpus numa-bind-nodes offload-params
        served-model-name
    """,
    "json": """
        attention-config compilation-config diffusion-config ec-transfer-config eplb-config
        ir-op-priority kernel-config kv-events-config kv-transfer-config pooler-config
        profiler-config reasoning-config speculative-config structured-outputs-config
        weight-transfer-config
    """,
}

# Single-dash aliases, same sources (e.g. ``"--tensor-parallel-size", "-tp"``).
SHORT = {
    "-tp": "tensor-parallel-size",
    "-pp": "pipeline-parallel-size",
    "-q": "quantization",
    "-dp": "data-parallel-size",
    "-dpn": "data-parallel-rank",
    "-dpr": "data-parallel-start-rank",
    "-dpl": "data-parallel-size-local",
    "-dpa": "data-parallel-address",
    "-dpp": "data-parallel-rpc-port",
    "-dpb": "data-parallel-backend",
    "-dph": "data-parallel-hybrid-lb",
    "-dpe": "data-parallel-external-lb",
    "-dpm": "data-parallel-multi-port-external-lb",
    "-dcp": "decode-context-parallel-size",
    "-pcp": "prefill-context-parallel-size",
    "-ep": "enable-expert-parallel",
    "-n": "nnodes",
    "-r": "node-rank",
    "-asc": "api-server-count",
    "-sc": "speculative-config",
    "-dc": "diffusion-config",
    "-cc": "compilation-config",
    "-ac": "attention-config",
    "-h": "help",
}

# Flags vLLM 0.26.0 still accepts but does nothing with (a warning, not a failure).
IGNORED = {
    "max-parallel-loading-workers": (
        "accepted but ignored: vLLM 0.26.0 logs 'max_parallel_loading_workers is currently not "
        "supported and will be ignored' (config/parallel.py)"
    ),
    "calculate-kv-scales": (
        "deprecated no-op: k/v scales come from the checkpoint or default to 1.0 "
        "(vLLM 0.26.0 config/cache.py)"
    ),
}

# Flags that change nothing vLLM 0.26.0 sizes on the GPU (weights, activation peak, CUDA graphs,
# KV-cache blocks, batch limits): the API server, its network, TLS, auth and CORS settings
# (entrypoints/openai/cli_args.py FrontendArgs), the tokenizer and chat template (a CPU-side
# renderer), tool / reasoning parsers, logging and tracing, the sampling seed and generation
# defaults, names and download paths. `kvplan estimate` accepts them, lists them as ignored and
# keeps them in the serve line it writes. A catalogue flag not listed here and not an EngineArgs
# field makes an estimate approximate (it may change memory). Later releases reuse this reading;
# a flag new in them is not listed, so it is approximate until someone reads it.
NO_SIZING_EFFECT = frozenset("""
    host port uds root-path api-key allowed-origins allowed-methods allowed-headers allow-credentials
    ssl-keyfile ssl-certfile ssl-ca-certs ssl-cert-reqs ssl-ciphers enable-ssl-refresh middleware
    h11-max-header-count h11-max-incomplete-event-size uvicorn-log-level disable-uvicorn-access-log
    disable-access-log-for-endpoints disable-fastapi-docs enable-offline-docs enable-request-id-headers
    enable-server-load-tracking enable-tokenizer-info-endpoint enable-force-include-usage
    enable-prompt-tokens-details return-tokens-as-token-ids response-role served-model-name
    chat-template chat-template-content-format default-chat-template-kwargs trust-request-chat-template
    tokenizer tokenizer-mode tokenizer-revision skip-tokenizer-init trust-remote-code hf-token
    enable-auto-tool-choice tool-call-parser tool-parser-plugin tool-server exclude-tools-when-tool-choice-none
    reasoning-parser reasoning-parser-plugin
    seed generation-config override-generation-config
    disable-log-stats aggregate-engine-logging enable-log-requests enable-log-outputs enable-log-deltas
    max-log-len log-config-file log-error-stack otlp-traces-endpoint show-hidden-metrics-for-version
    use-tqdm-on-load download-dir allowed-local-media-path allowed-media-domains shutdown-timeout
""".split())

# Flags of older vLLM releases that 0.26.0 no longer defines, so `vllm serve` exits with
# "unrecognized arguments". Most were V0-engine settings the V1 engine had already ignored.
# (Absence checked against the 0.26.0 sources above; the "use instead" notes name 0.26.0 flags.)
REMOVED = {
    "swap-space": "CPU swap space for the V0 engine's swap preemption; the V1 engine ignored it (it recomputes preempted requests) and 0.26.0 does not have it",
    "num-scheduler-steps": "multi-step scheduling (V0) was removed (vLLM 0.26.0 arg_utils.py: 'multi-step scheduling has been removed')",
    "multi-step-stream-outputs": "multi-step scheduling (V0) was removed",
    "use-v2-block-manager": "a V0 block-manager switch",
    "preemption-mode": "V0 preemption choice; the V1 engine always recomputes",
    "scheduler-delay-factor": "a V0 scheduler setting",
    "num-lookahead-slots": "a V0 speculative-decoding setting",
    "disable-async-output-proc": "a V0 output-processing switch",
    "max-seq-len-to-capture": "use --max-cudagraph-capture-size",
    "disable-log-requests": "request logging is off by default; use --enable-log-requests to turn it on",
    "speculative-model": "use --speculative-config (or --spec-model)",
    "num-speculative-tokens": "use --speculative-config (or --spec-tokens)",
    "guided-decoding-backend": "use --structured-outputs-config",
    "tokenizer-pool-size": "tokenizer pools were removed",
    "tokenizer-pool-type": "tokenizer pools were removed",
    "worker-use-ray": "use --distributed-executor-backend ray",
    "engine-use-ray": "use --distributed-executor-backend ray",
    "task": "use --runner / --convert",
    "rope-scaling": "use --hf-overrides",
    "rope-theta": "use --hf-overrides",
    "enable-reasoning": "--reasoning-parser alone enables reasoning output",
    "device": "the device is detected automatically",
    "disable-frontend-multiprocessing": "not a vLLM 0.26.0 flag",
    "enable-prompt-adapter": "prompt adapters were removed",
    "lora-extra-vocab-size": "not a vLLM 0.26.0 flag",
    "long-lora-scaling-factors": "not a vLLM 0.26.0 flag",
    "disable-mm-preprocessor-cache": "use --mm-processor-cache-gb 0",
}

# --kv-cache-dtype and --dtype choices (vLLM 0.26.0 config/cache.py CacheDType,
# config/model.py ModelDType).
CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4",
)
MODEL_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")

# Value flags whose argparse type reads the text "None" as "not set" (vLLM 0.26.0
# engine/arg_utils.py optional_type, applied when the config field is typed ``X | None``):
# config/model.py revision, quantization; config/cache.py kv_cache_memory_bytes,
# num_gpu_blocks_override. Checked for the flags kvplan reads; other flags are not listed, so a
# `null` there is passed on as "None" without comment.
NONE_IS_UNSET = frozenset({"revision", "quantization", "kv-cache-memory-bytes", "num-gpu-blocks-override"})


# (flags by arity, short aliases, ignored, removed, cache dtypes, model dtypes, none-is-unset)
TABLE = (
    FLAGS,
    SHORT,
    IGNORED,
    REMOVED,
    CACHE_DTYPES,
    MODEL_DTYPES,
    NONE_IS_UNSET,
)

# The write side (engines/vllm/flags.py): EngineArgs field -> (flag, vLLM 0.26.0 default or None
# when the default depends on the model/GPU)
SERVE_FLAGS = {
    "tensor_parallel_size": ("--tensor-parallel-size", 1),
    "pipeline_parallel_size": ("--pipeline-parallel-size", 1),
    "max_model_len": ("--max-model-len", None),
    "gpu_memory_utilization": ("--gpu-memory-utilization", 0.92),
    "kv_cache_dtype": ("--kv-cache-dtype", "auto"),
    # --block-size in vLLM 0.26.0 is any int > 0, not a fixed set: config/cache.py
    # `block_size: int = Field(default=None, gt=0)` (no BlockSize Literal in this version), and
    # engine/arg_utils.py adds it with get_kwargs(CacheConfig), so argparse has no `choices`.
    # What a value must satisfy comes from the attention backend's
    # get_supported_kernel_block_sizes (v1/attention/backends/flash_attn.py: MultipleOf(16);
    # FlashMLA [64], CUTLASS MLA [128], FlashInfer MLA [32, 64]); platforms/cuda.py skips a
    # backend whose kernel blocks do not fit ("block_size not supported"). kvplan checks the
    # FlashAttention rule (a positive multiple of 16) in engines/vllm/args.py EngineArgs.
    "block_size": ("--block-size", None),
    "dtype": ("--dtype", "auto"),
    "quantization": ("--quantization", None),
    "max_num_seqs": ("--max-num-seqs", None),
    "max_num_batched_tokens": ("--max-num-batched-tokens", None),
    "enforce_eager": ("--enforce-eager", False),
    "kv_cache_memory_bytes": ("--kv-cache-memory-bytes", None),
    "enable_prefix_caching": ("--enable-prefix-caching", None),  # False -> --no-enable-prefix-caching
    "enable_chunked_prefill": ("--enable-chunked-prefill", None),  # False -> --no-enable-chunked-prefill
    "revision": ("--revision", None),
    "limit_mm_per_prompt": ("--limit-mm-per-prompt", None),  # JSON (config/multimodal.py)
    # the multi-GPU layout (config/parallel.py ParallelConfig defaults; engine/arg_utils.py spellings)
    "data_parallel_size": ("--data-parallel-size", 1),
    "data_parallel_size_local": ("--data-parallel-size-local", None),
    "enable_expert_parallel": ("--enable-expert-parallel", False),
    "enable_eplb": ("--enable-eplb", False),
    "eplb_config": ("--eplb-config", None),  # JSON (config/parallel.py EPLBConfig)
    "decode_context_parallel_size": ("--decode-context-parallel-size", 1),
    "prefill_context_parallel_size": ("--prefill-context-parallel-size", 1),
    "nnodes": ("--nnodes", 1),
    "node_rank": ("--node-rank", 0),
    "headless": ("--headless", False),
    "data_parallel_address": ("--data-parallel-address", None),
    "master_addr": ("--master-addr", None),
    "distributed_executor_backend": ("--distributed-executor-backend", None),
    # add-ons (engines/vllm/features.py; defaults: config/speculative.py, lora.py, offload.py, cache.py)
    "speculative_config": ("--speculative-config", None),
    "spec_method": ("--spec-method", None),
    "spec_model": ("--spec-model", None),
    "spec_tokens": ("--spec-tokens", None),
    "enable_lora": ("--enable-lora", False),
    "max_loras": ("--max-loras", None),
    "max_lora_rank": ("--max-lora-rank", None),
    "max_cpu_loras": ("--max-cpu-loras", None),
    "fully_sharded_loras": ("--fully-sharded-loras", False),
    "lora_dtype": ("--lora-dtype", "auto"),
    "cpu_offload_gb": ("--cpu-offload-gb", 0.0),
    "cpu_offload_params": ("--cpu-offload-params", None),
    "offload_group_size": ("--offload-group-size", 0),
    "offload_num_in_group": ("--offload-num-in-group", None),
    "offload_prefetch_step": ("--offload-prefetch-step", None),
    "offload_params": ("--offload-params", None),
    "kv_offloading_size": ("--kv-offloading-size", None),
    "kv_offloading_backend": ("--kv-offloading-backend", "native"),
    "kv_transfer_config": ("--kv-transfer-config", None),
}

