"""Variables in deployment files are expanded only where the platform expands them (review
item 20 and its kind).

* Dockerfile: the JSON (exec) form of CMD/ENTRYPOINT/RUN runs without a shell, so `$VAR` reaches
  vLLM as text; the shell form runs ``/bin/sh -c`` in the container, which sees ENV (not ARG).
  (Dockerfile reference: "Unlike the shell form, the exec form does not invoke a command shell.
  This means that normal shell processing does not happen.")
* Kubernetes: only ``$(VAR)`` is replaced in command/args, from the container's env.
* docker-compose: ``${VAR}`` in the file is replaced from the shell or the ``.env`` file where
  `docker compose` runs, not from the service's ``environment:``; ``$$`` is a literal ``$``.
"""

from __future__ import annotations

import shutil

from tests.check.common import check, DATA, diag, found, R4, write, _diags, _json

DOCKER = DATA / "docker"


def test_dockerfile_exec_form_passes_variables_literally():
    code, doc, _ = check(str(DOCKER / "Dockerfile.exec-vars"))
    assert code == 1  # vLLM would get a model named "${MODEL_ID}": a failed check, not exit 2
    assert found(doc, "error") == {("literal-variable", 5), ("literal-variable", 6)}
    by_key = {d["key"]: d for d in doc["diagnostics"]}
    assert "${MODEL_ID}" in by_key["--model"]["message"] and "exec form" in by_key["--model"]["message"]
    assert "$MAX_LEN" in by_key["--max-model-len"]["message"]
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "${MODEL_ID}" and dep["figures"] is None  # ARG/ENV values not used
    assert "model-unresolved" not in {d["check_id"] for d in doc["diagnostics"]}


def test_dockerfile_shell_form_still_expands_env_set_from_build_args():
    code, doc, _ = check(str(DOCKER / "Dockerfile.shell-form"))
    assert code == 0, doc["diagnostics"]
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "meta-llama/Llama-3.1-8B-Instruct"  # ENV MODEL=${MODEL_ID} at build time
    assert dep["figures"]["max_model_len"] == 8192  # ${MAX_LEN:-4096} with ENV MAX_LEN=8192


def test_dockerfile_exec_form_sh_c_is_expanded_by_the_shell():
    code, doc, _ = check(str(DOCKER / "Dockerfile.sh-c"))
    assert code == 0, doc["diagnostics"]
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_dockerfile_build_arg_is_not_seen_by_the_running_container():
    code, doc, _ = check(str(DOCKER / "Dockerfile.arg-only"))
    assert code == 2  # unknown at check time (docker run -e could set it), like any unset variable
    d = diag(doc, "model-unresolved")
    assert d["line"] == 4 and "ARG" in d["message"] and "ENV MODEL=${MODEL}" in d["hint"]


def test_dockerfile_stages_do_not_share_env(tmp_path):
    f = write(
        tmp_path,
        "Dockerfile",
        """
        FROM python:3.12 AS build
        ENV MODEL=meta-llama/Llama-3.1-8B-Instruct
        FROM vllm/vllm-openai:v0.26.0
        # kvplan: gpu=H100
        ENTRYPOINT vllm serve $MODEL --max-model-len 8192
        """,
    )
    code, doc, _ = check(f)
    assert code == 2 and diag(doc, "model-unresolved")["line"] == 5


def test_kubernetes_expands_only_dollar_parenthesis():
    code, doc, _ = check(str(DOCKER / "k8s-dollar-brace.yaml"))
    assert code == 1
    # lines 10-11: --model ${MODEL_ID} is passed as is (reported on the flag's line);
    # lines 12-13: --max-model-len $(MAX_LEN) is replaced with 8192.
    assert found(doc, "error") == {("literal-variable", 10)}
    d = diag(doc, "literal-variable")
    assert d["key"] == "--model" and "$(NAME)" in d["message"]


def test_compose_interpolates_from_dot_env_not_from_the_service_environment(tmp_path):
    code, doc, _ = check(str(DOCKER / "compose/docker-compose.yml"))
    assert code == 0, doc["diagnostics"]
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "meta-llama/Llama-3.1-8B-Instruct"  # .env, not environment: Qwen
    assert dep["figures"]["max_model_len"] == 8192  # ${MAX_LEN:-8192}
    # $$MODEL is a literal "$MODEL" for vLLM (no shell runs): the served name is "$MODEL"
    d = diag(doc, "literal-variable")
    assert (d["line"], d["key"], d["severity"]) == (7, "--served-model-name", "warning")
    # without the .env file the model is unknown: not taken from environment:
    lone = tmp_path / "docker-compose.yml"
    shutil.copy(DOCKER / "compose/docker-compose.yml", lone)
    code, doc, _ = check(str(lone))
    assert code == 2
    d = diag(doc, "model-unresolved")
    assert d["line"] == 7 and ".env" in d["message"]
    assert "Qwen" not in str(doc["files"][0]["deployments"][0]["model"])


def test_shell_scripts_keep_expanding(tmp_path):
    f = write(
        tmp_path,
        "serve.sh",
        """
        # kvplan: gpu=H100
        MODEL=meta-llama/Llama-3.1-8B-Instruct
        vllm serve "$MODEL" --max-model-len ${LEN:-8192}
        """,
    )
    code, doc, _ = check(f)
    assert code == 0, doc["diagnostics"]
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 8192


def test_shell_form_cmd_under_the_vllm_image_entrypoint_is_not_a_pass(tmp_path):
    # The vllm/vllm-openai image's ENTRYPOINT is ["vllm", "serve"] (exec form); a shell-form CMD
    # arrives as `vllm serve /bin/sh -c "--model ..."` (Dockerfile reference, CMD/ENTRYPOINT table).
    f = write(
        tmp_path,
        "Dockerfile",
        """
        FROM vllm/vllm-openai:v0.26.0
        # kvplan: gpu=H100
        CMD --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192
        """,
    )
    code, doc, _ = check(f)
    assert code == 1
    d = diag(doc, "invalid-value")
    assert (d["line"], d["key"]) == (3, "CMD") and "/bin/sh" in d["message"]
    # the exec form of the same CMD passes
    g = write(
        tmp_path,
        "ok/Dockerfile",
        """
        FROM vllm/vllm-openai:v0.26.0
        # kvplan: gpu=H100
        CMD ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
        """,
    )
    assert check(g)[0] == 0


def test_compose_command_mapping_is_an_error():
    # line 4: `command: {a: 1}`; compose accepts a string or a list only
    code, doc = _json(str(R4 / "compose-command-mapping.yaml"), "--gpu", "H100")
    (e,) = _diags(doc, "invalid-value")
    assert (e["severity"], e["line"], e["key"]) == ("error", 4, "services.llm.command")
    assert e["file"].endswith("review4/compose-command-mapping.yaml")
    assert _diags(doc, "no-deployment") == []
    assert code == 1
