"""The add-on features of a `vllm serve` line, read from EngineArgs into typed settings:
speculative decoding (``--speculative-config`` and the ``--spec-method/--spec-model/--spec-tokens``
shorthands), LoRA (``--enable-lora`` ...), weight offload (``--cpu-offload-gb``, the prefetch
``--offload-*`` flags) and KV offloading (``--kv-offloading-size``, ``--kv-offloading-backend``,
``--kv-transfer-config``).

Only how vLLM *reads* these flags lives here (its config classes' defaults and checks, the same
in every supported version); what they cost in memory is each version's rule module
(engines/vllm/v0_26/addons.py, v0_33/addons.py). Pure: no I/O.

Rule sources (vLLM, the same in every supported version): engine/arg_utils.py
create_speculative_config (the shorthands and their mutual exclusion with the JSON keys),
config/speculative.py SpeculativeConfig (method names, ``[ngram]``, model-specific MTP names
becoming ``mtp``, ``model`` defaulting to the target for ``mtp``), config/lora.py LoRAConfig
(max_lora_rank 16, max_loras 1, max_cpu_loras = max_loras, lora_dtype auto), config/offload.py
(UVAOffloadConfig.cpu_offload_gb in GiB, PrefetchOffloadConfig), config/cache.py
(kv_offloading_size in GiB, kv_offloading_backend native | lmcache), config/vllm.py
_post_init_kv_transfer_config (native -> OffloadingConnector with cpu_bytes_to_use = size x 2^30).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kvplan.errors import KvplanError

GiB = 1 << 30

# vLLM config/lora.py MaxLoRARanks (the same in every supported version).
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
LORA_DTYPES = ("auto", "float16", "bfloat16")
KV_OFFLOADING_BACKENDS = ("native", "lmcache")


@dataclass(frozen=True)
class SpeculativeSettings:
    """``--speculative-config`` as vLLM normalizes it.

    Attributes:
        method: vLLM's method after normalization ("eagle", "eagle3", "mtp", "draft_model",
            "ngram", "ngram_gpu", or a method kvplan does not size: "suffix", "medusa", ...).
        method_given: the method as written (a model-specific MTP name such as "deepseek_mtp"
            is kept here; ``method`` is then "mtp").
        num_speculative_tokens: K, draft tokens per step; None = from the draft's config
            (MTP: num_nextn_predict_layers).
        model: the draft's Hub id / directory (None for ngram and for MTP, whose draft is the
            target's own checkpoint).
        raw: the whole JSON object (keys with dashes read as underscores).
    """

    method: str | None
    method_given: str | None
    num_speculative_tokens: int | None
    model: str | None
    raw: dict

    @property
    def needs_draft_config(self) -> bool:
        """The draft's config.json must be read (eagle, eagle3, draft_model, or an unnamed
        method with a model, which vLLM detects from the draft's config)."""
        return self.method in ("eagle", "eagle3", "draft_model", None) and self.model is not None


@dataclass(frozen=True)
class LoraSettings:
    """LoRA as vLLM's LoRAConfig holds it (defaults filled). ``lora_dtype`` "auto" = the model dtype."""

    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int
    fully_sharded_loras: bool
    lora_dtype: str


@dataclass(frozen=True)
class OffloadSettings:
    """Weight offload: UVA (``cpu_offload_bytes`` > 0) and/or prefetch (``group_size`` > 0)."""

    cpu_offload_bytes: int
    cpu_offload_params: tuple[str, ...]
    group_size: int
    num_in_group: int
    prefetch_step: int
    offload_params: tuple[str, ...]


@dataclass(frozen=True)
class KVOffloadSettings:
    """KV offloading: the connector vLLM builds and the CPU bytes it is given (over all workers).

    Attributes:
        connector: "OffloadingConnector" (native), "LMCacheMPConnector" (lmcache), or the
            ``kv_connector`` of ``--kv-transfer-config``.
        cpu_bytes: ``--kv-offloading-size`` x 2^30 for native, else the connector's
            ``cpu_bytes_to_use`` if given, else None (the connector owns its memory).
        extra: the connector's kv_connector_extra_config.
        from_flag: built from --kv-offloading-size (not a hand-written --kv-transfer-config).
    """

    connector: str
    cpu_bytes: int | None
    extra: dict
    from_flag: bool


@dataclass(frozen=True)
class Features:
    """Every add-on of one EngineArgs; None = off."""

    speculative: SpeculativeSettings | None = None
    lora: LoraSettings | None = None
    offload: OffloadSettings | None = None
    kv_offload: KVOffloadSettings | None = None

    @property
    def any(self) -> bool:
        return any((self.speculative, self.lora, self.offload, self.kv_offload))


