"""`kvplan check` over YAML files of every shape: several documents, no deployment, and values
whose YAML type does not fit the flag (review items 12, 27 and 31).

vLLM 0.26.0 reads a `--config` file with ``yaml.safe_load`` (utils/argparse_utils.py
load_config_file): one document, one mapping; ``null`` becomes the text "None" and a list becomes
several words. Expected lines and messages below are read off the fixture files by hand.
"""

from __future__ import annotations

import pytest

from tests.check.common import check, DATA, diag, found, R3, write
from tests.helpers import run_cli


# --- several documents (item 12) ----------------------------------------------------------------


def test_trailing_separator_is_read_as_the_vllm_config_and_fails_as_vllm_would():
    # fail/trailing-separator.yaml: the config on lines 3-4, a stray `---` on line 5.
    code, doc, _ = check(str(DATA / "fail/trailing-separator.yaml"))
    assert doc["files"][0]["kind"] == "vllm-config"
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "meta-llama/Llama-3.1-8B-Instruct" and dep["gpu"] == "h100-sxm"
    assert dep["figures"]["max_model_len"] == 8192  # the document was read and checked
    # yaml.safe_load refuses a second document, even an empty one: `vllm serve --config` exits.
    assert found(doc, "error") == {("multiple-documents", 5)}
    d = diag(doc, "multiple-documents")
    assert "expected a single document" in d["message"] and "2 YAML documents" in d["message"]
    assert code == 1


def test_each_document_of_a_multi_document_config_is_checked():
    # fail/two-configs.yaml: 8192 tokens (fits an L4) then 131072 tokens on line 6.
    code, doc, _ = check(str(DATA / "fail/two-configs.yaml"))
    assert code == 1
    deps = doc["files"][0]["deployments"]
    assert len(deps) == 2
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 x 2 B = 128 KiB/token; 131072 tokens = 16 GiB,
    # more than an L4 (< 24e9 B in total) holds next to 16.06e9 B of weights.
    assert ("max-model-len-fits", 6) in found(doc, "error")
    assert diag(doc, "max-model-len-fits")["deployment"] == deps[1]["name"]
    assert ("multiple-documents", 4) in found(doc, "error")
    assert deps[0]["figures"]["max_model_len"] == 8192 and deps[0]["figures"]["fits"] is True


def test_kubernetes_documents_between_separators_pass():
    # A leading and a trailing `---` around a Service and a Deployment are fine for kubectl.
    code, doc, _ = check(str(DATA / "pass/k8s-with-separators.yaml"))
    assert code == 0, doc["diagnostics"]
    assert doc["files"][0]["kind"] == "k8s"
    (dep,) = doc["files"][0]["deployments"]
    assert dep["name"] == "Deployment/chat container vllm" and dep["gpu"] == "h100-sxm"
    assert dep["figures"]["max_model_len"] == 8192


def test_a_ci_workflow_is_searched_for_vllm_serve_lines():
    code, doc, _ = check(str(DATA / "pass/ci-workflow.yml"))
    assert code == 0, doc["diagnostics"]
    assert doc["files"][0]["kind"] == "command"
    (dep,) = doc["files"][0]["deployments"]
    assert dep["line"] == 9 and dep["figures"]["max_model_len"] == 8192


def test_manifest_and_config_with_a_trailing_separator(tmp_path):
    # kvplan reads kvplan.yaml itself, so an empty document after it is harmless; the vLLM
    # config it names is read by vLLM, which refuses the second document.
    write(tmp_path, "deploy/chat.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n---\n")
    m = write(
        tmp_path,
        "kvplan.yaml",
        """
        deployments:
          - name: chat
            config: deploy/chat.yaml
            gpu: H100
        ---
        """,
    )
    code, doc, _ = check(m)
    assert code == 1
    d = diag(doc, "multiple-documents")
    assert d["file"].endswith("deploy/chat.yaml") and d["line"] == 3
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 8192


# --- YAML with no deployment (items 12 and 31) --------------------------------------------------


