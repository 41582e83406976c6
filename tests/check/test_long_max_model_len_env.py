"""`kvplan check` reads VLLM_ALLOW_LONG_MAX_MODEL_LEN from every place a deployment puts it in
vLLM's process environment, not only from a `NAME=value vllm serve` prefix: a Kubernetes
container's env (name/value), compose environment: (list and map forms), Dockerfile ENV and a
shell `export` line (vLLM 0.26.0 envs.py reads the variable from its environment; "1"/"true" is on).

Llama-2-7b-hf (bundled): max_position_embeddings 4096, no rope scaling, so --max-model-len 8192
is refused (error) unless the variable is on, then a warning.
"""

from __future__ import annotations

import pytest

from tests.check.common import check, diag, write

M = "meta-llama/Llama-2-7b-hf"
ARGS = f"{M} --max-model-len 8192"

K8S = f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.26.0
    args: ["--model", "{M}", "--max-model-len", "8192"]
    env:
    - name: VLLM_ALLOW_LONG_MAX_MODEL_LEN
      value: "{{v}}"
    resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
COMPOSE_LIST = f"""
services:
  vllm:
    image: vllm/vllm-openai:v0.26.0
    command: ["--model", "{M}", "--max-model-len", "8192"]
    environment:
      - VLLM_ALLOW_LONG_MAX_MODEL_LEN={{v}}
"""
COMPOSE_MAP = f"""
services:
  vllm:
    image: vllm/vllm-openai:v0.26.0
    command: ["--model", "{M}", "--max-model-len", "8192"]
    environment:
      VLLM_ALLOW_LONG_MAX_MODEL_LEN: "{{v}}"
"""
DOCKERFILE = f"""
FROM vllm/vllm-openai:v0.26.0
ENV VLLM_ALLOW_LONG_MAX_MODEL_LEN={{v}}
CMD ["--model", "{M}", "--max-model-len", "8192"]
"""
SHELL_EXPORT = f"""
#!/bin/sh
export VLLM_ALLOW_LONG_MAX_MODEL_LEN={{v}}
vllm serve {ARGS}
"""
CASES = {
    "k8s.yaml": K8S, "compose-list/docker-compose.yml": COMPOSE_LIST,
    "compose-map/docker-compose.yml": COMPOSE_MAP, "Dockerfile": DOCKERFILE, "serve.sh": SHELL_EXPORT,
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_variable_in_the_process_environment_is_honoured(tmp_path, name):
    on = write(tmp_path / "on", name, CASES[name].replace("{v}", "1"))
    code, doc, _ = check(on, "--gpu", "H100", "--vllm-version", "0.26.0")
    d = diag(doc, "max-model-len-over-limit")
    assert d["severity"] == "warning", d["message"]
    assert "vLLM accepts it" in d["message"]
    off = write(tmp_path / "off", name, CASES[name].replace("{v}", "0"))
    code, doc, _ = check(off, "--gpu", "H100", "--vllm-version", "0.26.0")
    assert code == 1 and diag(doc, "max-model-len-over-limit")["severity"] == "error"


def test_a_shell_variable_that_is_not_exported_does_not_reach_vllm(tmp_path):
    # POSIX: a plain assignment stays in the shell; only `export` (or a command prefix) passes it on
    f = write(tmp_path, "serve.sh", f"#!/bin/sh\nVLLM_ALLOW_LONG_MAX_MODEL_LEN=1\nvllm serve {ARGS}\n")
    code, doc, _ = check(f, "--gpu", "H100", "--vllm-version", "0.26.0")
    assert code == 1 and diag(doc, "max-model-len-over-limit")["severity"] == "error"
