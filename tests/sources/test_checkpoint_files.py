"""The files of a local model directory: shard paths outside the model directory, implausible
safetensors headers, device/FIFO/broken-link shards, config.json a broken symbolic link, a FIFO or
a device, --revision '', a NUL in config.json, and the bundled granite-4.0-h-small spec.

Safetensors files are written byte by byte (8-byte little-endian header length, JSON header,
zero-filled data); expected values are worked out by hand in each test.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import huggingface_hub.constants  # noqa: F401 - see below
import pytest
from helpers import TINY_LLAMA, error_line, run_cli
from hf_server import fake_hub  # noqa: F401 - fixture

from kvplan.errors import KvplanError
from kvplan.sources.local import load_local

TINY = dict(TINY_LLAMA)
INDEX = "model.safetensors.index.json"
# huggingface_hub.constants is imported above, before any fake_hub fixture runs: if its first
# import happened inside the fixture (after HF_ENDPOINT was pointed at the fake Hub), the fixture's
# monkeypatch would "restore" the fake endpoint and a cleared HF_HUB_OFFLINE for later tests.


def model_dir(tmp_path: Path, name: str = "model") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    return d


def header_file(path: Path, header: dict, data_bytes: int) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data_bytes))


def good_shard(path: Path) -> None:
    # one BF16 tensor of 2 x 3 = 6 elements = 12 bytes
    header_file(path, {"embed": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}, 12)


def index(d: Path, weight_map: dict) -> Path:
    p = d / INDEX
    p.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}), encoding="utf-8")
    return p


def one_error(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2, err
    return lines[0]


# -- 10: shard names confined to the model directory --------------------------------------------


@pytest.mark.parametrize(
    "shard, why",
    [
        ("../../../../etc/passwd", "'..'"),
        ("/etc/hostname", "absolute"),
        ("/dev/zero", "absolute"),
        ("sub/../../x.safetensors", "'..'"),
        ("", "empty"),
    ],
)
def test_index_shard_outside_the_directory_is_refused(tmp_path, shard, why):
    d = model_dir(tmp_path)
    idx = index(d, {"embed": shard})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert str(idx) in line and repr(shard) in line and why in line, line
    assert "unreadable safetensors header" not in line  # never opened
    assert "which is not in" not in line


def test_index_shard_symlink_to_another_disk_is_followed(tmp_path):
    # A link the user made inside their own model directory is followed, as vLLM follows it;
    # only the names an index gives are confined (absolute / ".." names above).
    d = model_dir(tmp_path)
    outside = tmp_path / "elsewhere.safetensors"
    good_shard(outside)
    (d / "model-00001-of-00001.safetensors").symlink_to(outside)
    index(d, {"embed": "model-00001-of-00001.safetensors"})
    assert load_local(d).checkpoint_bytes == 12  # 6 BF16 elements x 2 bytes


def test_index_shard_in_a_subdirectory_is_fine(tmp_path):
    d = model_dir(tmp_path)
    (d / "sub").mkdir()
    good_shard(d / "sub" / "a.safetensors")
    index(d, {"embed": "sub/a.safetensors"})
    src = load_local(d)
    assert src.checkpoint_bytes == 12  # 6 BF16 elements x 2 bytes


def test_hf_cache_snapshot_symlinks_into_blobs_are_fine(tmp_path):
    # huggingface_hub's cache: models--o--n/snapshots/<rev>/FILE -> ../../blobs/<hash>
    repo = tmp_path / "hub" / "models--o--n"
    blobs = repo / "blobs"
    snap = repo / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (blobs / "cfg").write_text(json.dumps(TINY), encoding="utf-8")
    good_shard(blobs / "shard")
    (blobs / "idx").write_text(json.dumps({"weight_map": {"embed": "model-00001-of-00001.safetensors"}}), encoding="utf-8")
    (snap / "config.json").symlink_to("../../blobs/cfg")
    (snap / "model-00001-of-00001.safetensors").symlink_to("../../blobs/shard")
    (snap / INDEX).symlink_to("../../blobs/idx")
    src = load_local(snap)
    assert src.checkpoint_bytes == 12


def test_fifo_shard_says_fifo(tmp_path):
    d = model_dir(tmp_path)
    os.mkfifo(d / "f.safetensors")
    index(d, {"embed": "f.safetensors"})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "f.safetensors" in line and "FIFO" in line and "which is not in" not in line, line


def test_dangling_symlink_shard_says_broken_link(tmp_path):
    d = model_dir(tmp_path)
    (d / "a.safetensors").symlink_to(d / "gone.safetensors")
    index(d, {"embed": "a.safetensors"})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "'a.safetensors'" in line and "broken symbolic link" in line, line


def test_missing_shard_still_says_missing(tmp_path):
    d = model_dir(tmp_path)
    index(d, {"embed": "a.safetensors"})
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "lists a.safetensors, which is not in" in line


# -- 10: implausible safetensors headers --------------------------------------------------------


def test_absurd_shape_is_refused_not_sized(tmp_path):
    d = model_dir(tmp_path)
    n = 10**12 * 10**12  # elements; BF16 -> 2 x 10^24 bytes, and the offsets agree with it
    header_file(d / "model.safetensors", {"w": {"dtype": "BF16", "shape": [10**12, 10**12], "data_offsets": [0, 2 * n]}}, 0)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "model.safetensors" in line and "unreadable safetensors header" in line, line


def test_data_offsets_past_the_end_of_the_file_are_refused(tmp_path):
    d = model_dir(tmp_path)
    # shape [1000, 1000] BF16 = 2,000,000 bytes, consistent offsets, but only 12 data bytes there
    header_file(d / "model.safetensors", {"w": {"dtype": "BF16", "shape": [1000, 1000], "data_offsets": [0, 2_000_000]}}, 12)
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "unreadable safetensors header" in line and "2,000,000" in line and "12" in line, line


def test_data_offsets_exactly_at_the_end_are_fine(tmp_path):
    d = model_dir(tmp_path)
    good_shard(d / "model.safetensors")
    assert load_local(d).checkpoint_bytes == 12


# -- 16: config.json a broken symbolic link -----------------------------------------------------


def test_config_json_dangling_symlink(tmp_path):
    d = tmp_path / "dang"
    d.mkdir()
    (d / "config.json").symlink_to("/nonexistent-kvplan-target")
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "config.json is a broken symbolic link (-> /nonexistent-kvplan-target)" in line, line
    assert "no config.json" not in line


def test_config_json_symlink_loop(tmp_path):
    d = tmp_path / "loop"
    d.mkdir()
    (d / "config.json").symlink_to("config.json")
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "config.json is a symbolic-link loop" in line, line


def test_config_json_path_given_directly_dangling(tmp_path):
    d = tmp_path / "dang2"
    d.mkdir()
    (d / "config.json").symlink_to("/nonexistent-kvplan-target")
    line = one_error(*run_cli("estimate", str(d / "config.json"), "--gpu", "H200"))
    assert "broken symbolic link (-> /nonexistent-kvplan-target)" in line, line


# -- 17: --revision '' and a NUL byte in config.json --------------------------------------------


@pytest.mark.parametrize("command", ["estimate", "plan"])
def test_empty_revision_is_refused_before_the_hub(fake_hub, command):  # noqa: F811
    args = [command, "meta-llama/Meta-Llama-3-8B", "--revision", ""]
    args += ["--gpu", "H200"] if command == "estimate" else ["--gpus", "h200"]
    line = one_error(*run_cli(*args))
    assert "--revision: empty" in line, line
    assert fake_hub.requests == []


def test_nul_in_config_json_gives_line_and_column(tmp_path):
    d = tmp_path / "nul"
    d.mkdir()
    # line 1 is '{'; line 2 is '  "model_type": "lla\x00ma"': 2 spaces (columns 1-2), '"model_type"'
    # (12 characters, 3-14), ':' 15, ' ' 16, '"' 17, 'l' 18, 'l' 19, 'a' 20 -> the NUL is column 21
    (d / "config.json").write_bytes(b'{\n  "model_type": "lla\x00ma"\n}')
    line = one_error(*run_cli("estimate", str(d), "--gpu", "H200"))
    assert "config.json:2: not valid JSON (Invalid control character at line 2 column 21" in line, line
    assert "NUL" in line


# -- 22: bundled granite-4.0-h-small is complete enough to size ---------------------------------


def test_bundled_granite_h_small_has_four_attention_layers():
    from kvplan.sources import load_spec

    spec, source = load_spec("ibm-granite/granite-4.0-h-small")
    kinds = [k.value for k in spec.layer_kinds]
    # layer_types of the record that ran on an H200: attention at 5, 15, 25, 35 of 40
    assert [i for i, k in enumerate(kinds) if k != "mamba"] == [5, 15, 25, 35]
    assert spec.derived_max_model_len == 131072
    assert "granite4h-small_eager.json" in str(source.provenance.get("status")) + " ".join(source.notes)


def test_bundled_granite_h_small_kv_bytes_per_token():
    code, out, err = run_cli("estimate", "ibm-granite/granite-4.0-h-small", "--gpu", "H200", "--max-model-len", "8192", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    found = []

    def walk(x):
        if isinstance(x, dict):
            found.extend(v for k, v in x.items() if k == "bytes_per_token")
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads(out))
    # 4 attention layers x 2 (K and V) x 8 KV heads x head_dim 128 (4096 / 32) x 2 bytes (bf16)
    # = 16,384 bytes of attention KV per token: no longer 0
    assert found == [16384], found


def test_hub_absurd_shape_is_not_sized(fake_hub):  # noqa: F811
    # the Hub source reads headers only (no file size): the 1 TiB bound refuses the tensor, and
    # the estimate falls back to kvplan's formula with a warning, as for any malformed header
    n = 10**12 * 10**12
    raw = json.dumps({"w": {"dtype": "BF16", "shape": [10**12, 10**12], "data_offsets": [0, 2 * n]}}).encode()
    raw += b" " * (-len(raw) % 8)
    fake_hub.add_repo("acme/huge", {"config.json": json.dumps(TINY).encode(), "model.safetensors": struct.pack("<Q", len(raw)) + raw})
    code, out, err = run_cli("estimate", "acme/huge", "--gpu", "H200", "--format", "json")
    assert code in (0, 1) and "Traceback" not in err, err
    doc = json.loads(out)
    assert any("unreadable safetensors header" in w for w in doc["warnings"]), doc["warnings"]
    # TINY's formula weights are a few MB; 2 x 10^24 bytes would be sized without the bound
    numbers = []

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            numbers.append(x)

    walk(doc)
    assert max(numbers) < 10**15, max(numbers)


def test_config_json_path_that_is_a_fifo(tmp_path):
    d = tmp_path / "ff"
    d.mkdir()
    os.mkfifo(d / "config.json")
    line = error_line(*run_cli("estimate", str(d / "config.json"), "--gpu", "H100"))
    assert "is a FIFO" in line and "Hugging Face" not in line, line


def test_relative_config_json_path_that_is_a_fifo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("ff")
    os.mkfifo("ff/config.json")
    line = error_line(*run_cli("estimate", "ff/config.json", "--gpu", "H100"))
    assert line.startswith("error: ff/config.json") and "is a FIFO" in line, line


def test_config_json_symlink_to_dev_zero(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkdir("zl")
    os.symlink("/dev/zero", "zl/config.json")
    line = error_line(*run_cli("estimate", "zl/config.json", "--gpu", "H100"))
    assert "is a character device" in line and "Hugging Face" not in line, line


def test_missing_config_json_path_is_not_looked_up_on_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = error_line(*run_cli("estimate", "nothere/config.json", "--gpu", "H100"))
    assert "nothere/config.json" in line and "Hugging Face" not in line, line