def parse_json_object(text: str | None, flag: str) -> dict | None:
    """A flag's JSON object (None when not given).

    Raises:
        KvplanError: not a JSON object (names ``flag``).
    """
    if text is None:
        return None
    if isinstance(text, dict):
        return dict(text)
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise KvplanError(f"{flag}: expected a JSON object, got {str(text)[:60]!r}")
    return data


def check_json_object(v: str | None) -> str | None:
    """EngineArgs validator: a JSON object, returned as compact JSON with sorted keys."""
    if v is None:
        return None
    try:
        data = json.loads(v) if not isinstance(v, dict) else v
    except (TypeError, ValueError):
        raise ValueError("must be a JSON object") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object")
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def speculative_settings(args: Any, mtp_methods: frozenset[str]) -> SpeculativeSettings | None:
    """The speculative settings of ``args`` (EngineArgs): ``--speculative-config`` merged with
    the ``--spec-method/--spec-model/--spec-tokens`` shorthands, then vLLM's normalization.
    ``mtp_methods``: the version's model-specific MTP names (config/speculative.py MTPModelTypes).

    Raises:
        KvplanError: a shorthand and the same JSON key both given, or a JSON key of the wrong
            type (names the flag), as vLLM refuses them.
    """
    raw = parse_json_object(getattr(args, "speculative_config", None), "--speculative-config")
    shorthands = (("--spec-method", "method", getattr(args, "spec_method", None)),
                  ("--spec-model", "model", getattr(args, "spec_model", None)),
                  ("--spec-tokens", "num_speculative_tokens", getattr(args, "spec_tokens", None)))
    for flag, key, value in shorthands:
        if value is None:
            continue
        raw = raw if raw is not None else {}
        if key in raw:
            raise KvplanError(f"{flag} and --speculative-config['{key}'] are mutually exclusive; vLLM refuses both")
        raw[key] = value
    if raw is None:
        return None
    raw = {str(k).replace("-", "_"): v for k, v in raw.items()}
    method = raw.get("method")
    model = raw.get("model")
    k = raw.get("num_speculative_tokens")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise KvplanError(f"--speculative-config: num_speculative_tokens must be a positive integer, got {k!r}")
    if method is not None and not isinstance(method, str):
        raise KvplanError(f"--speculative-config: method must be a string, got {method!r}")
    given = method
    if method is None and model in ("ngram", "[ngram]"):
        method = "ngram"
    if method == "[ngram]":
        method = "ngram"
    if method in mtp_methods and method != "mtp":
        method = "mtp"  # config/speculative.py: "method `%s` is deprecated and replaced with mtp"
    if method in ("ngram", "ngram_gpu", "suffix"):
        model = None
    if method == "mtp":
        model = None  # the target's own checkpoint
    if method in ("eagle", "eagle3", "draft_model") and model is None:
        raise KvplanError(f"--speculative-config: method {method} needs a draft \"model\" (vLLM: "
                          "'num_speculative_tokens was provided but without speculative model')")
    if method is None and model is None:
        raise KvplanError("--speculative-config: needs a method or a model (vLLM cannot tell which drafter to build)")
    if k is None and method not in ("mtp",):
        raise KvplanError("--speculative-config: num_speculative_tokens is required for this method "
                          "(vLLM: 'num_speculative_tokens was provided but without speculative model' / required)",
                          hint="add \"num_speculative_tokens\": K")
    return SpeculativeSettings(method=method, method_given=given, num_speculative_tokens=k, model=model, raw=raw)


def ignored_lora_flags(args: Any) -> list[str]:
    """One warning naming the LoRA flags given without --enable-lora, or none.

    vLLM ignores them: engine/arg_utils.py create_engine_config builds LoRAConfig (where
    --max-loras, --max-lora-rank ... land) only ``if self.enable_lora`` (every supported version),
    so no LoRA slot is reserved and no adapter can be loaded."""
    if getattr(args, "enable_lora", False):
        return []
    given = [
        f"{flag} {value}" if value is not True else flag
        for flag, value in (
            ("--max-loras", getattr(args, "max_loras", None)),
            ("--max-lora-rank", getattr(args, "max_lora_rank", None)),
            ("--max-cpu-loras", getattr(args, "max_cpu_loras", None)),
            ("--fully-sharded-loras", getattr(args, "fully_sharded_loras", False) or None),
            ("--lora-dtype", None if getattr(args, "lora_dtype", "auto") in (None, "auto") else args.lora_dtype),
        )
        if value is not None
    ]
    if not given:
        return []
    return [", ".join(given) + " without --enable-lora: vLLM ignores them (it builds no LoRA config), so no "
            "LoRA slot is reserved and no adapter can be served; add --enable-lora to serve adapters"]


