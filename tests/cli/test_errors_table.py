"""docs/errors.md, row by row: each bad input runs through the real command line (in-process,
tests/helpers.py run_cli) and must give the documented exit code and message.

Every row names one input class, the command, the exit code and a stable part of the message
(paths under the test's tmp_path vary, so the fragments leave them out). Rows where kvplan does
not yet behave as documented are ``xfail(strict=True)``: the row states what it SHOULD do.
Hub rows run against tests/hf_server.py's local FakeHub (no internet).

``test_every_row_is_in_docs_errors_md`` keeps the page and this table in step: each row's first
fragment must appear in docs/errors.md verbatim.
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from helpers import TINY_LLAMA, run_cli
from hf_server import fake_hub, safetensors_bytes, set_hf_env  # noqa: F401 - fixture

from kvplan.sources.bundled import find_bundled

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
LLAMA3_8B = "meta-llama/Meta-Llama-3-8B"  # bundled (32 heads, 8 KV heads, 32 layers, 8192 positions)
LLAMA_CFG = find_bundled(LLAMA3_8B).config


def _config_dir(tmp: Path, content: str | bytes | dict, name: str = "model") -> str:
    """A model directory holding config.json with ``content`` (a dict is written as JSON)."""
    d = tmp / name
    d.mkdir(exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content)
    data = content.encode() if isinstance(content, str) else content
    (d / "config.json").write_bytes(data)
    return str(d)


def _llama(**over) -> dict:
    return {**LLAMA_CFG, **over}


def _without(key: str) -> dict:
    return {k: v for k, v in LLAMA_CFG.items() if k != key}


def _file(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def _sparse(tmp: Path, name: str, size: int, head: bytes = b"") -> str:
    """A file of ``size`` bytes that costs no disk: ``head`` then a hole (NUL bytes)."""
    path = tmp / name
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return str(path)


def _big_config_dir(tmp: Path) -> str:
    d = tmp / "big"
    d.mkdir()
    _sparse(d, "config.json", MB100, b'{"pad": "')
    return str(d)


def _huge_config_dir(tmp: Path) -> str:
    d = tmp / "huge"
    d.mkdir()
    _sparse(d, "config.json", 3 << 30, b"{")  # sparse: no disk, but 3 GiB if read whole
    return str(d)


def _alias_bomb(top: str) -> str:
    """A 'billion laughs' YAML document: 9 levels of 9 aliases (9**9 nodes once expanded)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n" + top.replace("BOMB", f"*{prev}") + "\n"


def _safetensors_dir(tmp: Path, header: dict | None = None, raw: bytes | None = None) -> str:
    d = Path(_config_dir(tmp, LLAMA_CFG))
    if raw is None:
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        raw = struct.pack("<Q", len(text)) + text + b"\0" * 64
    (d / "model.safetensors").write_bytes(raw)
    return str(d)


MB100 = 100 * 1024 * 1024


@dataclass(frozen=True)
class Row:
    """One row of docs/errors.md.

    Attributes:
        id: the row's name (pytest id).
        argv: builds the command line (files under the given tmp dir); the program name excluded.
        code: the exit code.
        fragments: stable parts of the message, all required; the first is quoted in the docs.
        stream: "err" (one ``error:`` line on stderr) or "out" (kvplan check's report).
        xfail: why kvplan does not behave like this yet (the row says what it should do).
        isolated: run ``python -m kvplan`` in a child process with a 1 GiB address-space limit
            (for inputs that could make a misbehaving kvplan allocate gigabytes).
    """

    id: str
    argv: Callable[[Path], list[str]]
    code: int
    fragments: tuple[str, ...]
    stream: str = "err"
    xfail: str | None = None
    isolated: bool = False


def E(*args: str) -> Callable[[Path], list[str]]:  # noqa: N802 - reads like a command line
    return lambda tmp: ["estimate", *args]


