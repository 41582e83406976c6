"""`vllm serve` command lines and vLLM ``--config`` YAML for a plan (the version's flag names).

Flag templates are pinned per vLLM version, separate from the arithmetic: SERVE_FLAGS maps an
EngineArgs field to its `vllm serve` spelling and vLLM's default, so only values that differ
from vLLM's default are written (plus --max-model-len, always pinned so the numbers hold).
"""

from __future__ import annotations

import shlex

from kvplan.engines.vllm import versions

# field -> (flag, the default version's fixed default or None when it depends on the model/GPU):
# the version's rules (VllmRules.serve_flags, e.g. engines/vllm/v0_26/flag_catalogue.py).
SERVE_FLAGS = versions.default().serve_flags
SERVE_FLAGS_0_26 = SERVE_FLAGS  # the old name; nothing in kvplan reads it now (goes with the issue-11 shims)

# Every `vllm serve` flag kvplan understands when reading command lines/configs (underscored).
KNOWN_ENGINE_KEYS = {k for k in SERVE_FLAGS} | {"model"}


def serve_tokens(values: dict, catalogue: dict | None = None) -> list[tuple[str, list[str]]]:
    """(field, its `vllm serve` tokens) for each field of ``values`` whose value vLLM would not
    already use by default, in the catalogue's order. Booleans become bare flags; a tri-state
    flag turned off becomes ``--no-<flag>``; values equal to vLLM's fixed default are dropped.
    ``catalogue``: the version's VllmRules.serve_flags (None: the default version's)."""
    out: list[tuple[str, list[str]]] = []
    for field, (flag, default) in (catalogue or SERVE_FLAGS).items():
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


def serve_args(explicit: dict, pinned_max_model_len: int | None, catalogue: dict | None = None) -> list[str]:
    """The flag list for ``explicit`` (field -> value the user set), in `vllm serve`'s spelling, with
    ``--max-model-len`` pinned when ``pinned_max_model_len`` is given (see serve_tokens; ``catalogue``
    the version's VllmRules.serve_flags, None: the default version's)."""
    values = dict(explicit)
    if pinned_max_model_len is not None:
        values["max_model_len"] = pinned_max_model_len
    return [t for _, toks in serve_tokens(values, catalogue) for t in toks]


def serve_command(model: str, explicit: dict, pinned_max_model_len: int | None) -> str:
    """A copy-pasteable ``vllm serve MODEL ...`` line (shell-quoted)."""
    return shlex.join(["vllm", "serve", model, *serve_args(explicit, pinned_max_model_len)])


def config_yaml_dict(model: str, explicit: dict, pinned_max_model_len: int | None, catalogue: dict | None = None) -> dict:
    """The same settings as a vLLM ``--config`` YAML mapping (keys as `vllm serve` long flags
    without dashes; vLLM accepts dashes or underscores)."""
    out: dict = {"model": model}
    args = serve_args(explicit, pinned_max_model_len, catalogue)
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
            # vLLM utils/argparse_utils.py load_config_file (version rules in engines/vllm/v0_26) drops a `false` value (it adds
            # a flag only for `true`), so `X: false` would leave X on: write `no-X: true`.
            out[key] = True
            i += 1
        else:
            out[key] = True
            i += 1
    return out
