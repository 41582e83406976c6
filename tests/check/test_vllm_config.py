"""`kvplan check` on vLLM --config YAML as vLLM's loader reads it: `false` dropped, duplicate keys, non-finite targets."""

from __future__ import annotations

from tests.check.common import R3, R4, _diags, _json


def test_false_is_dropped_as_vllm_0_26_0_does(tmp_path):
    # 0.26.0: `if isinstance(value, bool): if value: processed_args.append("--" + key)` -> a false
    # value adds nothing, so a default-on switch stays on.
    (tmp_path / "c.yaml").write_text("# kvplan: gpu=H100\nmodel: meta-llama/Llama-3.1-8B-Instruct\nenable-prefix-caching: false\n")
    code, doc = _json(str(tmp_path / "c.yaml"))
    (w,) = _diags(doc, "false-dropped")
    assert w["line"] == 3 and code == 0


def test_duplicate_key_in_config_yaml_warns_with_both_lines():
    # `model:` on lines 2 and 4; yaml.safe_load (vLLM's loader) keeps the last one
    code, doc = _json(str(R3 / "duplicate-model.yaml"))
    (d,) = _diags(doc, "duplicate-flag")
    assert d["severity"] == "warning" and d["line"] == 4 and d["key"] == "model"
    assert "line 2" in d["message"] and "line 4" in d["message"]
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert code == 0


def test_inf_min_concurrency_in_kvplan_block_is_refused():
    code, doc = _json(str(R4 / "inf-target.yaml"))
    (e,) = _diags(doc, "invalid-kvplan-key")
    assert (e["line"], e["key"]) == (3, "kvplan.min_concurrency")
    assert "finite" in e["message"] and "inf" in e["message"]
    assert _diags(doc, "min-concurrency") == []
    assert code == 2
