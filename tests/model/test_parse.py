"""config.json values vLLM would not load, read through parse_config and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TINY_LLAMA, run_cli

from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config


def _dir(tmp_path: Path, **over) -> str:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**TINY_LLAMA, **over}))
    return str(d)


def test_integral_float_layer_count_is_refused(tmp_path):
    # transformers keeps 32.0 a float; vLLM's range(num_hidden_layers) raises TypeError
    code, out, err = run_cli("estimate", _dir(tmp_path, num_hidden_layers=2.0), "--gpu", "H100")
    assert code == 2 and out == ""
    assert "config key 'num_hidden_layers' must be an integer, got 2.0" in err


def test_zero_intermediate_size_of_a_dense_model_is_refused(tmp_path):
    code, out, err = run_cli("estimate", _dir(tmp_path, intermediate_size=0), "--gpu", "H100")
    assert code == 2 and out == ""
    assert "config key 'intermediate_size' must be >= 1 for a model with dense MLP layers, got 0" in err


@pytest.mark.parametrize("head_dim, warned", [(7, True), (20, True), (64, False), (36, False), (80, False)])
def test_head_dim_no_fast_attention_backend_takes_is_noted(head_dim, warned):
    # vLLM 0.26.0: FlashAttention takes multiples of 8 <= 256, FlashInfer 64/128/256/512,
    # Triton >= 32; 7 and 20 are taken by none of them (only FlexAttention); 36 goes to Triton
    spec = parse_config({**TINY_LLAMA, "head_dim": head_dim}, "m")
    assert any("head_dim" in n and "FlexAttention" in n for n in spec.notes) is warned


def test_parse_config_refuses_float_directly():
    with pytest.raises(KvplanError, match="num_attention_heads"):
        parse_config({**TINY_LLAMA, "num_attention_heads": 4.0}, "m")
