"""kvplan's weight rules against an independent parameter count: the model transformers builds
on the meta device from the same config (tests/data/meta_param_counts.json, written offline by
benchmarks/oracle/meta_params.py, which records the transformers version and each config's
source; the configs are stored with their counts).

kvplan's count is what its weight path allocates (kvplan/engines/vllm/v0_26/weights.py,
``weight_bytes_per_rank`` at TP 1, unquantized) turned back into elements, minus what vLLM adds
on purpose and transformers does not have:
- the vocabulary padded to a multiple of 64 rows (vocab_parallel_embedding.py) in the embedding
  and an untied LM head: the oracle has ``vocab_size`` rows;
- PhiMoE's LM-head bias (phimoe.py builds ParallelLMHead with bias=True; family_quirks.py);
- load-time buffers that are no parameters (the RoPE cos/sin cache, the MLA W_UK/W_UV copies,
  the fp8-KV and untraced per-family extras) and the vision tower, compared on its own.
On the oracle's side persistent buffers are added: transformers keeps DeepSeek-style
``e_score_correction_bias`` as a buffer, but it is in the checkpoint and vLLM loads it as a
parameter.

Exact where vLLM loads the same tensors; every remaining difference is listed in
``KNOWN_DIFFERENCES`` with its reason, and is within the issue's 0.5 %.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.vllm.v0_26.family_quirks import quirks
from kvplan.engines.vllm.v0_26.weights import VOCAB_PADDING, weight_bytes_per_rank
from kvplan.errors import KvplanError
from kvplan.model.parse import parse_config
from kvplan.model.spec import ModelSpec

DATA = json.loads((Path(__file__).parents[1] / "data" / "meta_param_counts.json").read_text())
MODELS = DATA["models"]
COUNTED = sorted(k for k, e in MODELS.items() if "error" not in e)

# Parts of kvplan's weight tally that are not checkpoint parameters (see the module docstring).
NOT_PARAMETERS = {"rotary_cache", "vllm_extra", "fp8_kv_overhead", "mla_absorbed", "vision"}

TOLERANCE = 0.005  # issue 12: weights without a checkpoint within 0.5 % of the meta-device count


def _phimoe_attention_biases(spec: ModelSpec) -> int:
    """vLLM's phimoe.py builds q/k/v and o_proj with bias=True whatever the config says;
    transformers 5.x PhimoeAttention follows ``attention_bias`` (default False), which the
    partial bundled config omits. Per layer: q (heads x head_dim) + k + v (kv heads x head_dim)
    + o (hidden)."""
    a = spec.attention
    per_layer = a.num_attention_heads * a.head_dim + 2 * a.num_key_value_heads * a.head_dim + spec.hidden_size
    return spec.num_hidden_layers * per_layer


# key of meta_param_counts.json -> (kvplan minus oracle, in parameters, as a function of the spec; why)
KNOWN_DIFFERENCES = {
    "model_specs/microsoft__Phi-3.5-MoE-instruct.json": (_phimoe_attention_biases, "vLLM phimoe.py: biases always"),
    "families/phi3.5-moe_eager.log": (_phimoe_attention_biases, "vLLM phimoe.py: biases always"),
}


def kvplan_text_params(spec: ModelSpec) -> int:
    """Parameters (elements) of the text model as kvplan's weight rules lay them out, vLLM's
    deliberate additions removed (module docstring).

    The tally is in bytes, with some parts kept in fp32 whatever the dtype (Mamba/GDN A_log, D,
    dt_bias; fp32 routers). Tallying at 2 and at 4 bytes per dtype element separates them
    exactly: per part, B2 = 2 d + 4 f and B4 = 4 d + 4 f, so d = (B4 - B2) / 2 and
    f = (2 B2 - B4) / 4 elements."""
    b2 = weight_bytes_per_rank(spec, tensor_parallel_size=1, dtype_bytes=2).parts
    b4 = weight_bytes_per_rank(spec, tensor_parallel_size=1, dtype_bytes=4).parts
    total = 0
    for part, bytes2 in b2.items():
        if part in NOT_PARAMETERS:
            continue
        d, rem_d = divmod(b4[part] - bytes2, 2)
        f, rem_f = divmod(2 * bytes2 - b4[part], 4)
        assert rem_d == 0 and rem_f == 0 and d >= 0 and f >= 0, (part, bytes2, b4[part])
        total += d + f
    padded = -(-spec.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    heads = 1 if spec.tie_word_embeddings else 2
    total -= heads * (padded - spec.vocab_size) * spec.hidden_size
    if quirks(spec.model_type).lm_head_bias:
        total -= padded
    return total


def oracle_text_params(entry: dict) -> int:
    return entry["text_total"] + sum(entry.get("checkpoint_buffers", {}).values())


def _spec(key: str) -> ModelSpec:
    return parse_config(MODELS[key]["config"], key, vllm_version="0.26.0")


def test_the_oracle_data_says_how_it_was_made():
    assert DATA["generated_by"] == "benchmarks/oracle/meta_params.py"
    assert DATA["transformers_version"] and DATA["date"]
    assert all(e["source"] for e in MODELS.values())
    assert len(COUNTED) >= 90


def test_padding_arithmetic_by_hand():
    # Llama-3.1-8B: vocab 128256 is a multiple of 64 (no padding), untied; by hand: embeddings and
    # LM head 2 x 128256 x 4096, 32 layers of q (4096x4096) + k, v (1024x4096 each) + o (4096x4096)
    # + gate/up/down (3 x 4096 x 14336) + 2 norms (4096), final norm 4096.
    spec = _spec("model_specs/meta-llama__Llama-3.1-8B.json")
    per_layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096
    assert kvplan_text_params(spec) == 2 * 128256 * 4096 + 32 * per_layer + 4096 == 8_030_261_248
    # Phi-3-mini: vocab 32064 = 501 x 64 (no padding either); OPT-125m: 50272 = 785.5 x 64, so vLLM
    # pads to 50304 rows, 32 x 768 elements the oracle does not have (tied: counted once).
    opt = _spec("model_specs/facebook__opt-125m.json")
    raw = weight_bytes_per_rank(opt, tensor_parallel_size=1, dtype_bytes=2).parts["embed_tokens"] // 2
    assert raw == 50304 * 768 and kvplan_text_params(opt) == oracle_text_params(MODELS["model_specs/facebook__opt-125m.json"])


@pytest.mark.parametrize("key", COUNTED)
def test_text_weights_match_the_meta_device_count(key):
    entry = MODELS[key]
    try:
        spec = _spec(key)
    except KvplanError as exc:
        # No silent guess: a config kvplan has no rules for is refused naming why, never sized.
        assert "kvplan" in str(exc) or "config" in str(exc)
        pytest.skip(f"kvplan refuses it (exit 2): {str(exc)[:120]}")
    ours = kvplan_text_params(spec)
    theirs = oracle_text_params(entry)
    delta, why = KNOWN_DIFFERENCES.get(key, (lambda s: 0, "none"))
    if spec.exact:
        assert ours - theirs == delta(spec), (key, ours, theirs, why)
    assert abs(ours - theirs) <= TOLERANCE * theirs, (key, ours, theirs)


@pytest.mark.parametrize("key", [k for k in COUNTED if MODELS[k]["components"].get("vision")])
def test_multimodal_totals_within_tolerance(key):
    """Vision towers are sized from vision_config (kvplan/model/parse.py _vision_params, a
    ViT-style approximation, or the family's own count): text + vision within 0.5 % of the
    oracle's whole model, except where listed in VISION_KNOWN (reported, not hidden)."""
    try:
        spec = _spec(key)
    except KvplanError:
        pytest.skip("refused by kvplan")
    ours = kvplan_text_params(spec) + spec.vision_params
    theirs = MODELS[key]["total"] + sum(MODELS[key].get("checkpoint_buffers", {}).values())
    if key in VISION_KNOWN:
        pytest.xfail(VISION_KNOWN[key])
    assert abs(ours - theirs) <= TOLERANCE * theirs, (key, ours, theirs)


VISION_KNOWN = {
    "families/qwen3-vl-8b_eager.log": "Qwen3-VL's vision tower (deepstack mergers) is not the ViT shape kvplan "
    "approximates: 417 M vs 576 M parameters (no family yet)",
}
