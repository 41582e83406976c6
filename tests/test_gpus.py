"""GPU profiles: lookup, `kvplan gpus`, user profile files, --gpu-memory, bundled data sanity.

Expected numbers are written by hand: the H200 total is the CUDA reading on this project's
machine (../shared/calibration/README.md); the other bundled totals are the public readings
cited in kvplan/data/gpus.yaml.
"""

from __future__ import annotations

import json

import pytest

from kvplan.errors import KvplanError
from kvplan.gpus import bundled_profiles, find_gpu, load_profiles, suggest
from tests.helpers import run_cli

MODEL = "meta-llama/Meta-Llama-3-8B"  # bundled spec: resolves offline
H200_CUDA_BYTES = 150_109_880_320  # torch.cuda.mem_get_info() total on the lent H200


@pytest.fixture(autouse=True)
def _no_user_profiles(monkeypatch):
    monkeypatch.delenv("KVPLAN_GPU_PROFILES", raising=False)


def _estimate_json(*args: str) -> dict:
    code, out, err = run_cli("estimate", MODEL, "--format", "json", *args)
    assert code in (0, 1), err
    return json.loads(out)


def _one_error_line(code: int, out: str, err: str) -> str:
    assert code == 2, (code, out, err)
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _write(tmp_path, text: str, name: str = "gpus.yaml") -> str:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


