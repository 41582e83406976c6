"""The engine-argument options shared by `estimate`, `plan` and `verify`, derived from the one
table of engine arguments (kvplan.engines.vllm.args.ENGINE_ARGS): their `vllm serve` spellings
(-tp, -pp, -q included), value placeholders and lower bounds come from the table, so a flag is
spelled and range-checked the same way by every command. Only what differs per command is given
here: the default (``plan`` takes lists, ``verify`` reads missing values from the run) and the
help line.

Also the flag parsers every command shares (--max-model-len, --kv-cache-memory-bytes): values
as `vllm serve` reads them, errors as one line naming the flag as typed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional

import typer

from kvplan.engines.vllm.args import ENGINE_ARGS, engine_arg
from kvplan.errors import KvplanError

# kvplan's own shorter spelling of a `vllm serve` flag, accepted after vLLM's.
ALIASES: dict[str, tuple[str, ...]] = {"kv_cache_memory_bytes": ("--kv-cache-memory",)}


def flag_of(name: str) -> str:
    """The long `vllm serve` spelling of engine argument ``name`` ("--max-num-seqs")."""
    return engine_arg(name).flags[0]


def engine_option(name: str, default: Any, *, help: Optional[str] = None, flags: Optional[tuple[str, ...]] = None) -> Any:
    """A typer option for engine argument ``name`` (a row of ENGINE_ARGS): its `vllm serve`
    spellings (plus kvplan's alias, see ALIASES) and metavar from the table.

    Args:
        default: the command's default (None = not given; vLLM's default applies).
        help: the command's help line (None = the table's help line for ``name``, so every
            engine flag says what it is in --help).
        flags: the spellings to accept when a command takes fewer than the table lists.
    """
    arg = engine_arg(name)
    decls = flags or (arg.flags + ALIASES.get(name, ()))
    if len(decls) == 2 and decls[1] == "--no-" + decls[0][2:]:
        decls = (f"{decls[0]}/{decls[1]}",)  # a tri-state switch: --X/--no-X
    return typer.Option(default, *decls, metavar=arg.metavar, help=arg.help if help is None else help)


def positive_engine_args(values: dict[str, Optional[int]]) -> None:
    """Each given int engine argument is >= 1 (the table's lower bound; --block-size too, whose
    rule in the table is "a positive multiple of 16": the CLI says >= 1 first).

    Raises:
        KvplanError: "<flag>: must be >= 1, got <value>" for the first one below (in ``values``' order).
    """
    for name, value in values.items():
        positive(flag_of(name), value)


def check_fraction(name: str, value: Optional[float]) -> None:
    """A fraction engine argument (--gpu-memory-utilization) inside the table's range (gt, le].

    Raises:
        KvplanError: "<flag>: must be in (0, 1], got <value>".
    """
    arg = engine_arg(name)
    if value is not None and not (arg.gt < value <= arg.le):
        raise KvplanError(f"{flag_of(name)}: must be in ({arg.gt:g}, {arg.le:g}], got {value}")


def positive(name: str, value: Optional[int]) -> Optional[int]:
    """``value`` unless it is below 1 (``name`` is the flag, for the message).

    Raises:
        KvplanError: "<name>: must be >= 1, got <value>".
    """
    if value is not None and value < 1:
        raise KvplanError(f"{name}: must be >= 1, got {value}")
    return value


def parse_max_model_len(value: Optional[str]) -> Optional[int]:
    """--max-model-len as `vllm serve` reads it: tokens, "32k" (x1000) / "32K" (x1024), or "auto" (-1).

    Raises:
        KvplanError: not a positive number or auto (names the flag).
    """
    if value is None:
        return None
    from kvplan.engines.vllm.serve_flags import parse_max_model_len as vllm_parse

    try:
        n = vllm_parse(value)
    except ValueError:
        raise KvplanError(
            f"--max-model-len: expected a number of tokens (8192, 32k = 32000, 32K = 32768) or 'auto', got {value!r}"
        ) from None
    if n != -1 and n <= 0:
        raise KvplanError(f"--max-model-len: must be positive, got {value!r}")
    return n


def parse_hf_overrides(value: Optional[str]) -> Optional[dict]:
    """--hf-overrides as `vllm serve` reads it: a JSON object (vLLM engine/arg_utils.py
    union_dict_and_str; text that is not an object is refused by config/model.py ModelConfig).
    None when not given; {} (no override) for ``{}``.

    Raises:
        KvplanError: not a JSON object (names the flag).
    """
    if value is None:
        return None
    import json

    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise KvplanError(
            f"--hf-overrides: expected a JSON object, got {shown!r}",
            hint='write a JSON object such as \'{"max_position_embeddings": 262144}\'',
        )
    return parsed


def parse_kv_cache_memory(value: Optional[str]) -> Optional[int]:
    """--kv-cache-memory-bytes as `vllm serve` reads it ("80g" = 80e9, "80G" = 80 GiB) or with
    an IEC unit ("80GiB"), in bytes. Raises KvplanError naming the flag as typed
    (--kv-cache-memory or --kv-cache-memory-bytes)."""
    if value is None:
        return None
    from kvplan.engines.vllm.serve_flags import parse_human_int
    from kvplan.io.units import parse_bytes

    flag = flag_typed(*ALIASES["kv_cache_memory_bytes"], flag_of("kv_cache_memory_bytes"))
    try:
        n = parse_human_int(value)
    except ValueError:
        n = parse_bytes(value, what=flag)
    if n <= 0:
        raise KvplanError(f"{flag}: must be a positive number of bytes, got {value!r}")
    return n


def flag_typed(*spellings: str) -> str:
    """Which of an option's ``spellings`` the command line used (the last one given, as click
    keeps the last value), for messages; all of them joined by "/" when none is on it."""
    used = None
    for a in sys.argv[1:]:
        for flag in spellings:
            if a == flag or a.startswith(flag + "="):
                used = flag
    return used or "/".join(spellings)


# The multi-GPU layout flags (vLLM config/parallel.py ParallelConfig; capacity/ranks.py models
# them), taken alike by estimate, plan, perf and check's readers, spelled as `vllm serve` spells them.
PARALLEL_FIELDS = (
    "data_parallel_size", "data_parallel_size_local", "enable_expert_parallel", "enable_eplb", "eplb_config",
    "decode_context_parallel_size", "prefill_context_parallel_size", "nnodes", "node_rank", "headless",
    "data_parallel_address", "master_addr", "distributed_executor_backend",
)


def parallel_values(**values: Any) -> dict:
    """The multi-GPU flags a command was given (PARALLEL_FIELDS -> value), without those left
    at vLLM's default (None, or False for a switch): EngineArgs then holds its own defaults."""
    unknown = set(values) - set(PARALLEL_FIELDS)
    if unknown:
        raise TypeError(f"not a parallel flag: {sorted(unknown)}")
    return {k: v for k, v in values.items() if v is not None and v is not False}


