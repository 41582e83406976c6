"""The `vllm serve` flag catalogue, keyed by vLLM version: which flags exist, which take a value.

Data, not logic borrowed from vLLM: the names and arities below were read out of vLLM 0.26.0's
argument definitions with a one-off AST walk (nothing imported) and pasted here:

* ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args``
  (explicit ``add_argument`` calls; a config-dataclass field typed ``bool`` becomes a
  ``--flag/--no-flag`` pair through ``argparse.BooleanOptionalAction`` in ``_compute_kwargs``,
  ``list[...]`` fields take ``nargs="+"``, config-dataclass fields take one JSON value);
* ``vllm/entrypoints/openai/cli_args.py`` ``make_arg_parser`` (``--config``, ``--headless``,
  ``--api-server-count``, ``--grpc``) and the fields of ``BaseFrontendArgs``/``FrontendArgs``
  (``--host``, ``--port``, ``--api-key`` ...).

How `vllm serve` reads a token (vLLM 0.26.0 ``vllm/utils/argparse_utils.py``
``FlexibleArgumentParser.parse_args`` over Python's argparse, which kvplan mirrors in
``FlagCatalogue.resolve``):

* underscores in a long flag's name become dashes (``--max_model_len`` == ``--max-model-len``);
* ``--flag=value`` and ``--flag value`` are the same; ``--section.key value`` builds a JSON value;
* ``-O3`` / ``-O 3`` mean ``--optimization-level 3``;
* argparse's ``allow_abbrev`` is on, so an unambiguous prefix of a long flag is that flag
  (``--kv-cache-memory`` is ``--kv-cache-memory-bytes``); an ambiguous prefix is an error;
* an unknown flag makes `vllm serve` exit with "unrecognized arguments" before loading anything.

A YAML file given to ``vllm serve --config`` is turned into the same tokens
(``FlexibleArgumentParser.load_config_file``): ``key: value`` -> ``--key value``, ``key: true`` ->
``--key``, ``key: false`` -> nothing, a list -> ``--key v1 v2``, a mapping -> ``--key '<json>'``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import lru_cache

from kvplan.errors import KvplanError

# Arity: "value" takes one value; "bool" is a bare switch (store_true); "negatable" is a switch
# with a --no-<name> twin (BooleanOptionalAction); "optional" takes a value or none (nargs="?");
# "list" takes one or more values (nargs="+"); "json" takes one JSON value (config dataclass).
_FLAGS_0_26_0 = {
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
_SHORT_0_26_0 = {
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
_IGNORED_0_26_0 = {
    "max-parallel-loading-workers": (
        "accepted but ignored: vLLM 0.26.0 logs 'max_parallel_loading_workers is currently not "
        "supported and will be ignored' (config/parallel.py)"
    ),
    "calculate-kv-scales": (
        "deprecated no-op: k/v scales come from the checkpoint or default to 1.0 "
        "(vLLM 0.26.0 config/cache.py)"
    ),
}

# Flags of older vLLM releases that 0.26.0 no longer defines, so `vllm serve` exits with
# "unrecognized arguments". Most were V0-engine settings the V1 engine had already ignored.
# (Absence checked against the 0.26.0 sources above; the "use instead" notes name 0.26.0 flags.)
_REMOVED_0_26_0 = {
    "swap-space": "CPU swap space for the V0 engine's swap preemption; the V1 engine ignored it (it recomputes preempted requests) and 0.26.0 removed it",
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
CACHE_DTYPES_0_26_0 = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
    "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4",
)
MODEL_DTYPES_0_26_0 = ("auto", "half", "float16", "bfloat16", "float", "float32")

# Value flags whose argparse type reads the text "None" as "not set" (vLLM 0.26.0
# engine/arg_utils.py optional_type, applied when the config field is typed ``X | None``):
# config/model.py revision, quantization; config/cache.py kv_cache_memory_bytes,
# num_gpu_blocks_override. Checked for the flags kvplan reads; other flags are not listed, so a
# `null` there is passed on as "None" without comment.
NONE_IS_UNSET_0_26_0 = frozenset({"revision", "quantization", "kv-cache-memory-bytes", "num-gpu-blocks-override"})


@dataclass(frozen=True)
class FlagCatalogue:
    """The flags one vLLM version's `vllm serve` accepts.

    Attributes:
        version: the vLLM version, e.g. "0.26.0".
        arity: canonical long name (no dashes in front, e.g. "max-model-len") -> arity.
        short: single-dash alias ("-tp") -> long name.
        ignored: long name -> why vLLM accepts it but does nothing with it.
        removed: long name of an older release's flag -> why it is gone / what to use.
        cache_dtypes / model_dtypes: accepted --kv-cache-dtype / --dtype values.
        none_is_unset: value flags for which "None" (a YAML null in a --config file) means unset.
    """

    version: str
    arity: dict
    short: dict
    ignored: dict
    removed: dict
    cache_dtypes: tuple
    model_dtypes: tuple
    none_is_unset: frozenset = frozenset()

    def option_strings(self) -> list[str]:
        """Every long option string argparse registers ("--x" and "--no-x" twins)."""
        out = []
        for name, kind in self.arity.items():
            out.append("--" + name)
            if kind == "negatable":
                out.append("--no-" + name)
        return out

    def resolve(self, token: str) -> "FlagMatch":
        """Read one command-line token that starts with "-" the way `vllm serve` would.

        Args:
            token: e.g. "--max_model_len=32k", "-tp", "--no-enable-prefix-caching",
                "--compilation-config.mode", "-O3", "--kv-cache-memory".
        Returns:
            a FlagMatch; ``status`` is "ok", "abbreviation", "ambiguous", "removed" or
            "unknown" (with close matches in ``suggestions``).
        Rule source: vLLM 0.26.0 utils/argparse_utils.py FlexibleArgumentParser.parse_args and
            Python argparse _parse_optional (allow_abbrev).
        """
        explicit = None
        text = token
        if token.startswith("-O") and not token.startswith("--") and token != "-O":
            level = token[3:] if token[2:3] == "=" else token[2:]
            return FlagMatch(token, "optimization-level", "value", "ok", explicit=level)
        if token == "-O":
            return FlagMatch(token, "optimization-level", "value", "ok")
        if "=" in text:
            text, explicit = text.split("=", 1)
        if not text.startswith("--"):
            long = self.short.get(text)
            if long is None:
                return FlagMatch(token, None, None, "unknown", explicit=explicit, suggestions=self.suggest(text))
            return FlagMatch(token, long, self.arity[long], "ok", explicit=explicit)
        name = text[2:]
        dotted = None
        if "." in name:
            name, dotted = name.split(".", 1)
        name = name.replace("_", "-")
        negated = False
        if name in self.arity:
            long = name
        elif name.startswith("no-") and self.arity.get(name[3:]) == "negatable":
            long, negated = name[3:], True
        elif name in self.removed:
            # argparse would still take a unique prefix match (--device -> --device-ids).
            prefixed = tuple(o for o in self.option_strings() if o.startswith("--" + name))
            return FlagMatch(token, name, None, "removed", explicit=explicit, note=self.removed[name], suggestions=prefixed)
        else:
            matches = [o for o in self.option_strings() if o.startswith("--" + name)]
            if len(matches) == 1:
                full = matches[0][2:]
                negated = full.startswith("no-") and full[3:] in self.arity and full not in self.arity
                long = full[3:] if negated else full
                return FlagMatch(
                    token, long, self.arity[long], "abbreviation", explicit=explicit, negated=negated, dotted=dotted
                )
            if len(matches) > 1:
                return FlagMatch(token, None, None, "ambiguous", explicit=explicit, suggestions=tuple(sorted(matches)[:5]))
            return FlagMatch(token, None, None, "unknown", explicit=explicit, suggestions=self.suggest(name))
        return FlagMatch(token, long, self.arity[long], "ok", explicit=explicit, negated=negated, dotted=dotted)

    def suggest(self, name: str) -> tuple[str, ...]:
        """Up to three close flag names for a misspelt one ("did you mean"), as "--name"."""
        key = name.lstrip("-").replace("_", "-")
        pool = list(self.arity) + [s.lstrip("-") for s in self.short]
        close = difflib.get_close_matches(key, pool, n=3, cutoff=0.6)
        out = []
        for c in close:
            flag = ("--" + c) if c in self.arity else ("-" + c)
            if flag not in out:
                out.append(flag)
        return tuple(out)


@dataclass(frozen=True)
class FlagMatch:
    """What one token means to `vllm serve` (see FlagCatalogue.resolve).

    Attributes:
        token: the token as written.
        flag: canonical long name without dashes ("max-model-len"), None when unknown/ambiguous.
        arity: the flag's arity (see _FLAGS_0_26_0), None when unknown.
        status: "ok", "abbreviation", "ambiguous", "removed" or "unknown".
        explicit: the value after "=" (or after -O), if any.
        negated: the token was the --no-<flag> twin.
        dotted: the ".sub.key" part of "--compilation-config.sub.key", if any.
        suggestions: close known flags ("--name") for unknown/ambiguous tokens.
        note: why a removed flag is gone / what to use instead.
    """

    token: str
    flag: str | None
    arity: str | None
    status: str
    explicit: str | None = None
    negated: bool = False
    dotted: str | None = None
    suggestions: tuple[str, ...] = ()
    note: str | None = None


_TABLES = {
    "0.26.0": (
        _FLAGS_0_26_0,
        _SHORT_0_26_0,
        _IGNORED_0_26_0,
        _REMOVED_0_26_0,
        CACHE_DTYPES_0_26_0,
        MODEL_DTYPES_0_26_0,
        NONE_IS_UNSET_0_26_0,
    ),
}


@lru_cache(maxsize=None)
def catalogue(version: str = "0.26.0") -> FlagCatalogue:
    """The flag catalogue for a vLLM version.

    Raises:
        KvplanError: kvplan has no flag table for that version (names --vllm-version).
    """
    if version not in _TABLES:
        raise KvplanError(
            f"--vllm-version: kvplan has no `vllm serve` flag table for vLLM {version!r}",
            hint="supported: " + ", ".join(sorted(_TABLES)),
        )
    flags, short, ignored, removed, cache, model, none_is_unset = _TABLES[version]
    arity = {}
    for kind, names in flags.items():
        for name in names.split():
            arity[name] = kind
    arity["help"] = "bool"
    return FlagCatalogue(
        version=version,
        arity=arity,
        short=dict(short),
        ignored=dict(ignored),
        removed=dict(removed),
        cache_dtypes=cache,
        model_dtypes=model,
        none_is_unset=none_is_unset,
    )


_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_human_int(text: str) -> int:
    """An integer as `vllm serve` reads --max-num-batched-tokens / --kv-cache-memory-bytes.

    Lower-case suffixes are decimal (``25.6k`` = 25,600; ``80g`` = 80,000,000,000), upper-case
    ones binary (``1K`` = 1,024; ``80G`` = 85,899,345,920; no decimals with them).

    Returns:
        the integer (tokens or bytes, depending on the flag).
    Raises:
        ValueError: not such a number (the message says why).
    Rule source: vLLM 0.26.0 utils/argparse_utils.py human_readable_int.
    """
    value = str(text).strip()
    m = _HUMAN_INT.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(f"decimals are not allowed with binary suffix {suffix} (did you mean {number}{suffix.lower()}?)")
        return int(number) * _BINARY[suffix]
    return int(value)


def parse_max_model_len(text: str) -> int:
    """--max-model-len as `vllm serve` reads it: a human-readable int, or -1 / "auto" (-1).

    Returns:
        tokens, or -1 for auto-fit.
    Raises:
        ValueError: not a number or "auto".
    Rule source: vLLM 0.26.0 utils/argparse_utils.py human_readable_int_or_auto.
    """
    value = str(text).strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return parse_human_int(value)
