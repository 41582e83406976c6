"""``--hf-overrides`` in deployments: applied to the model's config as vLLM 0.26.0 applies it.

vLLM 0.26.0 config/model.py (ModelConfig.__post_init__, _apply_dict_overrides) and
transformers_utils/config.py (get_config): keys with a non-mapping value update the top-level
config; a mapping value is merged into an existing sub-config (text_config, ...) and replaces
any other attribute. The limit vLLM checks --max-model-len against is then the overridden
max_position_embeddings (config/model.py _get_and_verify_max_len on hf_text_config).
Qwen/Qwen3-8B's config.json has max_position_embeddings 40960 and no rope scaling.
"""

from __future__ import annotations

from tests.check.common import check, diag, write


def _ids(doc: dict) -> set[str]:
    return {d["check_id"] for d in doc["diagnostics"]}


def test_config_yaml_mapping_raises_the_limit(tmp_path):
    f = write(tmp_path, "deploy.yaml", """
        model: Qwen/Qwen3-8B
        max-model-len: 131072
        hf-overrides:
          max_position_embeddings: 262144
        """)
    code, doc, _ = check(f, "--gpu", "H200")
    assert code == 0, [d["text"] for d in doc["diagnostics"]]
    assert "max-model-len-over-limit" not in _ids(doc)
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 131072
    assert "max_position_embeddings" in diag(doc, "planner-note")["message"]


def test_json_on_the_command_line_and_dotted_keys(tmp_path):
    f = write(tmp_path, "serve.sh", """
        # kvplan: gpu=H200
        vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{"max_position_embeddings": 262144}'
        vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides.max_position_embeddings 262144
        vllm serve Qwen/Qwen3-8B --max-model-len 131072
        """)
    code, doc, _ = check(f)
    over = [d["line"] for d in doc["diagnostics"] if d["check_id"] == "max-model-len-over-limit"]
    assert over == [4]  # only the line without overrides: 131072 > 40960
    assert code == 1


def test_not_a_json_object_is_refused_as_vllm_does(tmp_path):
    f = write(tmp_path, "serve.sh", """
        # kvplan: gpu=H200
        vllm serve Qwen/Qwen3-8B --hf-overrides '{"max_position_embeddings": 262144'
        """)
    code, doc, _ = check(f)
    d = diag(doc, "invalid-value")
    assert code == 1 and d["key"] == "--hf-overrides" and "JSON object" in d["message"]


def test_overrides_kvplan_cannot_apply_are_a_warning(tmp_path):
    f = write(tmp_path, "serve.sh", """
        # kvplan: gpu=H200
        vllm serve Qwen/Qwen3-8B --hf-overrides "$OVERRIDES"
        vllm serve Qwen/Qwen3-8B --hf-overrides '{"max_position_embeddings": "long"}'
        """)
    code, doc, _ = check(f)
    warned = [d for d in doc["diagnostics"] if d["severity"] == "warning" and d["key"] == "--hf-overrides"]
    assert [d["line"] for d in warned] == [2, 3]
    assert all("not apply" in d["message"] or "cannot apply" in d["message"] for d in warned)
    assert code == 0


def test_multimodal_text_config_is_reached_only_through_text_config(tmp_path):
    # gemma-3-27b-it: the language model reads text_config (max_position_embeddings 131072)
    f = write(tmp_path, "serve.sh", """
        # kvplan: gpu=H200
        vllm serve google/gemma-3-27b-it --max-model-len 200000 --hf-overrides '{"max_position_embeddings": 262144}'
        vllm serve google/gemma-3-27b-it --max-model-len 200000 --hf-overrides '{"text_config": {"max_position_embeddings": 262144}}'
        """)
    code, doc, _ = check(f)
    over = [d["line"] for d in doc["diagnostics"] if d["check_id"] == "max-model-len-over-limit"]
    assert over == [2]
    assert any(d["line"] == 2 and d["severity"] == "warning" and "text_config" in d["message"] for d in doc["diagnostics"])


def test_apply_rules():
    from kvplan.model.overrides import apply_hf_overrides

    config = {
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
        "text_config": {"hidden_size": 8, "max_position_embeddings": 4096},
    }
    new, changed = apply_hf_overrides(
        config,
        {"max_position_embeddings": 8192, "rope_scaling": {"factor": 2.0}, "text_config": {"max_position_embeddings": 1}},
    )
    assert new["max_position_embeddings"] == 8192
    assert new["rope_scaling"] == {"factor": 2.0}  # a plain mapping is replaced, not merged
    assert new["text_config"] == {"hidden_size": 8, "max_position_embeddings": 1}  # a sub-config is merged
    assert config["text_config"]["max_position_embeddings"] == 4096  # the input is not changed
    assert set(changed) == {"max_position_embeddings", "rope_scaling", "text_config.max_position_embeddings"}
