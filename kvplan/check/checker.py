"""`kvplan check`: read vLLM deployments from config files as they are and report what fails.

Inputs, detected per file (``detect_kind``):

* ``vllm-config``: the YAML given to ``vllm serve --config`` (keys are `vllm serve` flags with
  dashes or underscores, plus ``model``), optionally with a ``kvplan:`` mapping (``Targets``).
* ``command``: any text file with ``vllm serve ...`` lines (shell scripts, Dockerfile
  CMD/ENTRYPOINT, CI YAML ``run:`` steps), read with shlex after joining line continuations.
* ``compose``: a docker-compose file (``services.*.command``/``entrypoint``; the
  ``vllm/vllm-openai`` image's entrypoint is `vllm serve`).
* ``k8s``: Kubernetes objects holding pod specs (``containers[].command``/``args``, the
  ``nvidia.com/gpu`` resource count, ``nodeSelector`` mapped to a GPU profile by
  ``kvplan.yaml``'s ``node_selectors``).
* ``manifest``: a ``kvplan.yaml`` listing several deployments (``Manifest``).

YAML files are read document by document (``yaml_doc_kind``), so one file may hold several
kinds; a vLLM config in a file of several documents also fails ``multiple-documents`` (vLLM
loads it with ``yaml.safe_load``), and a YAML file with no deployment at all fails
``no-deployment``. ``$VARIABLES`` are expanded only where the platform would (``expand_word``:
shell lines, Dockerfile shell form from ENV, Kubernetes ``$(NAME)``, compose from ``.env``).

Text files and YAML files (compose, k8s) may carry ``# kvplan: gpu=H100-80GB gpu_count=2``
comments; a comment applies to the deployments that follow it in the file (or, when none
precedes a deployment, to the whole file).

Every problem is a ``Diagnostic`` (check id, severity, file, line, key, message); nothing is
raised for bad input in a file. The memory arithmetic is the planner's (``kvplan.planner.plan``);
this module only maps flags onto ``EngineArgs`` and compares the Plan with the file's targets.
Model specs and plans are cached per run (``Checker``). Pure except reading the input files and
resolving models (``kvplan.sources``).

Rule sources: vLLM 0.26.0 ``utils/argparse_utils.py`` (how `vllm serve` and ``--config`` read
flags), ``engine/arg_utils.py`` (the flags), ``config/cache.py`` (gpu_memory_utilization in
(0, 1]), ``config/model.py`` (max_model_len limit), ``config/parallel.py`` (tensor parallel),
``v1/core/kv_cache_utils.py`` (one max_model_len request must fit).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from kvplan.engines.vllm.serve_flags import FlagCatalogue, catalogue, parse_human_int, parse_max_model_len
from kvplan.safe_io import MAX_FILE_BYTES, MAX_YAML_NODES, InputError, YamlDoc, load_yaml, read_text  # noqa: F401
from kvplan.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK, KvplanError

# ---------------------------------------------------------------------------------------------
# Check ids
# ---------------------------------------------------------------------------------------------

PARSE_ERROR = "parse-error"  # the file cannot be read or parsed (exit 2)
NO_DEPLOYMENT = "no-deployment"  # nothing to check in the file (an error for YAML that is no deployment)
MULTIPLE_DOCUMENTS = "multiple-documents"  # a vLLM --config file with a `---`: vLLM's loader exits
LITERAL_VARIABLE = "literal-variable"  # a $VAR the platform passes as text (Dockerfile exec form ...)
UNKNOWN_FLAG = "unknown-flag"  # vLLM 0.26 does not define it: `vllm serve` exits
REMOVED_FLAG = "removed-flag"  # a flag of an older vLLM that 0.26 rejects (swap-space ...)
IGNORED_FLAG = "ignored-flag"  # accepted, but vLLM 0.26 does nothing with it
ABBREVIATED_FLAG = "abbreviated-flag"  # argparse prefix match (--kv-cache-memory)
DUPLICATE_FLAG = "duplicate-flag"  # given twice: the last one wins
FALSE_DROPPED = "false-dropped"  # `flag: false` in --config YAML is dropped by vLLM
INVALID_VALUE = "invalid-value"  # vLLM's parser or config validation rejects the value
MODEL_MISSING = "model-missing"  # no model given: `vllm serve` exits
MODEL_UNRESOLVED = "model-unresolved"  # kvplan cannot find the model's config (exit 2)
GPU_MISSING = "gpu-missing"  # no GPU declared for the deployment (exit 2)
GPU_UNKNOWN = "gpu-unknown"  # the declared GPU is not a known profile (exit 2)
INVALID_KVPLAN_KEY = "invalid-kvplan-key"  # bad `kvplan:` block / comment / manifest key (exit 2)
UNRESOLVED_VALUE = "unresolved-value"  # $VARIABLE kvplan cannot expand
KVPLAN_KEY_IN_VLLM_CONFIG = "kvplan-key-in-vllm-config"  # vLLM's --config loader rejects `kvplan:`
NOT_MODELLED = "not-modelled"  # kvplan does not model this flag/value; figures may differ
UTILIZATION_RANGE = "gpu-memory-utilization-range"
TP_DIVISIBILITY = "tp-divisibility"
KV_HEAD_REPLICATION = "kv-head-replication"
MAX_MODEL_LEN_LIMIT = "max-model-len-over-limit"
FP8_KV_UNSUPPORTED = "fp8-kv-unsupported-gpu"
GPU_COUNT = "gpu-count"
WEIGHTS_FIT = "weights-fit"
CUDA_GRAPHS_FIT = "cuda-graphs-fit"  # the planner's StartOutcome.CUDA_GRAPH_CAPTURE_OOM
MAX_MODEL_LEN_FITS = "max-model-len-fits"
MAX_NUM_SEQS = "max-num-seqs"
MIN_CONCURRENCY = "min-concurrency"
MAX_GPU_MEMORY_UTILIZATION = "max-gpu-memory-utilization"
ENGINE_REJECTS = "engine-rejects"  # the planner found another reason vLLM refuses the args
PLANNER_NOTE = "planner-note"
NODE_SELECTORS = "node-selectors"  # which kvplan.yaml's node_selectors gave a Kubernetes pod its GPU

# Errors with these ids mean "kvplan could not read/evaluate the input" -> exit 2.
INPUT_ERROR_IDS = frozenset({PARSE_ERROR, MODEL_UNRESOLVED, GPU_MISSING, GPU_UNKNOWN, INVALID_KVPLAN_KEY})

_MAX_QUOTE_LINES = 50  # lines a quoted shell string may span

Severity = Literal["error", "warning", "info"]


class Diagnostic(BaseModel):
    """One finding about one deployment file.

    Attributes:
        check_id: stable id, e.g. "max-model-len-fits" (see the constants in kvplan.check).
        severity: "error" (the check failed), "warning" (passes unless --strict), "info".
        file: the file as given on the command line.
        line: 1-based line of the key (None when the file could not be read at all).
        key: the key/flag as the file spells it ("--max-model-len", "max_model_len",
            "kvplan.min_concurrency"), or None.
        message: one line; says what vLLM would do and, where it can, what fits instead.
        hint: optional one-line suggestion.
        deployment: which deployment in the file (k8s container, compose service, ...).
    """

    model_config = ConfigDict(frozen=True)

    check_id: str
    severity: Severity
    file: str
    line: Optional[int] = None
    key: Optional[str] = None
    message: str
    hint: Optional[str] = None
    deployment: Optional[str] = None

    @property
    def location(self) -> str:
        """"file:line" (or just "file")."""
        return f"{self.file}:{self.line}" if self.line else self.file

    def text(self) -> str:
        """The one-line form: ``file:line: severity [check-id] key: message``."""
        key = f"{self.key}: " if self.key else ""
        return f"{self.location}: {self.severity} [{self.check_id}] {key}{self.message}"


# ---------------------------------------------------------------------------------------------
# The config format (pydantic models; `kvplan schema` prints their JSON Schema)
# ---------------------------------------------------------------------------------------------


class Targets(BaseModel):
    """The ``kvplan:`` mapping of a vLLM config file (also ``# kvplan: k=v`` comments and the
    fields of a ``kvplan.yaml`` deployment): the hardware and the targets to check against."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: Optional[str] = Field(None, description="GPU profile id or alias (see `kvplan gpus`), e.g. H100-80GB.")
    gpu_count: Optional[int] = Field(
        None, ge=1, description="GPUs this deployment gets on one node; must cover tensor x pipeline x data parallel."
    )
    model: Optional[str] = Field(
        None,
        description="Check as this model (a Hub id or bundled spec) when the deployment loads from a path "
        "that does not exist where kvplan runs.",
    )
    min_concurrency: Optional[float] = Field(
        None, gt=0, allow_inf_nan=False, description="Requests that must fit in the KV cache at once, each of request_len tokens."
    )
    request_len: Optional[int] = Field(
        None, gt=0, description="Tokens per request (prompt + output) for min_concurrency; default max_model_len."
    )
    max_gpu_memory_utilization: Optional[float] = Field(
        None, gt=0, le=1, allow_inf_nan=False, description="Fail when --gpu-memory-utilization (default 0.92) is above this fraction."
    )


class ManifestDeployment(Targets):
    """One deployment in ``kvplan.yaml``: a vLLM config file, a `vllm serve` command line, or a
    model with a mapping of `vllm serve` flags; plus targets."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Deployment name used in messages.")
    config: Optional[str] = Field(None, description="Path (relative to kvplan.yaml) of a vLLM --config YAML file.")
    command: Optional[str] = Field(None, description="A `vllm serve MODEL --flag value ...` command line.")
    args: Optional[dict[str, Any]] = Field(
        None, description="`vllm serve` flags as in a --config YAML file (dashes or underscores)."
    )


class Manifest(BaseModel):
    """``kvplan.yaml`` at the repository root: deployments to check and the Kubernetes
    node-selector -> GPU profile mapping used for k8s files anywhere below it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_selectors: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="label -> label value -> GPU profile, e.g. "
        "{'nvidia.com/gpu.product': {'NVIDIA-H100-80GB-HBM3': 'H100-80GB'}}.",
    )
    deployments: list[ManifestDeployment] = Field(default_factory=list)


def _flag_type(name: str, arity: str, cat: FlagCatalogue):
    """Python type for one `vllm serve` flag in the --config YAML schema."""
    scalar = Union[str, int, float]
    # the ranges check enforces (and vLLM 0.26.0's parser / EngineArgs): counts >= 1, sizes as
    # human_readable_int text ("32k", "80G"), max-model-len also -1 / "auto", utilization in (0, 1]
    count = Annotated[int, Field(ge=1)]
    human = Annotated[str, Field(pattern=r"^\s*[0-9]+(\.[0-9]+)?[kKmMgGtT]?\s*$")]
    typed = {
        "model": str,
        "tensor-parallel-size": count,
        "pipeline-parallel-size": count,
        "data-parallel-size": count,
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


def vllm_config_model(version: str = "0.26.0") -> type[BaseModel]:
    """A pydantic model of a ``vllm serve --config`` YAML file for ``version`` (one optional
    field per flag, spelled with dashes, plus ``kvplan``), for `kvplan schema`.

    Raises:
        KvplanError: no flag table for that version.
    Rule source: vLLM 0.26.0 utils/argparse_utils.py load_config_file; flags from
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


def json_schema(kind: str = "config", version: str = "0.26.0") -> dict:
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
        raise KvplanError(f"kind: unknown schema {kind!r}", hint="use config or manifest")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


# ---------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Deployments and `vllm serve` argument parsing
# ---------------------------------------------------------------------------------------------


class FileLine(int):
    """A 1-based line in another file than the deployment's own: a line of the --config YAML
    that a script's `vllm serve --config FILE` names. Deployment.diag reports it in that file."""

    file: str

    def __new__(cls, line: int, file: str) -> "FileLine":
        obj = int.__new__(cls, line)
        obj.file = file
        return obj


@dataclass
class Tok:
    """One `vllm serve` argument with where it came from."""

    text: str
    line: int | None
    key: str | None = None  # how a --config YAML spelled it (the YAML key)
    unresolved: tuple[str, ...] = ()  # $VARIABLES that could not be expanded
    literal: tuple[str, ...] = ()  # $VARIABLES the platform passes on as text (exec form)
    value_of: str | None = None  # the --config YAML key this is the value of (never a positional)


@dataclass
class Setting:
    """One flag as the deployment sets it.

    Attributes:
        flag: canonical long name ("max-model-len").
        value: str (value flags), bool (switches), list[str] (list flags), True (bare optional).
        line: 1-based line.
        key: as written ("--max-model-len", "-tp", "max_model_len").
        unresolved: $VARIABLES left in the value (unknown where kvplan runs).
        literal: $VARIABLES that reach vLLM as text (the platform does not expand them).
    """

    flag: str
    value: Any
    line: int | None
    key: str
    unresolved: tuple[str, ...] = ()
    literal: tuple[str, ...] = ()


@dataclass
class Deployment:
    """One vLLM server found in a file: its flags, its model, its GPU and its targets."""

    name: str
    file: str
    line: int | None
    kind: str
    settings: dict[str, Setting] = field(default_factory=dict)
    model: str | None = None
    model_line: int | None = None
    model_key: str = "MODEL"
    model_unresolved: tuple[str, ...] = ()
    model_literal: tuple[str, ...] = ()
    model_null_line: int | None = None  # `model:` with no value in a --config file
    invalid: set = field(default_factory=set)  # flags whose value was refused while reading
    literal_reason: str = ""  # why $VARIABLES are passed as text (exec form, Kubernetes ...)
    process_env: dict[str, str] = field(default_factory=dict)  # `NAME=value vllm serve`: set for vLLM
    var_notes: dict = field(default_factory=dict)  # $NAME -> why it is unset at runtime
    targets: dict[str, Any] = field(default_factory=dict)
    target_lines: dict[str, int | None] = field(default_factory=dict)
    target_keys: dict[str, str] = field(default_factory=dict)
    gpu_hint: str | None = None  # why no GPU could be found (k8s node selector without mapping)
    gpu_count: int | None = None  # from the platform (k8s resources, compose devices)
    gpu_count_line: int | None = None
    gpu_count_key: str | None = None
    # a LeaderWorkerSet leader: (this pod's GPUs, group size, leader pod's GPUs, worker pod's GPUs)
    gpu_group: tuple | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def diag(self, check_id: str, severity: Severity, message: str, *, line=None, key=None, hint=None) -> None:
        line = line if line is not None else self.line
        self.diagnostics.append(
            Diagnostic(
                check_id=check_id,
                severity=severity,
                file=getattr(line, "file", None) or self.file,  # a FileLine is in its own file
                line=int(line) if line is not None else None,
                key=key,
                message=message,
                hint=hint,
                deployment=self.name,
            )
        )

    def set_target(self, name: str, value: Any, line: int | None, key: str) -> None:
        self.targets[name] = value
        self.target_lines[name] = line
        self.target_keys[name] = key


_NEG_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_option(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not _NEG_NUMBER.match(text)


def parse_serve_args(dep: Deployment, toks: list[Tok], cat: FlagCatalogue, *, positional_model: bool = True) -> None:
    """Read `vllm serve` arguments into ``dep.settings`` / ``dep.model``, adding diagnostics for
    unknown, removed, ignored, abbreviated, duplicate and malformed flags.

    Args:
        toks: the arguments after ``vllm serve`` (or after ``-m vllm.entrypoints.openai.api_server``).
        positional_model: whether a bare word is the model (`vllm serve MODEL`).
    Rule source: vLLM 0.26.0 utils/argparse_utils.py FlexibleArgumentParser.parse_args (underscores,
        dotted JSON keys, -O), Python argparse (abbreviations, nargs, --no-x twins).
    """
    positionals: list[Tok] = []
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.text == "--":
            positionals.extend(toks[i + 1 :])
            break
        if not _looks_like_option(t.text):
            positionals.append(t)
            i += 1
            continue
        m = cat.resolve(t.text)
        key = t.key or t.text.split("=", 1)[0]
        i += 1
        if m.status in ("unknown", "ambiguous", "removed"):
            # An unknown flag's arity is unknown: take the next word as its value unless that
            # word is the only candidate left for the positional model.
            if t.key is not None and i < n and toks[i].value_of == t.key:
                # a --config key's value(s): its own, never the positional model (fresh-eyes-5
                # H4: `aws_secret_access_key: sk-...` was reported as a second model)
                while i < n and toks[i].value_of == t.key:
                    i += 1
            elif m.explicit is None and i < n and not _looks_like_option(toks[i].text):
                model_pending = positional_model and not positionals and dep.model is None
                next_is_word = i + 1 < n and not _looks_like_option(toks[i + 1].text)
                if not model_pending or next_is_word:
                    i += 1
            flag = "--" + (t.text.lstrip("-").split("=", 1)[0])
            if m.status == "ambiguous":
                dep.diag(
                    UNKNOWN_FLAG,
                    "error",
                    f"ambiguous flag: vLLM {cat.version} could read it as {', '.join(m.suggestions)}; "
                    "`vllm serve` exits with 'ambiguous option'",
                    line=t.line,
                    key=key,
                    hint="spell the flag out in full",
                )
            elif m.status == "removed":
                also = (
                    f"; argparse would read it as an abbreviation of {m.suggestions[0]}"
                    if len(m.suggestions) == 1
                    else "; `vllm serve` exits with 'unrecognized arguments'"
                )
                dep.diag(
                    REMOVED_FLAG,
                    "error",
                    f"--{m.flag} is not a vLLM {cat.version} flag ({m.note}){also}",
                    line=t.line,
                    key=key,
                    hint=f"remove {key}",
                )
            else:
                did = f"; did you mean {' or '.join(m.suggestions)}?" if m.suggestions else ""
                dep.diag(
                    UNKNOWN_FLAG,
                    "error",
                    f"vLLM {cat.version} has no flag {flag}: `vllm serve` exits with 'unrecognized arguments'{did}",
                    line=t.line,
                    key=key,
                )
            continue
        assert m.flag is not None and m.arity is not None
        if m.status == "abbreviation":
            dep.diag(
                ABBREVIATED_FLAG,
                "info",
                f"read as --{'no-' if m.negated else ''}{m.flag} (argparse accepts an unambiguous prefix)",
                line=t.line,
                key=key,
                hint=f"spell it --{'no-' if m.negated else ''}{m.flag} so a future flag cannot make it ambiguous",
            )
        if m.flag in cat.ignored:
            dep.diag(IGNORED_FLAG, "warning", cat.ignored[m.flag], line=t.line, key=key, hint=f"remove {key}")
        value: Any
        unresolved, literal = t.unresolved, t.literal
        if m.arity in ("bool", "negatable"):
            if m.explicit is not None:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} is a switch and takes no value (got {m.explicit!r}); `vllm serve` exits "
                    "with 'ignored explicit argument'",
                    line=t.line,
                    key=key,
                )
                continue
            value = not m.negated
        elif m.arity == "optional":
            if m.explicit is not None:
                value = m.explicit
            elif i < n and not _looks_like_option(toks[i].text):
                value, unresolved, literal = toks[i].text, toks[i].unresolved, toks[i].literal
                i += 1
            else:
                value = True
        elif m.arity == "list":
            values = [m.explicit] if m.explicit is not None else []
            while i < n and not _looks_like_option(toks[i].text) and (m.explicit is None):
                values.append(toks[i].text)
                unresolved += toks[i].unresolved
                literal += toks[i].literal
                i += 1
            if not values:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} expects at least one value; `vllm serve` exits",
                    line=t.line,
                    key=key,
                )
                continue
            value = values
        else:  # value / json
            if m.explicit is not None:
                value = m.explicit
            elif i < n and not _looks_like_option(toks[i].text):
                value, unresolved, literal = toks[i].text, unresolved + toks[i].unresolved, literal + toks[i].literal
                i += 1
            else:
                dep.diag(
                    INVALID_VALUE,
                    "error",
                    f"--{m.flag} expects a value; `vllm serve` exits with 'expected one argument'",
                    line=t.line,
                    key=key,
                )
                continue
        name = m.flag if m.dotted is None else f"{m.flag}.{m.dotted}"
        # a command-line flag over one of its --config file is vLLM's precedence, not a slip
        overrides = name in dep.settings and isinstance(dep.settings[name].line, FileLine) and not isinstance(t.line, FileLine)
        if name in dep.settings and m.dotted is None and not overrides:
            prev = dep.settings[name]
            dep.diag(
                DUPLICATE_FLAG,
                "warning",
                f"--{m.flag} is set twice (also on line {prev.line}); vLLM uses the last one",
                line=t.line,
                key=key,
            )
        if name == "model":
            if dep.model is not None and dep.model_line != t.line:
                dep.diag(INVALID_VALUE, "error", "the model is given twice; `vllm serve` exits", line=t.line, key=key)
            dep.model, dep.model_line, dep.model_key = str(value), t.line, key
            dep.model_unresolved, dep.model_literal = unresolved, literal
            continue
        dep.settings[name] = Setting(flag=name, value=value, line=t.line, key=key, unresolved=unresolved, literal=literal)
    if positional_model and positionals:
        first = positionals[0]
        if dep.model is not None and isinstance(dep.model_line, FileLine) and not isinstance(first.line, FileLine):
            # `vllm serve MODEL --config FILE` with `model:` in FILE: the positional wins
            # (vLLM 0.26.0 entrypoints/cli/serve.py: args.model = args.model_tag)
            dep.model = None
        if dep.model is not None:
            dep.diag(
                INVALID_VALUE,
                "error",
                f"the model is given twice ({dep.model_key} and {first.text!r}); `vllm serve` exits",
                line=first.line,
                key="MODEL",
            )
        else:
            dep.model, dep.model_line, dep.model_key, dep.model_unresolved = first.text, first.line, "MODEL", first.unresolved
            dep.model_literal = first.literal
        positionals = positionals[1:]
    for extra in positionals:
        if extra.literal:
            dep.diag(
                LITERAL_VARIABLE,
                "error",
                f"{extra.text!r} reaches `vllm serve` as text ({dep.literal_reason}); it exits with "
                "'unrecognized arguments'",
                line=extra.line,
                key=extra.text,
            )
        elif extra.unresolved:
            positional = any(_POSITIONAL.fullmatch(n) for n in extra.unresolved)
            dep.diag(
                UNRESOLVED_VALUE,
                "warning",
                f"unresolved argument {extra.text}: the script's own arguments are not known here; they may "
                "add flags kvplan cannot see"
                if positional
                else f"{extra.text} is not set in this file; it may add flags kvplan cannot see",
                line=extra.line,
                key=extra.text,
            )
        else:
            dep.diag(
                INVALID_VALUE,
                "error",
                f"unexpected argument {extra.text!r}; `vllm serve` exits with 'unrecognized arguments'",
                line=extra.line,
                key=extra.text,
            )