ROWS: list[Row] = [
    # -- config.json: syntax, encoding, size ---------------------------------------------------
    Row(
        "malformed-json",
        lambda t: ["estimate", _config_dir(t, '{"model_type": "llama",\n  "hidden_size": 4096,\n}')],
        2,
        ("config.json:3: not valid JSON (Expecting property name enclosed in double quotes)",),
    ),
    Row("empty-config", lambda t: ["estimate", _config_dir(t, "")], 2, ("config.json:1: not valid JSON (Expecting value)",)),
    Row(
        "json-not-an-object",
        lambda t: ["estimate", _config_dir(t, "[1, 2]")],
        2,
        ("config.json: config.json must hold a JSON object, got a JSON list",),
    ),
    Row(
        "json-nested-too-deep",
        lambda t: ["estimate", _config_dir(t, "[" * 100_000 + "]" * 100_000)],
        2,
        ("config.json: JSON nested more than 64 levels deep; not a model file",),
    ),
    Row(
        "config-not-utf8",
        lambda t: ["estimate", _config_dir(t, b'{"model_type": "ll\xffama"}')],
        2,
        ("config.json: not UTF-8 text (bad byte at offset 18)",),
    ),
    Row(
        "config-100mb",
        lambda t: ["estimate", _big_config_dir(t)],
        2,
        ("config.json: 104,857,600 bytes is too large (limit 16 MiB)",),
    ),
    Row(
        "config-3gb",
        lambda t: ["estimate", _huge_config_dir(t)],
        2,
        ("config.json: 3,221,225,472 bytes is too large (limit 16 MiB)",),
        isolated=True,
    ),
    Row(
        "no-config-json",
        lambda t: ["estimate", str(t)],
        2,
        (": no config.json in this directory", "hint: give the model directory that holds config.json"),
    ),
    Row(
        "limit-mm-per-prompt-bad",
        lambda t: ["estimate", LLAMA3_8B, "--limit-mm-per-prompt", "image=0"],
        2,
        ("--limit-mm-per-prompt: must be a JSON object of modality -> count",),
    ),
    Row("no-such-directory", E("./no/such/dir"), 2, ("./no/such/dir: no such directory",)),
    Row(
        "model-name-too-long",
        E("a/" + "b" * 5000),
        2,
        ("... (5,002 characters): cannot read: File name too long",),
    ),
    # -- config.json: keys, types, values ------------------------------------------------------
    Row(
        "missing-key",
        lambda t: ["estimate", _config_dir(t, _without("num_attention_heads"))],
        2,
        ("config.json is missing required key 'num_attention_heads / n_head / num_heads'",),
    ),
    Row(
        "missing-model-type",
        lambda t: ["estimate", _config_dir(t, _without("model_type"))],
        2,
        ("config.json is missing required key 'model_type'",),
    ),
    Row(
        "wrong-type-string-number",
        lambda t: ["estimate", _config_dir(t, _llama(hidden_size="4096"))],
        2,
        ("config key 'hidden_size' must be an integer, got '4096'",),
    ),
    Row(
        "wrong-type-positions-string",
        lambda t: ["estimate", _config_dir(t, _llama(max_position_embeddings="8192"))],
        2,
        ("config key 'max_position_embeddings' must be an integer, got '8192'",),
    ),
    Row(
        "wrong-type-nested",
        lambda t: ["estimate", _config_dir(t, _llama(rope_scaling={"type": "linear", "factor": "abc"}))],
        2,
        ("config key 'rope_scaling.factor' must be a number, got 'abc'",),
    ),
    Row(
        "zero",
        lambda t: ["estimate", _config_dir(t, _llama(num_hidden_layers=0))],
        2,
        ("config key 'num_hidden_layers' must be >= 1, got 0",),
    ),
    Row(
        "negative",
        lambda t: ["estimate", _config_dir(t, _llama(num_key_value_heads=-8))],
        2,
        ("config key 'num_key_value_heads' must be >= 1, got -8",),
    ),
    Row(
        "negative-rope-factor",
        lambda t: ["estimate", _config_dir(t, _llama(rope_scaling={"type": "linear", "factor": -4}))],
        2,
        ("config key 'rope_scaling.factor' must be > 0, got -4",),
    ),
    Row(
        "nan",
        lambda t: ["estimate", _config_dir(t, '{"hidden_size": NaN, ' + json.dumps(_without("hidden_size"))[1:])],
        2,
        ("config key 'hidden_size' must be an integer, got nan",),
    ),
    Row(
        "infinity",
        lambda t: ["estimate", _config_dir(t, '{"intermediate_size": Infinity, ' + json.dumps(_without("intermediate_size"))[1:])],
        2,
        ("config key 'intermediate_size' must be an integer, got inf",),
    ),
    Row(
        "integral-float",
        lambda t: ["estimate", _config_dir(t, _llama(num_hidden_layers=32.0))],
        2,
        ("config key 'num_hidden_layers' must be an integer, got 32.0 (a JSON float: vLLM builds layers and tensor shapes from it and fails; write 32)",),
    ),
    Row(
        "intermediate-size-zero",
        lambda t: ["estimate", _config_dir(t, _llama(intermediate_size=0))],
        2,
        ("config key 'intermediate_size' must be >= 1 for a model with dense MLP layers, got 0",),
    ),
    Row(
        "huge-layer-count",
        lambda t: ["estimate", _config_dir(t, _llama(num_hidden_layers=10**12))],
        2,
        ("config key 'num_hidden_layers' is 1,000,000,000,000, above kvplan's limit of 4,096",),
    ),
    Row(
        "huge-hidden-size",
        lambda t: ["estimate", _config_dir(t, _llama(hidden_size=10**30))],
        2,
        ("config key 'hidden_size' is 1,000,000,000,000,000,000,000,000,000,000, above kvplan's limit of 262,144",),
    ),
    Row(
        "unknown-quant-method",
        lambda t: ["estimate", _config_dir(t, _llama(quantization_config={"quant_method": "magic"}))],
        2,
        ("quantization_config.quant_method 'magic'",),
    ),
    # -- architectures: not generative, or a guess (issue 12 part 3) ---------------------------
    Row(
        "pooling-only-architecture",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["BertForMaskedLM"], model_type="bert")), "--vllm-version", "0.26.0"],
        2,
        ("architecture 'BertForMaskedLM' (model_type 'bert') is an encoder-only model: vLLM 0.26.0 runs it only "
         "as a pooling/encoder model (embedding, classification or scoring: `--runner pooling`), which keeps no KV "
         "cache for generation; there is no generative start to size",),
    ),
    Row(
        "pooling-head",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["LlamaForSequenceClassification"])), "--vllm-version", "0.26.0"],
        2,
        ("architecture 'LlamaForSequenceClassification' (model_type 'llama') is not a generative model: vLLM 0.26.0 "
         "runs it only as a pooling/encoder model",),
    ),
    Row(
        "encoder-decoder",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["T5ForConditionalGeneration"], model_type="t5",
                                                      is_encoder_decoder=True)), "--vllm-version", "0.26.0"],
        2,
        ("architecture 'T5ForConditionalGeneration' (model_type 't5') is an encoder-decoder model: vLLM 0.26.0 does "
         "not serve it as a generative model (encoder-decoder models other than Whisper were removed with vLLM's V0 "
         "engine; BART / mBART / Florence-2 only through the vllm-project/bart-plugin)",),
    ),
    Row(
        "unknown-family-expert-keys",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FooMoeForCausalLM"], model_type="foo_moe",
                                                      moe_intermediate_size=1024, moe_num_experts=64, moe_k=8))],
        2,
        ("model_type 'foo_moe' (FooMoeForCausalLM) has no kvplan family, and config.json has keys that change its "
         "size which kvplan cannot read without one: 'moe_intermediate_size', 'moe_num_experts', 'moe_k' "
         "(mixture-of-experts layout (routed/shared experts, dense-layer pattern)); sizing it as a standard dense "
         "decoder would be wrong, so kvplan refuses to guess",
         "hint: kvplan sizes an architecture without a family only from the standard keys"),
    ),
    Row(
        "dense-family-expert-keys",
        lambda t: ["estimate", _config_dir(t, _llama(num_local_experts=8, num_experts_per_tok=2)), "--vllm-version", "0.26.0"],
        2,
        ("LlamaForCausalLM is a dense family in kvplan, but config.json has mixture-of-experts keys "
         "('num_local_experts', 'num_experts_per_tok') that its rules do not read; sizing the experts as absent would "
         "be wrong, so kvplan refuses to guess",
         "hint: check the config's architectures entry; a MoE variant needs its own kvplan family"),
    ),
    Row(
        "unknown-family-mla-keys",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FooForCausalLM"], model_type="foo",
                                                      kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64))],
        2,
        ("'kv_lora_rank', 'q_lora_rank', 'qk_rope_head_dim' (multi-head latent attention (compressed KV latent, "
         "sparse indexer))", "has no kvplan family"),
    ),
    Row(
        "unknown-family-state-keys",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FooForCausalLM"], model_type="foo",
                                                      ssm_state_size=128))],
        2,
        ("'ssm_state_size' (Mamba / SSM / linear-attention state)", "has no kvplan family"),
    ),
    Row(
        "starcoder2-without-biases",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Starcoder2ForCausalLM"], model_type="starcoder2",
                                                      use_bias=False))],
        2,
        ("config key 'use_bias' is false: kvplan's StarCoder2 rules (kvplan/model/families/starcoder2.py) know only "
         "the biased layout every published StarCoder2 config uses",),
    ),
    Row(
        "ernie45-moe-with-biases",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Ernie4_5_MoeForCausalLM"], model_type="ernie4_5_moe",
                                                      moe_num_experts=8, moe_k=2, moe_intermediate_size=1024,
                                                      use_bias=True))],
        2,
        ("config key 'use_bias' is true: kvplan's ERNIE-4.5-MoE rules (kvplan/model/families/ernie45.py) know only "
         "the unbiased layout every published ERNIE-4.5 MoE config uses",),
    ),
    Row(
        "hunyuan-cross-layer-attention",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["HunYuanDenseV1ForCausalLM"],
                                                      model_type="hunyuan_v1_dense", use_cla=True, cla_share_factor=2))],
        2,
        ("config key 'use_cla' is true with cla_share_factor > 1: vLLM builds the sharing layers as encoder-decoder "
         "attention, for which kvplan has no KV-cache rule",),
    ),
    Row(
        "hunyuan-moe-per-layer-lists",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["HunYuanMoEV1ForCausalLM"], model_type="hunyuan_v1_moe",
                                                      num_experts=8, moe_topk=[2] * 31 + [1]))],
        2,
        ("config key 'moe_topk' differs between layers: kvplan's Hunyuan rules (kvplan/model/families/hunyuan.py) "
         "size one MoE shape for every layer",),
    ),
    Row(
        "mistral3-vision-feature-layer",
        lambda t: ["estimate", _config_dir(t, {
            "architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "vision_feature_layer": 30,
            "text_config": {**LLAMA_CFG, "model_type": "mistral"},
            "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096,
                              "num_hidden_layers": 24, "num_attention_heads": 16, "patch_size": 14}})],
        2,
        ("config key 'vision_feature_layer' must be a layer index (or a list of them) within the 24 vision layers, "
         "got 30",),
    ),
    Row(
        "bailing-with-biases",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["BailingMoeV2ForCausalLM"], model_type="bailing_moe",
                                                      num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024,
                                                      use_bias=True))],
        2,
        ("config key 'use_bias' is true: kvplan's Bailing rules (kvplan/model/families/bailing.py) know only the "
         "unbiased layout every published Ling config uses",),
    ),
    Row(
        "bailing-layernorm-qk-norm",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["BailingMoeV2ForCausalLM"], model_type="bailing_moe",
                                                      num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024,
                                                      use_qk_norm=True))],
        2,
        ("config key 'use_qk_norm' is true without use_rmsnorm: vLLM's bailing_moe.py then builds LayerNorm q/k norms "
         "with biases, which kvplan's rules do not lay out",),
    ),
    Row(
        "falcon-mlp-width",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FalconForCausalLM"], model_type="falcon",
                                                      ffn_hidden_size=20000))],
        2,
        ("config key 'ffn_hidden_size' is 20,000, but vLLM's Falcon MLP is always 4 x hidden_size",),
    ),
    Row(
        "unknown-family-layer-type",
        lambda t: ["estimate", _config_dir(t, _llama(
            architectures=["FooForCausalLM"], model_type="foo", num_hidden_layers=2,
            layer_types=["full_attention", "linear_attention"]))],
        2,
        ("'layer_types[1]' (layer type 'linear_attention')", "has no kvplan family"),
    ),
    Row(
        "unknown-family-per-layer",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FooForCausalLM"], model_type="foo",
                                                      num_key_value_heads=[8] * 32))],
        2,
        ("'num_key_value_heads' (per-layer list (one value per layer))", "has no kvplan family"),
    ),
    Row(
        "family-refused-gemma4",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Gemma4ForConditionalGeneration"],
                                                      model_type="gemma4_text")), "--vllm-version", "0.26.0"],
        2,
        ("Gemma4ForConditionalGeneration (model_type 'gemma4_text'): vLLM 0.26.0 does not start it: with "
         "transformers 5.17 its config reader raises AmbiguousGlobalPerLayerAttributeError",),
    ),
    Row(
        "family-key-no-rules-yet",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Gemma4ForConditionalGeneration"],
                                                      model_type="gemma4_text", num_kv_shared_layers=4)),
                   "--vllm-version", "0.33.0"],
        2,
        ("config key 'num_kv_shared_layers' is 4: kvplan has no rules yet for Gemma-4's KV-shared layers",),
    ),
    Row(
        "zamba2-default-pattern",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Zamba2ForCausalLM"], model_type="zamba2"))],
        2,
        ("config.json has no 'layers_block_type' and transformers' Zamba2Config default pattern has 54 layers, "
         "not num_hidden_layers",),
    ),
    Row(
        "mimo-pattern-missing",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["MiMoV2FlashForCausalLM"],
                                                      model_type="mimo_v2_flash"))],
        2,
        ("config.json is missing required key 'hybrid_layer_pattern' (vLLM's MiMo-V2 reads it for every layer)",),
    ),
    Row(
        "hybrid-override-pattern-bad",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["NemotronHForCausalLM"], model_type="nemotron_h",
                                                      num_hidden_layers=2, hybrid_override_pattern="MX"))],
        2,
        ("config key 'hybrid_override_pattern' has unknown layer type 'X' at layer 1 (vLLM's NemotronH takes M, *, - "
         "and E)",),
    ),
    Row(
        "ssm-dtype-bad",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["NemotronHForCausalLM"], model_type="nemotron_h",
                                                      num_hidden_layers=1, hybrid_override_pattern="*",
                                                      mamba_ssm_cache_dtype="float64"))],
        2,
        ("config key 'mamba_ssm_cache_dtype' must be one of float32, float16, bfloat16, got 'float64'",),
    ),
    Row(
        "mamba2-heads-width",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Mamba2ForCausalLM"], model_type="mamba2",
                                                      num_heads=100, head_dim=64, expand=2))],
        2,
        ("config key 'num_heads' x head_dim (100 x 64) must equal expand x hidden_size (2 x 4096), as transformers' "
         "Mamba2Config requires",),
    ),
    Row(
        "falcon-h1-heads-width",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["FalconH1ForCausalLM"], model_type="falcon_h1",
                                                      mamba_d_ssm=3072, mamba_n_heads=20, mamba_d_head=128))],
        2,
        ("config key 'mamba_n_heads' x mamba_d_head (20 x 128) must equal the Mamba width mamba_d_ssm (3072), as "
         "transformers' FalconH1Config requires",),
    ),
    Row(
        "kimi-linear-attn-config-key",
        lambda t: ["estimate", _config_dir(t, _llama(
            architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", kv_lora_rank=512, qk_rope_head_dim=64,
            qk_nope_head_dim=128, v_head_dim=128, mla_use_nope=True,
            linear_attn_config={"head_dim": 128, "num_heads": 32, "short_conv_kernel_size": 4, "num_k_heads": 16,
                                "kda_layers": [1], "full_attn_layers": list(range(2, 33))}))],
        2,
        ("config key 'linear_attn_config.num_k_heads' is not a key kvplan reads",),
    ),
    Row(
        "lfm2-conv-dim",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["Lfm2ForCausalLM"], model_type="lfm2",
                                                      conv_dim=1024))],
        2,
        ("config key 'conv_dim' (1024) must equal hidden_size (4096): vLLM's LFM2 short conv projects the hidden "
         "state with conv_dim inputs",),
    ),
    Row(
        "chatglm-kv-channels",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["ChatGLMModel"], model_type="chatglm", kv_channels=64))],
        2,
        ("config key 'kv_channels' is 64, but vLLM's ChatGLM head size is always hidden_size / num_attention_heads (128)",),
    ),
    Row(
        "mpt-without-alibi",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["MPTForCausalLM"], model_type="mpt",
                                                      attn_config={"alibi": False})), "--vllm-version", "0.26.0"],
        2,
        ("config key 'attn_config.alibi' is false: vLLM's MPT supports ALiBi positions only (mpt.py asserts alibi)",),
    ),
    Row(
        "architecture-removed-by-vllm",
        lambda t: ["estimate", _config_dir(t, _llama(architectures=["MPTForCausalLM"], model_type="mpt")),
                   "--vllm-version", "0.33.0"],
        2,
        ("no longer serves MPTForCausalLM: its registry says it was supported until v0.28.0 and refuses to load it",),
    ),
    Row(
        "internvl-select-layer",
        lambda t: ["estimate", _config_dir(t, {
            "architectures": ["InternVLChatModel"], "model_type": "internvl_chat", "llm_config": LLAMA_CFG,
            "select_layer": 24, "vision_config": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                                                  "patch_size": 14, "image_size": 448, "norm_type": "layer_norm"}})],
        2,
        ("config key 'select_layer' must be a layer index within the 24 vision layers, got 24",),
    ),
    # -- safetensors next to config.json -------------------------------------------------------
    Row(
        "safetensors-unknown-dtype",
        lambda t: ["estimate", _safetensors_dir(t, {"w": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}})],
        2,
        ("unreadable safetensors header (tensor 'w': dtype 'Q4_K' is not a safetensors dtype (safetensors knows BOOL, U8",),
    ),
    Row(
        "safetensors-bad-shape",
        lambda t: [
            "estimate",
            _safetensors_dir(t, {"model.embed_tokens.weight": {"dtype": "BF16", "shape": "x", "data_offsets": [0, 4]}}),
        ],
        2,
        ("model.safetensors: unreadable safetensors header (tensor 'model.embed_tokens.weight': shape must be a list of integers >= 0, got 'x')",),
    ),
    Row(
        "safetensors-huge-header",
        lambda t: ["estimate", _safetensors_dir(t, raw=struct.pack("<Q", 10**9) + b"{")],
        2,
        ("model.safetensors: unreadable safetensors header (declares a 1,000,000,000-byte header; safetensors allows 100,000,000)",),
    ),
    # -- GPU --------------------------------------------------------------------------------------
    Row("unknown-gpu", E(LLAMA3_8B, "--gpu", "H2OO"), 2, ("--gpu: unknown GPU 'H2OO'; did you mean h200, gh200, h20?",)),
    Row(
        "gpu-memory-unreadable",
        E(LLAMA3_8B, "--gpu-memory", "abc"),
        2,
        ("--gpu-memory: cannot read 'abc' as a size", "hint: write bytes (85899345920) or a unit: 80GiB, 81920MiB, 80GB"),
    ),
    Row("gpu-memory-zero", E(LLAMA3_8B, "--gpu-memory", "0"), 2, ("--gpu-memory: must be a positive size, got '0'",)),
    Row(
        "gpu-memory-huge",
        E(LLAMA3_8B, "--gpu-memory", "99999999999999999999999999GiB"),
        2,
        ("--gpu-memory: '99999999999999999999999999GiB' is larger than any memory (limit 2**63 - 1 bytes)",),
    ),
    Row(
        "gpu-profiles-name-too-long",
        E(LLAMA3_8B, "--gpu-profiles", "b" * 5000),
        2,
        ("--gpu-profiles bbbbbbbbbb", "... (5,000 characters): cannot read: File name too long"),
    ),
    Row(
        "gpu-profiles-malformed-yaml",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-profiles", _file(t, "gpus.yaml", "gpus:\n  - id: x\n   memory_bytes: [1, 2\n")],
        2,
        ("gpus.yaml:3: not valid YAML: did not find expected '-' indicator",),
    ),
    Row(
        "gpu-profiles-alias-bomb",
        lambda t: [
            "estimate",
            LLAMA3_8B,
            "--gpu-profiles",
            _file(t, "bomb.yaml", _alias_bomb("gpus:\n  - id: bomb\n    memory_bytes: 80GiB\n    aliases: BOMB")),
        ],
        2,
        ("bomb.yaml:6: YAML document expands to more than 100,000 nodes (alias bomb?)",),
    ),
    Row(
        "gpu-profiles-100mb",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-profiles", _sparse(t, "big.yaml", MB100, b"gpus: []\n#")],
        2,
        ("big.yaml: file is 104,857,600 bytes; kvplan reads at most 2,097,152 bytes per file",),
    ),
    Row(
        "gpu-profiles-not-utf8",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-profiles", _file(t, "gpus.yaml", b"gpus:\n  - id: x\xff\n")],
        2,
        ("gpus.yaml:2: not UTF-8 (byte 0xff at offset 15)",),
    ),
    Row(
        "gpu-profiles-missing",
        E(LLAMA3_8B, "--gpu-profiles", "/no/such/gpus.yaml"),
        2,
        ("--gpu-profiles: file not found: /no/such/gpus.yaml",),
    ),
    Row(
        "gpu-profiles-perf-negative-bandwidth",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-profiles", _file(t, "gpus.yaml", "gpus:\n  - id: h200\n    perf: {memory_bandwidth_bytes_per_s: -1}\n")],
        2,
        ("gpus.yaml: gpus[0].perf.memory_bandwidth_bytes_per_s (id 'h200'): must be greater than 0 (got -1)",),
    ),
    Row(
        "gpu-profiles-perf-unknown-dtype",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-profiles", _file(t, "gpus.yaml", "gpus:\n  - id: h200\n    perf: {dense_tflops: {bf8: 3}}\n")],
        2,
        ("gpus.yaml: gpus[0].perf.dense_tflops.bf8 (id 'h200'): unknown key (see kvplan/data/gpus.yaml for the accepted keys)",),
    ),
    # -- model name ---------------------------------------------------------------------------
    Row("empty-model-name", E(""), 2, ("MODEL: empty model name",)),
    Row(
        "invalid-repo-id",
        E("acme/bad name"),
        2,
        ("'acme/bad name': not a valid Hub repo id",),
    ),
    Row(
        "unknown-model-offline",
        E("acme/no-such-model"),
        2,
        (
            "acme/no-such-model: HF_HUB_OFFLINE is set and config.json (revision main) is not in the Hugging Face cache",
            "hint: run once online to cache it, or unset HF_HUB_OFFLINE",
        ),
    ),
    # -- flags ----------------------------------------------------------------------------------
    Row(
        "tp-not-dividing-heads",
        E(LLAMA3_8B, "--tensor-parallel-size", "3"),
        2,
        ("--tensor-parallel-size 3: must divide the model's num_attention_heads (32)", "hint: valid sizes: 1, 2, 4, 8, 16, 32"),
    ),
    Row(
        "tp-not-dividing-kv-heads",
        lambda t: ["estimate", _config_dir(t, _llama(num_attention_heads=12, num_key_value_heads=3, hidden_size=1536)), "-tp", "2"],
        2,
        ("--tensor-parallel-size 2: must divide num_key_value_heads (3)",),
    ),
    Row(
        "tp-above-kv-heads-not-multiple",
        lambda t: ["estimate", _config_dir(t, _llama(num_attention_heads=12, num_key_value_heads=3, hidden_size=1536)), "-tp", "4"],
        2,
        ("--tensor-parallel-size 4: larger than num_key_value_heads (3) and not a multiple of it",),
    ),
    Row("tp-not-a-number", E(LLAMA3_8B, "-tp", "x"), 2, ("--tensor-parallel-size: must be a whole number, got 'x'",)),
    Row("tp-huge", E(LLAMA3_8B, "-tp", "99999999999999999999"), 2, ("--tensor-parallel-size: must be <= 1024 (got 99999999999999999999)",)),
    Row("pp-more-than-layers", E(LLAMA3_8B, "-pp", "100"), 2, ("--pipeline-parallel-size 100: more stages than the model's 32 layers",)),
    Row("utilization-zero", E(LLAMA3_8B, "--gpu-memory-utilization", "0"), 2, ("--gpu-memory-utilization: must be in (0, 1], got 0.0",)),
    Row("utilization-negative", E(LLAMA3_8B, "--gpu-memory-utilization", "-0.5"), 2, ("--gpu-memory-utilization: must be in (0, 1], got -0.5",)),
    Row("utilization-above-one", E(LLAMA3_8B, "--gpu-memory-utilization", "1.5"), 2, ("--gpu-memory-utilization: must be in (0, 1], got 1.5",)),
    Row("utilization-nan", E(LLAMA3_8B, "--gpu-memory-utilization", "nan"), 2, ("--gpu-memory-utilization: must be in (0, 1], got nan",)),
    Row(
        "kv-cache-dtype-unknown",
        E(LLAMA3_8B, "--kv-cache-dtype", "int4"),
        2,
        ("--kv-cache-dtype: must be one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2 (got 'int4')",),
    ),
    Row(
        "kv-cache-dtype-vllm-only",
        E(LLAMA3_8B, "--kv-cache-dtype", "fp8_inc"),
        2,
        ("--kv-cache-dtype: vLLM (0.26.0, 0.33.0, 0.34.0) accepts 'fp8_inc' but kvplan cannot size it yet",),
    ),
    Row(
        "max-model-len-not-a-number",
        E(LLAMA3_8B, "--max-model-len", "abc"),
        2,
        ("--max-model-len: expected a number of tokens (8192, 32k = 32000, 32K = 32768) or 'auto', got 'abc'",),
    ),
    Row("max-model-len-zero", E(LLAMA3_8B, "--max-model-len", "0"), 2, ("--max-model-len: must be positive, got '0'",)),
    Row(
        "max-model-len-above-model",
        E(LLAMA3_8B, "--max-model-len", "10000000"),
        2,
        ("--max-model-len 10000000: larger than the model's limit (8192 tokens, from max_position_embeddings and rope scaling); vLLM refuses it",),
    ),
    Row(
        "hf-overrides-not-an-object",
        E(LLAMA3_8B, "--hf-overrides", "[1]"),
        2,
        ("error: --hf-overrides: expected a JSON object, got '[1]'",
         """hint: write a JSON object such as '{"max_position_embeddings": 262144}'"""),
    ),
    Row(
        "hf-overrides-bad-config",
        E(LLAMA3_8B, "--hf-overrides", '{"num_hidden_layers": "x"}'),
        2,
        ("error: --hf-overrides: the overridden config is not one vLLM reads: meta-llama/Meta-Llama-3-8B: "
         "config key 'num_hidden_layers' must be an integer, got 'x'",),
    ),
    Row(
        "block-size-not-multiple-of-16",
        E(LLAMA3_8B, "--block-size", "17"),
        2,
        ("--block-size: must be a positive multiple of 16 (FlashAttention kernel blocks) (got 17)",),
    ),
    Row(
        "dtype-unknown",
        E(LLAMA3_8B, "--dtype", "bf16"),
        2,
        ("--dtype: must be one of auto, half, float16, bfloat16, float, float32 (vLLM's spelling) (got 'bf16')",),
    ),
    Row(
        "quantization-unknown",
        E(LLAMA3_8B, "--quantization", "magic"),
        2,
        ("--quantization: unsupported value 'magic'",),
    ),
    Row(
        "quantization-needs-checkpoint",
        E(LLAMA3_8B, "--quantization", "awq"),
        2,
        ("--quantization awq: needs a checkpoint quantized with awq; this config has no quantization_config",),
    ),
    Row(
        "quantization-below-capability",
        E(LLAMA3_8B, "--gpu", "V100-16GB", "--quantization", "fp8"),
        2,
        ("--quantization: fp8 needs compute capability 7.5; NVIDIA V100 16GB (SXM2) has 7.0, so vLLM refuses it",),
    ),
    Row("max-num-seqs-zero", E(LLAMA3_8B, "--max-num-seqs", "0"), 2, ("--max-num-seqs: must be >= 1, got 0",)),
    Row(
        "batched-tokens-below-seqs",
        E(LLAMA3_8B, "--max-num-seqs", "20000"),
        2,
        ("--max-num-batched-tokens 8192: smaller than --max-num-seqs 20000; vLLM refuses it",),
    ),
    Row(
        "kv-cache-memory-huge-size",
        E(LLAMA3_8B, "--kv-cache-memory", "99999999999999999999999GiB"),
        2,
        ("--kv-cache-memory: '99999999999999999999999GiB' is larger than any memory (limit 2**63 - 1 bytes)",),
    ),
    Row("format-unknown", E(LLAMA3_8B, "--format", "xml"), 2, ("--format: unknown value 'xml'", "hint: use table, json, yaml, serve, k8s, lws, kserve, llm-d, compose")),
    Row("vllm-version-unknown", E(LLAMA3_8B, "--vllm-version", "0.5.0"), 2, ("--vllm-version: kvplan has no rules for vLLM '0.5.0'",)),
    # a pasted `vllm serve` line (kvplan/cli/serve_extras.py): a word that is no flag of the version
    Row("flag-not-vllm", E(LLAMA3_8B, "--vllm-version", "0.34.0", "--prot", "8000"), 2,
        ("--prot: neither an option of `kvplan estimate` nor a `vllm serve` flag of vLLM 0.34.0", "hint: did you mean --plot, --perf, --port?")),
    Row("no-chunked-prefill-budget", E(LLAMA3_8B, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096"), 2,
        ("--max-num-batched-tokens 4096: smaller than --max-model-len 8192 with --no-enable-chunked-prefill; vLLM refuses it",)),
    Row(
        "workload-100mb",
        lambda t: ["estimate", LLAMA3_8B, "--workload", _sparse(t, "w.csv", MB100, b"prompt_tokens,output_tokens\n")],
        2,
        ("w.csv is 100.0 MiB; kvplan reads at most 16 MiB (100,000 rows)",),
    ),
    Row(
        # M's max_model_len is 8192: a 100,000-token prompt is over it, and so is every request;
        # the workload is refused before the table output is written (nothing on stdout)
        "workload-all-over-max-model-len",
        lambda t: ["estimate", LLAMA3_8B, "--workload", "prompt=100000 output=200"],
        2,
        ("error: --workload: every request has prompt + output tokens > --max-model-len 8192",
         "hint: raise --max-model-len or check the workload's lengths"),
    ),
    Row(
        # M's max_model_len is 8192: a 100,000-token prompt is over it, and so is every request;
        # the workload is refused before the YAML output is written (nothing on stdout)
        "workload-all-over-max-model-len-yaml",
        lambda t: ["estimate", LLAMA3_8B, "--workload", "prompt=100000 output=200", "--format", "yaml"],
        2,
        ("error: --workload: every request has prompt + output tokens > --max-model-len 8192",
         "hint: raise --max-model-len or check the workload's lengths"),
    ),
    Row(
        # M's max_model_len is 8192: a 100,000-token prompt is over it, and so is every request;
        # the workload is refused before the serve output is written (nothing on stdout)
        "workload-all-over-max-model-len-serve",
        lambda t: ["estimate", LLAMA3_8B, "--workload", "prompt=100000 output=200", "--format", "serve"],
        2,
        ("error: --workload: every request has prompt + output tokens > --max-model-len 8192",
         "hint: raise --max-model-len or check the workload's lengths"),
    ),
    # -- valid flags, absurd values: the configuration is checked and does not start ------------
    Row(
        "kv-cache-memory-above-gpu",
        E(LLAMA3_8B, "--gpu", "L4", "--kv-cache-memory", "500GiB", "--format", "json"),
        1,
        ('"failure": "--kv-cache-memory-bytes 536,870,912,000: with weights',),
        stream="out",
    ),
    Row(
        "batched-tokens-absurd",
        E(LLAMA3_8B, "--max-num-batched-tokens", "100000000000000000000"),
        2,
        ("--max-num-batched-tokens: must be <= 2147483647 (got 100000000000000000000)",),
    ),
    # -- kvplan check and kvplan plan read the same inputs --------------------------------------
    Row(
        "check-malformed-yaml",
        lambda t: ["check", _file(t, "deploy.yaml", "model: meta-llama/Meta-Llama-3-8B\ntensor-parallel-size: [1, 2\n")],
        2,
        ("3  error   parse-error  not valid YAML: did not find expected ',' or ']'",),
        stream="out",
    ),
    Row(
        "check-alias-bomb",
        lambda t: ["check", _file(t, "deploy.yaml", _alias_bomb("model: meta-llama/Meta-Llama-3-8B\nx: BOMB"))],
        2,
        ("parse-error  YAML document expands to more than 100,000 nodes (alias bomb?)",),
        stream="out",
    ),
    Row(
        "check-100mb",
        lambda t: ["check", _sparse(t, "deploy.yaml", MB100)],
        2,
        ("parse-error  file is 104,857,600 bytes; kvplan reads at most 2,097,152 bytes per file",),
        stream="out",
    ),
    Row(
        "check-not-utf8",
        lambda t: ["check", _file(t, "deploy.yaml", b"model: meta-llama/Meta-\xffLlama-3-8B\n")],
        2,
        ("parse-error  not UTF-8 (byte 0xff at offset 23)",),
        stream="out",
    ),
    Row(
        "plan-malformed-json",
        lambda t: ["plan", _config_dir(t, '{"model_type": "llama",\n  "hidden_size": 4096,\n}')],
        2,
        ("config.json:3: not valid JSON (Expecting property name enclosed in double quotes)",),
    ),
    Row(
        "plan-tp-not-dividing-heads",
        lambda t: ["plan", LLAMA3_8B, "--tensor-parallel-size", "3"],
        2,
        ("--tensor-parallel-size 3: must divide the model's num_attention_heads (32)",),
    ),
    Row(
        "plan-price-one-gpu-twice",
        lambda t: ["plan", LLAMA3_8B, "--concurrency", "8", "--price", "H100=2", "--price", "h100-sxm=3"],
        2,
        ("error: --price: 'H100' and 'h100-sxm' are the same GPU (h100-sxm); give it one price",),
    ),
    Row(
        "check-junit-stdout",
        lambda t: ["check", _file(t, "deploy.yaml", "model: meta-llama/Meta-Llama-3-8B\n"), "--gpu", "H100",
                   "--junit-xml", "/dev/stdout"],
        2,
        ("--junit-xml: /dev/stdout is a standard stream or file descriptor, not a file",),
    ),
    Row(
        "check-junit-dangling-symlink",
        lambda t: (
            os.symlink("/nonexistent-kvplan-target.xml", t / "report.xml"),
            ["check", _file(t, "deploy.yaml", "model: meta-llama/Meta-Llama-3-8B\n"), "--gpu", "H100",
             "--junit-xml", str(t / "report.xml")],
        )[1],
        2,
        ("is a broken symbolic link (-> /nonexistent-kvplan-target.xml)",),
    ),
    Row(
        "check-stdin-twice",
        lambda t: ["check", "-", "/dev/stdin", "--gpu", "H100"],
        2,
        ("error: FILES: standard input is given 2 times (-, /dev/stdin); it can be read once",),
    ),
    Row(
        "check-stdin-name-without-stdin",
        lambda t: ["check", _file(t, "deploy.yaml", "model: meta-llama/Meta-Llama-3-8B\n"), "--stdin-name", "deploy.yaml"],
        2,
        ("error: --stdin-name: no - among the files, so there is no standard input to name",),
    ),
]


def _params(rows):
    out = []
    for row in rows:
        marks = [pytest.mark.xfail(strict=True, reason=row.xfail)] if row.xfail else []
        out.append(pytest.param(row, id=row.id, marks=marks))
    return out


def _check(row: Row, code: int, out: str, err: str) -> None:
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert code == row.code, (code, out[-1500:], err[-1500:])
    text = err if row.stream == "err" else out
    if row.stream == "err":
        lines = err.strip().splitlines()
        assert lines and lines[0].startswith("error: "), err
        assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("  hint: ")), err
        if row.code == 2:
            assert out == "", out[:500]  # bad input: nothing on stdout
    from tests.helpers import unwrapped

    for fragment in row.fragments:
        # stdout is the human report, wrapped at the console width
        assert fragment in text or unwrapped(fragment) in unwrapped(text), (fragment, text[-1500:])


