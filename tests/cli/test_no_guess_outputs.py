"""Issue 12 part 3, "no silent guess", through the command line: an architecture without a kvplan
family, described by the standard keys alone, is sized (exit 0) and EVERY output says it is
approximate; the configs kvplan would have to guess on are exit 2 naming why; a registered
architecture says ``"exact": true``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli

# An architecture kvplan has no family for, standard keys only: 16 layers, 16 heads of 128,
# 4 KV heads, a gated MLP of 8192, bf16.
DENSE = {
    "architectures": ["FooForCausalLM"],
    "model_type": "foo",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 8192,
    "vocab_size": 100000,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
# The before-stop hook's config: expert keys in the Ernie-4.5 spelling, which no reader knows for
# an unknown family (read as dense, its weights would be 70-90 % low).
HOOK_MOE = {**DENSE, "architectures": ["FooMoeForCausalLM"], "model_type": "foo_moe",
            "moe_intermediate_size": 1024, "moe_num_experts": 64, "moe_k": 8}

REASON = "model_type 'foo' (FooForCausalLM) has no kvplan family"


def _dir(tmp_path: Path, config: dict, name: str = "m") -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


def _estimate(model: str, *extra: str) -> tuple[int, str, str]:
    return run_cli("estimate", model, "--gpu", "H200", "--max-model-len", "4096", *extra)


# -- exit 2: what kvplan would have to guess ----------------------------------------------------


@pytest.mark.parametrize("config, words", [
    (HOOK_MOE, ["'moe_num_experts'", "has no kvplan family", "mixture-of-experts"]),
    ({**DENSE, "kv_lora_rank": 512, "qk_rope_head_dim": 64}, ["'kv_lora_rank'", "latent attention"]),
    ({**DENSE, "mamba_d_state": 128, "hybrid_override_pattern": "M-M*"}, ["'mamba_d_state'", "'hybrid_override_pattern'"]),
    ({**DENSE, "num_hidden_layers": 2, "layer_types": ["full_attention", "linear_attention"]}, ["'layer_types[1]'"]),
    ({**DENSE, "architectures": ["BertForMaskedLM"], "model_type": "bert"},
     ["'BertForMaskedLM'", "only as a pooling/encoder model"]),
    ({**DENSE, "architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "is_encoder_decoder": True},
     ["'T5ForConditionalGeneration'", "encoder-decoder model"]),
])
def test_guesses_are_exit_2_with_nothing_on_stdout(tmp_path, config, words):
    code, out, err = _estimate(_dir(tmp_path, config), "--format", "json")
    assert code == 2 and out == ""
    for w in words:
        assert w in err
    assert "Traceback" not in err


def test_hook_config_is_not_exit_0_without_exact_false(tmp_path):
    # the before-stop hook's exact command line
    code, out, err = run_cli("estimate", _dir(tmp_path, HOOK_MOE), "--gpu", "H200", "--max-model-len", "4096",
                             "--format", "json")
    assert code == 2 and "moe_num_experts" in err


def test_check_fails_on_a_config_kvplan_would_guess(tmp_path):
    model = _dir(tmp_path, HOOK_MOE)
    script = tmp_path / "serve.sh"
    script.write_text(f"# kvplan: gpu=H200\nvllm serve {model} --max-model-len 4096\n")
    code, out, _ = run_cli("check", str(script), "--format", "json")
    doc = json.loads(out)
    assert code == 2
    assert any(d["check_id"] == "model-unresolved" and "moe_num_experts" in d["message"] for d in doc["diagnostics"])


# -- exit 0, exact false, visible everywhere ----------------------------------------------------


def test_estimate_json_says_exact_false_with_reasons(tmp_path):
    code, out, _ = _estimate(_dir(tmp_path, DENSE), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["exact"] is False
    assert any(REASON in r for r in doc["approximate"])
    assert any("MLP assumed gated" in r for r in doc["approximate"])


def test_approximate_estimate_json_validates_against_its_schema(tmp_path):
    import jsonschema

    from kvplan.render.schema import EstimateDocument, estimate_json_schema

    code, out, _ = _estimate(_dir(tmp_path, DENSE), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, estimate_json_schema())
    EstimateDocument.model_validate(doc)


def test_estimate_json_of_a_registered_architecture_is_exact(tmp_path):
    code, out, _ = _estimate(_dir(tmp_path, {**DENSE, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
                             "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["exact"] is True and "approximate" not in doc


def test_estimate_table_says_approximate_near_the_top_without_verbose(tmp_path):
    code, out, _ = _estimate(_dir(tmp_path, DENSE))
    assert code == 0
    lines = out.splitlines()
    # a line of its own within the first three lines (under the title, above the memory table)
    top = "\n".join(lines[:3])
    assert "approximate" in top and "not exact" in top, top
    assert REASON in " ".join(out.split())


@pytest.mark.parametrize("fmt", ["serve", "yaml"])
def test_serve_and_yaml_say_it_on_stderr(tmp_path, fmt):
    code, out, err = _estimate(_dir(tmp_path, DENSE), "--format", fmt)
    assert code == 0 and "4096" in out  # the line / YAML itself is unchanged on stdout
    assert "warning: approximate estimate" in err and REASON in err


def test_plan_table_marks_every_option(tmp_path):
    code, out, _ = run_cli("plan", _dir(tmp_path, DENSE), "--concurrency", "8", "--max-model-len", "4096",
                           "--gpus", "H200")
    assert code == 0
    lines = out.splitlines()
    assert "approximate, not exact" in " ".join(lines[:4])  # a note under the head line (which may wrap)
    assert REASON in " ".join(" ".join(lines).split())
    header = next(i for i, line in enumerate(lines) if line.startswith("#"))
    assert lines[header].split()[-1] == "exact"  # a marker column
    rows = [line for line in lines[header + 1:] if line[:1].isdigit() and "x " in line]
    assert rows and all(r.split()[-1] == "no" for r in rows)


def test_plan_json_says_exact_false(tmp_path):
    code, out, _ = run_cli("plan", _dir(tmp_path, DENSE), "--concurrency", "8", "--max-model-len", "4096",
                           "--gpus", "H200", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["exact"] is False and any(REASON in r for r in doc["approximate"])
    assert doc["options"] and all(o["exact"] is False for o in doc["options"])


def test_plan_json_of_a_registered_architecture_is_exact(tmp_path):
    model = _dir(tmp_path, {**DENSE, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    code, out, _ = run_cli("plan", model, "--concurrency", "8", "--max-model-len", "4096", "--gpus", "H200",
                           "--format", "json")
    doc = json.loads(out)
    assert doc["exact"] is True and all(o["exact"] is True for o in doc["options"])


def _script(tmp_path: Path, config: dict) -> str:
    model = _dir(tmp_path, config)
    script = tmp_path / "serve.sh"
    script.write_text(f"# kvplan: gpu=H200\nvllm serve {model} --max-model-len 4096\n")
    return str(script)


def test_check_warns_approximate_per_deployment(tmp_path):
    script = _script(tmp_path, DENSE)
    code, out, _ = run_cli("check", script, "--format", "json")
    doc = json.loads(out)
    assert code == 0
    hits = [d for d in doc["diagnostics"] if d["check_id"] == "approximate"]
    assert len(hits) == 1 and hits[0]["severity"] == "warning" and REASON in hits[0]["message"]
    code, out, _ = run_cli("check", script)
    assert code == 0
    assert "approximate: kvplan has no exact rules for this model" in " ".join(out.split())


def test_check_strict_fails_on_approximate(tmp_path):
    code, _, _ = run_cli("check", _script(tmp_path, DENSE), "--strict")
    assert code == 1


def test_check_of_a_registered_architecture_has_no_approximate_warning(tmp_path):
    script = _script(tmp_path, {**DENSE, "architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    code, out, _ = run_cli("check", script, "--format", "json", "--strict")
    assert code == 0
    assert not [d for d in json.loads(out)["diagnostics"] if d["check_id"] == "approximate"]