# ---------------------------------------------------------------------------------------------
# `# kvplan: k=v` comments and $VARIABLES
# ---------------------------------------------------------------------------------------------

_DIRECTIVE = re.compile(r"#\s*kvplan:\s*(.*)$")


@dataclass
class Directive:
    """One ``# kvplan: gpu=H100-80GB gpu_count=2`` comment: its line and key=value pairs."""

    line: int
    values: dict[str, str]


def find_directives(lines: list[str]) -> tuple[list[Directive], list[tuple[int, str]]]:
    """The ``# kvplan:`` comments of a file, and (line, problem) for malformed ones."""
    out, bad = [], []
    for no, raw in enumerate(lines, 1):
        if "kvplan" not in raw:
            continue
        m = _DIRECTIVE.search(raw)
        if not m:
            continue
        values: dict[str, str] = {}
        try:
            words = shlex.split(m.group(1))
        except ValueError as exc:
            bad.append((no, f"cannot read the kvplan comment: {exc}"))
            continue
        for w in words:
            if "=" not in w:
                bad.append((no, f"expected key=value in the kvplan comment, got {w!r}"))
                continue
            k, v = w.split("=", 1)
            values[k.strip()] = v.strip()
        out.append(Directive(no, values))
    return out, bad


def apply_directives(dep: Deployment, directives: list[Directive]) -> None:
    """Give ``dep`` the targets of the comments above it (all of the file's when none is above)."""
    above = [d for d in directives if dep.line is None or d.line <= dep.line]
    for d in above or directives:
        for k, v in d.values.items():
            dep.set_target(k, v, d.line, f"kvplan.{k}")


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_vars(text: str, env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """Expand ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (shell, compose) and ``$(NAME)``
    (Kubernetes) from ``env``; returns the text and the names left unexpanded."""
    if "$" not in text:
        return text, ()
    missing: list[str] = []

    def rep(m: re.Match) -> str:
        name = m.group(1) or m.group(4) or m.group(5)
        if name in env and (env[name] != "" or not m.group(2) or not m.group(2).startswith(":")):
            return env[name]
        if m.group(2) is not None:
            return m.group(3) or ""
        missing.append(name)
        return m.group(0)

    return _VAR.sub(rep, text), tuple(missing)


_POSITIONAL = re.compile(r"\$(?:[@*0-9]|\{[@*0-9]+\})")
_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_COMPOSE_VAR = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)

# How a platform rewrites an argv before the process starts (see expand_word).
Syntax = Literal["shell", "exec", "k8s", "compose"]

LITERAL_REASONS = {
    "exec": "Docker runs the exec form (a JSON array) of CMD/ENTRYPOINT/RUN without a shell, so no variable is expanded",
    "k8s": "Kubernetes expands only $(NAME) in command and args, and leaves it as it is when NAME is not in "
    "the container's env; no shell runs them",
    "compose": "`$$` in a compose file is a literal `$`, and no shell runs the command",
}


def _refs(text: str) -> tuple[str, ...]:
    """The $NAME / ${NAME...} references a shell would expand in ``text``."""
    return tuple(m.group(1) or m.group(2) for m in _SHELL_REF.finditer(text))


def expand_word(
    text: str, syntax: str, env: dict[str, str], runtime: frozenset[str] | None = None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """One argv word after the platform's own variable handling.

    Args:
        syntax: "shell" (a shell line: ``$NAME``, ``${NAME:-default}``, ``$(NAME)`` from ``env``),
            "exec" (Docker exec form: nothing is expanded), "k8s" (only ``$(NAME)`` from the
            container's ``env``; ``$$`` is a literal ``$``), "compose" (``${NAME}``, ``$NAME``,
            ``${NAME:-default}`` from ``env`` = the .env file; ``$$`` is a literal ``$``).
        runtime: k8s only: the names the container's env defines with values kvplan cannot
            know (``valueFrom``); "*" in it: any name may be defined (``envFrom``). A ``$(NAME)``
            of such a name is unresolved; one of another name not in ``env`` is left as it is by
            Kubernetes, so it reaches the process as text (literal). None: every ``$(NAME)``
            not in ``env`` is unresolved.
    Returns:
        (text, unresolved names: unknown where kvplan runs, literal names: reach vLLM as text).
    Rule sources: Dockerfile reference (shell and exec form), Kubernetes "Define dependent
        environment variables" ($(VAR), $$ escape), Compose "Interpolation" (.env, $$ escape).
    """
    if "$" not in text:
        return text, (), ()
    if syntax == "shell":
        new, missing = expand_vars(text, env)
        # the script's own arguments ("$@", "$1", ...): unknown where kvplan runs
        missing += tuple(m.group(0) for m in _POSITIONAL.finditer(new))
        return new, missing, ()
    if syntax == "exec":
        return text, (), _refs(text)
    missing: list[str] = []
    escaped: list[tuple[int, int]] = []
    out: list[str] = []
    pos = 0
    pattern = _K8S_VAR if syntax == "k8s" else _COMPOSE_VAR
    for m in pattern.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        if m.group(0) == "$$":
            start = sum(len(x) for x in out)
            out.append("$")
            escaped.append((start, start + 1))
            continue
        if syntax == "k8s":
            name = m.group(1)
            if name in env:
                out.append(env[name])
            elif runtime is None or name in runtime or "*" in runtime:
                missing.append(name)  # set in the pod, to a value kvplan cannot read
                out.append(m.group(0))
            else:  # Kubernetes leaves a reference to an undefined name as it is
                start = sum(len(x) for x in out)
                out.append(m.group(0))
                escaped.append((start, start + len(m.group(0))))
            continue
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3) or ""
        value = env.get(name)
        unset = value is None or (value == "" and op is not None and op.startswith(":"))
        if op and op.endswith("-"):
            out.append(word if unset else value)
        elif op and op.endswith("+"):
            out.append("" if unset else word)
        elif not unset:
            out.append(value)
        else:  # compose substitutes "" (with a warning) or stops (${NAME?err}); kvplan cannot know
            missing.append(name)
            out.append(m.group(0))
    out.append(text[pos:])
    new = "".join(out)
    literal: list[str] = []
    if syntax == "k8s":
        literal = [n for n in _refs(new) if n not in missing]
        literal += [_K8S_VAR.match(new, a).group(1) for a, b in escaped if b - a > 1]
    else:
        for m in _SHELL_REF.finditer(new):
            if any(a <= m.start() < b for a, b in escaped):
                literal.append(m.group(1) or m.group(2))
    return new, tuple(missing), tuple(literal)


