"""The Hugging Face Hub source against a real local HTTP server (tests/hf_server.py).

No internet and no mocking of huggingface_hub: the library makes real HTTP requests to FakeHub.
Expected parameter counts are written out by hand below.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest
from helpers import TINY_LLAMA, run_cli
from hf_server import closed_port_url, fake_hub, safetensors_bytes, safetensors_index, set_hf_env  # noqa: F401

from kvplan.errors import KvplanError
from kvplan.sources import load_spec
from kvplan.sources.hub import load_from_hub

TINY = {**TINY_LLAMA, "tie_word_embeddings": False}

# One file: embeddings, two decoder layers, an MTP-style layer 2 (vLLM does not load it: layer
# index >= num_hidden_layers), lm_head.
SINGLE_TENSORS = {
    "model.embed_tokens.weight": ("BF16", [1000, 256]),
    "model.layers.0.self_attn.q_proj.weight": ("BF16", [256, 256]),
    "model.layers.0.input_layernorm.weight": ("F32", [256]),
    "model.layers.1.self_attn.q_proj.weight": ("BF16", [256, 256]),
    "model.layers.1.input_layernorm.weight": ("F32", [256]),
    "model.layers.2.eh_proj.weight": ("BF16", [256, 512]),
    "lm_head.weight": ("BF16", [1000, 256]),
}
# BF16: embed 1000*256 + two q_proj 2*256*256 + lm_head 1000*256 (layer 2 dropped)
SINGLE_BF16 = 1000 * 256 + 2 * 256 * 256 + 1000 * 256  # 643_072
SINGLE_F32 = 2 * 256  # 512
SINGLE_BYTES = SINGLE_BF16 * 2 + SINGLE_F32 * 4  # 1_288_192

SHARD1 = {
    "model.embed_tokens.weight": ("BF16", [1000, 256]),
    "model.layers.0.mlp.up_proj.weight": ("BF16", [512, 256]),
}
SHARD2 = {
    "model.layers.1.mlp.up_proj.weight": ("BF16", [512, 256]),
    "model.norm.weight": ("F32", [256]),
    "mtp.fc.weight": ("BF16", [256, 512]),  # Qwen3-Next style MTP head: not loaded
    "lm_head.weight": ("F8_E4M3", [1000, 256]),
}
SHARDED_BF16 = 1000 * 256 + 512 * 256 + 512 * 256  # 518_144
SHARDED_F32 = 256
SHARDED_F8 = 1000 * 256  # 256_000
SHARDED_BYTES = SHARDED_BF16 * 2 + SHARDED_F32 * 4 + SHARDED_F8 * 1  # 1_293_312

# Multimodal: the text model's settings live under text_config.
VLM = {
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "torch_dtype": "bfloat16",
    "text_config": {k: v for k, v in TINY.items() if k not in ("architectures", "torch_dtype")},
    "vision_config": {"model_type": "clip_vision_model", "hidden_size": 64, "num_hidden_layers": 8},
}
VLM_TENSORS = {
    "language_model.model.embed_tokens.weight": ("BF16", [1000, 256]),
    "language_model.model.layers.0.self_attn.q_proj.weight": ("BF16", [256, 256]),
    "language_model.model.layers.1.self_attn.q_proj.weight": ("BF16", [256, 256]),
    "language_model.model.layers.2.self_attn.q_proj.weight": ("BF16", [256, 256]),  # >= 2 layers: dropped
    "vision_tower.vision_model.encoder.layers.7.fc1.weight": ("F32", [64, 64]),  # vision layer 7: kept
}
VLM_BF16 = 1000 * 256 + 2 * 256 * 256  # 387_072
VLM_F32 = 64 * 64  # 4_096


def _cfg(**over) -> bytes:
    return json.dumps({**TINY, **over}).encode()


def _populate(hub) -> dict[str, str]:
    """The repos every test can use; returns {name: commit sha}."""
    shas = {}
    shas["single"] = hub.add_repo("acme/tiny", {"config.json": _cfg(), "model.safetensors": safetensors_bytes(SINGLE_TENSORS)})
    shas["single-v2"] = hub.add_repo("acme/tiny", {"config.json": _cfg(num_hidden_layers=3)}, branch="v2")
    weight_map = {name: "model-00001-of-00002.safetensors" for name in SHARD1}
    weight_map |= {name: "model-00002-of-00002.safetensors" for name in SHARD2}
    shas["sharded"] = hub.add_repo(
        "acme/tiny-sharded",
        {
            "config.json": _cfg(),
            "model.safetensors.index.json": safetensors_index(weight_map),
            "model-00001-of-00002.safetensors": safetensors_bytes(SHARD1),
            "model-00002-of-00002.safetensors": safetensors_bytes(SHARD2),
        },
    )
    shas["vlm"] = hub.add_repo("acme/tiny-vlm", {"config.json": json.dumps(VLM).encode(), "model.safetensors": safetensors_bytes(VLM_TENSORS)})
    shas["gated"] = hub.add_repo("acme/gated", {"config.json": _cfg(), "model.safetensors": safetensors_bytes(SINGLE_TENSORS)}, gated=True)
    shas["config-only"] = hub.add_repo("acme/config-only", {"config.json": _cfg()})
    shas["bad-st"] = hub.add_repo("acme/bad-st", {"config.json": _cfg(), "model.safetensors": b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all"})
    shas["no-config"] = hub.add_repo("acme/no-config", {"README.md": b"# weights only\n"})
    # A header with a negative shape, and an index naming a
    # tensor that its shard does not hold.
    bad_shape = json.dumps({"w": {"dtype": "BF16", "shape": [-1, 4], "data_offsets": [0, 8]}}).encode()
    hub.add_repo("acme/neg-shape", {"config.json": _cfg(), "model.safetensors": struct.pack("<Q", len(bad_shape)) + bad_shape + bytes(8)})
    partial_map = dict(weight_map) | {"model.layers.1.self_attn.q_proj.weight": "model-00002-of-00002.safetensors"}
    hub.add_repo(
        "acme/tiny-partial",
        {
            "config.json": _cfg(),
            "model.safetensors.index.json": safetensors_index(partial_map),
            "model-00001-of-00002.safetensors": safetensors_bytes(SHARD1),
            "model-00002-of-00002.safetensors": safetensors_bytes(SHARD2),
        },
    )
    hub.add_repo("acme/broken", {"config.json": _cfg()}, fail_status=500)
    hub.add_repo("acme/limited", {"config.json": _cfg()}, fail_status=429)
    hub.add_repo("acme/slow", {"config.json": _cfg()}, delay_s=5.0)
    hub.granted_tokens.add("hf_granted")
    return shas


@pytest.fixture
def hub(fake_hub):  # noqa: F811 - the fixture imported from hf_server
    fake_hub.shas = _populate(fake_hub)
    return fake_hub


def _one_error(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ")
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("  hint: ")), err
    return err


# -- success --------------------------------------------------------------------------------


def test_single_file_repo_config_params_and_commit(hub):
    src = load_from_hub("acme/tiny")
    assert src.origin == "hub"
    assert src.config == TINY
    assert src.revision == hub.shas["single"]
    assert src.checkpoint_params == {"BF16": SINGLE_BF16, "F32": SINGLE_F32}
    assert src.checkpoint_bytes == SINGLE_BYTES
    assert src.provenance["commit"] == hub.shas["single"]
    assert src.provenance["weights_from"] == "safetensors headers (1 file)"
    # The safetensors header was read with a Range request, from the CDN the Hub redirected to.
    assert any(r.headers.get("range") == "bytes=0-100000" for r in hub.requests if r.server == "cdn")
    # huggingface_hub 2.4 needs no /api/models call for any of this (only an optional registry).
    assert not [r for r in hub.requests if r.path.startswith("/api/models")]


def test_sharded_repo_counts_every_shard_and_drops_mtp(hub):
    src = load_from_hub("acme/tiny-sharded")
    assert src.checkpoint_params == {"BF16": SHARDED_BF16, "F32": SHARDED_F32, "F8_E4M3": SHARDED_F8}
    assert src.checkpoint_bytes == SHARDED_BYTES
    assert src.provenance["weights_from"] == "safetensors headers (2 files)"
    assert hub.requests_to("/resolve/", "GET") and hub.requests_to("model.safetensors.index.json", "GET")


def test_multimodal_text_config_works_as_is(hub):
    src = load_from_hub("acme/tiny-vlm")
    assert src.config["text_config"]["num_hidden_layers"] == 2
    assert src.checkpoint_params == {"BF16": VLM_BF16, "F32": VLM_F32}
    code, out, err = run_cli("estimate", "acme/tiny-vlm", "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert json.loads(out)["model"]["num_hidden_layers"] == 2


def test_estimate_through_cli_reports_hub_source(hub):
    code, out, err = run_cli("estimate", "acme/tiny", "--gpu", "H200", "--format", "json")
    assert code in (0, 1), err
    source = json.loads(out)["model"]["source"]
    assert source["origin"] == "hub"
    assert source["commit"] == hub.shas["single"]


def test_revision_reaches_the_server(hub):
    src = load_from_hub("acme/tiny", revision="v2")
    assert src.config["num_hidden_layers"] == 3
    assert src.revision == hub.shas["single-v2"]
    assert hub.requests_to("/acme/tiny/resolve/v2/config.json", "HEAD")
    assert hub.requests_to("/acme/tiny/resolve/v2/config.json", "GET")
    assert not hub.requests_to("/acme/tiny/resolve/main/")


def test_revision_flag_and_commit_hash_via_cli(hub):
    code, out, err = run_cli("estimate", "acme/tiny", "--revision", "v2", "--gpu", "H200", "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)["model"]["num_hidden_layers"] == 3
    sha = hub.shas["single"]
    code, out, err = run_cli("estimate", "acme/tiny", "--revision", sha, "--gpu", "H200", "--format", "json")
    assert code in (0, 1), err
    assert hub.requests_to(f"/acme/tiny/resolve/{sha}/config.json", "HEAD")


def test_hf_token_is_sent_as_bearer(hub, monkeypatch):
    set_hf_env(monkeypatch, HF_TOKEN="hf_granted")
    src = load_from_hub("acme/gated")
    assert src.checkpoint_params == {"BF16": SINGLE_BF16, "F32": SINGLE_F32}
    to_hub = [r for r in hub.requests if r.server == "hub" and "/resolve/" in r.path]
    assert to_hub and all(r.headers.get("authorization") == "Bearer hf_granted" for r in to_hub)
    # The token stays on the Hub: the CDN (another origin) never sees it.
    to_cdn = [r for r in hub.requests if r.server == "cdn"]
    assert to_cdn and not any("authorization" in r.headers for r in to_cdn)


def test_no_token_sends_no_authorization(hub):
    load_from_hub("acme/tiny")
    assert not any("authorization" in r.headers for r in hub.requests)


# -- cache and offline ----------------------------------------------------------------------


def test_second_call_works_offline_from_cache(hub, monkeypatch):
    first = load_from_hub("acme/tiny")
    set_hf_env(monkeypatch, HF_HUB_OFFLINE="1")
    seen = len(hub.requests)
    again = load_from_hub("acme/tiny")
    assert len(hub.requests) == seen  # not one request
    assert again.config == first.config
    assert again.revision == first.revision
    assert again.checkpoint_params is None and "not cached" in again.provenance["weights_note"]
    assert "HF_HUB_OFFLINE" in again.provenance["cache_note"]
    code, out, err = run_cli("estimate", "acme/tiny", "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    assert len(hub.requests) == seen


def test_offline_with_empty_cache_is_one_line_error(hub, monkeypatch):
    set_hf_env(monkeypatch, HF_HUB_OFFLINE="1")
    err = _one_error(*run_cli("estimate", "acme/tiny", "--gpu", "H200"))
    assert "HF_HUB_OFFLINE is set" in err and "not in the Hugging Face cache" in err
    assert "run once online" in err and "unset HF_HUB_OFFLINE" in err
    assert hub.requests == []


def test_hub_down_falls_back_to_cached_config(hub):
    first = load_from_hub("acme/tiny")
    hub.repos["acme/tiny"].fail_status = 503
    again = load_from_hub("acme/tiny")
    assert again.config == first.config and again.revision == first.revision
    assert "HTTP 503" in again.provenance["cache_note"]


# -- safetensors metadata problems never fail the estimate ---------------------------------


def test_no_safetensors_falls_back(hub):
    src = load_from_hub("acme/config-only")
    assert src.checkpoint_params is None and src.checkpoint_bytes is None
    assert "no model.safetensors" in src.provenance["weights_note"]
    code, out, err = run_cli("estimate", "acme/config-only", "--gpu", "H200")
    assert code in (0, 1) and "Traceback" not in err, err


def test_unreadable_safetensors_header_falls_back(hub):
    src = load_from_hub("acme/bad-st")
    assert src.checkpoint_params is None
    assert "unreadable safetensors header" in src.provenance["weights_note"]
    assert src.config == TINY
    assert src.tensors_visible is True and len(src.notes) == 1 and "acme/bad-st" in src.notes[0]


def test_negative_shape_in_header_falls_back_with_a_note(hub):
    src = load_from_hub("acme/neg-shape")
    assert src.checkpoint_params is None and src.checkpoint_bytes is None
    assert "shape" in src.provenance["weights_note"] and "[-1, 4]" in src.provenance["weights_note"]
    assert len(src.notes) == 1 and "formula" in src.notes[0]
    code, out, err = run_cli("estimate", "acme/neg-shape", "--gpu", "H200")
    assert code in (0, 1) and "Traceback" not in err, err


def test_index_naming_a_tensor_no_shard_holds_falls_back_with_a_note(hub):
    spec, src = load_spec("acme/tiny-partial")
    assert src.checkpoint_params is None and spec.checkpoint_params is None
    assert any("model.layers.1.self_attn.q_proj.weight" in n for n in spec.notes), spec.notes


def test_tensor_visibility_from_the_hub(hub):
    assert load_from_hub("acme/tiny").tensors_visible is True
    src = load_from_hub("acme/config-only")
    assert src.tensors_visible is False and "no safetensors" in src.provenance["tensors"]
    assert load_spec("acme/config-only")[0].checkpoint_tensors_visible is False


# -- errors: exit 2, one line (+ hint), no traceback -----------------------------------------


def test_gated_without_token(hub):
    err = _one_error(*run_cli("estimate", "acme/gated", "--gpu", "H200"))
    assert "gated model" in err and "no Hugging Face token" in err and "HTTP 401" in err
    assert "accept the license" in err and "HF_TOKEN" in err and "hf auth login" in err


def test_gated_with_token_without_access(hub, monkeypatch):
    set_hf_env(monkeypatch, HF_TOKEN="hf_not_granted")
    err = _one_error(*run_cli("estimate", "acme/gated", "--gpu", "H200"))
    assert "gated model" in err and "token sent has no access" in err and "HTTP 403" in err
    assert f"{hub.url}/acme/gated" in err


def test_missing_repo(hub):
    err = _one_error(*run_cli("estimate", "acme/does-not-exist", "--gpu", "H200"))
    assert "no such model" in err and "HTTP 404" in err and "check the repo id" in err


def test_missing_revision(hub):
    err = _one_error(*run_cli("estimate", "acme/tiny", "--revision", "nope", "--gpu", "H200"))
    assert "revision 'nope' not found" in err and "--revision" in err


def test_repo_without_config_json(hub):
    err = _one_error(*run_cli("estimate", "acme/no-config", "--gpu", "H200"))
    assert "no config.json" in err


def test_server_error_is_not_retried(hub):
    started = time.monotonic()
    err = _one_error(*run_cli("estimate", "acme/broken", "--gpu", "H200"))
    assert time.monotonic() - started < 5
    assert "HTTP 500" in err and "no retries" in err and "try again later" in err
    assert len(hub.requests_to("/acme/broken/")) == 1


def test_rate_limited_is_not_retried(hub):
    err = _one_error(*run_cli("estimate", "acme/limited", "--gpu", "H200"))
    assert "HTTP 429" in err and "HF_TOKEN" in err
    assert len(hub.requests_to("/acme/limited/")) == 1


def test_unreachable_endpoint(hub, monkeypatch):
    dead = closed_port_url()
    set_hf_env(monkeypatch, HF_ENDPOINT=dead)
    started = time.monotonic()
    err = _one_error(*run_cli("estimate", "acme/tiny", "--gpu", "H200"))
    assert time.monotonic() - started < 5
    assert f"cannot reach the Hub at {dead}" in err and "gave up after" in err
    assert "HF_ENDPOINT" in err and "bundled model" in err


def test_slow_hub_times_out_and_says_how_long(hub, monkeypatch):
    set_hf_env(monkeypatch, HF_HUB_ETAG_TIMEOUT="1")
    started = time.monotonic()
    err = _one_error(*run_cli("estimate", "acme/slow", "--gpu", "H200"))
    assert time.monotonic() - started < 4  # one 1 s timeout, not the library's 60 s retry path
    assert "did not answer within 1 s" in err and "HF_HUB_ETAG_TIMEOUT" in err
    assert len(hub.requests_to("/acme/slow/")) == 1


def test_invalid_repo_id_makes_no_request(hub):
    with pytest.raises(KvplanError, match="not a valid Hub repo id"):
        load_from_hub("acme/bad name")
    assert not hub.requests_to("/acme/")


# -- import discipline ------------------------------------------------------------------------


def test_bundled_model_path_does_not_import_huggingface_hub():
    code = (
        "import sys\n"
        "from kvplan import cli\n"
        "sys.argv = ['kvplan', 'estimate', 'Qwen/Qwen3-8B', '--gpu', 'H200', '--format', 'json']\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, 1), e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('huggingface_hub', 'httpx2'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# -- a real `kvplan` process: huggingface_hub reads the environment at import, no resync ----------


def _kvplan_process(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING")) and k != "TRANSFORMERS_OFFLINE"}
    env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", **env_extra)
    return subprocess.run([sys.executable, "-m", "kvplan", *args], env=env, capture_output=True, text=True, timeout=120)


def test_cli_process_honours_endpoint_token_cache_and_offline(hub, tmp_path):
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "proc_home"), "HF_TOKEN": "hf_granted"}
    proc = _kvplan_process(env, "estimate", "acme/gated", "--gpu", "H200", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["model"]["source"]["commit"] == hub.shas["gated"]
    assert hub.requests_to("/acme/gated/resolve/main/config.json", "GET")[0].headers["authorization"] == "Bearer hf_granted"
    assert (tmp_path / "proc_home" / "hub" / "models--acme--gated").is_dir()
    seen = len(hub.requests)
    proc = _kvplan_process({**env, "HF_HUB_OFFLINE": "1"}, "estimate", "acme/gated", "--gpu", "H200", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    assert len(hub.requests) == seen


def test_cli_process_bad_timeout_variable_is_one_line(hub, tmp_path):
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "proc_home"), "HF_HUB_ETAG_TIMEOUT": "abc"}
    proc = _kvplan_process(env, "estimate", "acme/tiny", "--gpu", "H200")
    _one_error(proc.returncode, proc.stdout, proc.stderr)
    assert "HF_HUB_ETAG_TIMEOUT" in proc.stderr


# -- ModelOpt checkpoints: hf_quant_config.json next to config.json ---------------------------

MODELOPT_QUANT = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}


def test_modelopt_hf_quant_config_is_read_from_the_hub(fake_hub):  # noqa: F811
    """vLLM 0.26.0 reads hf_quant_config.json beside config.json; its kv_cache_quant_algo FP8 makes
    `--kv-cache-dtype auto` store fp8. TINY: 2 layers, 2 KV heads of 256 / 4 = 64, so
    bf16 KV = 2 x 2 (K,V) x 2 x 64 x 2 B = 1,024 B per token; fp8 halves it to 512."""
    cfg = dict(TINY)
    fake_hub.add_repo("nv/tiny-fp8", {"config.json": json.dumps(cfg).encode(), "hf_quant_config.json": json.dumps(MODELOPT_QUANT).encode()})
    fake_hub.add_repo("nv/tiny-bf16", {"config.json": json.dumps(cfg).encode()})
    src = load_from_hub("nv/tiny-fp8")
    assert src.config["_hf_quant_config"] == MODELOPT_QUANT
    assert load_from_hub("nv/tiny-bf16").config.get("_hf_quant_config") is None
    per_token = {}
    for repo in ("nv/tiny-fp8", "nv/tiny-bf16"):
        code, out, err = run_cli("estimate", repo, "--gpu", "H200", "--max-model-len", "1024", "--format", "json")
        assert code == 0, err
        per_token[repo] = json.loads(out)["kv_cache"]["bytes_per_token"]
    assert per_token["nv/tiny-bf16"] == 1024
    assert per_token["nv/tiny-fp8"] == 512


def test_modelopt_hf_quant_config_comes_from_the_cache_offline(fake_hub, monkeypatch):  # noqa: F811
    fake_hub.add_repo("nv/tiny-fp8", {"config.json": json.dumps(TINY).encode(), "hf_quant_config.json": json.dumps(MODELOPT_QUANT).encode()})
    load_from_hub("nv/tiny-fp8")
    set_hf_env(monkeypatch, HF_HUB_OFFLINE="1")
    seen = len(fake_hub.requests)
    assert load_from_hub("nv/tiny-fp8").config["_hf_quant_config"] == MODELOPT_QUANT
    assert len(fake_hub.requests) == seen  # from the cache, not one request