def lora_settings(args: Any) -> LoraSettings | None:
    """LoRA settings when ``--enable-lora`` (vLLM LoRAConfig defaults and checks).

    Raises:
        KvplanError: --max-lora-rank not one vLLM allows, --max-cpu-loras below --max-loras,
            a LoRA flag without --enable-lora is ignored by vLLM (not an error: returns None).
    """
    # --max-lora-rank's choices are checked when the flags are parsed, with or without
    # --enable-lora (engine/arg_utils.py: LoRAConfig.max_lora_rank is a Literal -> argparse choices)
    rank = args.max_lora_rank or 16
    if not getattr(args, "enable_lora", False) and rank in MAX_LORA_RANKS:
        return None
    max_loras = args.max_loras or 1
    if rank not in MAX_LORA_RANKS:
        raise KvplanError(f"--max-lora-rank {rank}: vLLM accepts only " + ", ".join(map(str, MAX_LORA_RANKS)))
    cpu = args.max_cpu_loras if args.max_cpu_loras is not None else max_loras
    if cpu < max_loras:
        raise KvplanError(f"--max-cpu-loras {cpu}: must be >= --max-loras ({max_loras}); vLLM refuses it")
    dtype = args.lora_dtype or "auto"
    if dtype not in LORA_DTYPES:
        raise KvplanError(f"--lora-dtype {dtype}: must be one of " + ", ".join(LORA_DTYPES))
    return LoraSettings(max_loras=max_loras, max_lora_rank=rank, max_cpu_loras=cpu,
                        fully_sharded_loras=bool(args.fully_sharded_loras), lora_dtype=dtype)


def _names(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    return tuple(p for p in str(text).replace(",", " ").split() if p)


def offload_settings(args: Any) -> OffloadSettings | None:
    """Weight offload when ``--cpu-offload-gb`` > 0 or ``--offload-group-size`` > 0.

    Raises:
        KvplanError: --offload-num-in-group above --offload-group-size (vLLM refuses it).
    """
    gb = getattr(args, "cpu_offload_gb", 0) or 0
    group = getattr(args, "offload_group_size", 0) or 0
    if gb <= 0 and group <= 0:
        return None
    num_in_group = args.offload_num_in_group or 1
    if group > 0 and num_in_group > group:
        raise KvplanError(f"--offload-num-in-group {num_in_group}: must be <= --offload-group-size ({group}); vLLM refuses it")
    step = args.offload_prefetch_step if args.offload_prefetch_step is not None else 1
    # model_executor/offloader/base.py: cpu_offload_max_bytes = int(cpu_offload_gb * 1024**3)
    return OffloadSettings(cpu_offload_bytes=int(gb * GiB), cpu_offload_params=_names(args.cpu_offload_params),
                           group_size=group, num_in_group=num_in_group, prefetch_step=step,
                           offload_params=_names(args.offload_params))


def kv_offload_settings(args: Any) -> KVOffloadSettings | None:
    """The KV connector vLLM builds from ``--kv-offloading-size/--kv-offloading-backend`` or
    ``--kv-transfer-config`` (config/vllm.py _post_init_kv_transfer_config).

    Raises:
        KvplanError: --kv-offloading-backend not native/lmcache; --kv-transfer-config not a JSON object.
    """
    size = getattr(args, "kv_offloading_size", None)
    backend = getattr(args, "kv_offloading_backend", None) or "native"
    if backend not in KV_OFFLOADING_BACKENDS:
        raise KvplanError(f"--kv-offloading-backend {backend}: must be native or lmcache")
    transfer = parse_json_object(getattr(args, "kv_transfer_config", None), "--kv-transfer-config")
    if size is not None:
        extra = dict((transfer or {}).get("kv_connector_extra_config") or {})
        if backend == "native":
            extra["cpu_bytes_to_use"] = int(size * GiB)
            return KVOffloadSettings("OffloadingConnector", int(size * GiB), extra, True)
        return KVOffloadSettings("LMCacheMPConnector", None, extra, True)
    if transfer is None:
        return None
    extra = dict(transfer.get("kv_connector_extra_config") or {})
    cpu = extra.get("cpu_bytes_to_use")
    return KVOffloadSettings(str(transfer.get("kv_connector") or "unknown"),
                             int(cpu) if isinstance(cpu, (int, float)) and cpu > 0 else None, extra, False)


def features_of(args: Any, mtp_methods: frozenset[str] = frozenset()) -> Features:
    """Every add-on of ``args`` (EngineArgs). Raises KvplanError as the readers above."""
    return Features(
        speculative=speculative_settings(args, mtp_methods),
        lora=lora_settings(args),
        offload=offload_settings(args),
        kv_offload=kv_offload_settings(args),
    )