def expand_tokens(
    words: list[tuple[str, int | None]], env: dict[str, str], syntax: str = "shell", runtime: frozenset[str] | None = None
) -> list[Tok]:
    """Tokens with variables expanded as ``syntax`` says (see expand_word); in a shell, a word
    that is only ``$VAR`` is split like an unquoted expansion."""
    out: list[Tok] = []
    for text, line in words:
        new, missing, literal = expand_word(text, syntax, env, runtime)
        if syntax == "shell" and new != text and _VAR.fullmatch(text) and not missing and any(c.isspace() for c in new):
            for part in new.split():
                out.append(Tok(part, line))
        elif syntax == "shell" and new == "" and _VAR.fullmatch(text):
            continue  # an empty unquoted expansion vanishes
        else:
            out.append(Tok(new, line, unresolved=missing, literal=literal))
    return out


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a compose ``.env`` file (comments, ``export``, quotes); {} when
    there is none or it cannot be read. Rule source: Compose "Use an environment file"."""
    try:
        text = read_text(path)
    except InputError:
        return {}
    env: dict[str, str] = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
            env[key] = value
    return env


_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_DOCKER_ENV = re.compile(r"^\s*(ENV|ARG)\s+(.*)$", re.IGNORECASE | re.DOTALL)


def _assignments(line: str, env: dict[str, str]) -> None:
    """Record a shell assignment (``NAME=value``, ``export NAME=value``) in ``env``."""
    m = _ASSIGN.match(line)
    if m:
        try:
            words = shlex.split(m.group(2), comments=True)
        except ValueError:
            return
        value = words[0] if words else ""
        env[m.group(1)] = expand_vars(value, env)[0]


@dataclass
class DockerEnv:
    """The variables of one Dockerfile build stage.

    ``env`` (ENV) is what the running container sees; ``args`` (ARG) exist only while building.
    ENV values are expanded at build time from both. ARGs declared before the first FROM are
    visible in a stage only when it declares them again (``ARG NAME``).
    Rule source: Dockerfile reference, ENV / ARG / "Environment replacement" / "Understand how
    ARG and FROM interact".
    """

    env: dict = field(default_factory=dict)
    args: dict = field(default_factory=dict)
    global_args: dict = field(default_factory=dict)
    in_stage: bool = False

    def build(self) -> dict:
        return {**self.args, **self.env}

    def new_stage(self) -> None:
        self.env, self.args, self.in_stage = {}, {}, True

    def instruction(self, text: str) -> bool:
        """Apply an ENV/ARG line; False when ``text`` is neither."""
        m = _DOCKER_ENV.match(text)
        if not m:
            return False
        try:
            words = shlex.split(m.group(2), comments=True)
        except ValueError:
            return True
        is_env = m.group(1).upper() == "ENV"
        target = self.env if is_env else (self.args if self.in_stage else self.global_args)
        if is_env and len(words) >= 2 and "=" not in words[0]:  # legacy `ENV NAME value`
            target[words[0]] = expand_vars(" ".join(words[1:]), self.build())[0]
            return True
        for w in words:
            if "=" in w:
                k, v = w.split("=", 1)
                target[k] = expand_vars(v, self.build() if self.in_stage else self.global_args)[0]
            elif not is_env and self.in_stage and w in self.global_args:
                self.args[w] = self.global_args[w]  # `ARG NAME` re-declares a global ARG
        return True

    def notes(self) -> dict:
        """$NAME -> why it is unset in the running container (a build-only ARG)."""
        return {
            k: f"${k} is a build argument (ARG): the running container sees only ENV variables"
            for k in self.args
            if k not in self.env
        }


# ---------------------------------------------------------------------------------------------
# Finding `vllm serve` in argument vectors and text
# ---------------------------------------------------------------------------------------------

_API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)
_VLLM_OPENAI_IMAGE = re.compile(r"/vllm-openai([:@]|$)|^vllm-openai[:@]")
# Container images whose entrypoint is `vllm serve` (vLLM's published image and a plain
# ".../vllm:TAG"), so a container with only args passes them to `vllm serve`.
_VLLM_IMAGE = re.compile(r"vllm-openai|(^|/)vllm([:@]|$)", re.IGNORECASE)
_SHELLS = ("sh", "bash", "dash", "zsh", "ash")


def _is_operator(word: str) -> bool:
    return bool(word) and all(c in "();<>|&" for c in word)


def find_serve(words: list[str]) -> tuple[int, str] | None:
    """Where the `vllm serve` arguments start in an argv, and the entry point.

    Returns:
        (index of the first argument, "serve" or "api_server"), or None.
    """
    for i, w in enumerate(words):
        base = w.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return i + 2, "serve"
        if w == "-m" and i + 1 < len(words):
            mod = words[i + 1]
            if mod in _API_SERVER_MODULES:
                return i + 2, "api_server"
            if mod == "vllm.entrypoints.cli.main" and i + 2 < len(words) and words[i + 2] == "serve":
                return i + 3, "serve"
    # `docker run [options] vllm/vllm-openai:TAG [args]`: the image's entrypoint is `vllm serve`
    for i, w in enumerate(words[:-1]):
        if w.rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl") and words[i + 1] == "run":
            for j in range(i + 2, len(words)):
                if _is_operator(words[j]):
                    break
                if _VLLM_OPENAI_IMAGE.search(words[j]) and not words[j].startswith("-"):
                    return j + 1, "serve"
    return None


def _cut_at_operator(words: list[str], lines: list[int | None]) -> tuple[list[str], list[int | None]]:
    """The words before the first shell operator (``>``, ``2>&1`` after _split_shell, ``|``,
    ``;``, ``&&`` ...): a redirection or the next command ends the argument list."""
    for j, w in enumerate(words):
        if _is_operator(w):
            return words[:j], lines[:j]
    return words, lines


_ASSIGN_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_PREFIX_COMMANDS = ("exec", "env", "nohup", "command", "time", "sudo")


def _command_env(words: list[str], start: int) -> dict[str, str]:
    """``NAME=value`` words in front of the command whose arguments start at ``start``
    (``VLLM_X=1 vllm serve``, ``env VLLM_X=1 exec vllm serve``): the environment that one process
    gets on top of the shell's. Rule source: POSIX shell "Simple Commands" (variable assignments
    before the command name are exported to it)."""
    j = start - 1
    while j >= 0 and not (
        words[j].rsplit("/", 1)[-1] == "vllm" or words[j].rsplit("/", 1)[-1].startswith("python")
    ):
        j -= 1
    env: dict[str, str] = {}
    j -= 1
    while j >= 0 and not _is_operator(words[j]):
        m = _ASSIGN_WORD.match(words[j])
        if m:
            env.setdefault(m.group(1), m.group(2))
        elif words[j] not in _PREFIX_COMMANDS:
            break
        j -= 1
    return env


def _locate(words: list[str], lines: list[str], first: int, last: int) -> list[int]:
    """1-based line of each word, searching forward through physical lines first..last (0-based)."""
    out: list[int] = []
    li, col = first, 0
    for w in words:
        needle = w[:60] if w else w
        found = None
        if needle:
            for j in range(li, min(last, len(lines) - 1) + 1):
                pos = lines[j].find(needle, col if j == li else 0)
                if pos >= 0:
                    found = (j, pos)
                    break
        if found:
            li, col = found[0], found[1] + len(needle)
        out.append(li + 1)
    return out


_INLINE_COMMENT = re.compile(r"`\s*#[^`]*`|\$\(\s*#[^)]*\)")
_FD_REDIRECT = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[;&|]))[0-9]+(?=[<>])")


def _split_shell(text: str) -> list[str]:
    """Words and operators of a shell line, as sh would split them: a `` `# comment` `` or
    ``$(# comment)`` (a comment inside a continued command) expands to nothing, and the file
    descriptor of a redirection (``2>&1``) belongs to the operator, not to the arguments."""
    text = _INLINE_COMMENT.sub(" ", text)
    text = _FD_REDIRECT.sub("", text)
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


@dataclass
class Invocation:
    """A `vllm serve` call found somewhere: its arguments, their lines, the variables set
    before it, and where it starts.

    ``syntax`` says how the platform expands variables in ``words`` (see expand_word) and
    ``env`` holds the values it uses; ``notes`` says why a name is unset at runtime;
    ``issues`` are (check id, line, key, message, hint) errors found while reading the call.
    """

    words: list[str]
    lines: list[int | None]
    line: int
    entry: str  # "serve" or "api_server"
    env: dict[str, str] = field(default_factory=dict)
    syntax: str = "shell"
    notes: dict[str, str] = field(default_factory=dict)
    issues: list = field(default_factory=list)
    process_env: dict[str, str] = field(default_factory=dict)  # NAME=value words before the command
    runtime: frozenset[str] | None = None  # k8s: names set to values kvplan cannot read (expand_word)


def serve_calls_in_argv(
    words: list[str],
    lines: list[int | None],
    line: int,
    *,
    implicit: bool = False,
    env: dict[str, str] | None = None,
    raw: list[str] | None = None,
    spans: list[tuple[int, int] | None] | None = None,
    syntax: str = "shell",
    argv_env: dict[str, str] | None = None,
    notes: dict[str, str] | None = None,
    runtime: frozenset[str] | None = None,
) -> list[Invocation]:
    """`vllm serve` calls in one argv (a k8s/compose command, a Dockerfile exec form, a shell
    line).

    Args:
        words / lines: the argv and each word's 1-based line.
        implicit: the argv goes to an image whose entrypoint is `vllm serve` (vllm/vllm-openai).
        env: the variables the running process (and a ``sh -c`` script) sees.
        raw / spans: the file's lines and each word's (first, last) line, to place the words of
            an ``sh -c "script"`` on the lines they are written on.
        syntax: how the platform expands variables in the argv itself before starting it
            ("shell", "exec", "k8s", "compose"; see expand_word).
        argv_env: the values that expansion uses when they are not ``env`` (compose: .env).
        notes: $NAME -> why it is unset at runtime, for messages.
        runtime: k8s: names the pod sets to values kvplan cannot read (see expand_word).

    Kubernetes expands ``$(NAME)`` in a ``sh -c`` script before the shell runs it (so the
    shell never sees ``$(NAME)`` of a defined name); a ``$(NAME)`` left in the script (an
    undefined name, or ``$$(NAME)``) is a command substitution for the shell: its output is
    unknown to kvplan.
    """
    env = dict(env or {})
    direct_env = dict(argv_env) if argv_env is not None else env
    notes = dict(notes or {})
    found = find_serve(words)
    if found is not None:
        start, entry = found
        args, arg_lines = _cut_at_operator(words[start:], lines[start:])
        inv = Invocation(args, arg_lines, lines[start - 1] or line, entry, direct_env, syntax, notes, runtime=runtime)
        if syntax == "shell":
            inv.process_env = _command_env(words, start)
        return [inv]
    for i, w in enumerate(words[:-1]):
        if w == "-c" and i > 0 and words[i - 1].rsplit("/", 1)[-1] in _SHELLS:
            script = words[i + 1]
            shell_env = env
            if syntax == "compose":  # compose rewrites the script before the shell sees it
                script, missing, _ = expand_word(script, "compose", direct_env)
                shell_env = {k: v for k, v in env.items() if k not in missing}
                for name in missing:
                    notes.setdefault(name, _COMPOSE_NOTE.format(name=name))
            elif syntax == "k8s":
                script, shell_env = _k8s_script(script, direct_env, runtime, notes)
            item_line = lines[i + 1] if lines[i + 1] is not None else line
            out = []
            for inv in serve_calls_in_text(script.split("\n"), shell_env)[0]:
                span = spans[i + 1] if spans else None
                if raw is not None and span is not None:
                    wl: list[int | None] = list(_locate(inv.words, raw, span[0] - 1, span[1] - 1))
                else:
                    wl = [item_line] * len(inv.words)
                out.append(
                    Invocation(inv.words, wl, wl[0] if wl and wl[0] else item_line, inv.entry, inv.env, "shell", notes,
                               process_env=inv.process_env)
                )
            return out
    if implicit and words:
        return [Invocation(list(words), list(lines), lines[0] or line, "serve", direct_env, syntax, notes, runtime=runtime)]
    return []


_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_PAREN_NAME = re.compile(r"\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _k8s_script(
    script: str, env: dict[str, str], runtime: frozenset[str] | None, notes: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """A ``sh -c`` script of a Kubernetes container as the shell gets it, and the variables the
    shell sees (the container's env).

    Kubernetes first replaces ``$(NAME)`` of a name in the container's env by its value and
    ``$$`` by ``$``; the rest is left as it is. What the shell then reads as ``$(NAME)`` (an
    undefined name, or an escaped ``$$(NAME)``) is a command substitution; a name the pod sets
    from ``valueFrom``/``envFrom`` has a value kvplan cannot read. Both are written ``${NAME}``
    for the shell parser, with NAME out of the shell's variables and a note saying why, so
    they come out unresolved (not split at the parenthesis).

    Rule source: Kubernetes "Define a command and arguments for a container" / "Define
    dependent environment variables" (``$(VAR)``, ``$$`` escape, undefined references kept).
    """
    out: list[str] = []
    hidden: set[str] = set()
    pos = 0
    for m in _K8S_REF.finditer(script):
        if m.start() < pos:  # the $(NAME) of a $$(NAME), already written
            continue
        out.append(script[pos : m.start()])
        pos = m.end()
        if m.group(0) == "$$":
            nxt = _PAREN_NAME.match(script, m.end())
            out.append("$")
            if nxt is not None:  # $$(NAME): the shell runs NAME as a command
                name = nxt.group(1)
                out.append("{" + name + "}")
                pos = nxt.end()
                hidden.add(name)
                notes.setdefault(name, f"$$({name}) reaches the shell as $({name}), which runs `{name}` as a command")
            continue
        name = m.group(1)
        if name in env:
            out.append(env[name])
            continue
        out.append("${" + name + "}")
        hidden.add(name)
        if runtime is not None and name in runtime:
            notes.setdefault(name, f"$({name}) comes from the container's env valueFrom, which kvplan cannot read")
        elif runtime is not None and "*" in runtime:
            notes.setdefault(name, f"$({name}) is not in the container's env; it may come from envFrom, which kvplan does not read")
        else:
            notes.setdefault(
                name,
                f"$({name}) is not in the container's env: Kubernetes leaves it as it is and the shell runs "
                f"`{name}` as a command",
            )
    out.append(script[pos:])
    return "".join(out), {k: v for k, v in env.items() if k not in hidden}


_COMPOSE_NOTE = (
    "docker compose substitutes ${{{name}}} from the shell or the .env file where it runs, not from "
    "the service's environment:, and kvplan finds no .env value for it"
)


_DOCKER_EXEC = re.compile(r"^\s*(CMD|ENTRYPOINT|RUN)\s+(\[.*\])\s*$", re.IGNORECASE | re.DOTALL)
_DOCKER_SHELL = re.compile(r"^\s*(CMD|ENTRYPOINT)\s+(.*)$", re.IGNORECASE | re.DOTALL)
_DOCKER_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE)


def _logical_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first, last, text) of each logical line (0-based): backslash-newline joins lines."""
    out = []
    i, n = 0, len(lines)
    while i < n:
        first = i
        text = lines[i]
        while text.endswith("\\") and (len(text) - len(text.rstrip("\\"))) % 2 == 1 and i + 1 < n:
            i += 1
            text = text[:-1] + lines[i]
        out.append((first, i, text))
        i += 1
    return out


def serve_calls_in_text(
    lines: list[str], env: dict[str, str], *, dockerfile: bool = False, problems: list | None = None
):
    """Every `vllm serve` call in a text file (shell, Dockerfile, CI YAML, Markdown).

    Lines are joined at backslash-newline; a quoted string left open continues onto the next
    lines (up to _MAX_QUOTE_LINES); words are split with shlex (shell operators end a command).
    Dockerfiles: exec-form (JSON) CMD/ENTRYPOINT are combined as Docker does; a ``vllm/vllm-openai``
    base image without ENTRYPOINT runs CMD as `vllm serve` arguments. Variables follow Docker:
    the exec form expands none; the shell form of CMD/ENTRYPOINT is expanded by ``/bin/sh`` in
    the running container, from ENV (not ARG); each FROM starts a stage with its own variables.

    Returns:
        (invocations, env): ``env`` holds the variables assigned in the file (a Dockerfile's
        last stage ENV). A `vllm` line that cannot be split (a quote never closed) is appended
        to ``problems`` as (line, message).
    """
    calls: list[Invocation] = []
    entry_cmd: dict[str, tuple[list[str], list[int | None], int, bool]] = {}
    base_image = ""
    denv = DockerEnv()
    logical = _logical_lines(lines)
    k = 0
    while k < len(logical):
        first, last, text = logical[k]
        k += 1
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if dockerfile:
            m = _DOCKER_FROM.match(text)
            if m:
                base_image = expand_vars(m.group(1), denv.global_args)[0]
                entry_cmd.clear()
                denv.new_stage()
                continue
            if denv.instruction(text):
                continue
            m = _DOCKER_EXEC.match(text)
            if m:
                try:
                    words = json.loads(m.group(2))
                except ValueError:
                    words = None
                if isinstance(words, list) and all(isinstance(w, str) for w in words):
                    kind = m.group(1).upper()
                    wl: list[int | None] = list(_locate(words, lines, first, last))
                    if kind == "RUN":  # at build time: a `sh -c` inside sees ARG and ENV
                        calls += serve_calls_in_argv(words, wl, first + 1, env=denv.build(), syntax="exec")
                    else:
                        entry_cmd[kind] = (words, wl, first + 1, False)
                    continue
            m = _DOCKER_SHELL.match(text)
            if m:
                try:
                    words = _split_shell(m.group(2))
                except ValueError:
                    continue
                entry_cmd[m.group(1).upper()] = (words, list(_locate(words, lines, first, last)), first + 1, True)
                continue
        else:
            _assignments(text, env)
        if "vllm" not in text and "api_server" not in text:
            continue
        words = None
        while True:
            try:
                words = _split_shell(text)
                break
            except ValueError:
                if k >= len(logical) or last - first >= _MAX_QUOTE_LINES:
                    break
                _, last, more = logical[k]
                k += 1
                text = text + "\n" + more
        if words is None:
            if problems is not None and re.search(r"\bvllm\b.*\bserve\b|api_server", text):
                problems.append((first + 1, "cannot split this `vllm serve` command: a quote is never closed"))
            continue
        line_env = denv.build() if dockerfile else env  # a RUN line runs at build time
        calls += serve_calls_in_argv(words, list(_locate(words, lines, first, last)), first + 1, env=line_env)
    if dockerfile and entry_cmd:
        calls += _docker_entry_calls(entry_cmd, base_image, denv)
    return calls, (denv.env if dockerfile else env)


def _docker_entry_calls(entry_cmd: dict, base_image: str, denv: DockerEnv) -> list[Invocation]:
    """The `vllm serve` call a Dockerfile's last ENTRYPOINT and CMD make (Dockerfile reference,
    "Understand how CMD and ENTRYPOINT interact"): a shell-form ENTRYPOINT ignores CMD; an
    exec-form ENTRYPOINT (the vLLM image's is ``["vllm", "serve"]``) gets CMD as arguments, and
    a shell-form CMD arrives there as ``/bin/sh -c "<CMD>"``."""
    ent = entry_cmd.get("ENTRYPOINT")
    cmd = entry_cmd.get("CMD")
    implicit = ent is None and bool(_VLLM_IMAGE.search(base_image))
    notes = denv.notes()
    issues = []
    if ent and ent[3]:
        words, wl, syntax = ent[0], ent[1], "shell"  # shell-form ENTRYPOINT ignores CMD
    elif cmd and cmd[3] and (ent is not None or implicit):
        # `/bin/sh -c` is not run: its words would be arguments of the exec-form ENTRYPOINT.
        words, wl, syntax = list((ent[0] if ent else []) + cmd[0]), list((ent[1] if ent else []) + cmd[1]), "shell"
        issues.append(
            (
                INVALID_VALUE,
                cmd[2],
                "CMD",
                "shell-form CMD after an exec-form ENTRYPOINT"
                + ("" if ent else f" (the {base_image} image's `vllm serve`)")
                + ": Docker appends `/bin/sh -c '...'` to the ENTRYPOINT, so `vllm serve` gets '/bin/sh' "
                "as the model and exits",
                'write CMD in exec (JSON) form: CMD ["--model", "...", "--max-model-len", "..."]',
            )
        )
    else:
        words, wl = [], []
        for part in (ent, cmd):
            if part:
                words += part[0]
                wl += part[1]
        syntax = "shell" if (ent is None and cmd and cmd[3]) else "exec"
    line = (ent or cmd)[2]  # type: ignore[index]
    calls = serve_calls_in_argv(words, wl, line, implicit=implicit, env=denv.env, syntax=syntax, notes=notes)
    for inv in calls:
        inv.issues += issues
    return calls


# ---------------------------------------------------------------------------------------------
# Extracting deployments from each kind of file
# ---------------------------------------------------------------------------------------------

# Switches whose vLLM 0.26.0 default is on (config/cache.py enable_prefix_caching,
# config/scheduler.py enable_chunked_prefill / async_scheduling=None -> auto, config/load.py
# use_tqdm_on_load, cli_args.py enable_log_deltas / enable_flash_late_interaction): `key: false`
# in a --config file is dropped by vLLM's loader, so it does not turn them off.
_DEFAULT_ON_0_26_0 = frozenset(
    {
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "async-scheduling",
        "use-tqdm-on-load",
        "enable-log-deltas",
        "enable-flash-late-interaction",
    }
)


def _inline_config_file(dep: Deployment, toks: list[Tok], base_dir: Path, cat: FlagCatalogue) -> list[Tok]:
    """The arguments with ``--config FILE`` replaced by the flags of FILE, placed before the
    command line's own so that those win, as vLLM 0.26.0 does (utils/argparse_utils.py
    _pull_args_from_config: cli > config > defaults; load_config_file). FILE is looked for next
    to the script (``base_dir``), then in the working directory. Findings on its keys are
    reported in FILE (FileLine). An unreadable FILE is an error at --config (vLLM exits)."""
    idx = next((i for i, t in enumerate(toks) if t.text == "--config" or t.text.startswith("--config=")), None)
    if idx is None:
        return toks
    t = toks[idx]
    if t.text == "--config":
        if idx + 1 >= len(toks):
            return toks  # parse_serve_args reports the missing value
        value_tok, n = toks[idx + 1], 2
    else:
        value_tok, n = Tok(t.text.split("=", 1)[1], t.line, unresolved=t.unresolved, literal=t.literal), 1
    if value_tok.unresolved or value_tok.literal:
        return toks  # a $VARIABLE path: the flags in it cannot be seen (reported as unresolved)
    rest = toks[:idx] + toks[idx + n :]
    raw_path = value_tok.text

    def refuse(message: str) -> list[Tok]:
        dep.diag(INVALID_VALUE, "error", f"--config {raw_path}: {message}", line=t.line, key="--config")
        dep.invalid.add("model")  # vLLM stops at the file: no second finding about the model
        return rest

    p = Path(raw_path)
    candidates = [p] if p.is_absolute() else [base_dir / p, Path.cwd() / p]
    found = next((c for c in candidates if c.exists() or c.is_symlink()), None)
    # fresh-eyes-5 H4: a file outside the repository (or working directory) is never read,
    # so a PR cannot have CI echo values of /home/runner/secrets.yaml into annotations
    outside = outside_boundary(found if found is not None else candidates[0], base_dir, raw_path)
    if outside is not None and (found is not None or all(outside_boundary(c, base_dir, raw_path) for c in candidates)):
        dep.diag(INVALID_VALUE, "error", f"--config {outside[0]}", line=t.line, key="--config", hint=outside[1])
        dep.invalid.add("model")
        return rest
    if found is None:
        where = " or ".join(dict.fromkeys(_display_path(str(c.parent)) or "." for c in candidates))
        return refuse(f"no such file (looked in {where}); `vllm serve` exits ('Unable to read the config file')")
    if found.suffix.lower() not in (".yaml", ".yml"):
        return refuse("vLLM reads a --config file only when its name ends in .yaml or .yml; `vllm serve` exits")
    shown = _display_path(str(found))
    try:
        text = read_text(found)
        docs = load_yaml(text)
    except InputError as exc:
        return refuse(f"{shown}{':' + str(exc.line) if exc.line else ''}: {exc.message}; `vllm serve` exits")
    mappings = [d for d in docs if d.data is not None]
    if len(mappings) != 1 or not isinstance(mappings[0].data, dict):
        return refuse(f"{shown} must be one YAML mapping of `vllm serve` flags; it {describe_yaml(docs)}")
    doc = mappings[0]
    dups = duplicate_top_keys(text)
    _warn_duplicate_keys(dep, doc, dups[0] if dups else (), lambda line: FileLine(line, shown))
    data = dict(doc.data)
    if "kvplan" in data:
        kline = FileLine(doc.lines.get(("kvplan",), doc.line), shown)
        dep.diag(
            KVPLAN_KEY_IN_VLLM_CONFIG,
            "warning",
            "vLLM's --config loader turns every top-level key into a flag, and `vllm serve` 0.26.0 "
            "exits with 'unrecognized arguments: --kvplan'",
            line=kline,
            key="kvplan",
            hint="strip the kvplan block before deploying, or move the targets to kvplan.yaml",
        )
        _targets_from_mapping(dep, data.pop("kvplan"), lambda k: FileLine(doc.lines.get(("kvplan", k), kline), shown), "kvplan.", kline)
    cfg = config_tokens(dep, data, lambda k: FileLine(doc.lines.get((k,), doc.line), shown), cat)
    return cfg + rest


def deployment_from_invocation(
    inv: Invocation, file: str, name: str, kind: str, cat: FlagCatalogue, *, base_dir: Path | None = None
) -> Deployment:
    """A Deployment from one `vllm serve` call (variables expanded from the call's env).

    ``base_dir``: the directory of the script, where a ``--config FILE`` is looked for first
    (then the working directory); None leaves --config unread (a path inside a container)."""
    dep = Deployment(name=name, file=file, line=inv.line, kind=kind)
    dep.literal_reason = LITERAL_REASONS.get(inv.syntax, "")
    dep.var_notes = dict(inv.notes)
    dep.process_env = dict(inv.process_env)
    for check_id, line, key, message, hint in inv.issues:
        dep.diag(check_id, "error", message, line=line, key=key, hint=hint)
    toks = expand_tokens(list(zip(inv.words, inv.lines)), inv.env, inv.syntax, inv.runtime)
    if base_dir is not None:
        toks = _inline_config_file(dep, toks, base_dir, cat)
    parse_serve_args(dep, toks, cat, positional_model=inv.entry == "serve")
    return dep


def config_tokens(dep: Deployment, mapping: dict, lines_of, cat: FlagCatalogue, key_prefix: str = "") -> list[Tok]:
    """A --config YAML mapping as `vllm serve` tokens, the way vLLM 0.26.0
    utils/argparse_utils.py load_config_file builds them (true -> bare flag, false -> nothing,
    list -> values, mapping -> JSON, other -> str(value), so null -> "None"); ``lines_of(key)``
    gives a key's line.

    A value whose YAML type the flag cannot take (a list for a one-value flag, anything but
    true/false for a switch, null where vLLM reads "None" as text) is reported at its key as an
    invalid-value error and left out (the flag goes into ``dep.invalid``), so nothing is
    evaluated with a stray word of it; ``model: null`` sets ``dep.model_null_line``.
    """
    toks: list[Tok] = []
    for raw_key, value in mapping.items():
        k = str(raw_key)
        line = lines_of(k)
        shown = key_prefix + k
        m = cat.resolve("--" + k)
        known = m.status in ("ok", "abbreviation") and m.dotted is None
        if isinstance(value, bool):
            if value:
                toks.append(Tok("--" + k, line, key=shown))
            else:
                if m.flag in _DEFAULT_ON_0_26_0 and not m.negated:
                    dep.diag(
                        FALSE_DROPPED,
                        "warning",
                        f"vLLM's --config loader drops `false`, so --{m.flag} stays on (its default)",
                        line=line,
                        key=shown,
                        hint=f"write `no-{m.flag}: true` to turn it off",
                    )
                elif m.status in ("unknown", "ambiguous", "removed"):
                    toks.append(Tok("--" + k, line, key=shown))  # still report the unknown key
            continue
        if known:
            problem = _config_value_problem(m.flag, m.arity, value, k, cat)
            if problem == "model-null":
                dep.model_null_line, dep.model_key = line, shown
                continue
            if problem == "unset":
                continue
            if problem is not None:
                dep.diag(INVALID_VALUE, "error", problem, line=line, key=shown)
                dep.invalid.add(m.flag)
                continue
        if isinstance(value, list):
            if value:
                toks.append(Tok("--" + k, line, key=shown))
                toks += [Tok(str(v), line, value_of=shown) for v in value]
            continue
        if isinstance(value, dict):
            toks += [Tok("--" + k, line, key=shown), Tok(json.dumps(value, default=str), line, value_of=shown)]
            continue
        toks += [Tok("--" + k, line, key=shown), Tok(str(value), line, value_of=shown)]
    return toks


def _yaml_shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str, separators=(", ", ": "))
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def _config_value_problem(flag: str, arity: str, value: Any, key: str, cat: FlagCatalogue) -> str | None:
    """Why a --config value of this YAML type cannot be what the flag means (a message), or
    "model-null" / "unset" for a null vLLM reads as no model / as the flag's default, or None.

    Rule source: vLLM 0.26.0 utils/argparse_utils.py load_config_file (the tokens it builds),
    engine/arg_utils.py optional_type ("None" -> None only for flags typed ``X | None``).
    """
    if isinstance(value, bool):
        return None
    switch = arity in ("bool", "negatable")
    if value is None:
        if flag == "model":
            return "model-null"
        if flag in cat.none_is_unset:
            return "unset"
        if switch:
            return (
                f"--{flag} is a switch: null is neither true nor false; vLLM's --config loader passes "
                f"`--{key} None` and `vllm serve` reads 'None' as another argument"
            )
        if flag in _READ_FLAGS:
            return (
                f"null: vLLM's --config loader passes the text 'None', which --{flag} does not accept; "
                "`vllm serve` exits"
            )
        return None
    if switch:
        words = " ".join(str(v) for v in value) if isinstance(value, list) else _yaml_shown(value)
        return (
            f"--{flag} is a switch: write true or false, not {_yaml_shown(value)} (vLLM's --config loader "
            f"passes `--{key} {words}` and `vllm serve` reads {words!r} as another argument)"
        )
    if isinstance(value, list) and value and arity != "list":
        words = " ".join(str(v) for v in value)
        return (
            f"--{flag} takes one value, got a list {_yaml_shown(value)}: vLLM's --config loader passes "
            f"`--{key} {words}`, which `vllm serve` cannot read"
        )
    return None


def _targets_from_mapping(dep: Deployment, block: Any, lines_of, key_prefix: str, line: int | None) -> None:
    if not isinstance(block, dict):
        dep.diag(INVALID_KVPLAN_KEY, "error", "must be a mapping (gpu, gpu_count, min_concurrency, ...)", line=line, key=key_prefix.rstrip("."))
        return
    for k, v in block.items():
        dep.set_target(str(k), v, lines_of(str(k)), key_prefix + str(k))


def _warn_duplicate_keys(dep, doc, duplicates, where) -> None:
    """One duplicate-flag warning per top-level key given twice in a --config YAML, naming both
    lines; the key's line becomes the last one (yaml.safe_load keeps the last value, and so does
    vLLM 0.26.0's load_config_file). ``where`` turns a line number into the finding's position."""
    for key, prev, line in duplicates:
        doc.lines[(key,)] = line
        dep.diag(
            DUPLICATE_FLAG,
            "warning",
            f"`{key}` is given twice in this YAML file (line {prev} and line {line}); vLLM's --config loader "
            f"(yaml.safe_load) silently keeps the last one, line {line}",
            line=where(line),
            key=key,
            hint=f"remove one of the two `{key}:` lines",
        )


def duplicate_top_keys(text: str) -> list[list[tuple[str, int, int]]]:
    """Per YAML document (the documents load_yaml returns, in order): each top-level key given
    again, as (key, previous line, line), 1-based. yaml.safe_load keeps the last value silently.

    Call only on text load_yaml has read (aliases are not expanded here)."""
    import yaml

    from kvplan.safe_io import _yaml_loader

    loader = _yaml_loader()(text)
    out: list[list[tuple[str, int, int]]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            dups: list[tuple[str, int, int]] = []
            if isinstance(node, yaml.MappingNode):
                seen: dict[str, int] = {}
                for k, _ in node.value:
                    if isinstance(k, yaml.ScalarNode):
                        line = k.start_mark.line + 1
                        if k.value in seen:
                            dups.append((k.value, seen[k.value], line))
                        seen[k.value] = line
            out.append(dups)
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return out


def deployment_from_config(
    doc: YamlDoc, file: str, cat: FlagCatalogue, *, name: str | None = None, duplicates=()
) -> Deployment:
    """The deployment described by a ``vllm serve --config`` YAML file (and its ``kvplan:`` block).

    ``duplicates``: (key, previous line, line) of top-level keys given twice (duplicate_top_keys);
    each is a duplicate-flag warning naming both lines, and the key's line becomes the last one
    (yaml.safe_load keeps the last value).

    Rule source: vLLM 0.26.0 utils/argparse_utils.py load_config_file / _pull_args_from_config.
    """
    data = dict(doc.data)
    dep = Deployment(name=name or file, file=file, line=doc.line, kind="vllm-config")
    _warn_duplicate_keys(dep, doc, duplicates, lambda line: line)
    block = data.pop("kvplan", None)
    if "kvplan" in doc.data:
        line = doc.lines.get(("kvplan",))
        dep.diag(
            KVPLAN_KEY_IN_VLLM_CONFIG,
            "warning",
            "vLLM's --config loader turns every top-level key into a flag, and `vllm serve` 0.26.0 "
            "exits with 'unrecognized arguments: --kvplan'",
            line=line,
            key="kvplan",
            hint="strip the kvplan block before deploying, or move the targets to kvplan.yaml",
        )
        _targets_from_mapping(dep, block, lambda k: doc.lines.get(("kvplan", k), line), "kvplan.", line)
    toks = config_tokens(dep, data, lambda k: doc.lines.get((k,), doc.line), cat)
    parse_serve_args(dep, toks, cat, positional_model=False)
    return dep


def _as_words(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return None


def _gpu_from_selectors(dep: Deployment, pod: dict, path: tuple, doc: YamlDoc, node_map: dict[str, dict[str, str]]) -> None:
    """Set dep's GPU from the pod's nodeSelector / required node affinity and kvplan.yaml's
    node_selectors mapping (or say what is unmapped in dep.gpu_hint)."""
    pairs: list[tuple[str, str, int | None, str]] = []
    sel = pod.get("nodeSelector")
    if isinstance(sel, dict):
        for k, v in sel.items():
            pairs.append((str(k), str(v), doc.line_of(path + ("nodeSelector", str(k))), f"nodeSelector.{k}"))
    try:
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    except (KeyError, TypeError):
        terms = None
    if isinstance(terms, list):
        for ti, term in enumerate(terms):
            for ei, expr in enumerate((term or {}).get("matchExpressions") or []):
                if isinstance(expr, dict) and expr.get("operator") == "In" and isinstance(expr.get("values"), list):
                    for v in expr["values"]:
                        p = path + ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", ti, "matchExpressions", ei)
                        pairs.append((str(expr.get("key")), str(v), doc.line_of(p), f"affinity matchExpressions {expr.get('key')}"))
    unmapped = []
    for label, value, line, key in pairs:
        gpu = (node_map.get(label) or {}).get(value)
        if gpu:
            dep.set_target("gpu", gpu, line, key)
            return
        if "gpu" in label.lower() or "accelerator" in label.lower() or "instance-type" in label:
            unmapped.append(f"{label}={value}")
    if unmapped:
        dep.gpu_hint = f"map {unmapped[0]} to a GPU profile under node_selectors in kvplan.yaml"


def _find_pod_specs(obj: Any, path: tuple, depth: int = 0):
    if depth > 12:
        return
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield path, obj
            return
        for k, v in obj.items():
            yield from _find_pod_specs(v, path + (str(k),), depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _find_pod_specs(v, path + (i,), depth + 1)


def _int_or_none(v: Any) -> int | None:
    try:
        return int(str(v))
    except (TypeError, ValueError):
        return None


def _k8s_non_strings(dep: Deployment, container: dict, cpath: tuple, doc: YamlDoc) -> None:
    """An invalid-value error for each item of the container's command/args that is not a
    string (an unquoted 4096, true, null): the Kubernetes API server refuses the manifest
    (Container.command and .args are []string), so the pod never starts.

    Rule source: Kubernetes core/v1 Container (command, args: []string)."""
    for part in ("command", "args"):
        items = container.get(part)
        for j, item in enumerate(items if isinstance(items, list) else []):
            if isinstance(item, str):
                continue
            what = "null" if item is None else type(item).__name__
            dep.diag(
                INVALID_VALUE,
                "error",
                f"{_yaml_shown(item)} is a YAML {what}, not a string; Kubernetes refuses the manifest "
                f"({part} must be a list of strings)",
                line=doc.lines.get(cpath + (part, j), doc.line_of(cpath)),
                key=f"{part}[{j}]",
                hint=f'quote it: "{item}"' if item is not None and not isinstance(item, (dict, list)) else None,
            )


def _k8s_env(container: dict, injected: dict[str, str | None] | None = None) -> tuple[dict[str, str], frozenset[str], dict[str, str]]:
    """The container's environment as Kubernetes builds it: (known values, names set to values
    kvplan cannot read, $NAME -> why).

    ``env`` entries in order, each ``value`` with ``$(NAME)`` of the entries above it expanded
    (``$$`` escapes); a ``valueFrom`` entry (secret, config map, field, resource) has a value
    known only in the cluster; ``envFrom`` may define any name ("*" in the second item).
    ``injected``: variables the controller adds (LeaderWorkerSet: LWS_GROUP_SIZE ...; None as a
    value: unknown). Rule source: Kubernetes core/v1 EnvVar ("Variable references $(VAR_NAME)
    are expanded using the previously defined environment variables in the container").
    """
    env: dict[str, str] = {}
    runtime: set[str] = set()
    notes: dict[str, str] = {}
    if container.get("envFrom"):  # read before env; env entries override them
        runtime.add("*")
    for name, value in (injected or {}).items():
        if value is None:
            runtime.add(name)
            notes[name] = f"${name} is set by the LeaderWorkerSet controller to a value kvplan cannot know"
        else:
            env[name] = value
    for e in container.get("env") or []:
        if not isinstance(e, dict) or "name" not in e:
            continue
        name = str(e["name"])
        if "value" in e:
            value = "" if e["value"] is None else str(e["value"])
            new, missing, _ = expand_word(value, "k8s", env, frozenset(runtime) if runtime else frozenset())
            if missing:  # refers to a value kvplan cannot read: so is this one
                env.pop(name, None)
                runtime.add(name)
                notes[name] = f"${name} is built from {', '.join('$(' + m + ')' for m in missing)}, which kvplan cannot read"
            else:
                env[name] = new
                runtime.discard(name)
        elif isinstance(e.get("valueFrom"), dict):
            env.pop(name, None)
            runtime.add(name)
            source = next(iter(e["valueFrom"]), "valueFrom")
            notes[name] = f"${name} comes from the container's env valueFrom ({source}), which kvplan cannot read"
        else:  # a name with no value: Kubernetes sets it to ""
            env[name] = ""
    return env, frozenset(runtime), notes


def _pod_gpus(pod: Any) -> int | None:
    """The ``nvidia.com/gpu`` count of a pod spec: its containers' limits (else requests), summed;
    None when no container asks for GPUs or a count is not an integer."""
    if not isinstance(pod, dict) or not isinstance(pod.get("containers"), list):
        return None
    total, seen = 0, False
    for c in pod["containers"]:
        res = c.get("resources") if isinstance(c, dict) and isinstance(c.get("resources"), dict) else {}
        for part in ("limits", "requests"):
            vals = res.get(part) if isinstance(res.get(part), dict) else {}
            if "nvidia.com/gpu" in vals:
                n = _int_or_none(vals["nvidia.com/gpu"])
                if n is None:
                    return None
                total, seen = total + n, True
                break
    return total if seen else None


@dataclass
class _LwsGroup:
    """A LeaderWorkerSet's group: ``size`` pods, the leader from ``leaderTemplate`` (or
    ``workerTemplate`` when there is none) and size - 1 workers from ``workerTemplate``.

    Rule source: LeaderWorkerSet API v1 (leaderworkerset.x-k8s.io/v1) LeaderWorkerTemplate
    (size, leaderTemplate, workerTemplate) and the env it adds to every container
    (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX); vLLM docs
    deployment/frameworks/lws.md (the leader runs `vllm serve` over a Ray cluster of the group).
    """

    size: int
    size_line: int | None
    leader_path: tuple  # path of the pod spec that the leader runs
    leader_gpus: int | None
    worker_gpus: int | None

    @property
    def gpus(self) -> int | None:
        if self.leader_gpus is None or (self.size > 1 and self.worker_gpus is None):
            return None
        return self.leader_gpus + (self.size - 1) * (self.worker_gpus or 0)

    def env(self, leader: bool) -> dict[str, str | None]:
        return {"LWS_LEADER_ADDRESS": None, "LWS_GROUP_SIZE": str(self.size), "LWS_WORKER_INDEX": "0" if leader else None}


def _lws_group(doc: YamlDoc) -> _LwsGroup | None:
    """The group of a LeaderWorkerSet document, or None for any other object."""
    data = doc.data
    if data.get("kind") != "LeaderWorkerSet" or not str(data.get("apiVersion", "")).startswith("leaderworkerset.x-k8s.io/"):
        return None
    lwt = (data.get("spec") or {}).get("leaderWorkerTemplate") if isinstance(data.get("spec"), dict) else None
    if not isinstance(lwt, dict):
        return None
    size = _int_or_none(lwt.get("size", 1))
    if size is None or size < 1:
        size = 1
    base = ("spec", "leaderWorkerTemplate")
    worker = (lwt.get("workerTemplate") or {}).get("spec") if isinstance(lwt.get("workerTemplate"), dict) else None
    leader = (lwt.get("leaderTemplate") or {}).get("spec") if isinstance(lwt.get("leaderTemplate"), dict) else None
    leader_path = base + (("leaderTemplate", "spec") if isinstance(leader, dict) else ("workerTemplate", "spec"))
    return _LwsGroup(
        size=size,
        size_line=doc.lines.get(base + ("size",)),
        leader_path=leader_path,
        leader_gpus=_pod_gpus(leader if isinstance(leader, dict) else worker),
        worker_gpus=_pod_gpus(worker),
    )


def k8s_deployments(docs: list[YamlDoc], file: str, raw: list[str], cat: FlagCatalogue, node_map: dict) -> list[Deployment]:
    """Deployments in Kubernetes objects: every container whose command/args run `vllm serve`
    (or whose image is vLLM's with only args), with its ``nvidia.com/gpu`` count and node selector.

    In a LeaderWorkerSet the leader's `vllm serve` runs over the whole group (vLLM's multi-node
    pattern: Ray across the pods), so its GPU count is the group's: the leader pod's GPUs plus
    size - 1 times a worker pod's (see _LwsGroup); ``dep.gpu_group`` keeps the per-pod count for
    a `vllm serve --nnodes N` that counts GPUs per node."""
    out: list[Deployment] = []
    for doc in docs:
        if not isinstance(doc.data, dict):
            continue
        obj_kind = doc.data.get("kind", "object")
        meta = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
        obj_name = meta.get("name", "?")
        group = _lws_group(doc)
        for path, pod in _find_pod_specs(doc.data, ()):
            is_leader = group is not None and path == group.leader_path
            lws = group
            for ci, c in enumerate(pod["containers"]):
                if not isinstance(c, dict):
                    continue
                cpath = path + ("containers", ci)
                cline = doc.line_of(cpath)
                cmd, args = _as_words(c.get("command")), _as_words(c.get("args"))
                if cmd is None or args is None:
                    continue
                words = cmd + args
                keys = [cpath + ("command", j) for j in range(len(cmd))] + [cpath + ("args", j) for j in range(len(args))]
                lines = [doc.lines.get(k, cline) for k in keys]
                spans = [doc.spans.get(k) for k in keys]
                env, runtime, notes = _k8s_env(c, injected=lws.env(is_leader) if lws else None)
                implicit = not cmd and bool(_VLLM_IMAGE.search(str(c.get("image", ""))))
                invs = serve_calls_in_argv(
                    words, lines, cline or doc.line, implicit=implicit, env=env, raw=raw, spans=spans, syntax="k8s",
                    notes=notes, runtime=runtime,
                )
                for n_inv, inv in enumerate(invs):
                    name = f"{obj_kind}/{obj_name} container {c.get('name', ci)}"
                    if lws is not None:
                        name = f"{obj_kind}/{obj_name} {'leader' if is_leader else 'worker'} container {c.get('name', ci)}"
                    dep = deployment_from_invocation(inv, file, name, "k8s", cat)
                    if n_inv == 0:
                        _k8s_non_strings(dep, c, cpath, doc)
                    res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
                    for part in ("limits", "requests"):
                        vals = res.get(part) if isinstance(res.get(part), dict) else {}
                        if "nvidia.com/gpu" in vals:
                            dep.gpu_count = _int_or_none(vals["nvidia.com/gpu"])
                            dep.gpu_count_line = doc.line_of(cpath + ("resources", part, "nvidia.com/gpu"))
                            dep.gpu_count_key = f"resources.{part}.nvidia.com/gpu"
                            break
                    if is_leader and group.gpus is not None and group.size > 1:
                        dep.gpu_group = (dep.gpu_count, group.size, group.leader_gpus, group.worker_gpus)
                        dep.gpu_count = group.gpus
                    _gpu_from_selectors(dep, pod, path, doc, node_map)
                    out.append(dep)
    return out


def compose_deployments(
    doc: YamlDoc, file: str, raw: list[str], cat: FlagCatalogue, dotenv: dict[str, str] | None = None,
    problems: list[tuple[int | None, str, str]] | None = None,
) -> list[Deployment]:
    """Deployments in a docker-compose file: services whose entrypoint/command run `vllm serve`
    (the vllm/vllm-openai image's entrypoint is `vllm serve`), with their reserved GPU count.

    ``${VAR}`` in entrypoint/command is compose's interpolation from ``dotenv`` (the .env file
    next to the compose file), not the service's ``environment:``; no shell runs the command
    unless it is ``sh -c``, which sees ``environment:``.

    ``problems`` receives (line, key, message) for an entrypoint/command that compose refuses
    whatever it runs (a mapping, a number)."""
    out: list[Deployment] = []
    services = doc.data.get("services") or {}
    for sname, svc in services.items():
        if not isinstance(svc, dict):
            continue
        spath = ("services", str(sname))
        sline = doc.line_of(spath)
        env: dict[str, str] = {}
        envs = svc.get("environment")
        if isinstance(envs, dict):
            env = {str(k): str(v) for k, v in envs.items() if v is not None}
        elif isinstance(envs, list):
            env = dict(str(e).split("=", 1) for e in envs if "=" in str(e))
        words: list[str] = []
        lines: list[int | None] = []
        spans: list[tuple[int, int] | None] = []
        for part in ("entrypoint", "command"):
            v = svc.get(part)
            if isinstance(v, str):
                try:
                    ws = shlex.split(v)
                except ValueError as exc:
                    out_dep = Deployment(name=f"service {sname}", file=file, line=doc.line_of(spath + (part,)), kind="compose")
                    out_dep.diag(INVALID_VALUE, "error", f"cannot split the {part} string: {exc}", key=f"services.{sname}.{part}")
                    out.append(out_dep)
                    ws = []
                span = doc.spans.get(spath + (part,)) or (doc.line_of(spath + (part,)),) * 2
                words += ws
                lines += _locate(ws, raw, span[0] - 1, span[1] - 1)
                spans += [span] * len(ws)
            elif v is not None and not isinstance(v, list):
                # compose's schema: entrypoint/command is a string or a list of strings; `docker
                # compose` refuses the file otherwise
                if problems is not None:
                    problems.append((doc.line_of(spath + (part,)), f"services.{sname}.{part}",
                                     f"{_yaml_shown(v)} is not a string or a list; docker compose refuses the file"))
            elif isinstance(v, list):
                for j, w in enumerate(v):
                    words.append(str(w))
                    lines.append(doc.lines.get(spath + (part, j), sline))
                    spans.append(doc.spans.get(spath + (part, j)))
        implicit = svc.get("entrypoint") is None and bool(_VLLM_IMAGE.search(str(svc.get("image", ""))))
        notes = {}
        for m in _SHELL_REF.finditer(" ".join(words)):
            name = m.group(1) or m.group(2)
            notes[name] = _COMPOSE_NOTE.format(name=name)
        invs = serve_calls_in_argv(
            words, lines, sline or doc.line, implicit=implicit, env=env, raw=raw, spans=spans,
            syntax="compose", argv_env=dotenv or {}, notes=notes,
        )
        for inv in invs:
            dep = deployment_from_invocation(inv, file, f"service {sname}", "compose", cat)
            try:
                devices = svc["deploy"]["resources"]["reservations"]["devices"]
            except (KeyError, TypeError):
                devices = None
            if isinstance(devices, list):
                for di, d in enumerate(devices):
                    if isinstance(d, dict) and ("gpu" in (d.get("capabilities") or []) or d.get("driver") == "nvidia"):
                        dpath = spath + ("deploy", "resources", "reservations", "devices", di)
                        if isinstance(d.get("device_ids"), list):
                            dep.gpu_count = len(d["device_ids"])
                            dep.gpu_count_line = doc.line_of(dpath + ("device_ids",))
                            dep.gpu_count_key = f"services.{sname}.deploy.resources.reservations.devices[{di}].device_ids"
                        elif _int_or_none(d.get("count")) is not None:
                            dep.gpu_count = _int_or_none(d.get("count"))
                            dep.gpu_count_line = doc.line_of(dpath + ("count",))
                            dep.gpu_count_key = f"services.{sname}.deploy.resources.reservations.devices[{di}].count"
                        break
            out.append(dep)
    return out


def _looks_like_vllm_config(data: dict, cat: FlagCatalogue) -> bool:
    if not data:
        return False
    known = 0
    for k in data:
        if not isinstance(k, str):
            continue
        if k in ("model", "kvplan"):
            known += 1
            continue
        m = cat.resolve("--" + k)
        if m.status in ("ok", "abbreviation", "removed"):
            known += 1
    return known >= max(1, len(data) / 2)


def yaml_doc_kind(data: Any, cat: FlagCatalogue) -> str | None:
    """What one YAML document is: "k8s" (``apiVersion`` and ``kind``), "compose" (a
    ``services`` mapping), "vllm-config" (a mapping whose keys are mostly `vllm serve` flags),
    "manifest" (only ``deployments``/``node_selectors``), or None (none of these)."""
    if not isinstance(data, dict):
        return None
    if "apiVersion" in data and "kind" in data:
        return "k8s"
    if isinstance(data.get("services"), dict):
        return "compose"
    if _looks_like_vllm_config(data, cat):
        return "vllm-config"
    if isinstance(data.get("deployments"), list) and set(data) <= {"deployments", "node_selectors"}:
        return "manifest"
    return None


def detect_kind(path: Path, docs: list[YamlDoc] | None, cat: FlagCatalogue) -> str:
    """The file's kind: "manifest", "dockerfile", "command" (text scan), or for YAML the kinds
    of its documents joined with "+" ("k8s", "vllm-config", "compose", "k8s+vllm-config").

    YAML files (``.yaml``/``.yml``) are read document by document (see yaml_doc_kind); empty
    documents (a stray ``---``) are skipped; ``kvplan.yaml`` is the manifest; a file with no
    recognised document is searched as text for `vllm serve` lines ("command")."""
    name = path.name.lower()
    if docs is not None:
        if name in ("kvplan.yaml", "kvplan.yml"):
            return "manifest"
        kinds = [yaml_doc_kind(d.data, cat) for d in docs]
        found = [k for k in kinds if k is not None]
        if found == ["manifest"] and sum(d.data is not None for d in docs) == 1:
            return "manifest"
        found = list(dict.fromkeys(k for k in found if k != "manifest"))
        return "+".join(found) if found else "command"
    if name.startswith(("dockerfile", "containerfile")) or name.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    return "command"


def _separator_line(raw: list[str], doc: YamlDoc) -> int:
    """The line of the ``---`` that starts ``doc`` (searching up from its first line)."""
    for no in range(min(doc.line, len(raw)), 0, -1):
        if raw[no - 1].startswith("---"):
            return no
    return doc.line


def multiple_documents_problem(docs: list[YamlDoc], raw: list[str]) -> tuple[int, str, str] | None:
    """(line, message, hint) when a vLLM --config file holds more than one YAML document: vLLM
    0.26.0 reads it with ``yaml.safe_load`` (utils/argparse_utils.py load_config_file), which
    raises "expected a single document in the stream" even for an empty second document."""
    if len(docs) < 2:
        return None
    line = _separator_line(raw, docs[1])
    empty = all(d.data is None for d in docs[1:])
    message = (
        f"{len(docs)} YAML documents (the `---` on line {line} starts another): vLLM's --config loader "
        "reads one document with yaml.safe_load, so `vllm serve` exits with 'expected a single document "
        "in the stream'"
    )
    hint = f"delete the `---` on line {line}" if empty else "give each vLLM config its own file"
    return line, message, hint


def describe_yaml(docs: list[YamlDoc]) -> str:
    """What a YAML file holds, for a no-deployment message ("is empty", "holds a list" ...)."""
    data = [d.data for d in docs if d.data is not None]
    if not docs:
        return "is empty (no YAML document)"
    if not data:
        return "holds only an empty YAML document" if len(docs) == 1 else "holds only empty YAML documents"
    first = data[0]
    if isinstance(first, list):
        what = "a list, not a mapping (a vLLM --config file is one mapping of flags)"
    elif isinstance(first, dict):
        keys = ", ".join(str(k) for k in list(first)[:5]) + (", ..." if len(first) > 5 else "")
        what = (
            f"a mapping whose keys ({keys}) are not `vllm serve` flags, a Kubernetes object "
            "(apiVersion, kind), a compose file (services) or a kvplan.yaml (deployments)"
        )
    else:
        what = f"a single value ({type(first).__name__}), not a mapping"
    return f"holds {what}"


# ---------------------------------------------------------------------------------------------
# Evaluating a deployment
# ---------------------------------------------------------------------------------------------

# `vllm serve` flags -> (kvplan EngineArgs field, how vLLM 0.26.0 reads the value).
# (utils/argparse_utils.py human_readable_int[_or_auto]; argparse int/float; BooleanOptionalAction)
_ENGINE_FIELDS = {
    "tensor-parallel-size": ("tensor_parallel_size", int),
    "pipeline-parallel-size": ("pipeline_parallel_size", int),
    "max-model-len": ("max_model_len", parse_max_model_len),
    "gpu-memory-utilization": ("gpu_memory_utilization", float),
    "kv-cache-dtype": ("kv_cache_dtype", str),
    "block-size": ("block_size", int),
    "dtype": ("dtype", str),
    "quantization": ("quantization", str),
    "max-num-seqs": ("max_num_seqs", int),
    "max-num-batched-tokens": ("max_num_batched_tokens", parse_human_int),
    "enforce-eager": ("enforce_eager", bool),
    "kv-cache-memory-bytes": ("kv_cache_memory_bytes", parse_human_int),
    "enable-prefix-caching": ("enable_prefix_caching", bool),
    "disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", bool),
}
_OTHER_INT_FLAGS = ("data-parallel-size", "data-parallel-size-local", "nnodes")
_READ_FLAGS = frozenset(_ENGINE_FIELDS) | frozenset(_OTHER_INT_FLAGS) | {"model", "revision"}

# Flags that change vLLM's memory or KV-cache sizing but that kvplan's planner does not model.
_NOT_MODELLED = {
    "cpu-offload-gb": "weights offloaded to CPU free GPU memory for the KV cache",
    "num-gpu-blocks-override": "vLLM allocates exactly this many blocks",
    "speculative-config": "a draft model and its KV cache take GPU memory",
    "spec-model": "a draft model and its KV cache take GPU memory",
    "enable-lora": "LoRA adapters take GPU memory",
    "kv-offloading-size": "KV blocks offloaded to CPU",
    "kv-transfer-config": "KV transfer connectors change the cache layout",
    "decode-context-parallel-size": "decode context parallel splits the KV cache",
    "prefill-context-parallel-size": "prefill context parallel splits the KV cache",
    "compilation-config": "CUDA-graph settings change the graph memory vLLM reserves",
    "cudagraph-capture-sizes": "CUDA-graph sizes change the graph memory vLLM reserves",
    "max-cudagraph-capture-size": "CUDA-graph sizes change the graph memory vLLM reserves",
    "kv-cache-dtype-skip-layers": "unquantized layers change the page size",
}


@dataclass
class DeploymentResult:
    """The outcome for one deployment: which checks ran, what they found, and the plan figures."""

    name: str
    file: str
    line: int | None
    kind: str
    model: str | None
    gpu: str | None
    checks: list[str]
    diagnostics: list[Diagnostic]
    figures: dict | None = None


@dataclass
class FileResult:
    """One input file: its kind, its deployments, and file-level diagnostics."""

    file: str
    kind: str | None
    deployments: list[DeploymentResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def exit_code_for(diagnostics: list[Diagnostic], strict: bool = False) -> int:
    """0 all pass (warnings too unless ``strict``), 1 a check failed, 2 an input could not be
    read/parsed/resolved (parse-error, unknown GPU or model, bad kvplan keys)."""
    if any(d.severity == "error" and d.check_id in INPUT_ERROR_IDS for d in diagnostics):
        return EXIT_BAD_INPUT
    if any(d.severity == "error" for d in diagnostics):
        return EXIT_FAIL
    if strict and any(d.severity == "warning" for d in diagnostics):
        return EXIT_FAIL
    return EXIT_OK


@dataclass
class Report:
    """Everything one `kvplan check` run found."""

    files: list[FileResult]
    stats: dict
    vllm_version: str

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = []
        for f in self.files:
            out += f.diagnostics
            for d in f.deployments:
                out += d.diagnostics
        return out

    def exit_code(self, strict: bool = False) -> int:
        return exit_code_for(self.diagnostics, strict)

    def to_dict(self, strict: bool = False) -> dict:
        """The --format json document."""
        from kvplan import __version__

        diags = self.diagnostics
        return {
            "kvplan_version": __version__,
            "vllm_version": self.vllm_version,
            "exit_code": self.exit_code(strict),
            "summary": {
                "files": len(self.files),
                "deployments": sum(len(f.deployments) for f in self.files),
                "errors": sum(d.severity == "error" for d in diags),
                "warnings": sum(d.severity == "warning" for d in diags),
                "infos": sum(d.severity == "info" for d in diags),
            },
            "files": [
                {
                    "file": f.file,
                    "kind": f.kind,
                    "deployments": [
                        {
                            "name": d.name,
                            "line": d.line,
                            "kind": d.kind,
                            "model": d.model,
                            "gpu": d.gpu,
                            "checks": d.checks,
                            "figures": d.figures,
                        }
                        for d in f.deployments
                    ],
                }
                for f in self.files
            ],
            "diagnostics": [d.model_dump() | {"text": d.text()} for d in diags],
            "stats": self.stats,
        }


@dataclass
class _EngineInputs:
    """A deployment's flags as kvplan's EngineArgs, with where each came from.

    Attributes:
        args: the EngineArgs (invalid values left at vLLM's defaults).
        keys: EngineArgs field -> the Setting it came from (for lines and keys in messages).
        blockers: flags whose values kvplan cannot size (memory checks are skipped).
        other: integer flags kvplan reads but EngineArgs does not hold (data parallel, nnodes).
        revision: --revision of the model, if given.
    """

    args: Any = None
    keys: dict = field(default_factory=dict)
    blockers: list = field(default_factory=list)
    other: dict = field(default_factory=dict)
    revision: str | None = None
    hf_overrides: dict | None = None
    hf_overrides_setting: Any = None


def _real(path_text: str) -> str:
    """A path with symbolic links and ``..`` resolved, to tell whether two names are one file."""
    try:
        return os.path.realpath(path_text)
    except (OSError, ValueError):
        return path_text


def _display_path(path_text: str) -> str:
    """The path as diagnostics show it: relative to the working directory when it lies below
    it (GitHub annotations need repository-relative paths), else as given."""
    try:
        rel = os.path.relpath(os.path.abspath(path_text))
    except ValueError:  # another drive (Windows)
        return path_text
    if rel.startswith(".."):
        return path_text
    return rel


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


class Checker:
    """Runs the checks over files; caches model specs per (model, revision) and plans per
    (model, revision, GPU, engine args) for the run.

    Args:
        gpu: GPU profile for deployments that declare none (the `--gpu` flag).
        gpu_profiles: extra GPU profile YAML files.
        vllm_version: whose flags and rules to use.
        stdin_name: the file name standard input (``-``, ``/dev/stdin``) stands for: it decides
            how the text is read (``deploy.yaml``, ``Dockerfile``, ``serve.sh``, ``kvplan.yaml``)
            and is the name findings carry; a ``--config FILE`` in it is looked for next to that
            name. None: the kind is told from the text (see _stdin_path).
        stdin: the bytes to read as standard input (None: the process's standard input).
    Raises:
        KvplanError: unknown vLLM version or unreadable GPU profile files (exit 2).
    """

    def __init__(
        self, *, gpu: str | None = None, gpu_profiles: list[str] | None = None, vllm_version: str = "0.26.0",
        stdin_name: str | None = None, stdin: bytes | None = None,
    ):
        from kvplan.engines.vllm.defaults import check_version
        from kvplan.gpus import load_profiles

        check_version(vllm_version)
        self.cat = catalogue(vllm_version)
        self.vllm_version = vllm_version
        self.profiles = load_profiles(gpu_profiles)
        self.default_gpu = gpu
        self._specs: dict = {}
        self._plans: dict = {}
        self._manifests: dict = {}
        self._gpus: dict = {}
        self.stdin_name = stdin_name
        self._stdin = stdin
        self.stats = {"spec_loads": 0, "spec_cache_hits": 0, "plans": 0, "plan_cache_hits": 0}

    # -- cached pieces of kvplan.cli.plan_from_options -------------------------------------
    def spec(self, model: str, revision: str | None, hf_overrides: dict | None = None):
        """(ModelSpec, ModelSource) for a model (with ``--hf-overrides`` applied), cached;
        raises KvplanError when not found."""
        key = (model, revision, json.dumps(hf_overrides, sort_keys=True, default=str) if hf_overrides else None)
        if key in self._specs:
            self.stats["spec_cache_hits"] += 1
            hit = self._specs[key]
            if isinstance(hit, KvplanError):
                raise hit
            return hit
        from kvplan.sources import load_spec

        self.stats["spec_loads"] += 1
        try:
            spec, source = load_spec(model, revision, hf_overrides=hf_overrides)
        except KvplanError as exc:
            self._specs[key] = exc
            raise
        self._specs[key] = (spec, source)
        return spec, source

    def plan(self, model: str, revision: str | None, spec, gpu, args):
        """The planner's Plan, cached per (model, revision, GPU, args); raises KvplanError."""
        from kvplan.planner import plan

        key = (model, revision, spec, gpu.id, gpu.memory_bytes, args)
        if key in self._plans:
            self.stats["plan_cache_hits"] += 1
            hit = self._plans[key]
            if isinstance(hit, KvplanError):
                raise hit
            return hit
        self.stats["plans"] += 1
        try:
            result = plan(spec, gpu, args)
        except KvplanError as exc:
            self._plans[key] = exc
            raise
        self._plans[key] = result
        return result

    def gpu(self, name: str):
        """The GPU profile for a name or alias, cached; raises KvplanError (unknown GPU)."""
        from kvplan.gpus import find_gpu

        if name not in self._gpus:
            try:
                self._gpus[name] = find_gpu(name, self.profiles)
            except KvplanError as exc:
                self._gpus[name] = exc
        hit = self._gpus[name]
        if isinstance(hit, KvplanError):
            raise hit
        return hit

    # -- files ------------------------------------------------------------------------------
    def check_paths(self, paths: list[str]) -> Report:
        """Check every file; never raises for a bad file (it becomes a parse-error)."""
        t0 = time.perf_counter()
        covered = self._covered_by_manifests(paths)
        # a file that a kvplan.yaml of this run names (`config: FILE`) is checked there, with the
        # manifest's gpu and targets, and not a second time as a bare file
        files = [self.check_file(p) for p in paths if is_stdin(p) or _real(p) not in covered]
        self._nothing_checked(files, any(is_stdin(p) for p in paths))
        stats = dict(self.stats, seconds=round(time.perf_counter() - t0, 4))
        return Report(files=files, stats=stats, vllm_version=self.vllm_version)

    def _nothing_checked(self, files: list[FileResult], stdin: bool) -> None:
        """A `no-deployment` warning (a failure under --strict) on the last file when the run
        found no deployment at all and nothing else failed: a check that checked nothing is
        not a pass to rely on (a wrong glob, a file kvplan read as another kind)."""
        if not files or any(f.deployments for f in files):
            return
        if any(d.severity == "error" for f in files for d in f.diagnostics):
            return  # the run fails already, and says why
        last = files[-1]
        last.diagnostics.append(
            Diagnostic(
                check_id=NO_DEPLOYMENT,
                severity="warning",
                file=last.file,
                line=None,
                message=f"0 deployments found in the {len(files)} file(s) given: nothing was checked",
                hint="name standard input's kind with --stdin-name (deploy.yaml, serve.sh, Dockerfile)"
                if stdin
                else "check the file list; kvplan reads vLLM --config YAML, Kubernetes, compose, Dockerfiles, "
                "scripts with `vllm serve` and kvplan.yaml",
            )
        )

    def _read_stdin(self) -> str:
        """Standard input as text (read once per run), with read_text's limits and rules.

        Raises:
            InputError: closed, too large, binary or not UTF-8."""
        if self._stdin is None:
            stream = getattr(sys.stdin, "buffer", None)
            if stream is None:
                raise InputError("standard input is closed")
            try:
                self._stdin = stream.read(MAX_FILE_BYTES + 1)
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read standard input: {exc}") from None
        data = self._stdin
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"standard input is over {MAX_FILE_BYTES:,} bytes; kvplan reads at most {MAX_FILE_BYTES:,} bytes per file")
        if b"\x00" in data:
            raise InputError("binary input (contains NUL bytes)")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise InputError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line) from None
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def _stdin_path(self, text: str) -> Path:
        """The file standard input stands for: ``--stdin-name``, else a name told from the text:
        YAML whose documents are a deployment format (Kubernetes, compose, vLLM config,
        kvplan.yaml) is read as ``stdin.yaml``; text with a Dockerfile ``FROM`` and a
        CMD/ENTRYPOINT/RUN line as a ``Dockerfile``; anything else as a script."""
        if self.stdin_name:
            return Path(self.stdin_name)
        try:
            docs = load_yaml(text)
        except InputError:
            docs = None
        if docs is not None and detect_kind(Path("stdin.yaml"), docs, self.cat) not in ("command",):
            if detect_kind(Path("stdin.yaml"), docs, self.cat) == "manifest":
                return Path("kvplan.yaml")
            return Path("stdin.yaml")
        if re.search(r"^\s*FROM\s+\S", text, re.M | re.I) and re.search(r"^\s*(CMD|ENTRYPOINT|RUN)\b", text, re.M | re.I):
            return Path("Dockerfile")
        return Path("stdin")

    def _covered_by_manifests(self, paths: list[str]) -> set[str]:
        """Real paths of the --config files that the kvplan.yaml manifests among ``paths`` name
        (``deployments[].config``, relative to the manifest). A manifest that cannot be read
        covers nothing (check_file reports it)."""
        covered: set[str] = set()
        for p in paths:
            path = Path(p)
            if is_stdin(p) or path.suffix.lower() not in (".yaml", ".yml"):
                continue
            try:
                docs = load_yaml(read_text(path))
            except (InputError, OSError):
                continue
            if detect_kind(path, docs, self.cat) != "manifest":
                continue
            for doc in docs:
                entries = doc.data.get("deployments") if isinstance(doc.data, dict) else None
                for entry in entries if isinstance(entries, list) else []:
                    if isinstance(entry, dict) and isinstance(entry.get("config"), str) and entry["config"].strip():
                        if outside_boundary(path.parent / entry["config"], path.parent, entry["config"]):
                            continue  # refused there, unread: a file named here is checked on its own
                        cfg = _real(str(path.parent / entry["config"]))
                        if cfg != _real(p):
                            covered.add(cfg)
        return covered

    def _parse_error(self, fr: FileResult, message: str, line: int | None = None, file: str | None = None) -> FileResult:
        fr.diagnostics.append(
            Diagnostic(check_id=PARSE_ERROR, severity="error", file=file or fr.file, line=line, message=message)
        )
        return fr

    def check_file(self, path_text: str) -> FileResult:
        """All deployments in one file, evaluated. ``-`` and ``/dev/stdin`` are standard input
        (see _stdin_path for how its kind is told)."""
        if is_stdin(path_text):
            shown = _display_path(self.stdin_name) if self.stdin_name else "<stdin>"
            fr = FileResult(file=shown, kind=None)
            try:
                text = self._read_stdin()
            except InputError as exc:
                return self._parse_error(fr, exc.message, exc.line)
            path = self._stdin_path(text)
        else:
            shown = _display_path(path_text)
            fr = FileResult(file=shown, kind=None)
            if not path_text.strip():  # Path("") is ".", the working directory: say what was given
                return self._parse_error(fr, "empty file name")
            path = Path(path_text)
            escape = link_out_of_repository(path)
            if escape is not None:
                return self._parse_error(fr, escape)
            try:
                text = read_text(path)
            except InputError as exc:
                return self._parse_error(fr, exc.message, exc.line)
        raw = text.split("\n")
        docs = None
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                docs = load_yaml(text)
            except InputError as exc:
                return self._parse_error(fr, exc.message, exc.line)
        kind = detect_kind(path, docs, self.cat)
        fr.kind = kind
        directives, bad = find_directives(raw)
        for line, msg in bad:
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=line, key="kvplan", message=msg)
            )
        deps: list[Deployment] = []
        if kind == "manifest":
            assert docs is not None
            deps = self._manifest_deployments(docs, path, shown, raw, fr)
        elif docs is not None and kind != "command":
            deps = self._yaml_deployments(docs, path, shown, raw, fr)
        else:
            problems: list[tuple[int, str]] = []
            calls, _ = serve_calls_in_text(raw, {}, dockerfile=kind == "dockerfile", problems=problems)
            for line, msg in problems:
                self._parse_error(fr, msg, line)
            deps = [
                deployment_from_invocation(
                    inv, shown, f"{shown}:{inv.line}", kind, self.cat, base_dir=path.parent if kind == "command" else None
                )
                for inv in calls
            ]
        if kind != "manifest":
            for dep in deps:
                apply_directives(dep, directives)
        if not deps and not fr.diagnostics:
            if docs is not None and kind == "command":
                # YAML that is no deployment format and runs no `vllm serve`: given to check by
                # mistake or a deployment kvplan cannot see; either way, not a pass. It was
                # searched as text for `vllm serve`, but it is shown as what it is: YAML.
                fr.kind = "yaml"
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=NO_DEPLOYMENT,
                        severity="error",
                        file=shown,
                        line=None,
                        message=f"no vLLM deployment in this YAML file: it {describe_yaml(docs)}, and no "
                        "`vllm serve` line was found in it",
                        hint="give kvplan check vLLM --config files, Kubernetes or compose files that run vLLM, "
                        "kvplan.yaml, or scripts with `vllm serve`",
                    )
                )
            else:
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=NO_DEPLOYMENT,
                        severity="info",
                        file=shown,
                        line=None,
                        message=f"no `vllm serve` command or vLLM config found (read as {kind})",
                    )
                )
        fr.deployments = [self.evaluate(dep) for dep in deps]
        return fr

    def _yaml_deployments(self, docs: list[YamlDoc], path: Path, shown: str, raw: list[str], fr: FileResult) -> list[Deployment]:
        """The deployments of a YAML file, document by document (Kubernetes objects, compose
        files, vLLM --config mappings); a vLLM config in a file of several documents is also a
        multiple-documents error, as vLLM cannot load it."""
        deps: list[Deployment] = []
        node_map = None
        dotenv = None
        n_configs = sum(yaml_doc_kind(d.data, self.cat) == "vllm-config" for d in docs)
        dups = duplicate_top_keys("\n".join(raw)) if n_configs else []
        for i, doc in enumerate(docs):
            kind = yaml_doc_kind(doc.data, self.cat)
            if kind == "k8s":
                if node_map is None:
                    node_map, map_file = self._node_map(path, fr)
                k8s = k8s_deployments([doc], shown, raw, self.cat, node_map)
                for dep in k8s:
                    if "gpu" in dep.targets and map_file is not None:
                        dep.diag(
                            NODE_SELECTORS,
                            "info",
                            f"GPU {dep.targets['gpu']} from node_selectors in {map_file}",
                            line=dep.target_lines.get("gpu"),
                            key=dep.target_keys.get("gpu"),
                        )
                deps += k8s
            elif kind == "compose":
                if dotenv is None:
                    dotenv = read_dotenv(path.parent / ".env")
                problems: list[tuple[int | None, str, str]] = []
                deps += compose_deployments(doc, shown, raw, self.cat, dotenv, problems=problems)
                for line, key, message in problems:
                    fr.diagnostics.append(
                        Diagnostic(check_id=INVALID_VALUE, severity="error", file=shown, line=line, key=key, message=message)
                    )
            elif kind == "vllm-config":
                name = shown if len(docs) == 1 or n_configs == 1 else f"{shown} (document {i + 1})"
                deps.append(
                    deployment_from_config(doc, shown, self.cat, name=name, duplicates=dups[i] if i < len(dups) else ())
                )
        problem = multiple_documents_problem(docs, raw) if n_configs else None
        if problem is not None:
            line, message, hint = problem
            fr.diagnostics.append(
                Diagnostic(check_id=MULTIPLE_DOCUMENTS, severity="error", file=shown, line=line, message=message, hint=hint)
            )
        return deps

    def _node_map(self, path: Path, fr: FileResult) -> tuple[dict, str | None]:
        """kvplan.yaml's node_selectors from the nearest directory at or above the file's own,
        and that kvplan.yaml as shown in messages (None when none is used).

        The search stops at the file's repository root (the nearest directory with a ``.git``);
        outside a repository, at the working directory, never above it (a file outside the
        working directory: its own directory only). A stray kvplan.yaml in /tmp or $HOME does
        not remap GPUs."""
        start = path.resolve().parent
        ceiling = _lookup_ceiling(start)
        d = start
        seen = []
        while True:
            if d in self._manifests:
                found = self._manifests[d]
                break
            seen.append(d)
            cand = next((d / n for n in ("kvplan.yaml", "kvplan.yml") if (d / n).is_file()), None)
            escape = link_out_of_repository(cand) if cand is not None else None
            if escape is not None:
                self._parse_error(fr, escape, file=_display_path(str(cand)))
                found = None
                break
            if cand is not None:
                manifest = self._load_manifest_file(cand, fr)
                found = (manifest, _display_path(str(cand))) if manifest is not None else None
                break
            if d == ceiling or d.parent == d:
                found = None
                break
            d = d.parent
        for s in seen:
            self._manifests[s] = found
        return (found[0].node_selectors, found[1]) if found is not None else ({}, None)

    def _load_manifest_file(self, cand: Path, fr: FileResult) -> Manifest | None:
        """The kvplan.yaml that supplies node_selectors, validated as ``kvplan check
        kvplan.yaml`` and ``kvplan schema manifest`` do (the Manifest model: a deployment needs
        a name, targets must be finite ...); None with its problems on ``fr`` (same key, line
        and message as when the file is checked directly)."""
        shown = _display_path(str(cand))
        doc = None
        try:
            docs = [d for d in load_yaml(read_text(cand)) if d.data is not None]
            if len(docs) > 1:
                raise InputError("kvplan.yaml must be one YAML mapping (node_selectors, deployments)", docs[1].line)
            doc = docs[0] if docs else None
            return Manifest.model_validate(doc.data if doc is not None else {})
        except InputError as exc:
            self._parse_error(fr, exc.message, exc.line, file=shown)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                if err["type"] == "missing" and loc[-1:] == ("name",) and loc[:1] == ("deployments",):
                    message = _MISSING_NAME
                else:
                    message = _pydantic_message(err, Manifest)
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=INVALID_KVPLAN_KEY,
                        severity="error",
                        file=shown,
                        line=doc.line_of(loc) if doc is not None else None,
                        key=_manifest_key(loc),
                        message=message,
                    )
                )
        return None

    def _manifest_deployments(self, docs: list[YamlDoc], path: Path, shown: str, raw: list[str], fr: FileResult) -> list[Deployment]:
        docs = [d for d in docs if d.data is not None]  # kvplan reads it: empty documents are harmless
        if len(docs) != 1 or not isinstance(docs[0].data, dict):
            where = docs[1].line if len(docs) > 1 else (docs[0].line if docs else None)
            self._parse_error(fr, "kvplan.yaml must be one YAML mapping (node_selectors, deployments)", where)
            return []
        doc = docs[0]
        data = doc.data
        problems = []
        try:
            Manifest.model_validate({k: v for k, v in data.items() if k != "deployments"})
        except ValidationError as exc:
            problems = exc.errors()
        for err in problems:
            loc = tuple(str(p) if not isinstance(p, int) else p for p in err["loc"])
            fr.diagnostics.append(
                Diagnostic(
                    check_id=INVALID_KVPLAN_KEY,
                    severity="error",
                    file=shown,
                    line=doc.line_of(loc),
                    key=".".join(str(p) for p in loc),
                    message=_pydantic_message(err, Manifest),
                )
            )
        entries = data.get("deployments") or []
        if not isinstance(entries, list):
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=doc.line_of(("deployments",)), key="deployments", message="must be a list")
            )
            return []
        deps = []
        base = path.parent
        for i, entry in enumerate(entries):
            epath = ("deployments", i)
            eline = doc.line_of(epath)
            if not isinstance(entry, dict):
                fr.diagnostics.append(
                    Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=eline, key=f"deployments[{i}]", message="must be a mapping")
                )
                continue
            if not isinstance(entry.get("name"), str):  # the schema's rule (ManifestDeployment.name)
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=INVALID_KVPLAN_KEY,
                        severity="error",
                        file=shown,
                        line=doc.line_of(epath + ("name",)),
                        key=f"deployments[{i}].name",
                        message=_MISSING_NAME if "name" not in entry else f"expected text (got {_yaml_shown(entry['name'])})",
                    )
                )
            name = str(entry.get("name") or f"deployments[{i}]")
            sources = [k for k in ("config", "command", "args") if entry.get(k) is not None]
            dep: Deployment | None = None
            if len(sources) > 1:
                fr.diagnostics.append(
                    Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=eline, key=f"deployments[{i}]", message=f"give one of config, command or args (got {', '.join(sources)})")
                )
                continue
            if "config" in sources:
                dep = self._manifest_config(entry, i, name, doc, path, shown, fr)
                if dep is None:
                    continue
            elif "command" in sources:
                cmd = str(entry["command"])
                span = doc.spans.get(epath + ("command",)) or (eline, eline)
                calls, _ = serve_calls_in_text(cmd.split("\n"), {})
                if not calls:
                    fr.diagnostics.append(
                        Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=span[0], key=f"deployments[{i}].command", message="no `vllm serve` call in the command")
                    )
                    continue
                inv = calls[0]
                inv.lines = list(_locate(inv.words, raw, span[0] - 1, span[1] - 1))
                dep = deployment_from_invocation(inv, shown, name, "manifest", self.cat)
                dep.line = eline
            else:
                dep = Deployment(name=name, file=shown, line=eline, kind="manifest")
                args = entry.get("args") or {}
                if not isinstance(args, dict):
                    dep.diag(INVALID_KVPLAN_KEY, "error", "must be a mapping of `vllm serve` flags", key=f"deployments[{i}].args")
                    args = {}
                toks = config_tokens(dep, args, lambda k: doc.lines.get(epath + ("args", k), eline), self.cat, key_prefix=f"deployments[{i}].args.")
                parse_serve_args(dep, toks, self.cat, positional_model=False)
                if entry.get("model") is not None:
                    dep.model, dep.model_line, dep.model_key = str(entry["model"]), doc.line_of(epath + ("model",)), f"deployments[{i}].model"
            served_here = "config" not in sources and "command" not in sources
            for k, v in entry.items():
                if k in ("name", "config", "command", "args") or (k == "model" and served_here):
                    continue  # (for args/model entries `model` is the served model, set above)
                dep.set_target(str(k), v, doc.line_of(epath + (str(k),)), f"deployments[{i}].{k}")
            deps.append(dep)
        return deps

    def _manifest_config(self, entry: dict, i: int, name: str, doc: YamlDoc, path: Path, shown: str, fr: FileResult):
        """The deployment of a kvplan.yaml entry with ``config: FILE`` (relative to kvplan.yaml),
        or None with one diagnostic on ``fr`` when FILE cannot be a vLLM --config file: this
        kvplan.yaml itself, a name vLLM's loader refuses (not .yaml/.yml), unreadable, not YAML,
        or not one mapping of `vllm serve` flags. The other entries are checked either way.

        Rule source: vLLM 0.26.0 utils/argparse_utils.py load_config_file (yaml/yml only,
        yaml.safe_load of one document, every top-level key a flag).
        """
        raw_cfg = str(entry["config"])
        key, line = f"deployments[{i}].config", doc.line_of(("deployments", i, "config"))
        cfg = path.parent / raw_cfg
        cshown = _display_path(str(cfg))

        def bad_key(message: str, hint: str | None = None) -> None:
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=line, key=key,
                           message=message, hint=hint, deployment=name)
            )

        outside = outside_boundary(cfg, path.parent, raw_cfg)
        if outside is not None:  # fresh-eyes-5 H4: not read, so nothing of it is echoed
            bad_key(*outside)
            return None
        try:
            same = cfg.exists() and cfg.resolve() == path.resolve()
        except OSError:
            same = False
        if same:
            bad_key(f"{raw_cfg} is this kvplan.yaml itself, not a vLLM --config file",
                    "name the YAML file given to `vllm serve --config`, e.g. deploy/chat.yaml")
            return None
        if cfg.suffix.lower() not in (".yaml", ".yml"):
            bad_key(f"{raw_cfg}: vLLM reads a --config file only when its name ends in .yaml or .yml "
                    "(`vllm serve` exits with 'Config file must be of a yaml/yml type')")
            return None
        try:
            ctext = read_text(cfg)
            cdocs = load_yaml(ctext)
        except InputError as exc:
            self._parse_error(fr, f"{exc.message} (deployment {name!r} of {shown})", exc.line, file=cshown)
            return None
        mappings = [d for d in cdocs if isinstance(d.data, dict)]
        what = None
        if len(mappings) > 1:
            what = f"holds {len(mappings)} YAML mappings"
        elif len(mappings) != 1 or any(d.data is not None and not isinstance(d.data, dict) for d in cdocs):
            what = describe_yaml(cdocs)
        else:
            kind = yaml_doc_kind(mappings[0].data, self.cat)
            if kind in ("k8s", "compose", "manifest"):
                what = "holds " + {"k8s": "a Kubernetes object", "compose": "a docker-compose file",
                                   "manifest": "a kvplan.yaml (deployments)"}[kind]
        if what is not None:
            self._parse_error(
                fr,
                f"a vLLM --config file must be one YAML mapping of `vllm serve` flags; it {what} "
                f"(deployment {name!r} of {shown})",
                mappings[1].line if len(mappings) > 1 else None,
                file=cshown,
            )
            return None
        dups = duplicate_top_keys(ctext)
        dep = deployment_from_config(mappings[0], cshown, self.cat, name=name, duplicates=dups[0] if dups else ())
        problem = multiple_documents_problem(cdocs, ctext.split("\n"))
        if problem is not None:
            dep.diag(MULTIPLE_DOCUMENTS, "error", problem[1], line=problem[0], hint=problem[2])
        return dep

    # -- checks -----------------------------------------------------------------------------
    def evaluate(self, dep: Deployment) -> DeploymentResult:
        """Run every check on one deployment (see docs/ci.md for the list); never raises."""
        checks: list[str] = [UNKNOWN_FLAG, INVALID_VALUE]
        targets = self._targets(dep)
        model = self._model_name(dep, targets, checks)
        eng = self._engine_args(dep, checks)
        gpu, gpu_name = self._resolve_gpu(dep, targets, checks)
        self._gpu_count_check(dep, targets, eng, checks)
        self._utilization_target(dep, targets, eng, checks)
        spec = self._load_spec(dep, targets, model, eng.revision, eng)
        figures = None
        if spec is not None and self._model_checks(dep, spec, eng.args, eng.keys, checks):
            if gpu is not None and not eng.blockers:
                figures = self._plan_checks(
                    dep, model, eng.revision, spec, gpu, eng.args, eng.keys, targets, checks,
                    dp=max(eng.other.get("data-parallel-size") or 1, 1),
                )
        order = {"error": 0, "warning": 1, "info": 2}
        dep.diagnostics.sort(key=lambda d: (d.line or 0, order[d.severity]))
        return DeploymentResult(
            name=dep.name,
            file=dep.file,
            line=dep.line,
            kind=dep.kind,
            model=model or dep.model,  # (an unexpanded $VAR model is shown as written)
            gpu=gpu.id if gpu else (str(gpu_name) if gpu_name else None),
            checks=checks,
            diagnostics=dep.diagnostics,
            figures=figures,
        )

    def _model_name(self, dep: Deployment, targets: Targets, checks: list[str]) -> str | None:
        """The model to check: the kvplan ``model`` override, else the deployment's own.
        No model at all fails (`vllm serve` exits: entrypoints/cli/serve.py / argparse_utils)."""
        checks.append(MODEL_MISSING)
        if dep.model is None and "model" in dep.invalid:
            return targets.model  # its value was refused (reported where it was read)
        if dep.model is None and dep.model_null_line is not None:
            dep.diag(
                MODEL_MISSING,
                "error",
                "no model: `model:` is empty (YAML null); vLLM's --config loader passes the text 'None' as "
                "the model, which `vllm serve` cannot load",
                line=dep.model_null_line,
                key=dep.model_key,
                hint="write the model's Hugging Face id or path after `model:`",
            )
            return targets.model
        if dep.model is None or not dep.model.strip():
            dep.diag(
                MODEL_MISSING,
                "error",
                "no model: `vllm serve` exits with 'No model specified'"
                if dep.model is None
                else "the model is an empty string: `vllm serve` cannot load it",
                line=dep.model_line if dep.model is not None else None,
                key=dep.model_key if dep.model is not None else "model",
                hint="give the model as `vllm serve MODEL` or a `model:` key",
            )
            return targets.model
        if dep.model_literal:
            dep.diag(
                LITERAL_VARIABLE,
                "error",
                f"the model {dep.model!r} is not expanded ({dep.literal_reason}): vLLM looks for a model "
                f"named {dep.model!r} and exits",
                line=dep.model_line,
                key=dep.model_key,
                hint=_literal_hint(dep),
            )
            return targets.model
        if dep.model_unresolved and targets.model is None:
            notes = [dep.var_notes[v] for v in dep.model_unresolved if v in dep.var_notes]
            why = "; ".join(notes) if notes else "which is not set in this file"
            arg_only = [v for v in dep.model_unresolved if "build argument" in dep.var_notes.get(v, "")]
            dep.diag(
                MODEL_UNRESOLVED,
                "error",
                f"the model {dep.model!r} uses {', '.join('$' + v for v in dep.model_unresolved)}, {why}"
                if not notes
                else f"the model {dep.model!r} is unknown at runtime: {why}",
                line=dep.model_line,
                key=dep.model_key,
                hint=f"add `ENV {arg_only[0]}=${{{arg_only[0]}}}` after the ARG, or a `# kvplan: model=<hub id>` comment"
                if arg_only
                else "set the variable in the file or add a `# kvplan: model=<hub id>` comment",
            )
            return None
        return targets.model or dep.model

    def _engine_args(self, dep: Deployment, checks: list[str]) -> "_EngineInputs":
        """Map the deployment's `vllm serve` flags onto kvplan's EngineArgs, reading values as
        vLLM 0.26.0 does (human-readable ints, choices); every rejected value is a diagnostic."""
        from kvplan.engines.vllm.kv_spec import KV_CACHE_DTYPES
        from kvplan.planner import QUANTIZATIONS, EngineArgs

        kwargs: dict[str, Any] = {"vllm_version": self.vllm_version}
        eng = _EngineInputs()
        eng.blockers += sorted(f for f in dep.invalid if f in _ENGINE_FIELDS)
        for name, s in dep.settings.items():
            base = name.split(".", 1)[0]
            if s.literal:
                read = name in _READ_FLAGS
                dep.diag(
                    LITERAL_VARIABLE,
                    "error" if read else "warning",
                    f"{s.value!r} is not expanded ({dep.literal_reason}): --{name} gets the text as it is"
                    + ("; `vllm serve` exits or loads the wrong thing" if read else ""),
                    line=s.line,
                    key=s.key,
                    hint=_literal_hint(dep),
                )
                if name in _ENGINE_FIELDS:
                    eng.blockers.append(name)
                continue
            if s.unresolved and (name in _ENGINE_FIELDS or name in _OTHER_INT_FLAGS or name == "revision"):
                dep.diag(
                    UNRESOLVED_VALUE,
                    "warning",
                    f"{s.value!r} uses {', '.join('$' + v for v in s.unresolved)}, which is not set in this file; "
                    f"kvplan checks with vLLM's default for --{name}",
                    line=s.line,
                    key=s.key,
                )
                continue
            if name == "revision":
                eng.revision = str(s.value)
                continue
            if base == "hf-overrides":
                self._hf_overrides_setting(dep, eng, name, s)
                continue
            if name in _OTHER_INT_FLAGS:
                try:
                    eng.other[name] = int(str(s.value))
                except ValueError:
                    dep.diag(INVALID_VALUE, "error", f"expected an integer, got {s.value!r}; `vllm serve` exits", line=s.line, key=s.key)
                continue
            if base in _NOT_MODELLED:
                dep.diag(
                    NOT_MODELLED,
                    "info",
                    f"kvplan does not model --{base} ({_NOT_MODELLED[base]}); its figures assume it is unset",
                    line=s.line,
                    key=s.key,
                )
                continue
            if name not in _ENGINE_FIELDS:
                continue
            fname, conv = _ENGINE_FIELDS[name]
            try:
                value = conv(s.value) if conv is not bool else bool(s.value)
            except (TypeError, ValueError) as exc:
                why = str(exc) if "decimals" in str(exc) else f"expected {'a number' if conv is float else 'an integer'}"
                dep.diag(INVALID_VALUE, "error", f"{why}, got {s.value!r}; `vllm serve` exits", line=s.line, key=s.key)
                eng.blockers.append(name)  # never evaluate with a value the file does not hold
                continue
            problem = self._value_problem(name, value, KV_CACHE_DTYPES, QUANTIZATIONS, checks)
            if problem is not None:
                check_id, severity, message, hint = problem
                dep.diag(check_id, severity, message, line=s.line, key=s.key, hint=hint)
                if check_id == NOT_MODELLED or severity == "error":
                    eng.blockers.append(name)
                continue
            kwargs[fname] = value
            eng.keys[fname] = s
        while eng.args is None:
            try:
                eng.args = EngineArgs(**kwargs)
            except ValidationError as exc:
                for err in exc.errors():
                    fname = str(err["loc"][0]) if err["loc"] else ""
                    s = eng.keys.get(fname)
                    dep.diag(
                        INVALID_VALUE,
                        "error",
                        f"{plain_validation_message(err)}; `vllm serve` exits",
                        line=s.line if s else None,
                        key=s.key if s else fname,
                    )
                    kwargs.pop(fname, None)
                    eng.blockers.append(fname)
                    if not fname:
                        kwargs = {"vllm_version": self.vllm_version}
        return eng

    def _value_problem(self, name: str, value: Any, kv_dtypes, quantizations, checks: list[str]):
        """(check id, severity, message, hint) when vLLM 0.26.0 rejects a value (CacheConfig
        gpu_memory_utilization in (0, 1], CacheDType / ModelDType choices) or kvplan cannot
        size it; None when the value is fine."""
        if name == "gpu-memory-utilization":
            checks.append(UTILIZATION_RANGE)
            if not (0 < value <= 1):
                return (
                    UTILIZATION_RANGE,
                    "error",
                    f"{value} is outside (0, 1]: vLLM's CacheConfig rejects it and `vllm serve` exits",
                    "use a fraction such as 0.9",
                )
        elif name == "kv-cache-dtype":
            if value not in self.cat.cache_dtypes:
                return (
                    INVALID_VALUE,
                    "error",
                    f"{value!r} is not a vLLM {self.vllm_version} KV-cache dtype; `vllm serve` exits",
                    "choose from " + ", ".join(self.cat.cache_dtypes[:6]) + ", ...",
                )
            if value not in kv_dtypes:
                return (NOT_MODELLED, "warning", f"kvplan cannot size a {value} KV cache; memory checks skipped", None)
        elif name == "block-size" and value > 0 and value % 16:
            return (
                NOT_MODELLED,
                "warning",
                f"kvplan models block sizes that are multiples of 16 (FlashAttention); {value} is not: memory checks skipped",
                None,
            )
        elif name == "dtype" and value not in self.cat.model_dtypes:
            return (
                INVALID_VALUE,
                "error",
                f"{value!r} is not a vLLM {self.vllm_version} dtype; `vllm serve` exits",
                "choose from " + ", ".join(self.cat.model_dtypes),
            )
        elif name == "quantization" and value.lower() not in quantizations:
            return (NOT_MODELLED, "warning", f"kvplan does not model --quantization {value}; memory checks skipped", None)
        return None

    def _resolve_gpu(self, dep: Deployment, targets: Targets, checks: list[str]):
        """(GPUProfile or None, the name asked for): the deployment's own GPU, else --gpu."""
        gpu_name = targets.gpu or self.default_gpu
        checks.append(GPU_MISSING)
        if gpu_name is None:
            dep.diag(
                GPU_MISSING,
                "error",
                "no GPU declared, so kvplan cannot check memory",
                key="gpu",
                hint=dep.gpu_hint or "pass --gpu to kvplan check, add `# kvplan: gpu=H100-80GB`, or a kvplan: mapping with gpu",
            )
            return None, None
        try:
            return self.gpu(str(gpu_name)), gpu_name
        except KvplanError as exc:
            dep.diag(
                GPU_UNKNOWN,
                "error",
                exc.message.removeprefix("--gpu: "),
                line=dep.target_lines.get("gpu") if targets.gpu else None,
                key=dep.target_keys.get("gpu", "--gpu") if targets.gpu else "--gpu",
                hint=exc.hint,
            )
            return None, gpu_name

    def _gpu_count_check(self, dep: Deployment, targets: Targets, eng: "_EngineInputs", checks: list[str]) -> None:
        """vLLM starts tensor x pipeline x data-parallel workers, one GPU each (per node:
        divided by --nnodes); fewer GPUs than that and it cannot start (vLLM 0.26.0
        config/parallel.py world_size)."""
        count = targets.gpu_count if targets.gpu_count is not None else dep.gpu_count
        if count is None:
            return
        checks.append(GPU_COUNT)
        tp, pp = eng.args.tensor_parallel_size, eng.args.pipeline_parallel_size
        dp = eng.other.get("data-parallel-size-local") or eng.other.get("data-parallel-size") or 1
        nnodes = max(eng.other.get("nnodes") or 1, 1)
        need = -(-tp * pp * dp // nnodes)
        where = ""
        if targets.gpu_count is not None:
            cline, ckey = dep.target_lines.get("gpu_count"), dep.target_keys.get("gpu_count")
        else:
            cline, ckey = dep.gpu_count_line, dep.gpu_count_key
            if dep.gpu_group is not None:
                own, size, leader, worker = dep.gpu_group
                if nnodes > 1:  # `--nnodes N`: vLLM counts the GPUs of each node (pod)
                    count = own
                else:
                    where = (
                        f" in the LeaderWorkerSet group of {size} pods (leader {leader}"
                        + f" + {size - 1} worker(s) x {worker})"
                    )
        tp_key = eng.keys["tensor_parallel_size"].key if "tensor_parallel_size" in eng.keys else "--tensor-parallel-size"
        if need > count:
            dep.diag(
                GPU_COUNT,
                "error",
                f"{count} GPU(s){where} but tensor x pipeline x data parallel = {tp} x {pp} x {dp}"
                + (f" / {nnodes} nodes" if nnodes > 1 else "")
                + f" needs {need}: vLLM cannot start its workers",
                line=cline,
                key=ckey,
                hint=f"give {need} GPUs or lower {tp_key}",
            )
        elif need < count:
            dep.diag(GPU_COUNT, "info", f"{count} GPU(s){where} but vLLM uses {need} (tensor x pipeline x data parallel)", line=cline, key=ckey)

    def _utilization_target(self, dep: Deployment, targets: Targets, eng: "_EngineInputs", checks: list[str]) -> None:
        """--gpu-memory-utilization (vLLM 0.26.0 default 0.92, config/cache.py) against the
        ``max_gpu_memory_utilization`` target."""
        if targets.max_gpu_memory_utilization is None:
            return
        checks.append(MAX_GPU_MEMORY_UTILIZATION)
        util = eng.args.gpu_memory_utilization
        if util > targets.max_gpu_memory_utilization:
            s = eng.keys.get("gpu_memory_utilization")
            dep.diag(
                MAX_GPU_MEMORY_UTILIZATION,
                "error",
                f"gpu-memory-utilization {util} is above the target {targets.max_gpu_memory_utilization}"
                + ("" if s else " (vLLM's default, since the flag is not set)"),
                line=s.line if s else dep.target_lines.get("max_gpu_memory_utilization"),
                key=s.key if s else dep.target_keys.get("max_gpu_memory_utilization"),
            )

    def _load_spec(self, dep: Deployment, targets: Targets, model: str | None, revision: str | None, eng=None):
        """The model's ModelSpec (cached) with the deployment's ``--hf-overrides`` applied, or
        None with a model-unresolved diagnostic."""
        if model is None:
            return None
        try:
            spec = self.spec(model, revision)[0]
        except KvplanError as exc:
            dep.diag(
                MODEL_UNRESOLVED,
                "error",
                f"kvplan cannot read the model's config: {exc.message}",
                line=dep.target_lines.get("model") if targets.model else dep.model_line,
                key=dep.target_keys.get("model") if targets.model else dep.model_key,
                hint=exc.hint or "add `# kvplan: model=<hub id>` naming a bundled or cached model",
            )
            return None
        if eng is None or not eng.hf_overrides:
            return spec
        return self._overridden_spec(dep, model, revision, spec, eng)

    def _hf_overrides_setting(self, dep: Deployment, eng: "_EngineInputs", name: str, s: Setting) -> None:
        """Read ``--hf-overrides JSON`` or a dotted ``--hf-overrides.KEY VALUE`` into
        ``eng.hf_overrides``, as vLLM 0.26.0's parser does (engine/arg_utils.py: a JSON object;
        utils/argparse_utils.py: dotted keys build a nested mapping from JSON or plain text,
        and that mapping is passed after the other arguments, so it replaces a whole
        ``--hf-overrides JSON`` given as well). A value kvplan cannot read is a warning: the
        overrides are not applied."""
        if s.unresolved:
            dep.diag(
                UNRESOLVED_VALUE, "warning",
                f"{s.value!r} uses {', '.join('$' + v for v in s.unresolved)}, which is not set in this file; "
                "kvplan did not apply --hf-overrides to the model's config",
                line=s.line, key=s.key,
            )
            eng.hf_overrides_setting = None
            eng.hf_overrides = None
            return
        if name == "hf-overrides":
            text = str(s.value)
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, dict):
                # engine/arg_utils.py union_dict_and_str: `{...}` must be JSON (else argparse
                # exits), other text stays a string, which ModelConfig.hf_overrides refuses
                dep.diag(
                    INVALID_VALUE, "error",
                    f"{_yaml_shown(s.value)} is not a JSON object; `vllm serve` exits",
                    line=s.line, key=s.key, hint='write a JSON object such as \'{"max_position_embeddings": 262144}\'',
                )
                return
            if eng.hf_overrides_setting is not None and "." in eng.hf_overrides_setting.flag:
                return  # the dotted keys are passed last and win (see above)
            eng.hf_overrides, eng.hf_overrides_setting = value, s
            return
        path = name.split(".")[1:]
        text = str(s.value)
        try:
            value: Any = json.loads(text)
        except ValueError:
            try:
                value = parse_human_int(text)
            except (TypeError, ValueError):
                value = text
        if eng.hf_overrides_setting is None or "." not in eng.hf_overrides_setting.flag:
            eng.hf_overrides = {}
        target = eng.hf_overrides
        for part in path[:-1]:
            if not isinstance(target.get(part), dict):
                target[part] = {}
            target = target[part]
        target[path[-1]] = value
        eng.hf_overrides_setting = s

    def _overridden_spec(self, dep: Deployment, model: str, revision: str | None, spec, eng: "_EngineInputs"):
        """``spec`` rebuilt from the config with ``--hf-overrides`` applied (vLLM 0.26.0
        config/model.py; see kvplan.specs.overrides), with an info naming the keys that changed;
        a warning, and the checkpoint's own spec, when the overridden config cannot be parsed."""
        from kvplan.specs.overrides import apply_hf_overrides, shadowed_flat_keys

        s = eng.hf_overrides_setting
        line, key = (s.line, s.key) if s is not None else (None, "--hf-overrides")
        source = self.spec(model, revision)[1]
        _, changed = apply_hf_overrides(source.config, eng.hf_overrides)
        try:
            new = self.spec(model, revision, eng.hf_overrides)[0]
        except KvplanError as exc:
            dep.diag(
                NOT_MODELLED, "warning",
                f"kvplan cannot apply --hf-overrides to the model's config ({exc.message}); its figures use "
                "the checkpoint's config, vLLM's may differ",
                line=line, key=key,
            )
            return spec
        for name in shadowed_flat_keys(source.config, eng.hf_overrides):
            dep.diag(
                NOT_MODELLED, "warning",
                f"{name} is set on the outer config, but this model's language model reads text_config.{name}: "
                f"vLLM applies it where it changes nothing",
                line=line, key=key, hint=f'write {{"text_config": {{"{name}": ...}}}}',
            )
        dep.diag(
            PLANNER_NOTE, "info",
            f"applied to the model's config as vLLM does (sets {', '.join(changed)})",
            line=line, key=key,
        )
        return new

    def _targets(self, dep: Deployment) -> Targets:
        """Validate the deployment's kvplan targets; a bad key becomes an invalid-kvplan-key error."""
        import difflib

        values = dict(dep.targets)
        while True:
            try:
                return Targets.model_validate(values)
            except ValidationError as exc:
                for err in exc.errors():
                    name = str(err["loc"][0]) if err["loc"] else ""
                    msg = _pydantic_message(err, Targets)
                    if err["type"] == "extra_forbidden":
                        close = difflib.get_close_matches(name, list(Targets.model_fields), n=1)
                        msg = f"not a kvplan key" + (f"; did you mean {close[0]}?" if close else f" (use {', '.join(Targets.model_fields)})")
                    dep.diag(INVALID_KVPLAN_KEY, "error", msg, line=dep.target_lines.get(name), key=dep.target_keys.get(name, name))
                    values.pop(name, None)
                    if not name:
                        values = {}

    def _model_checks(self, dep: Deployment, spec, args, keys: dict, checks: list[str]) -> bool:
        """Checks that need only the model: tensor-parallel divisibility and KV-head replication
        (vLLM 0.26.0 config/parallel.py + model_executor attention layers), max_model_len over the
        model's limit (config/model.py _get_and_verify_max_len). False when the planner would refuse."""
        ok = True
        tp = args.tensor_parallel_size
        s = keys.get("tensor_parallel_size")
        tline, tkey = (s.line, s.key) if s else (dep.line, "--tensor-parallel-size")
        checks.append(TP_DIVISIBILITY)
        heads = spec.attention.num_attention_heads
        kv = spec.attention.num_key_value_heads
        from kvplan.planner import valid_tensor_parallel_sizes

        # the hint lists the sizes the planner's own refusal predicate accepts (one rule, not two)
        valid = valid_tensor_parallel_sizes(spec)
        valid_hint = ("valid sizes: " + ", ".join(map(str, valid))) if valid else None
        if heads % tp:
            dep.diag(
                TP_DIVISIBILITY,
                "error",
                f"tensor-parallel-size {tp} does not divide the model's {heads} attention heads; vLLM refuses it",
                line=tline,
                key=tkey,
                hint=valid_hint,
            )
            ok = False
        elif not spec.uses_mla and ((tp > kv and tp % kv) or (tp <= kv and kv % tp)):
            dep.diag(
                TP_DIVISIBILITY,
                "error",
                f"tensor-parallel-size {tp} and the model's {kv} KV heads: one must divide the other; vLLM refuses it",
                line=tline,
                key=tkey,
                hint=valid_hint,
            )
            ok = False
        elif not spec.uses_mla and tp > kv:
            checks.append(KV_HEAD_REPLICATION)
            dep.diag(
                KV_HEAD_REPLICATION,
                "info",
                f"tensor-parallel-size {tp} > {kv} KV heads: each KV head is replicated on {tp // kv} GPUs, "
                "so every GPU stores a full head's KV cache",
                line=tline,
                key=tkey,
            )
        mml = args.max_model_len
        if mml is not None and mml != -1:
            checks.append(MAX_MODEL_LEN_LIMIT)
            limit = spec.derived_max_model_len
            if mml > limit:
                s = keys["max_model_len"]
                base = spec.max_position_embeddings
                how = (
                    f"max_position_embeddings {base}"
                    if base is None or base == limit
                    else f"max_position_embeddings {base} with rope scaling"
                )
                # vLLM 0.26.0 envs.py: VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" / "true"
                allowed = dep.process_env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")
                if allowed:
                    dep.diag(
                        MAX_MODEL_LEN_LIMIT,
                        "warning",
                        f"{mml} tokens is over the model's limit of {limit} ({how}); the command sets "
                        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, so vLLM accepts it but warns that outputs may be wrong; "
                        "kvplan sizes no length past the limit, so the memory checks are skipped",
                        line=s.line,
                        key=s.key,
                        hint=f"use {limit} or less unless the model was trained for longer contexts",
                    )
                else:
                    dep.diag(
                        MAX_MODEL_LEN_LIMIT,
                        "error",
                        f"{mml} tokens is over the model's limit of {limit} ({how}); vLLM refuses it "
                        "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                        line=s.line,
                        key=s.key,
                        hint=f"use {limit} or less",
                    )
                ok = False
        return ok

    def _plan_checks(
        self, dep: Deployment, model, revision, spec, gpu, args, keys: dict, targets: Targets, checks: list[str], *, dp: int = 1
    ):
        """Checks on the planner's Plan: weights fit, one max_model_len request fits (vLLM 0.26.0
        v1/core/kv_cache_utils.py check_enough_kv_cache_memory), max_num_seqs vs concurrency,
        min_concurrency, fp8 KV cache support.

        ``dp``: --data-parallel-size, the engine's replicas. min_concurrency counts requests
        across all of them (per-replica concurrency x dp), as `kvplan plan` does
        (search.Option.achieved); the figures and message give the per-replica number too."""
        try:
            p = self.plan(model, revision, spec, gpu, args)
        except KvplanError as exc:
            m = re.match(r"(--[a-z0-9-]+)", exc.message)
            s = None
            if m:
                s = keys.get(m.group(1)[2:].replace("-", "_"))
            dep.diag(
                ENGINE_REJECTS,
                "error",
                exc.message,
                line=s.line if s else dep.line,
                key=s.key if s else (m.group(1) if m else None),
                hint=exc.hint,
            )
            return None
        mml = p.effective["max_model_len"]
        ms = keys.get("max_model_len")
        mline, mkey = (ms.line, ms.key) if ms else (dep.model_line or dep.line, dep.model_key)
        from kvplan.planner import StartOutcome

        checks += [WEIGHTS_FIT, MAX_MODEL_LEN_FITS]
        starved = [s for s in p.stages if s.budget.kv_cache_bytes <= 0]
        over_free = [
            s for s in p.stages if s.budget.requested_bytes > s.budget.free_at_start_bytes and not s.budget.kv_cache_memory_override
        ]
        if over_free:
            # vLLM 0.26.0 v1/worker/gpu_worker.py init_device: the requested share of the GPU
            # must be free at start-up; the planner's failure says by how much (as estimate does).
            b = over_free[0].budget
            us = keys.get("gpu_memory_utilization")
            checks.append(UTILIZATION_RANGE)
            most = math.floor(b.free_at_start_bytes / b.total_bytes * 1000) / 1000 if b.total_bytes else 0
            dep.diag(
                UTILIZATION_RANGE,
                "error",
                f"gpu-memory-utilization {args.gpu_memory_utilization} asks for {_gib(b.requested_bytes)} of "
                f"{gpu.display_name}, but only about {_gib(b.free_at_start_bytes)} is free when vLLM starts "
                f"(the CUDA context holds {(b.total_bytes - b.free_at_start_bytes) / 2**20:.0f} MiB): vLLM refuses to start",
                line=us.line if us else dep.line,
                key=us.key if us else "gpu-memory-utilization",
                hint=f"use at most {most} (the free share of the GPU when vLLM starts)" if most > 0 else None,
            )
        elif starved:
            st = starved[0]
            b = st.budget
            dep.diag(
                WEIGHTS_FIT,
                "error",
                f"{spec.name} on {gpu.display_name} (tensor-parallel-size {args.tensor_parallel_size}): weights "
                f"{_gib(b.weights_bytes)} + activations {_gib(b.activation_peak_bytes)} + non-torch "
                f"{_gib(b.non_torch_bytes)} per GPU leave no KV cache within {_gib(b.requested_bytes)} "
                f"(gpu-memory-utilization {args.gpu_memory_utilization}); vLLM will refuse to start",
                line=dep.model_line or dep.line,
                key=dep.model_key,
                hint="use more GPUs (tensor parallel), a larger GPU, or a quantized checkpoint",
            )
        elif any(_override_overflows(s.budget) for s in p.stages):
            st = next(s for s in p.stages if _override_overflows(s.budget))
            b = st.budget
            ks = keys.get("kv_cache_memory_bytes")
            used = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_bytes
            dep.diag(
                WEIGHTS_FIT,
                "error",
                f"kv-cache-memory-bytes {_gib(b.kv_cache_bytes)} + weights {_gib(b.weights_bytes)} + activations, "
                f"non-torch and CUDA graphs {_gib(used - b.weights_bytes)} per GPU exceed the "
                f"{_gib(b.total_bytes)} of {gpu.display_name}: vLLM runs out of memory allocating the KV cache",
                line=ks.line if ks else dep.line,
                key=ks.key if ks else "kv-cache-memory-bytes",
                hint=f"use at most {max(b.total_bytes - used, 0) // 2**20} MiB (e.g. --kv-cache-memory-bytes "
                f"{max(b.total_bytes - used, 0) // 2**30}G)",
            )
        elif p.outcome is StartOutcome.CUDA_GRAPH_CAPTURE_OOM:
            # the same typed outcome estimate reports; its fix comes from kvplan.recommend
            from kvplan.recommend import recommendations

            checks.append(CUDA_GRAPHS_FIT)
            us = keys.get("gpu_memory_utilization")
            fix = next((r for r in recommendations(p) if r.flag == "--gpu-memory-utilization"), None)
            dep.diag(
                CUDA_GRAPHS_FIT,
                "error",
                p.failure or "CUDA graph capture runs out of memory",
                line=us.line if us else dep.line,
                key=us.key if us else "gpu-memory-utilization",
                hint=(f"use --gpu-memory-utilization {fix.value} or less" if fix else "lower gpu-memory-utilization")
                + ", or --enforce-eager",
            )
        elif not p.fits:
            largest = p.largest_max_model_len or 0
            worst = p.worst_stage
            default = "" if ms else f" (max-model-len not set: vLLM uses the model's {spec.derived_max_model_len})"
            dep.diag(
                MAX_MODEL_LEN_FITS,
                "error",
                f"one {mml}-token request needs {_gib(worst.bytes_for_max_len)} of KV cache but only "
                f"{_gib(worst.budget.kv_cache_bytes)} is available on {gpu.display_name}{default}: "
                "vLLM will refuse to start"
                + (f"; the largest max-model-len that fits is {largest}" if largest > 0 else ""),
                line=mline,
                key=mkey if ms else "max-model-len",
                hint=f"set --max-model-len {largest}" if largest > 0 else "use more GPUs or a larger GPU",
            )
        figures = {
            "gpu": gpu.id,
            "tensor_parallel_size": args.tensor_parallel_size,
            "pipeline_parallel_size": args.pipeline_parallel_size,
            "max_model_len": mml,
            "max_num_seqs": p.effective["max_num_seqs"],
            "kv_cache_dtype": p.effective["kv_cache_dtype"],
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "kv_cache_bytes": p.worst_stage.budget.kv_cache_bytes,
            "num_gpu_blocks": p.num_gpu_blocks,
            "block_size": p.block_size,
            "gpu_kv_cache_tokens": p.gpu_kv_cache_tokens,
            "max_concurrency": _truncate2(p.max_concurrency),
            "fits": p.fits,
            "largest_max_model_len": p.largest_max_model_len,
        }
        kvd = p.effective["kv_cache_dtype"]
        if kvd.startswith("fp8"):
            checks.append(FP8_KV_UNSUPPORTED)
            if not gpu.fp8_supported:
                s = keys.get("kv_cache_dtype")
                dep.diag(
                    FP8_KV_UNSUPPORTED,
                    "warning",
                    f"{kvd} KV cache on {gpu.display_name}, which has no fp8 support: attention backends may "
                    "refuse it or run slowly",
                    line=s.line if s else dep.line,
                    key=s.key if s else "kv-cache-dtype",
                    hint="use --kv-cache-dtype auto on this GPU",
                )
        notes = []
        for w in [*p.warnings, *p.notes]:
            if w.startswith(("--kv-cache-dtype", "tensor-parallel-size")):
                continue  # reported above as fp8-kv-unsupported-gpu / kv-head-replication
            if "unverified" in w:
                notes.append(w)  # about kvplan's own confidence, not the deployment
                continue
            dep.diag(PLANNER_NOTE, "info", w)
        if notes:
            figures["notes"] = notes
        if not p.fits:
            return figures
        seqs = p.effective["max_num_seqs"]
        checks.append(MAX_NUM_SEQS)
        ss = keys.get("max_num_seqs")
        conc = p.max_concurrency
        shown_conc = _concurrency_text(conc)
        if ss is not None and seqs > conc:
            dep.diag(
                MAX_NUM_SEQS,
                "info",
                f"max-num-seqs {seqs}: the KV cache holds {shown_conc} requests of {mml} tokens at once; "
                "more run together only when requests are shorter",
                line=ss.line,
                key=ss.key,
            )
        elif ss is not None and seqs < int(conc):
            dep.diag(
                MAX_NUM_SEQS,
                "info",
                f"max-num-seqs {seqs} caps concurrency below the {shown_conc} requests of {mml} tokens the KV cache holds",
                line=ss.line,
                key=ss.key,
            )
        if targets.min_concurrency is not None:
            checks.append(MIN_CONCURRENCY)
            req = targets.request_len or mml
            tline, tkey = dep.target_lines.get("min_concurrency"), dep.target_keys.get("min_concurrency")
            if req > mml:
                dep.diag(
                    INVALID_KVPLAN_KEY,
                    "error",
                    f"request_len {req} is longer than max-model-len {mml}; vLLM rejects such requests",
                    line=dep.target_lines.get("request_len"),
                    key=dep.target_keys.get("request_len"),
                )
            else:
                kv_conc = p.layout.max_concurrency(p.num_gpu_blocks, req, p.max_in_flight_tokens)
                per_replica = min(kv_conc, float(seqs))
                achievable = per_replica * dp  # every replica has its own KV cache and max-num-seqs
                figures["concurrency_at_request_len"] = _truncate2(achievable)
                figures["request_len"] = req
                if dp > 1:
                    figures["concurrency_per_replica_at_request_len"] = _truncate2(per_replica)
                    figures["data_parallel_size"] = dp
                if achievable < targets.min_concurrency:
                    cap = "max-num-seqs" if seqs < kv_conc else "the KV cache"
                    fit = (
                        f"{_concurrency_text(per_replica)} requests of {req} tokens fit at once per replica, "
                        f"x{dp} replicas = {_concurrency_text(achievable)}"
                        if dp > 1
                        else f"{_concurrency_text(achievable)} requests of {req} tokens fit at once"
                    )
                    dep.diag(
                        MIN_CONCURRENCY,
                        "error",
                        f"{fit} ({cap} limits it; "
                        f"{p.num_gpu_blocks} blocks of {p.block_size} tokens), below the target {targets.min_concurrency:g}",
                        line=tline,
                        key=tkey,
                        hint="raise max-num-seqs"
                        if cap == "max-num-seqs"
                        else "use more GPUs or a shorter max-model-len"
                        if kvd.startswith("fp8")
                        else "use more GPUs, an fp8 KV cache, or a shorter max-model-len",
                    )
        return figures


