"""The findings of `kvplan check`: the check ids, one ``Diagnostic`` per finding, and the exit
code a list of them means (0 pass, 1 a check failed, 2 an input could not be read)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from kvplan.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK

# ---------------------------------------------------------------------------------------------
# Check ids
# ---------------------------------------------------------------------------------------------


PARSE_ERROR = "parse-error"  # the file cannot be read or parsed (exit 2)


NO_DEPLOYMENT = "no-deployment"  # nothing to check in the file (an error for YAML that is no deployment)


MULTIPLE_DOCUMENTS = "multiple-documents"  # a vLLM --config file with a `---`: vLLM's loader exits


LITERAL_VARIABLE = "literal-variable"  # a $VAR the platform passes as text (Dockerfile exec form ...)


UNKNOWN_FLAG = "unknown-flag"  # the vLLM version checked has no such flag: `vllm serve` exits


REMOVED_FLAG = "removed-flag"  # a flag of an older vLLM that this version rejects (swap-space ...)


NEWER_FLAG = "newer-flag"  # a flag only newer vLLM releases have (not yet in the deployment's release)


IGNORED_FLAG = "ignored-flag"  # accepted, but this vLLM version does nothing with it


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


APPROXIMATE = "approximate"  # the model's architecture has no kvplan family: figures are approximate


UTILIZATION_RANGE = "gpu-memory-utilization-range"


TP_DIVISIBILITY = "tp-divisibility"


KV_HEAD_REPLICATION = "kv-head-replication"


MAX_MODEL_LEN_LIMIT = "max-model-len-over-limit"


FP8_KV_UNSUPPORTED = "fp8-kv-unsupported-gpu"


GPU_COUNT = "gpu-count"


REPLICAS = "replicas"  # a serving stack's replicas of an engine: the figures are per replica


HOST_MEMORY = "host-memory"  # the container's memory limit holds less than vLLM's CPU KV offload buffer


SHARED_GPU = "shared-gpu"  # vLLM processes on one host whose utilizations of a GPU sum above 1


WEIGHTS_FIT = "weights-fit"


CUDA_GRAPHS_FIT = "cuda-graphs-fit"  # the planner's StartOutcome.CUDA_GRAPH_CAPTURE_OOM


MAX_MODEL_LEN_FITS = "max-model-len-fits"


MAX_NUM_SEQS = "max-num-seqs"


MIN_CONCURRENCY = "min-concurrency"


MAX_GPU_MEMORY_UTILIZATION = "max-gpu-memory-utilization"


ENGINE_REJECTS = "engine-rejects"  # the planner found another reason vLLM refuses the args


PLANNER_NOTE = "planner-note"


NODE_SELECTORS = "node-selectors"  # which kvplan.yaml's node_selectors gave a Kubernetes pod its GPU


VLLM_VERSION = "vllm-version"  # which vLLM version a deployment was checked with, why, and its evidence


HOST_MEMORY = "host-memory"  # weight/KV offload host memory against the container's memory limit


SHM_SIZE = "shm-size"  # vLLM's /dev/shm KV offload region against the container's /dev/shm (check.rules.shm)


SHM_QUEUES = "shm-queues"  # a multi-GPU engine's shared-memory rings (and NCCL) against the container's /dev/shm


# Errors with these ids mean "kvplan could not read/evaluate the input" -> exit 2.
INPUT_ERROR_IDS = frozenset({PARSE_ERROR, MODEL_UNRESOLVED, GPU_MISSING, GPU_UNKNOWN, INVALID_KVPLAN_KEY})


Severity = Literal["error", "warning", "info"]


class Diagnostic(BaseModel):
    """One finding about one deployment file.

    Attributes:
        check_id: stable id, e.g. "max-model-len-fits" (see the constants in kvplan.check.diagnostics).
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
