"""The model-family registry (kvplan.model.families): a new family is one module plus one line."""

from __future__ import annotations

import json

from fake_family import FOO
from helpers import run_cli

from kvplan.model import families
from kvplan.model.parse import parse_config
from kvplan.model.spec import LayerKind

FOO_CONFIG = {
    "architectures": ["FooForCausalLM"],
    "model_type": "foo",
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 6,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "sliding_window": 512,
    "torch_dtype": "bfloat16",
}


def test_fictitious_family_is_one_module_and_one_registry_line(monkeypatch, tmp_path):
    monkeypatch.setitem(families.FAMILIES, "FooForCausalLM", FOO)
    spec = parse_config(FOO_CONFIG, "foo-test")
    F, S = LayerKind.FULL, LayerKind.SLIDING
    assert spec.layer_kinds == (F, F, S, F, F, S)
    assert spec.sliding_window == 512
    assert spec.notes == ()  # a registered family: no "no kvplan rules" note

    (tmp_path / "config.json").write_text(json.dumps(FOO_CONFIG))
    code, out, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--max-model-len", "4096", "--format", "json")
    assert code == 0, err
    kv = json.loads(out)["kv_cache"]
    # K and V, 2 KV heads x 128 dims x 2 bytes (bf16), on each of the 6 layers that store per-token KV
    # (full and sliding alike count per token): 2 * 2 * 128 * 2 * 6.
    assert kv["bytes_per_token"] == 2 * 2 * 128 * 2 * 6 == 6144


def test_unregistered_architecture_is_sized_approximately():
    # Without the registry line the same config is an unknown model type: generic decoder, all
    # layers sliding (a model-wide window without layer_types), and the spec says it is not exact
    # (issue 12: the reasons are typed approximations, no longer a note among the warnings).
    spec = parse_config(FOO_CONFIG, "foo-test")
    assert spec.layer_kinds == (LayerKind.SLIDING,) * 6
    assert not spec.exact
    assert any("model_type 'foo' (FooForCausalLM) has no kvplan family" in a.reason for a in spec.approximations)


def test_every_registered_model_type_has_a_default_architecture():
    for arch, family in families.registered().items():
        for model_type in family.model_types:
            assert model_type in families.DEFAULT_ARCHITECTURE, (arch, model_type)
            # the registered family, or the variant it names for that text model type (InternVL)
            assert families.family_for(arch, model_type) is family.for_model_type(model_type) is not None