_MISSING_NAME = "required: every deployment needs a name (used in messages)"


def _manifest_key(loc: tuple) -> str:
    """A kvplan.yaml key path as check prints it: ("deployments", 0, "name") -> deployments[0].name."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _lookup_ceiling(start: Path) -> Path:
    """The highest directory _node_map may read a kvplan.yaml from, for a file in ``start``
    (resolved): the repository root (nearest ``.git``), else the working directory when
    ``start`` is at or below it, else ``start`` itself."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    cwd = Path.cwd().resolve()
    return cwd if start == cwd or cwd in start.parents else start


def link_out_of_repository(path: Path) -> str | None:
    """Why ``path`` must not be read, or None: it lies in a git repository (nearest ``.git``
    above its own directory, as written) but resolves through a symbolic link to a file outside
    that repository. A link committed in a pull request could otherwise make CI print the values
    of any YAML file on the runner (fresh-eyes-6 N1); a file named outside any repository is the
    user's own choice and is read."""
    lexical = Path(os.path.abspath(path))
    repo = next((d for d in lexical.parents if (d / ".git").exists()), None)
    if repo is None:
        return None
    real = Path(os.path.realpath(lexical))
    real_repo = Path(os.path.realpath(repo))
    if real == real_repo or real_repo in real.parents:
        return None
    return (
        f"is a symbolic link to {real}, outside the repository ({real_repo}); kvplan does not follow "
        "links out of a repository, so a pull request cannot make CI print files elsewhere on the runner"
    )


