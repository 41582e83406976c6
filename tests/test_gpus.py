"""GPU profiles: lookup, `kvplan gpus`, user profile files, --gpu-memory, bundled data sanity.

Expected numbers are written by hand: the H200 total is the CUDA reading on this project's
machine (../shared/calibration/README.md); the other bundled totals are the public readings
cited in kvplan/data/gpus.yaml.
"""

from __future__ import annotations

import json
import re

import pytest

from kvplan.errors import KvplanError
from kvplan.gpus import bundled_profiles, find_gpu, load_profiles, suggest
from tests.helpers import error_line, run_cli

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
    assert rows["h200"]["price_per_hour_usd"] == 6.35  # RunPod on-demand list, 2026-03 (gpus.yaml)
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
    # vLLM 0.34.0 (the default): utilization 1.0 with the extensible KV cache, requested = the total
    assert doc["memory"]["requested_bytes"] == 85899345920
    doc = _estimate_json("--gpu", "H200", "--gpu-memory", "80GiB", "--vllm-version", "0.33.0")
    # 0.33.0: requested = ceil(85899345920 x 0.92) = ceil(79027398246.4)
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


# --- hostile user files: size cap and YAML alias bombs ------------------------------------------

BOMB = """\
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
gpus: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_alias_bomb_is_refused_quickly_in_one_line(tmp_path):
    import time

    f = _write(tmp_path, BOMB)
    start = time.monotonic()
    line = _one_error_line(*run_cli("estimate", MODEL, "--gpu", "H200", "--gpu-profiles", f))
    assert time.monotonic() - start < 5.0
    assert "--gpu-profiles" in line and f in line and "alias bomb" in line


def test_alias_bomb_through_the_environment_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPLAN_GPU_PROFILES", _write(tmp_path, BOMB))
    line = _one_error_line(*run_cli("gpus"))
    assert "KVPLAN_GPU_PROFILES" in line and "alias bomb" in line


def test_oversized_profile_file_is_refused_unread(tmp_path):
    f = _write(tmp_path, "gpus:\n" + "  - {id: x, memory_bytes: 1}\n" * 100_000)  # 3.1 MB
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert "--gpu-profiles" in line and f in line and "2,097,152" in line


def test_second_yaml_document_is_refused(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: a, memory_bytes: 5}\n---\ngpus: []\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f"{f}:4" in line and "second YAML document" in line  # its first line


def test_binary_profile_file_is_refused(tmp_path):
    p = tmp_path / "gpus.yaml"
    p.write_bytes(b"gpus:\x00\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", str(p)))
    assert str(p) in line and "binary" in line


# --- absurd memory (item 36) --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1e28", "1.0e+28", "70368744177665", "65TiB", "80.5", ".nan", ".inf"])
def test_absurd_memory_bytes_is_refused_naming_the_key(tmp_path, value):
    f = _write(tmp_path, f"gpus:\n  - id: big\n    memory_bytes: {value}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f in line and "gpus[0].memory_bytes" in line


def test_memory_bytes_up_to_64_tib_is_accepted(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: a, memory_bytes: 64TiB}\n  - {id: b, memory_bytes: 8.5e+10}\n")
    profiles = load_profiles([f])
    assert profiles["a"].memory_bytes == 70_368_744_177_664  # 64 x 2^40
    assert profiles["b"].memory_bytes == 85_000_000_000 and isinstance(profiles["b"].memory_bytes, int)


@pytest.mark.parametrize("key, value", [("nvidia_smi_total_mib", "10000000000"), ("price_per_hour_usd", ".nan"), ("price_per_hour_usd", ".inf")])
def test_absurd_other_numbers_are_refused(tmp_path, key, value):
    f = _write(tmp_path, f"gpus:\n  - id: h200\n    {key}: {value}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert f"gpus[0].{key}" in line


def test_absurd_gpu_memory_flag_is_one_line():
    line = _one_error_line(*run_cli("estimate", MODEL, "--gpu", "H200", "--gpu-memory", "9" * 400 + "GiB"))
    assert "--gpu-memory" in line


def test_gpu_memory_flag_above_64_tib_is_one_line():
    line = _one_error_line(*run_cli("estimate", MODEL, "--gpu", "H200", "--gpu-memory", "100TiB"))
    assert "--gpu-memory" in line and "64 TiB" in line


# --- names that clash (item 36): kept as the lookup rule says, with a warning -----------------------


def test_user_alias_shadowing_a_bundled_alias_warns(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: my-h100, memory_bytes: 84000000000, aliases: [H100]}\n")
    p = find_gpu("H100", load_profiles([f]))
    assert p.id == "my-h100"
    assert len(p.warnings) == 1
    assert "'H100'" in p.warnings[0] and "'h100-sxm'" in p.warnings[0] and f in p.warnings[0]


def test_user_alias_equal_to_a_bundled_id_warns_on_both(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: mine, memory_bytes: 84000000000, aliases: [H200]}\n")
    profiles = load_profiles([f])
    picked = find_gpu("H200", profiles)
    assert picked.id == "h200"  # ids beat aliases
    assert any("'mine'" in w and "'H200'" in w for w in picked.warnings)
    assert any("'h200'" in w for w in profiles["mine"].warnings)


def test_duplicate_aliases_warn(tmp_path):
    f = _write(
        tmp_path,
        "gpus:\n"
        "  - {id: one, memory_bytes: 1000, aliases: [lab, lab]}\n"
        "  - {id: two, memory_bytes: 2000, aliases: [LAB]}\n",
    )
    profiles = load_profiles([f])
    assert any("twice" in w for w in profiles["one"].warnings)
    assert any("'LAB'" in w and "'one'" in w for w in profiles["two"].warnings)
    assert find_gpu("lab", profiles).id == "two"  # the later profile wins, as documented


def test_plain_user_file_and_bundled_profiles_have_no_warnings(tmp_path):
    f = _write(tmp_path, NEW_GPU)
    profiles = load_profiles([f])
    assert all(p.warnings == () for p in profiles.values())


def test_warnings_cannot_be_set_from_yaml(tmp_path):
    f = _write(tmp_path, "gpus:\n  - {id: h200, warnings: [x]}\n")
    line = _one_error_line(*run_cli("gpus", "--gpu-profiles", f))
    assert "gpus[0].warnings" in line and "unknown key" in line


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


# --- bundled prices ---------------------------------------------------------------------------


def test_bundled_prices_carry_a_source_url_and_a_date():
    profiles = load_profiles()
    priced = [p for p in profiles.values() if p.price_per_hour_usd is not None]
    # the list prices written into gpus.yaml from the cited pages (USD per GPU-hour)
    assert profiles["h100-sxm"].price_per_hour_usd == 4.76
    assert profiles["a100-80gb-sxm"].price_per_hour_usd == 2.45
    assert profiles["l40s"].price_per_hour_usd == 1.40
    assert profiles["t4"].price_per_hour_usd == 0.59
    assert len(priced) >= 12
    for p in priced:
        assert p.price_source and "https://" in p.price_source, p.id
        assert re.search(r"20\d\d-\d\d-\d\d", p.price_source), p.id


def test_gpus_table_has_a_price_column_and_marks_missing_prices(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli("gpus")
    assert code == 0, err
    header = out.splitlines()[0]  # no blank first line (box edge)
    assert "$/h" in header
    row = next(line for line in out.splitlines() if line.split()[:1] == ["h100-sxm"])
    assert "4.76" in row
    b300 = next(line for line in out.splitlines() if line.split()[:1] == ["b300"])
    assert " ? " in b300
    assert "? = no price bundled" in " ".join(out.split())


def test_memory_source_cites_no_internal_search_ids():
    # Issue 14 item 15: memory_source reached users' JSON with "code index id N", an id of the
    # research tool's index that means nothing outside it. Every source must read as a URL, a
    # repository file or a plain description.
    code, out, err = run_cli("gpus", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all("memory_source" in r for r in rows)
    for r in rows:
        assert "code index" not in (r["memory_source"] or ""), r["id"]
        assert not re.search(r"\bid \d{6,}", r["memory_source"] or ""), r["id"]


@pytest.mark.parametrize("cc", ["abc", "12.x", "-1.0", "", "9", "9.0.1", " 9.0"])
@pytest.mark.parametrize("command", ["gpus", "estimate"])
def test_bad_compute_capability_is_refused_at_load(tmp_path, cc, command):
    f = tmp_path / "gp9.yaml"
    f.write_text(
        "gpus:\n  - {id: x, name: X, memory_bytes: 85899345920, compute_capability: " + json.dumps(cc) + "}\n"
    )
    args = ["gpus", "--gpu-profiles", str(f)] if command == "gpus" else [
        "estimate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu-profiles", str(f), "--gpu", "x"]
    line = error_line(*run_cli(*args))
    assert str(f) in line and "gpus[0].compute_capability (id 'x')" in line, line
    assert "MAJOR.MINOR" in line and repr(cc) in line, line


def test_bad_compute_capability_in_plan_is_exit_2(tmp_path):
    f = tmp_path / "gp9.yaml"
    f.write_text("gpus:\n  - {id: x, memory_bytes: 85899345920, compute_capability: abc}\n")
    line = error_line(*run_cli("plan", "deepseek-ai/DeepSeek-V2-Lite", "--gpus", "x", "--gpu-profiles", str(f),
                                   "--max-model-len", "4096", "--concurrency", "1"))
    assert "gpus[0].compute_capability" in line


@pytest.mark.parametrize("cc", ["9.0", "10.0", "12.1", 8.9])
def test_good_compute_capability_is_kept(tmp_path, cc):
    from kvplan.gpus import load_profiles

    f = tmp_path / "ok.yaml"
    f.write_text(f"gpus:\n  - {{id: x, memory_bytes: 85899345920, compute_capability: {json.dumps(cc)}}}\n")
    assert load_profiles([str(f)])["x"].compute_capability == str(cc)


def test_gfd_product_label_of_a_device_name():
    # k8s-device-plugin internal/lm/resource.go sanitise: drop other characters, spaces -> "-"
    from kvplan.gpus import gfd_product

    assert gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert gfd_product("NVIDIA A100-SXM4-80GB") == "NVIDIA-A100-SXM4-80GB"
    assert gfd_product("NVIDIA RTX 6000 Ada Generation") == "NVIDIA-RTX-6000-Ada-Generation"
    assert gfd_product("NVIDIA  GeForce (R) RTX 4090") == "NVIDIA-GeForce-R-RTX-4090"
