"""Round trips of the serving-stack writers (issue 22): `kvplan estimate/plan --format
k8s|lws|kserve|llm-d|compose` writes a manifest, and `kvplan check` on that file reads back the
same model, flags, GPU and vLLM version and so gives the same figures, with nothing to warn
about. The expected numbers are the estimate's own JSON: the oracle is the other command."""

from __future__ import annotations

import json

import pytest

from tests.helpers import run_cli

FORMATS = ("k8s", "lws", "kserve", "llm-d", "compose")
CASES = {
    "one-gpu": ("Qwen/Qwen2.5-7B-Instruct", "H100", ()),
    # 16 GPUs: two LeaderWorkerSet pods of 8 with lws (Ray over the group), one pod of 16 otherwise
    "tp8-pp2": ("meta-llama/Llama-3.1-70B-Instruct", "A100-80GB", ("-tp", "8", "-pp", "2", "--max-model-len", "32768")),
    "fp8-kv-and-flags": ("meta-llama/Llama-3.1-8B-Instruct", "H200",
                         ("--max-model-len", "65536", "--kv-cache-dtype", "fp8", "--max-num-seqs", "128", "--enforce-eager")),
}


def _write(tmp_path, fmt: str, text: str) -> str:
    p = tmp_path / ("docker-compose.yaml" if fmt == "compose" else f"{fmt}.yaml")
    p.write_text(text, encoding="utf-8")
    return str(p)


def _checked(path: str, *extra: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", path, "--format", "json", *extra)
    assert "Traceback" not in out + err
    doc = json.loads(out)
    deps = [d for f in doc["files"] for d in f["deployments"]]
    assert len(deps) == 1, deps
    return code, {**deps[0]["figures"], "diagnostics": doc["diagnostics"], "model": deps[0]["model"]}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_estimate_manifest_checks_with_the_same_numbers(tmp_path, fmt, case):
    model, gpu, flags = CASES[case]
    code, out, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", "json")
    assert code == 0, err
    est = json.loads(out)
    code, text, err = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", fmt)
    assert code == 0, err
    assert text.startswith("# written by") and f"# kvplan: gpu={est['gpu']['name']}" in text
    code, fig = _checked(_write(tmp_path, fmt, text), "--strict")
    assert code == 0, [d["text"] for d in fig["diagnostics"] if d["severity"] != "info"]
    assert fig["model"] == model and fig["gpu"] == est["gpu"]["name"]
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "kv_cache_dtype", "block_size",
                "max_num_seqs"):
        assert fig[key] == est["engine"][key], key
    assert fig["num_gpu_blocks"] == est["kv_cache"]["num_gpu_blocks"]
    assert fig["kv_cache_bytes"] == est["memory"]["kv_cache_bytes"]
    # the image tag names the version the estimate used, so check used the same rules
    assert f"vllm/vllm-openai:v{est['engine']['vllm_version']}" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_environment_vllm_needs_is_written_and_read_back(tmp_path, monkeypatch, fmt):
    # --max-model-len above the model's 131072 starts only with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    # in vLLM's environment (config/model.py _get_and_verify_max_len): estimate takes it from its
    # own environment, the manifest must carry it, and check reads it there (then skips the
    # memory checks past the model's limit, with a warning: kvplan sizes no length past it)
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    code, text, err = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H200", "--max-model-len", "200000",
                              "--format", fmt)
    assert code == 0, err
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    code, out, _ = run_cli("check", _write(tmp_path, fmt, text), "--format", "json")
    over = [d for d in json.loads(out)["diagnostics"] if d["check_id"] == "max-model-len-over-limit"]
    assert code == 0 and [d["severity"] for d in over] == ["warning"]
    assert "environment sets VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in over[0]["message"]


def test_lws_spreads_sixteen_gpus_over_two_pods(tmp_path):
    model, gpu, flags = CASES["tp8-pp2"]
    code, text, _ = run_cli("estimate", model, "--gpu", gpu, *flags, "--format", "lws")
    import yaml

    lwt = [d for d in yaml.safe_load_all(text)][0]["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2  # 16 GPUs / 8 a node
    for part in ("leaderTemplate", "workerTemplate"):
        assert lwt[part]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    code, fig = _checked(_write(tmp_path, "lws", text))
    gpu_count = [d for d in fig["diagnostics"] if d["check_id"] == "gpu-count"]
    assert code == 0 and not [d for d in gpu_count if d["severity"] == "error"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_plan_writes_the_cheapest_option(tmp_path, fmt):
    args = ("Qwen/Qwen2.5-7B-Instruct", "--concurrency", "40", "--max-model-len", "16384", "--gpus", "H100,A10G")
    code, out, err = run_cli("plan", *args, "--format", "json")
    assert code == 0, err
    best = json.loads(out)["options"][0]
    code, text, err = run_cli("plan", *args, "--format", fmt)
    assert code == 0 and "cheapest option" in err
    code, fig = _checked(_write(tmp_path, fmt, text), "--strict")
    assert code == 0
    assert (fig["gpu"], fig["num_gpu_blocks"], fig["max_model_len"]) == (best["gpu"], best["num_gpu_blocks"], 16384)


def test_plan_with_no_option_writes_nothing():
    code, out, err = run_cli("plan", "meta-llama/Llama-3.1-405B", "--gpus", "T4", "--max-gpus", "1", "--format", "k8s")
    assert code == 1 and out == "" and "nothing written" in err


def test_a_local_model_directory_cannot_be_a_kserve_or_llm_d_uri(tmp_path):
    from pathlib import Path

    spec = json.loads((Path(__file__).parents[2] / "model_specs" / "facebook__opt-125m.json").read_text())
    d = tmp_path / "opt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(spec["config"]))
    for fmt in ("kserve", "llm-d"):
        code, out, err = run_cli("estimate", str(d), "--gpu", "H100", "--format", fmt)
        assert code == 2 and out == "" and f"--format {fmt}" in err and "Traceback" not in err
    code, out, _ = run_cli("estimate", str(d), "--gpu", "H100", "--format", "k8s")
    assert code == 0 and str(d) in out


def test_a_gpu_memory_override_cannot_be_written():
    code, out, err = run_cli("estimate", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--gpu-memory", "70GiB", "--format", "k8s")
    assert code == 2 and out == "" and "--gpu-memory" in err


@pytest.mark.parametrize("fmt", ("k8s", "lws", "kserve", "llm-d"))
def test_plan_writes_its_replicas(tmp_path, fmt):
    # 300 requests of 16384 tokens on one-GPU H100 engines: each holds ~63 (the one-gpu case),
    # so the cheapest option is several replicas of the engine, written as the stack's replicas
    args = ("Qwen/Qwen2.5-7B-Instruct", "--concurrency", "300", "--max-model-len", "16384", "--gpus", "H100", "-tp", "1",
            "-pp", "1", "--max-gpus", "8")
    code, out, err = run_cli("plan", *args, "--format", "json")
    best = json.loads(out)["options"][0]
    dp = best["data_parallel_size"]
    assert code == 0 and dp > 1
    code, text, err = run_cli("plan", *args, "--format", fmt)
    assert code == 0 and f"{dp} replica(s)" in err and f"{dp} replicas of" in text
    code, out, _ = run_cli("check", _write(tmp_path, fmt, text), "--format", "json")
    reps = [d for d in json.loads(out)["diagnostics"] if d["check_id"] == "replicas"]
    assert code == 0 and len(reps) == 1 and reps[0]["message"].startswith(f"{dp} replica(s)")