def outside_boundary(target: Path, base_dir: Path, raw: str) -> tuple[str, str] | None:
    """(message, hint) when a file that a checked file refers to (a script's ``--config FILE``,
    a kvplan.yaml ``config: FILE``) lies outside the checked file's boundary, else None.

    The boundary is _lookup_ceiling's, the one the node_selectors search stops at: the
    repository root (nearest ``.git`` at or above ``base_dir``, the checked file's directory),
    else the working directory (else ``base_dir`` itself when it is not below the working
    directory). ``target`` is resolved (``..`` and symbolic links) but never opened: the caller
    reports the message and does not read the file, so its values cannot reach CI logs
    (fresh-eyes-5 H4). ``raw``: the path as the file wrote it (named in the message).
    """
    start = Path(os.path.realpath(base_dir))
    ceiling = _lookup_ceiling(start)
    real = Path(os.path.realpath(target))
    if real == ceiling or ceiling in real.parents:
        return None
    if (ceiling / ".git").exists():
        where = f"the repository ({ceiling})"
    elif ceiling == Path.cwd().resolve():
        where = f"the working directory ({ceiling}; no .git above the checked file)"
    else:
        where = f"the checked file's directory ({ceiling}; no .git above it, and it is not under the working directory)"
    via = "" if str(real) == os.path.normpath(os.path.join(os.path.abspath(target.parent), target.name)) else f" resolves to {real}, which"
    return (
        f"{raw}{via} is outside {where}; kvplan reads referenced files only inside it and did not read this one",
        "keep the config file inside the repository, or check it directly: kvplan check FILE",
    )