def _run_isolated(argv: list[str], limit_bytes: int = 1 << 30) -> tuple[int, str, str]:
    """``python -m kvplan ARGV`` in a child process with RLIMIT_AS = limit_bytes, offline."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    proc = subprocess.run(
        [sys.executable, "-m", "kvplan", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        preexec_fn=limit,
    )
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("row", _params(ROWS))
def test_row(row: Row, tmp_path: Path):
    argv = row.argv(tmp_path)
    started = time.monotonic()
    code, out, err = _run_isolated(argv) if row.isolated else run_cli(*argv)
    _check(row, code, out, err)
    assert time.monotonic() - started < 10  # hostile inputs are refused quickly, not chewed on


# -- the Hugging Face Hub (tests/hf_server.py, no internet) ---------------------------------------

TINY = dict(TINY_LLAMA)


@dataclass(frozen=True)
class HubRow:
    id: str
    model: str
    fragments: tuple[str, ...]
    env: dict = field(default_factory=dict)  # HF_* variables for this row ("{dead}": a closed port)
    code: int = 2
    extra: tuple[str, ...] = ()
    xfail: str | None = None


HUB_ROWS: list[HubRow] = [
    HubRow(
        "hub-timeout",
        "acme/slow",
        ("did not answer within 1 s", "HF_HUB_ETAG_TIMEOUT"),
        env={"HF_HUB_ETAG_TIMEOUT": "1"},
    ),
    HubRow("hub-401-gated", "acme/gated", ("gated model", "no Hugging Face token", "HTTP 401")),
    HubRow("hub-403-no-access", "acme/gated", ("gated model", "token sent has no access", "HTTP 403"), env={"HF_TOKEN": "hf_not_granted"}),
    HubRow("hub-404-model", "acme/does-not-exist", ("no such model", "HTTP 404", "check the repo id")),
    HubRow("hub-404-revision", "acme/tiny", ("revision 'nope' not found", "--revision"), extra=("--revision", "nope")),
    HubRow("hub-no-config", "acme/no-config", ("no config.json",)),
    HubRow("hub-500", "acme/broken", ("HTTP 500", "no retries", "try again later")),
    HubRow("hub-429", "acme/limited", ("HTTP 429", "HF_TOKEN")),
    HubRow("hub-unreachable", "acme/tiny", ("cannot reach the Hub at", "gave up after", "HF_ENDPOINT"), env={"HF_ENDPOINT": "{dead}"}),
    HubRow(
        "hub-offline-empty-cache",
        "acme/tiny",
        ("HF_HUB_OFFLINE is set and config.json (revision main) is not in the Hugging Face cache", "unset HF_HUB_OFFLINE"),
        env={"HF_HUB_OFFLINE": "1"},
    ),
]


@pytest.fixture
def hub(fake_hub):  # noqa: F811 - the fixture imported from hf_server
    cfg = json.dumps(TINY).encode()
    fake_hub.add_repo("acme/tiny", {"config.json": cfg})
    fake_hub.add_repo("acme/gated", {"config.json": cfg}, gated=True)
    fake_hub.add_repo("acme/no-config", {"README.md": b"# weights only\n"})
    fake_hub.add_repo("acme/broken", {"config.json": cfg}, fail_status=500)
    fake_hub.add_repo("acme/limited", {"config.json": cfg}, fail_status=429)
    fake_hub.add_repo("acme/slow", {"config.json": cfg}, delay_s=5.0)
    return fake_hub


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id, marks=[pytest.mark.xfail(strict=True, reason=r.xfail)] if r.xfail else []) for r in HUB_ROWS])
def test_hub_row(row: HubRow, hub, monkeypatch):
    from hf_server import closed_port_url

    env = {k: (closed_port_url() if v == "{dead}" else v) for k, v in row.env.items()}
    if env:
        set_hf_env(monkeypatch, **env)
    started = time.monotonic()
    code, out, err = run_cli("estimate", row.model, "--gpu", "H200", *row.extra)
    assert time.monotonic() - started < 5  # one short attempt, never the library's retry loops
    _check(Row(row.id, lambda t: [], row.code, row.fragments), code, out, err)


# -- the page and the table agree -----------------------------------------------------------------


def test_every_row_is_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    missing = [r.id for r in ROWS if r.fragments[0] not in text]
    missing += [r.id for r in HUB_ROWS if r.fragments[0] not in text]
    assert not missing, f"rows whose message docs/errors.md does not quote: {missing}"
    for r in ROWS + HUB_ROWS:
        assert f"`{r.id}`" in text, f"docs/errors.md has no row named `{r.id}`"


# -- model directories: shard names, implausible headers, symbolic links -----------------------


def _index_dir(tmp: Path, shard: str, fifo: bool = False) -> str:
    """A model directory whose model.safetensors.index.json maps one tensor to ``shard``."""
    d = Path(_config_dir(tmp, LLAMA_CFG))
    if fifo:
        os.mkfifo(d / shard)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": shard}}), encoding="utf-8")
    return str(d)


def _link_dir(tmp: Path, target: str) -> str:
    """A model directory whose config.json is a symbolic link to ``target``."""
    d = tmp / "model"
    d.mkdir()
    (d / "config.json").symlink_to(target)
    return str(d)


SOURCE_FILE_ROWS = [
    Row(
        "index-shard-dotdot",
        lambda t: ["estimate", _index_dir(t, "../../../../etc/passwd")],
        2,
        ("model.safetensors.index.json: shard '../../../../etc/passwd' has a '..' component; shard names must stay inside the model directory",),
    ),
    Row(
        "index-shard-absolute",
        lambda t: ["estimate", _index_dir(t, "/etc/hostname")],
        2,
        ("model.safetensors.index.json: shard '/etc/hostname' is an absolute path; shard names are relative to the model directory",),
    ),
    Row(
        "index-shard-fifo",
        lambda t: ["estimate", _index_dir(t, "f.safetensors", fifo=True)],
        2,
        ("model.safetensors.index.json: shard 'f.safetensors' is a FIFO (named pipe), not a regular file; kvplan reads only regular files",),
    ),
    Row(
        "safetensors-absurd-shape",
        # [10^12, 10^12] BF16 = 2 x 10^24 bytes, with data_offsets that agree with the shape
        lambda t: ["estimate", _safetensors_dir(t, {"w": {"dtype": "BF16", "shape": [10**12, 10**12], "data_offsets": [0, 2 * 10**24]}})],
        2,
        ("model.safetensors: unreadable safetensors header (tensor 'w': data_offsets end at byte 2,000,000,000,000,000,000,000,000, beyond any real checkpoint",),
    ),
    Row(
        "safetensors-offsets-past-eof",
        # [100, 100] BF16 = 20,000 bytes; _safetensors_dir writes 64 data bytes
        lambda t: ["estimate", _safetensors_dir(t, {"w": {"dtype": "BF16", "shape": [100, 100], "data_offsets": [0, 20000]}})],
        2,
        ("model.safetensors: unreadable safetensors header (tensor 'w': data_offsets end at byte 20,000 of the data, but the file holds 64 data bytes)",),
    ),
    Row(
        "config-dangling-symlink",
        lambda t: ["estimate", _link_dir(t, "missing.json")],
        2,
        ("config.json is a broken symbolic link (-> missing.json)",),
    ),
    Row(
        "config-symlink-loop",
        lambda t: ["estimate", _link_dir(t, "config.json")],
        2,
        ("config.json is a symbolic-link loop",),
    ),
    Row(
        "config-nul-byte",
        # '{' column 1, '"model_type"' 2-13, ':' 14, ' ' 15, '"' 16 -> the NUL is column 17
        lambda t: ["estimate", _config_dir(t, b'{"model_type": "\x00"}')],
        2,
        ("config.json:1: not valid JSON (Invalid control character at line 1 column 17: a NUL byte)",),
    ),
    Row(
        "revision-empty",
        lambda t: ["estimate", LLAMA3_8B, "--revision", ""],
        2,
        ("error: --revision: empty",),
    ),
]


@pytest.mark.parametrize("row", _params(SOURCE_FILE_ROWS))
def test_source_file_row(row: Row, tmp_path: Path):
    code, out, err = run_cli(*row.argv(tmp_path))
    _check(row, code, out, err)


def test_source_file_rows_are_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for r in SOURCE_FILE_ROWS:
        assert f"`{r.id}`" in text and r.fragments[0] in text, r.id


# -- estimate/plan advice --------------------------------------------------------------------------

ADVICE_ROWS = [
    Row(
        "gpu-memory-no-unit",
        lambda t: ["estimate", LLAMA3_8B, "--gpu-memory", "80"],
        2,
        ("error: --gpu-memory: 80 is read as 80 bytes, less than 1 GiB: no GPU is that small (a number without a unit means bytes)",
         "hint: did you mean 80GiB?"),
    ),
    Row(
        "gpu-memory-below-cuda-context",
        # 0.5 x 2**30 = 536,870,912 bytes; the CUDA context is 552,402,944 bytes = 526.8 -> "527 MiB"
        lambda t: ["estimate", LLAMA3_8B, "--gpu-memory", "0.5GiB", "--vllm-version", "0.26.0"],
        2,
        ("error: --gpu-memory: 0.5GiB (536,870,912 bytes) is not more than the 527 MiB the CUDA context alone takes; vLLM cannot start on it",),
    ),
    Row(
        "plan-concurrency-below-one",
        lambda t: ["plan", LLAMA3_8B, "--concurrency", "1e-300"],
        2,
        ("error: --concurrency: must be a finite number >= 1 (concurrent requests), got 1e-300",),
    ),
    Row(
        "plan-gpus-empty-string",
        lambda t: ["plan", LLAMA3_8B, "--gpus", ""],
        2,
        ("error: --gpus: empty list",),
    ),
    Row(
        "plan-utilization-above-free",
        # H200: 150,109,880,320 B total, free at start 150,109,880,320 - 552,402,944 = 149,557,477,376 B;
        # floor(1000 x (149,557,477,376 - 1,048,576) / 150,109,880,320) / 1000 = floor(996.3) / 1000 = 0.996
        lambda t: ["plan", LLAMA3_8B, "--gpus", "h200", "--gpu-memory-utilization", "1.0", "--vllm-version", "0.26.0"],
        2,
        ("error: --gpu-memory-utilization 1.0: above the memory free when vLLM starts on every GPU tried (",
         "hint: use --gpu-memory-utilization 0.996 or less"),
    ),
]


@pytest.mark.parametrize("row", _params(ADVICE_ROWS))
def test_advice_row(row: Row, tmp_path: Path):
    code, out, err = run_cli(*row.argv(tmp_path))
    _check(row, code, out, err)


def test_advice_rows_are_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for r in ADVICE_ROWS:
        assert f"`{r.id}`" in text and r.fragments[0].removeprefix("error: ")[:60] in text, r.id


# -- `kvplan check` inputs: outputs onto inputs, files outside the repository ---------------------


def _outside_config_script(t: Path) -> str:
    """REPO/sub/serve.sh (REPO has a .git) naming an absolute --config path outside REPO."""
    _file(t, "creds.yaml", "max-model-len: sk-SECRET456\n")
    (t / "repo" / ".git").mkdir(parents=True)
    (t / "repo" / "sub").mkdir()
    return _file(t / "repo" / "sub", "serve.sh", f"vllm serve meta-llama/Llama-3.1-8B-Instruct --config {t / 'creds.yaml'}\n")


CHECK_INPUT_ROWS: list[Row] = [
    Row(
        "check-junit-onto-input",
        lambda t: ["check", _file(t, "in.yaml", "model: meta-llama/Meta-Llama-3-8B\n"), "--gpu", "H100",
                   "--junit-xml", str(t / "in.yaml")],
        2,
        ("is an input of this check; kvplan does not overwrite it",),
    ),
    Row(
        "check-config-outside-repo",
        lambda t: ["check", _outside_config_script(t), "--gpu", "H100"],
        1,
        ("is outside the repository (", "did not read this one"),
        stream="out",
    ),
]


@pytest.mark.parametrize("row", _params(CHECK_INPUT_ROWS))
def test_check_input_row(row: Row, tmp_path: Path):
    code, out, err = run_cli(*row.argv(tmp_path))
    _check(row, code, out, err)
    if row.id == "check-junit-onto-input":
        assert (tmp_path / "in.yaml").read_text() == "model: meta-llama/Meta-Llama-3-8B\n"
    if row.id == "check-config-outside-repo":
        assert "sk-SECRET" not in out + err


def test_check_input_rows_are_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for r in CHECK_INPUT_ROWS:
        assert f"`{r.id}`" in text and r.fragments[0] in text, r.id


# -- verify --record and 0 counts in --from-log -----------------------------------------------------

_VERIFY_EXCERPT = json.loads(
    (Path(__file__).parents[1] / "data" / "logs" / "vllm-0.26.0-h200" / "llama3-8b_eager.json").read_text()
)["log_excerpt"]


def _zero_log(tmp: Path, prefix: str, replacement: str | None, drop: tuple[str, ...] = ()) -> str:
    """The llama3-8b_eager excerpt with the line starting ``prefix`` replaced (lines starting
    with a ``drop`` prefix left out)."""
    lines = [replacement if s.startswith(prefix) else s for s in _VERIFY_EXCERPT if not s.startswith(drop)]
    return _file(tmp, "zero.log", "\n".join(lines) + "\n")


VERIFY_RECORD_ROWS = [
    Row(
        "verify-record-regular-file",
        lambda t: ["verify", LLAMA3_8B, "--record", _file(t, "rec.json", "keep\n")],
        2,
        ("is a regular file, not a directory; kvplan writes <name>.json and <name>.log into a directory", "error: --record: "),
    ),
    Row("verify-record-empty", lambda t: ["verify", LLAMA3_8B, "--record", ""], 2, ("error: --record: empty directory name",)),
    Row(
        "verify-record-pseudo-fs",
        lambda t: ["verify", LLAMA3_8B, "--record", "/proc/x"],
        2,
        ("error: --record: /proc/x is in /proc, a kernel pseudo-filesystem, not a directory for records",),
    ),
    Row(
        "verify-from-log-zero-blocks",
        lambda t: ["verify", "--from-log", _zero_log(
            t, "RESULT ", "RESULT num_gpu_blocks=0 block_size=16 max_num_seqs=1024 max_num_batched_tokens=16384 startup_s=25.3")],
        2,
        ("RESULT line: num_gpu_blocks=0 is impossible for a start that sized its KV cache (vLLM refuses to start without at least one block)",
         "error: --from-log: "),
    ),
    Row(
        "verify-from-log-zero-tokens",
        lambda t: ["verify", "--from-log", _zero_log(t, "GPU KV cache size: ", "GPU KV cache size: 0 tokens", drop=("RESULT ",))],
        2,
        ("GPU KV cache size line: 0 tokens is impossible for a start that sized its KV cache "
         "(vLLM refuses to start without room for at least one request)", "error: --from-log: "),
    ),
    Row(
        "verify-start-out-of-range",
        lambda t: ["verify", "--from-log", _zero_log(t, "no line starts so", None), "--start", "2"],
        2,
        (": it holds 1 vLLM start", "error: --start: 2 is not a start of "),
    ),
    Row(
        "verify-start-without-from-log",
        lambda t: ["verify", LLAMA3_8B, "--start", "1"],
        2,
        ("error: --start: only with --from-log (it picks one start of the log)",),
    ),
]


@pytest.mark.parametrize("row", _params(VERIFY_RECORD_ROWS))
def test_verify_record_row(row: Row, tmp_path: Path):
    code, out, err = run_cli(*row.argv(tmp_path))
    _check(row, code, out, err)


def test_verify_record_rows_are_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for r in VERIFY_RECORD_ROWS:
        assert f"`{r.id}`" in text and r.fragments[0] in text, r.id