@pytest.mark.parametrize(
    "name, words",
    [
        ("empty.yaml", "empty"),
        ("comments-only.yaml", "empty"),
        ("separator-only.yml", "empty"),
        ("scalar.yaml", "a single value"),
        ("list.yaml", "a list"),
        ("helm-values.yaml", "replicaCount, image"),
    ],
)
def test_yaml_without_a_deployment_fails(name, words):
    code, doc, _ = check(str(DATA / "yaml-shapes" / name), "--gpu", "H100")
    assert code == 1
    (d,) = doc["diagnostics"]
    assert (d["check_id"], d["severity"]) == ("no-deployment", "error")
    assert "no vLLM deployment" in d["message"] and words in d["message"]


def test_kubernetes_objects_without_vllm_are_a_note(tmp_path):
    # A k8s/ directory also holds Services and ConfigMaps: those pass with a note.
    f = write(tmp_path, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: chat}\n")
    code, doc, _ = check(f)
    assert code == 0
    d = diag(doc, "no-deployment")
    assert d["severity"] == "info" and "k8s" in d["message"]


# --- values whose YAML type does not fit the flag (item 27) -------------------------------------


def test_null_model_says_the_model_is_missing():
    code, doc, _ = check(str(DATA / "yaml-shapes/null-model.yaml"))
    assert code == 1  # vLLM would exit: a failed check, not unreadable input
    d = diag(doc, "model-missing")
    assert (d["line"], d["key"]) == (2, "model") and "null" in d["message"]
    texts = " ".join(x["message"] for x in doc["diagnostics"])
    assert "None:" not in texts and "HF_HUB_OFFLINE" not in texts
    assert "model-unresolved" not in {x["check_id"] for x in doc["diagnostics"]}


def test_empty_model_string_and_model_as_a_list(tmp_path):
    f = write(tmp_path, "e.yaml", 'model: ""\nmax-model-len: 8192\n')
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1 and found(doc, "error") == {("model-missing", 1)}
    g = write(tmp_path, "l.yaml", "model: [meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen2.5-7B-Instruct]\n")
    code, doc, _ = check(g, "--gpu", "H100")
    assert code == 1 and found(doc, "error") == {("invalid-value", 1)}  # not also "no model"
    assert "takes one value" in diag(doc, "invalid-value")["message"]


def test_list_null_and_non_boolean_values_name_their_key_and_are_not_evaluated():
    code, doc, _ = check(str(DATA / "yaml-shapes/list-value.yaml"))
    assert code == 1
    errors = {(d["check_id"], d["line"], d["key"]) for d in doc["diagnostics"] if d["severity"] == "error"}
    assert errors == {
        ("invalid-value", 3, "max-model-len"),  # [1, 2]
        ("invalid-value", 4, "enforce-eager"),  # 1 is not true/false
        ("invalid-value", 5, "tensor-parallel-size"),  # null -> "None", not an integer
    }
    by_line = {d["line"]: d["message"] for d in doc["diagnostics"]}
    assert "one value" in by_line[3] and "[1, 2]" in by_line[3]
    assert "switch" in by_line[4]
    assert "null" in by_line[5]
    assert 6 not in by_line  # kv-cache-memory-bytes: null is vLLM's "unset"
    # no finding about a stray "2" or "1", and no figures computed with max-model-len 1
    assert not any(d["key"] in ("1", "2") for d in doc["diagnostics"])
    assert doc["files"][0]["deployments"][0]["figures"] is None


def test_pydantic_wording_does_not_reach_the_user(tmp_path):
    f = write(
        tmp_path,
        "zero.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        tensor-parallel-size: 0
        kvplan:
          gpu: H100
          gpu_count: 0
        """,
    )
    code, doc, _ = check(f)
    assert code == 2  # the kvplan key is kvplan's own input
    msgs = {d["key"]: d["message"] for d in doc["diagnostics"]}
    assert msgs["tensor-parallel-size"].startswith("must be at least 1 (got 0)")
    assert msgs["kvplan.gpu_count"] == "must be at least 1 (got 0)"
    assert not any("Input should" in m for m in msgs.values())


def test_empty_yaml_is_not_labelled_command():
    code, out, _ = run_cli("check", str(R3 / "empty" / "empty.yaml"))
    first = out.splitlines()[0]
    assert "(command)" not in first and first.endswith("(yaml)")
    assert code == 1