def _truncate2(x: float) -> float:
    """``x`` cut (not rounded) to 2 decimals: 4.5254 -> 4.52, so a capacity is never shown above
    what fits. The header of `kvplan check` and its notes both print this value."""
    return math.floor(x * 100 + 1e-9) / 100


def _concurrency_text(x: float) -> str:
    """How check prints a concurrency (requests of max-model-len tokens at once): 2 decimals,
    cut like _truncate2, the figure vLLM logs as 'Maximum concurrency ... %.2fx'."""
    return f"{_truncate2(x):.2f}"


def _override_overflows(b) -> bool:
    """With --kv-cache-memory-bytes vLLM allocates exactly that KV cache, whatever else is on the
    GPU (vLLM 0.26.0 v1/worker/gpu_worker.py determine_available_memory): it must fit next to
    the weights, activations, non-torch memory and CUDA graphs in the GPU's total bytes."""
    if not b.kv_cache_memory_override:
        return False
    used = b.weights_bytes + b.activation_peak_bytes + b.non_torch_bytes + b.cudagraph_bytes
    return used + b.kv_cache_bytes > b.total_bytes


def _pydantic_message(err: dict, model: type[BaseModel]) -> str:
    import difflib

    if err.get("type") == "extra_forbidden":
        name = str(err["loc"][-1])
        close = difflib.get_close_matches(name, list(model.model_fields), n=1)
        return "not a kvplan key" + (f"; did you mean {close[0]}?" if close else "")
    return plain_validation_message(err)


