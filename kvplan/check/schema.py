"""`kvplan schema`: the JSON Schema of a ``vllm serve --config`` file for one vLLM version
(generated from its flag catalogue) and of kvplan.yaml."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from kvplan.check.engine_flags import _READ_FLAGS
from kvplan.check.sources.manifest import Manifest, Targets
from kvplan.check.version import DEFAULT_VLLM_VERSION
from kvplan.engines.vllm.serve_flags import FlagCatalogue, catalogue
from kvplan.errors import KvplanError


def _flag_type(name: str, arity: str, cat: FlagCatalogue):
    """Python type for one `vllm serve` flag in the --config YAML schema."""
    scalar = Union[str, int, float]
    # the ranges check enforces (and vLLM's parser / EngineArgs): counts >= 1, sizes as
    # human_readable_int text ("32k", "80G"), max-model-len also -1 / "auto", utilization in (0, 1]
    count = Annotated[int, Field(ge=1)]
    human = Annotated[str, Field(pattern=r"^\s*[0-9]+(\.[0-9]+)?[kKmMgGtT]?\s*$")]
    typed = {
        "model": str,
        "tensor-parallel-size": count,
        "pipeline-parallel-size": count,
        "data-parallel-size": count,
        # the multi-GPU layout (vLLM config/parallel.py ParallelConfig ranges; capacity/ranks.py)
        "data-parallel-size-local": Annotated[int, Field(ge=0)],
        "decode-context-parallel-size": count,
        "prefill-context-parallel-size": count,
        "nnodes": count,
        "node-rank": Annotated[int, Field(ge=0)],
        "distributed-executor-backend": Literal["ray", "mp", "uni", "external_launcher"],
        "eplb-config": Union[dict[str, Any], str],
        "max-num-seqs": count,
        "block-size": count,
        "max-model-len": Union[Literal[-1], count, human, Literal["-1", "auto"]],
        "max-num-batched-tokens": Union[count, human],
        "kv-cache-memory-bytes": Union[Annotated[int, Field(ge=0)], human],
        "gpu-memory-utilization": Annotated[float, Field(gt=0, le=1)],
        "kv-cache-dtype": Literal[cat.cache_dtypes],  # type: ignore[valid-type]
        "dtype": Literal[cat.model_dtypes],  # type: ignore[valid-type]
    }
    if name in typed:
        return typed[name]
    if arity in ("bool", "negatable"):
        return bool
    if arity == "optional":
        return Union[bool, str]
    if arity == "list":
        return Union[list[scalar], scalar]
    if arity == "json":
        return Union[dict[str, Any], str]
    return Union[scalar, dict[str, Any], list[Any]]


def vllm_config_model(version: str = DEFAULT_VLLM_VERSION) -> type[BaseModel]:
    """A pydantic model of a ``vllm serve --config`` YAML file for ``version`` (one optional
    field per flag, spelled with dashes, plus ``kvplan``), for `kvplan schema`.

    Raises:
        KvplanError: no flag table for that version.
    Rule source: vLLM utils/argparse_utils.py load_config_file; flags from
        kvplan.engines.vllm.serve_flags.
    """
    cat = catalogue(version)
    fields: dict[str, Any] = {}
    for name, arity in sorted(cat.arity.items()):
        if name in ("help", "config"):
            continue
        kind = {"bool": "switch", "negatable": "switch", "list": "one or more values", "json": "JSON value"}.get(
            arity, "value"
        )
        # null is "None" to vLLM: allowed where vLLM reads it as unset, or where kvplan does not
        # know the flag's type; not for switches and the flags kvplan reads (see config_tokens)
        nullable = arity not in ("bool", "negatable") and (name not in _READ_FLAGS or name in cat.none_is_unset)
        ftype = _flag_type(name, arity, cat)
        fields[name.replace("-", "_")] = (
            Optional[ftype] if nullable else ftype,
            Field(None, alias=name, description=f"`vllm serve --{name}` ({kind}; vLLM {version})."),
        )
        if arity == "negatable":
            fields["no_" + name.replace("-", "_")] = (
                Optional[bool],
                Field(None, alias="no-" + name, description=f"`vllm serve --no-{name}`: turn --{name} off."),
            )
    fields["kvplan"] = (Optional[Targets], Field(None, description="kvplan's hardware and targets (not a vLLM key)."))
    return create_model(  # type: ignore[call-overload]
        "VllmServeConfig",
        # check reports a key that is no vLLM flag as an unknown-flag error (vLLM exits), so the
        # schema has no room for other keys either (see json_schema for underscores and dots)
        __config__=ConfigDict(extra="forbid", populate_by_name=True),
        __doc__=f"A `vllm serve --config` YAML file (vLLM {version}); keys may use dashes or underscores.",
        **fields,
    )


def json_schema(kind: str = "config", version: str = DEFAULT_VLLM_VERSION) -> dict:
    """The JSON Schema of a vLLM --config file (``kind="config"``) or of kvplan.yaml
    (``kind="manifest"``), generated from the pydantic models.

    Raises:
        KvplanError: unknown kind or vLLM version.
    """
    if kind == "config":
        schema = vllm_config_model(version).model_json_schema(by_alias=True)
        # vLLM turns `max_model_len` into --max-model-len (FlexibleArgumentParser.parse_args), and
        # a dotted key of a JSON flag (`compilation-config.level: 3`) into part of that flag.
        # (An argparse abbreviation such as `max-model: 4096` is accepted by vLLM, and check
        # notes it, but the schema asks for full names.)
        props = schema.get("properties", {})
        for name in [n for n in props if "-" in n]:
            props.setdefault(name.replace("-", "_"), {"$ref": f"#/properties/{name}"})
        cat = catalogue(version)
        json_flags = sorted(n for n, a in cat.arity.items() if a == "json")
        if json_flags:
            alts = "|".join(f"{n}|{n.replace('-', '_')}" for n in json_flags)  # names are [a-z0-9-]
            schema["patternProperties"] = {f"^({alts})\\.": {}}
        schema["additionalProperties"] = False
    elif kind == "manifest":
        schema = Manifest.model_json_schema(by_alias=True)
    else:
        raise KvplanError(f"kind: unknown schema {kind!r}", hint="use config or manifest, or perf for the `kvplan perf --format json` document")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