# --- lookup -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typed, want",
    [
        ("h200", "h200"),
        ("H200", "h200"),
        ("NVIDIA H200", "h200"),
        ("H100-80GB", "h100-sxm"),
        ("h100 80gb", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("H100 PCIe", "h100-pcie"),
        ("A100-80GB", "a100-80gb-sxm"),
        ("A100", "a100-80gb-sxm"),  # ambiguous: documented to mean the SXM4 80GB part
        ("a100-40gb", "a100-40gb-sxm"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
        ("L40S", "l40s"),
        ("l40", "l40"),
        ("A10G", "a10g"),
        ("A10", "a10"),
        ("Tesla T4", "t4"),
        ("RTX 4090", "rtx-4090"),
        ("b200", "b200"),
    ],
)
def test_lookup_by_id_alias_and_case(typed, want):
    assert find_gpu(typed, load_profiles()).id == want


def test_h200_profile_is_the_measured_cuda_total():
    p = find_gpu("H200", load_profiles())
    assert p.memory_bytes == H200_CUDA_BYTES
    assert p.memory_quality == "measured"
    assert p.fp8_supported is True
    # NVML total vLLM uses for its batch-default rule: 143771 MiB x 1048576 B.
    assert p.nvml_total_bytes == 150_754_820_096


def test_unknown_gpu_suggests_closest_in_one_line():
    code, out, err = run_cli("estimate", MODEL, "--gpu", "H2OO")
    line = _one_error_line(code, out, err)
    assert "--gpu" in line and "'H2OO'" in line
    assert "did you mean h200" in line  # H2OO is H200 with letter O for zero: best first


def test_nonsense_gpu_points_to_kvplan_gpus():
    with pytest.raises(KvplanError, match=r"--gpu: unknown GPU 'zzzzqqq'; run `kvplan gpus`"):
        find_gpu("zzzzqqq", load_profiles())


def test_suggest_ranks_h100_variants_for_a_typo():
    assert suggest("H10O", load_profiles())[0] in ("h100-sxm", "h100-pcie", "h100-nvl")


# --- `kvplan gpus` ----------------------------------------------------------------------------


def test_gpus_json_lists_h200_with_cuda_bytes():
    code, out, err = run_cli("gpus", "--format", "json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["h200"]["memory_bytes"] == 150109880320
    assert rows["h200"]["price_per_hour_usd"] is None
    assert {"t4", "l4", "l40s", "a10g", "a100-80gb-sxm", "h100-sxm", "b200"} <= set(rows)


def test_gpus_table_lists_h200(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # rich truncates cells to the terminal width
    code, out, err = run_cli("gpus")
    assert code == 0, err
    assert "h200" in out and "150,109,880,320" in out


# --- --gpu-memory -----------------------------------------------------------------------------


def test_gpu_memory_override_80gib_is_used():
    doc = _estimate_json("--gpu", "H200", "--gpu-memory", "80GiB")
    assert doc["gpu"]["memory_bytes"] == 85899345920  # 80 x 2^30
    assert doc["memory"]["total_bytes"] == 85899345920
    # requested = ceil(85899345920 x 0.92) = ceil(79027398246.4)
    assert doc["memory"]["requested_bytes"] == 79027398247


def test_default_h200_memory_in_estimate():
    doc = _estimate_json("--gpu", "H200")
    assert doc["gpu"]["memory_bytes"] == 150109880320


# --- user profile files -----------------------------------------------------------------------

NEW_GPU = """\
gpus:
  - id: lab-card
    name: Lab Card 48GB
    memory_bytes: 51000000000
    fp8_supported: true
    price_per_hour_usd: 1.25
    aliases: [LABCARD]
"""

OVERRIDE_H200 = """\
gpus:
  - id: h200
    memory_bytes: 140000000000
"""


def test_gpu_profiles_flag_adds_a_gpu(tmp_path):
    f = _write(tmp_path, NEW_GPU)
    code, out, err = run_cli("gpus", "--gpu-profiles", f, "--format", "json")
    assert code == 0, err
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows["lab-card"]["memory_bytes"] == 51000000000
    assert rows["lab-card"]["price_per_hour_usd"] == 1.25
    assert rows["lab-card"]["memory_quality"] == "user"
    assert "h200" in rows  # bundled profiles stay
    doc = _estimate_json("--gpu", "labcard", "--gpu-profiles", f)
    assert doc["gpu"]["name"] == "lab-card"
    assert doc["gpu"]["memory_bytes"] == 51000000000


def test_gpu_profiles_flag_overrides_an_existing_id(tmp_path):
    f = _write(tmp_path, OVERRIDE_H200)
    doc = _estimate_json("--gpu", "H200", "--gpu-profiles", f)
    assert doc["gpu"]["memory_bytes"] == 140000000000


def test_env_var_adds_and_overrides(tmp_path, monkeypatch):
    new = _write(tmp_path, NEW_GPU, "new.yaml")
    over = _write(tmp_path, OVERRIDE_H200, "over.yaml")
    monkeypatch.setenv("KVPLAN_GPU_PROFILES", new + __import__("os").pathsep + over)
    assert _estimate_json("--gpu", "lab-card")["gpu"]["memory_bytes"] == 51000000000
    assert _estimate_json("--gpu", "h200")["gpu"]["memory_bytes"] == 140000000000


def test_flag_file_wins_over_env_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPLAN_GPU_PROFILES", _write(tmp_path, OVERRIDE_H200, "env.yaml"))
    flag = _write(tmp_path, "gpus:\n  - {id: h200, memory_bytes: 130000000000}\n", "flag.yaml")
    assert _estimate_json("--gpu", "h200", "--gpu-profiles", flag)["gpu"]["memory_bytes"] == 130000000000


def test_price_only_override_keeps_bundled_memory(tmp_path):
    f = _write(tmp_path, "gpus:\n  - id: H200\n    price_per_hour_usd: 3.5\n    price_source: my contract, 2026-11\n")
    p = load_profiles([f])["h200"]
    assert p.price_per_hour_usd == 3.5
    assert p.memory_bytes == 150109880320
    assert p.memory_quality == "measured"


def test_memory_as_size_string(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: small, memory_bytes: 24GiB}\n")
    assert load_profiles([f])["small"].memory_bytes == 25769803776  # 24 x 2^30


def test_user_alias_beats_bundled_alias(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: my-h100, memory_bytes: 84000000000, aliases: [H100]}\n")
    assert find_gpu("H100", load_profiles([f])).id == "my-h100"
    assert find_gpu("h100-sxm", load_profiles([f])).id == "h100-sxm"  # ids still reach bundled


# --- bad user files: exit 2, one line naming file and key -------------------------------------


def test_malformed_yaml_names_file(tmp_path):
    f = _write(tmp_path, "gpus:\n  - id: x\n    memory_bytes: [1, 2\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f in line and "not valid YAML" in line


def test_missing_file_names_flag_and_file(tmp_path):
    missing = str(tmp_path / "nope.yaml")
    line = _one_error_line(*run_cli("estimate", MODEL, "--gpu-profiles", missing))
    assert line == f"error: --gpu-profiles: file not found: {missing}"


def test_missing_env_file_names_the_variable(tmp_path, monkeypatch):
    missing = str(tmp_path / "nope.yaml")
    monkeypatch.setenv("KVPLAN_GPU_PROFILES", missing)
    line = _one_error_line(*run_cli("gpus"))
    assert "KVPLAN_GPU_PROFILES" in line and missing in line


def test_negative_memory_names_file_and_key(tmp_path):
    f = _write(tmp_path, "gpus:\n  - id: bad\n    memory_bytes: -5\n")
    line = _one_error_line(*run_cli("estimate", MODEL, "--gpu", "bad", "--gpu-profiles", f))
    assert f in line and "gpus[0].memory_bytes" in line and "-5" in line


def test_negative_price_names_key(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: h200, price_per_hour_usd: -1}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f in line and "gpus[0].price_per_hour_usd" in line


def test_misspelt_key_is_reported_not_ignored(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: h200, fp8_suported: true}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert "gpus[0].fp8_suported" in line and "unknown key" in line


def test_new_id_without_memory_is_rejected(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: brand-new, fp8_supported: true}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert "gpus[0].memory_bytes" in line and "required" in line


@pytest.mark.parametrize(
    "text, key",
    [
        ("- id: x\n  memory_bytes: 1\n", "'gpus'"),  # a bare list, no gpus: key
        ("gpus: {id: x}\n", "gpus"),
        ("gpus:\n  - just-a-string\n", "gpus[0]"),
        ("gpus:\n  - {memory_bytes: 5}\n", "gpus[0].id"),
        ("gpus:\n  - {id: a, memory_bytes: 5}\n  - {id: A, memory_bytes: 6}\n", "gpus[1].id"),
    ],
)
def test_wrong_shapes_name_the_key(tmp_path, text, key):
    f = _write(tmp_path, text)
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f in line and key in line


# --- bundled data -----------------------------------------------------------------------------


def test_bundled_readings_from_public_sources():
    p = bundled_profiles()
    # deviceQuery / cudaDeviceProp bytes quoted in kvplan/data/gpus.yaml
    assert p["a100-80gb-sxm"].memory_bytes == 85095874560
    assert p["h100-sxm"].memory_bytes == 85017755648
    assert p["l4"].memory_bytes == 23670685696
    assert p["l40s"].memory_bytes == 47677177856
    assert p["a10g"].memory_bytes == 23696375808
    assert p["t4"].memory_bytes == 15638134784
    # torch repr 182631 MiB, floored: 182631 x 1048576
    assert p["b200"].memory_bytes == 191502483456


def test_bundled_entries_say_where_memory_came_from():
    for p in bundled_profiles().values():
        assert p.memory_source, p.id
        assert p.memory_quality != "user", p.id
        if p.memory_quality == "estimate":
            assert p.memory_source.startswith("ESTIMATE"), p.id
        assert p.price_per_hour_usd is None or p.price_source, p.id


def test_bundled_cuda_total_is_below_nvml_total():
    # The driver keeps part of the board: CUDA total < nvidia-smi total, by less than 5 %.
    for p in bundled_profiles().values():
        if p.nvidia_smi_total_mib:
            nvml = p.nvidia_smi_total_mib * 1048576
            assert 0.95 * nvml < p.memory_bytes < nvml, p.id


def test_bundled_names_and_aliases_are_unambiguous():
    from kvplan.gpus import _norm

    owner: dict[str, str] = {}
    for p in bundled_profiles().values():
        for n in {_norm(x) for x in (p.id, p.name, p.reported_name, *p.aliases) if x}:
            assert owner.setdefault(n, p.id) == p.id, (n, owner[n], p.id)


def test_fp8_follows_compute_capability():
    for p in bundled_profiles().values():
        if p.compute_capability:
            major, minor = (int(x) for x in p.compute_capability.split("."))
            assert p.fp8_supported == ((major, minor) >= (8, 9)), p.id
            assert p.bf16_supported == (major >= 8), p.id


def test_reported_names_drive_vllm_batch_defaults():
    # vLLM 0.26.0: >= 70 GiB and no "a100" in the name -> 1024 seqs for `vllm serve`, else 256.
    assert _estimate_json("--gpu", "A100-80GB")["engine"]["max_num_seqs"] == 256
    assert _estimate_json("--gpu", "H100")["engine"]["max_num_seqs"] == 1024
    assert _estimate_json("--gpu", "L40S")["engine"]["max_num_seqs"] == 256