_PLAIN = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected a whole number",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "finite_number": "expected a finite number",
}


def plain_validation_message(err: dict) -> str:
    """A pydantic error as one plain line: "must be at least 1 (got 0)" rather than "Input
    should be greater than or equal to 1"; value errors keep their own text."""
    template = _PLAIN.get(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if template is not None:
        try:
            text = template.format(**ctx)
        except (KeyError, IndexError):
            text = err["msg"]
    else:
        text = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    return f"{text} (got {_yaml_shown(err.get('input'))})" if "input" in err else text


def _literal_hint(dep: Deployment) -> str:
    if dep.kind == "dockerfile":
        return 'write the value out, use the shell form (CMD vllm serve ...), or ["sh", "-c", "vllm serve $VAR ..."]'
    if dep.kind == "k8s":
        return "write $(NAME) with the variable in the container's env"
    return "write the value out, or `$VAR` (one $) for compose to substitute it"


STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


def is_stdin(path_text: str) -> bool:
    """Whether a file argument means standard input (``-``, ``/dev/stdin``, ``/dev/fd/0``)."""
    return path_text in STDIN_NAMES


def check_files(
    paths: list[str], *, gpu: str | None = None, gpu_profiles: list[str] | None = None, vllm_version: str = "0.26.0",
    stdin_name: str | None = None, stdin: bytes | None = None,
) -> Report:
    """Check deployment files; see Checker.

    Raises:
        KvplanError: unknown vLLM version or unreadable --gpu-profiles files (not file problems);
            standard input named twice, or ``stdin_name`` without standard input among ``paths``.
    """
    given = [p for p in paths if is_stdin(p)]
    if len(given) > 1:
        raise KvplanError(
            f"FILES: standard input is given {len(given)} times ({', '.join(given)}); it can be read once",
            hint="give - once",
        )
    if stdin_name is not None:
        if not stdin_name.strip():
            raise KvplanError("--stdin-name: empty", hint="give the file name standard input stands for, e.g. deploy.yaml")
        if not given:
            raise KvplanError("--stdin-name: no - among the files, so there is no standard input to name",
                              hint="add - to the files, or leave --stdin-name out")
    return Checker(
        gpu=gpu, gpu_profiles=gpu_profiles, vllm_version=vllm_version, stdin_name=stdin_name, stdin=stdin
    ).check_paths(paths)
