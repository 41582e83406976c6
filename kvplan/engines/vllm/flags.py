"""`vllm serve` command lines and vLLM ``--config`` YAML for a plan (vLLM 0.26.0 flag names).

Flag templates are pinned per vLLM version, separate from the arithmetic: SERVE_FLAGS maps an
EngineArgs field to its `vllm serve` spelling and vLLM's default, so only values that differ
from vLLM's default are written (plus --max-model-len, always pinned so the numbers hold).
"""

from __future__ import annotations

import shlex

# field -> (flag, vLLM 0.26.0 default or None when the default depends on the model/GPU)
SERVE_FLAGS_0_26 = {
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
    # FlashAttention rule (a positive multiple of 16) in planner.EngineArgs.
    "block_size": ("--block-size", None),
    "dtype": ("--dtype", "auto"),
    "quantization": ("--quantization", None),
    "max_num_seqs": ("--max-num-seqs", None),
    "max_num_batched_tokens": ("--max-num-batched-tokens", None),
    "enforce_eager": ("--enforce-eager", False),
    "kv_cache_memory_bytes": ("--kv-cache-memory-bytes", None),
    "enable_prefix_caching": ("--enable-prefix-caching", None),  # False -> --no-enable-prefix-caching
    "revision": ("--revision", None),
}

# Every `vllm serve` flag kvplan understands when reading command lines/configs (underscored).
KNOWN_ENGINE_KEYS = {k for k in SERVE_FLAGS_0_26} | {"model"}


def serve_tokens(values: dict) -> list[tuple[str, list[str]]]:
    """(field, its `vllm serve` tokens) for each field of ``values`` whose value vLLM would not
    already use by default, in the catalogue's order. Booleans become bare flags; a tri-state
    flag turned off becomes ``--no-<flag>``; values equal to vLLM's fixed default are dropped."""
    out: list[tuple[str, list[str]]] = []
    for field, (flag, default) in SERVE_FLAGS_0_26.items():
        if field not in values or values[field] is None:
            continue
        v = values[field]
        if default is not None and v == default:
            continue
        if isinstance(v, bool):
            if v:
                out.append((field, [flag]))
            elif default is None:  # a tri-state flag the user turned off explicitly
                out.append((field, ["--no-" + flag[2:]]))
            continue
        out.append((field, [flag, str(v)]))
    return out


def serve_args(explicit: dict, pinned_max_model_len: int | None) -> list[str]:
    """The flag list for ``explicit`` (field -> value the user set), vLLM 0.26.0 spelling, with
    ``--max-model-len`` pinned when ``pinned_max_model_len`` is given (see serve_tokens)."""
    values = dict(explicit)
    if pinned_max_model_len is not None:
        values["max_model_len"] = pinned_max_model_len
    return [t for _, toks in serve_tokens(values) for t in toks]


def serve_command(model: str, explicit: dict, pinned_max_model_len: int | None) -> str:
    """A copy-pasteable ``vllm serve MODEL ...`` line (shell-quoted)."""
    return shlex.join(["vllm", "serve", model, *serve_args(explicit, pinned_max_model_len)])


def config_yaml_dict(model: str, explicit: dict, pinned_max_model_len: int | None) -> dict:
    """The same settings as a vLLM ``--config`` YAML mapping (keys as `vllm serve` long flags
    without dashes; vLLM accepts dashes or underscores)."""
    out: dict = {"model": model}
    args = serve_args(explicit, pinned_max_model_len)
    i = 0
    while i < len(args):
        key = args[i][2:]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            raw = args[i + 1]
            try:
                val: object = int(raw)
            except ValueError:
                try:
                    val = float(raw)
                except ValueError:
                    val = raw
            out[key] = val
            i += 2
        elif key.startswith("no-"):
            # vLLM 0.26.0 utils/argparse_utils.py load_config_file drops a `false` value (it adds
            # a flag only for `true`), so `X: false` would leave X on: write `no-X: true`.
            out[key] = True
            i += 1
        else:
            out[key] = True
            i += 1
    return out