__all__ = [
    "ALIASES", "PARALLEL_FIELDS", "parallel_values", "ENGINE_ARGS", "check_fraction", "engine_option", "flag_of", "flag_typed", "parse_kv_cache_memory",
    "parse_max_model_len", "positive", "positive_engine_args",
]


@dataclass(frozen=True)
class EngineFlags:
    """The model, GPU and engine flags estimate and perf share, as typer parsed them (text still
    unparsed where the flag takes units: ``max_model_len``, ``kv_cache_memory``, ``gpu_memory``).
    Each command's flag object extends it with its own flags (built by keyword)."""

    model: str
    gpu: str
    gpu_memory: Optional[str]
    gpu_profiles: Optional[list[str]]
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: Optional[str]
    gpu_memory_utilization: Optional[float]
    kv_cache_dtype: str
    block_size: Optional[int]
    dtype: str
    quantization: Optional[str]
    max_num_seqs: Optional[int]
    max_num_batched_tokens: Optional[int]
    enforce_eager: bool
    kv_cache_memory: Optional[str]


# The add-on flags (speculative decoding, LoRA, weight and KV offload) every sizing command takes
# (estimate, perf, plan): EngineArgs fields, spelled and range-checked by the table.
ADDON_FIELDS = (
    "speculative_config", "spec_method", "spec_model", "spec_tokens",
    "enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "fully_sharded_loras", "lora_dtype",
    "cpu_offload_gb", "cpu_offload_params", "offload_group_size", "offload_num_in_group", "offload_prefetch_step",
    "offload_params", "kv_offloading_size", "kv_offloading_backend", "kv_transfer_config",
)


def addon_values(params: dict) -> dict:
    """Take the add-on flags (ADDON_FIELDS) out of ``params`` (a command's parsed parameters, as
    typer or the web API hold them) and return those given (not None, not False, not the table's
    default). Mutates ``params``."""
    addons = {}
    for name in ADDON_FIELDS:
        v = params.pop(name, None)
        if v is not None and v is not False and v != engine_arg(name).default:
            addons[name] = v
    return addons


def with_addon_options(fn):
    """Give a typer command ``fn`` (which takes ``addons: dict``) the add-on flags of ADDON_FIELDS
    as options (their `vllm serve` spellings from the engine-argument table); ``fn`` receives the
    given ones (not None, not the table's default) in ``addons``. The flags appear in --help in
    the table's order after the command's own."""
    return _with_engine_options(fn, "addons", ADDON_FIELDS, addon_values)


def with_parallel_options(fn):
    """Give a typer command ``fn`` (which takes ``parallel: dict``) the multi-GPU flags of
    PARALLEL_FIELDS as options (spelled by the engine-argument table); ``fn`` receives the given
    ones in ``parallel`` (parallel_values)."""
    return _with_engine_options(
        fn, "parallel", PARALLEL_FIELDS, lambda kw: parallel_values(**{k: kw.pop(k, None) for k in PARALLEL_FIELDS}))


def _with_engine_options(fn, target: str, fields: tuple[str, ...], collect):
    """``fn`` with one option per engine argument of ``fields`` appended to its signature (a
    switch defaults to the table's default, anything else to None: unset); the wrapper takes them
    out of its keywords with ``collect`` (which pops them) and passes the result as ``target``."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name != target]
    for name in fields:
        arg = engine_arg(name)
        default = arg.default if arg.type is bool else None
        annotation = Optional[arg.type] if arg.type is not bool else bool
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=engine_option(name, default, help=arg.help),
                                        annotation=annotation))

    @functools.wraps(fn)
    def wrapper(**kw):
        grouped = collect(kw)  # first: it takes the grouped flags out of kw
        return fn(**kw, **{target: grouped})

    wrapper.__signature__ = sig.replace(parameters=params)
    return wrapper
