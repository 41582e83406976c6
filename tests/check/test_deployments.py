"""`kvplan check` over real-looking deployment files: exit codes, check ids, file:line positions.

Expected figures are hand arithmetic written next to each assertion (bytes of KV per token from
the model's config.json: layers x KV heads per GPU x head_dim x 2 (K and V) x 2 bytes for bf16),
or generous bounds from published sizes; nothing is recomputed the way kvplan computes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.check.common import check, DATA, diag, found, GiB, write


# --- vLLM --config YAML ------------------------------------------------------------------------


def test_config_yaml_that_fits_passes_with_the_gpu_from_the_command_line():
    code, doc, _ = check(str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100")
    assert code == 0
    assert found(doc, "error") == set()
    dep = doc["files"][0]["deployments"][0]
    assert doc["files"][0]["kind"] == "vllm-config"
    assert dep["model"] == "meta-llama/Llama-3.1-8B-Instruct" and dep["gpu"] == "h100-sxm"
    fig = dep["figures"]
    assert fig["max_model_len"] == 32768  # `max_model_len: 32768` (underscore spelling accepted)
    # one 32768-token request: 32 layers x 8 KV heads x 128 x 2 x 2 B = 128 KiB/token -> 4 GiB
    assert fig["kv_cache_bytes"] > 4 * GiB
    # H100 80GB at 0.90 minus 16,060,522,496 B of weights leaves < 60.5e9 B -> < 14.1 requests,
    # so max-num-seqs 256 (line 6) is above what fits at max_model_len: an info, not an error.
    assert fig["max_concurrency"] < 14.1
    assert ("max-num-seqs", 6) in found(doc, "info")


def test_config_yaml_too_long_context_names_the_line_and_the_largest_length_that_fits():
    code, doc, _ = check(str(DATA / "fail/llama70b-long-context.yaml"), "--vllm-version", "0.33.0")  # 0.33.0's null block
    assert code == 1
    assert {("max-model-len-fits", 3), ("removed-flag", 5), ("unknown-flag", 6)} <= found(doc, "error")
    assert ("kvplan-key-in-vllm-config", 7) in found(doc, "warning")
    d = diag(doc, "max-model-len-fits")
    assert d["key"] == "max-model-len" and d["file"].endswith("fail/llama70b-long-context.yaml")
    # Llama-3.1-70B, TP 2: 80 layers x (8/2) KV heads x 128 x 2 x 2 B = 163,840 B/token;
    # 131,072 tokens -> 21,474,836,480 B = 20.00 GiB.
    assert "needs 20.00 GiB" in d["message"]
    assert "vLLM will refuse to start" in d["message"]
    largest = int(re.search(r"largest max-model-len that fits is (\d+)", d["message"]).group(1))
    avail = float(re.search(r"only ([\d.]+) GiB is available", d["message"]).group(1))
    assert largest * 163_840 <= (avail + 0.005) * GiB
    # upper bound: 0.95 x 81,559 MiB (nvidia-smi total) - 141,107,412,992 B / 2 of weights
    assert 0 < largest < (0.95 * 81_559 * 2**20 - 141_107_412_992 / 2) / 163_840
    assert d["hint"] == f"set --max-model-len {largest}"
    unknown = diag(doc, "unknown-flag")
    assert unknown["key"] == "max-modl-len" and "did you mean --max-model-len" in unknown["message"]
    removed = diag(doc, "removed-flag")
    assert removed["key"] == "swap_space" and "unrecognized arguments" in removed["message"]


def test_min_concurrency_target_in_the_kvplan_block(tmp_path):
    # Llama-3.1-8B on an L4 (< 24 GB): 0.92 x 24e9 - 16.06e9 B of weights < 6.1e9 B for KV;
    # a 32768-token request needs 4 GiB = 4.29e9 B, so at most 1 fits: a target of 2 fails.
    f = write(
        tmp_path,
        "l4.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 32768
        kvplan:
          gpu: L4
          min_concurrency: 2
        """,
    )
    code, doc, _ = check(f, "--vllm-version", "0.26.0")
    assert code == 1
    d = diag(doc, "min-concurrency")
    assert (d["line"], d["key"], d["severity"]) == (5, "kvplan.min_concurrency", "error")
    assert "below the target 2" in d["message"]


def test_min_concurrency_at_a_stated_request_length_and_max_num_seqs_cap(tmp_path):
    # On an H100 (85e9 B) at 0.92: >= 78e9 - 16.06e9 (weights) - 8e9 (a generous bound for
    # activations, non-torch and CUDA graphs) = 54e9 B of KV; a 1024-token request needs
    # 1024 x 128 KiB = 128 MiB, so well over 100 fit; max-num-seqs 8 then caps it below 16.
    ok = write(
        tmp_path,
        "ok.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        kvplan: {gpu: H100, min_concurrency: 100, request_len: 1024}
        """,
    )
    capped = write(
        tmp_path,
        "capped.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        max-num-seqs: 8
        kvplan: {gpu: H100, min_concurrency: 16, request_len: 1024}
        """,
    )
    code, doc, _ = check(ok)
    assert code == 0, doc["diagnostics"]
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["request_len"] == 1024 and fig["concurrency_at_request_len"] > 100
    code, doc, _ = check(capped)
    assert code == 1
    d = diag(doc, "min-concurrency")
    assert d["line"] == 4 and "max-num-seqs limits it" in d["message"] and "8.00 requests" in d["message"]  # 2 decimals, as the header


def test_invalid_kvplan_key_is_an_input_error_with_a_suggestion(tmp_path):
    f = write(
        tmp_path,
        "typo.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        kvplan:
          gpu: H100
          min_concurency: 4
        """,
    )
    code, doc, _ = check(f)
    assert code == 2
    d = diag(doc, "invalid-kvplan-key")
    assert (d["line"], d["key"]) == (4, "kvplan.min_concurency")
    assert "did you mean min_concurrency" in d["message"]


def test_utilization_out_of_range_and_max_utilization_target(tmp_path):
    f = write(
        tmp_path,
        "util.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        gpu-memory-utilization: 0
        """,
    )
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1
    assert ("gpu-memory-utilization-range", 3) in found(doc, "error")
    g = write(
        tmp_path,
        "target.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        gpu_memory_utilization: 0.95
        kvplan:
          max_gpu_memory_utilization: 0.9
        """,
    )
    code, doc, _ = check(g, "--gpu", "H100")
    assert code == 1
    d = diag(doc, "max-gpu-memory-utilization")
    assert (d["line"], d["key"]) == (3, "gpu_memory_utilization")


def test_false_in_config_yaml_does_not_turn_prefix_caching_off(tmp_path):
    # vLLM's load_config_file drops `key: false`; prefix caching defaults to on.
    f = write(
        tmp_path,
        "pc.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        enable-prefix-caching: false
        enforce-eager: false
        """,
    )
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0
    d = diag(doc, "false-dropped")
    assert (d["line"], d["severity"]) == (3, "warning") and "no-enable-prefix-caching: true" in d["hint"]
    assert ("false-dropped", 4) not in found(doc)  # enforce-eager is off by default anyway
    assert run_cli("check", f, "--gpu", "H100", "--strict")[0] == 1


def test_max_model_len_over_the_model_limit(tmp_path):
    # Llama-2-7b-hf: max_position_embeddings 4096, no rope scaling.
    f = write(tmp_path, "l2.yaml", "model: meta-llama/Llama-2-7b-hf\nmax-model-len: 8192\n")
    code, doc, _ = check(f, "--gpu", "A100-80GB")
    assert code == 1
    d = diag(doc, "max-model-len-over-limit")
    assert d["line"] == 2 and "limit of 4096" in d["message"] and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in d["message"]


def test_kv_head_replication_notice_and_tp_divisibility(tmp_path):
    # Llama-3.1-8B: 32 attention heads, 8 KV heads. TP 16 divides 32; 16 / 8 = 2 copies per KV head.
    f = write(tmp_path, "tp16.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\ntensor-parallel-size: 16\nmax-model-len: 8192\n")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0
    d = diag(doc, "kv-head-replication")
    assert d["severity"] == "info" and d["line"] == 2 and "replicated on 2 GPUs" in d["message"]
    # TP 6 divides neither 32 heads nor 8 KV heads.
    g = write(tmp_path, "tp6.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\ntensor_parallel_size: 6\n")
    code, doc, _ = check(g, "--gpu", "H100")
    assert code == 1
    d = diag(doc, "tp-divisibility")
    assert (d["line"], d["key"]) == (2, "tensor_parallel_size") and "32 attention heads" in d["message"]


def test_fp8_kv_cache_on_a_gpu_without_fp8_is_a_warning(tmp_path):
    f = write(tmp_path, "fp8.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\nkv-cache-dtype: fp8\n")
    code, doc, _ = check(f, "--gpu", "A100-80GB")
    assert code == 0
    d = diag(doc, "fp8-kv-unsupported-gpu")
    assert (d["line"], d["severity"]) == (3, "warning")
    code, doc, _ = check(f, "--gpu", "H100")
    assert "fp8-kv-unsupported-gpu" not in {x["check_id"] for x in doc["diagnostics"]}


def test_duplicate_and_invalid_values(tmp_path):
    f = write(
        tmp_path,
        "dup.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        max_model_len: 4096
        """,
    )
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0
    assert ("duplicate-flag", 3) in found(doc, "warning")
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 4096  # the last one wins
    g = write(
        tmp_path,
        "bad.yaml",
        """
        model: meta-llama/Llama-3.1-8B-Instruct
        max-model-len: 8192
        tensor-parallel-size: two
        kv-cache-dtype: fp9
        """,
    )
    code, doc, _ = check(g, "--gpu", "H100")
    assert code == 1
    assert {("invalid-value", 3), ("invalid-value", 4)} <= found(doc, "error")
    # no figures for a deployment vLLM refuses: they would be for tensor-parallel-size 1 and
    # an auto KV cache, which the file does not hold
    assert doc["files"][0]["deployments"][0]["figures"] is None


def test_model_missing_is_a_failure(tmp_path):
    f = write(tmp_path, "nomodel.yaml", "max-model-len: 8192\nport: 8000\n")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1
    assert diag(doc, "model-missing")["severity"] == "error"


# --- shell scripts, Dockerfiles --------------------------------------------------------------


def test_shell_script_with_continuations_passes():
    code, doc, _ = check(str(DATA / "pass/serve-qwen32b.sh"), "--vllm-version", "0.33.0")  # 16-token blocks
    assert code == 0, doc["diagnostics"]
    dep = doc["files"][0]["deployments"][0]
    assert doc["files"][0]["kind"] == "command"
    assert dep["line"] == 7 and dep["model"] == "Qwen/Qwen2.5-32B"  # from ${MODEL:-Qwen/Qwen2.5-32B}
    assert dep["gpu"] == "h100-sxm"  # from `# kvplan: gpu=H100 gpu_count=2`
    fig = dep["figures"]
    assert fig["tensor_parallel_size"] == 2  # --tensor-parallel-size=2
    assert fig["max_model_len"] == 32000  # vLLM reads a lower-case k as 1000
    assert fig["kv_cache_bytes"] == 40 * GiB  # --kv-cache-memory 40G: upper-case G = 2^30
    # Qwen2.5-32B, TP 2: 64 layers x (8/2) KV heads x 128 x 2 x 2 B = 131,072 B/token = 2 MiB per
    # 16-token block; 40 GiB / 2 MiB = 20,480 blocks.
    assert fig["num_gpu_blocks"] == 20_480
    d = diag(doc, "abbreviated-flag")
    assert (d["line"], d["key"]) == (10, "--kv-cache-memory") and "--kv-cache-memory-bytes" in d["message"]


def test_shell_script_failures_point_at_each_line():
    code, doc, _ = check(str(DATA / "fail/serve-multi.sh"))
    assert code == 1
    deps = doc["files"][0]["deployments"]
    assert [d["model"] for d in deps] == ["Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-2-7b-hf"]
    assert {
        ("tp-divisibility", 5),  # -tp 3 vs 28 attention heads
        ("max-model-len-over-limit", 11),  # 8192 > 4096
        ("gpu-memory-utilization-range", 12),  # 1.2
        ("removed-flag", 13),  # --swap-space
        ("unknown-flag", 15),  # --max-num-sequences
    } <= found(doc, "error")
    assert "did you mean --max-num-seqs" in diag(doc, "unknown-flag")["message"]
    assert "valid sizes: 1, 2, 4, 28" == diag(doc, "tp-divisibility")["hint"]  # 7 and 14 are refused (4 KV heads)


def test_flag_spellings_on_the_command_line(tmp_path):
    f = write(
        tmp_path,
        "run.sh",
        """
        # kvplan: gpu=H200
        vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor_parallel_size=4 --max-model-len 32K \\
            --max-num-batched-tokens 16k --no-enable-prefix-caching -O3
        """,
    )
    code, doc, _ = check(f)
    assert code == 0, doc["diagnostics"]
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert fig["tensor_parallel_size"] == 4
    assert fig["max_model_len"] == 32 * 1024  # upper-case K = 1024


def test_unset_variable_for_the_model_is_an_input_error_unless_a_comment_names_it(tmp_path):
    f = write(tmp_path, "a.sh", "vllm serve $MODEL_PATH --max-model-len 8192\n")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 2
    d = diag(doc, "model-unresolved")
    assert d["line"] == 1 and "kvplan: model=" in d["hint"]
    g = write(tmp_path, "b.sh", "# kvplan: model=meta-llama/Llama-3.1-8B-Instruct\nvllm serve $MODEL_PATH --max-model-len 8192\n")
    code, doc, _ = check(g, "--gpu", "H100")
    assert code == 0
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_dockerfile_exec_form_with_the_vllm_image_entrypoint():
    code, doc, _ = check(str(DATA / "pass/Dockerfile"))
    assert code == 0, doc["diagnostics"]
    dep = doc["files"][0]["deployments"][0]
    assert doc["files"][0]["kind"] == "dockerfile"
    assert dep["model"] == "mistralai/Mistral-7B-Instruct-v0.3" and dep["gpu"] == "l40s"
    assert dep["figures"]["max_model_len"] == 16384


def test_dockerfile_entrypoint_plus_cmd_that_does_not_fit():
    code, doc, _ = check(str(DATA / "fail/Dockerfile"))
    assert code == 1
    d = diag(doc, "max-model-len-fits")
    assert d["line"] == 6 and d["key"] == "--max-model-len"


# --- docker-compose ----------------------------------------------------------------------------


def test_compose_file_passes_with_an_fp8_warning_and_fails_under_strict():
    f = str(DATA / "pass/docker-compose.yml")
    code, doc, _ = check(f)
    assert code == 0
    assert doc["files"][0]["kind"] == "compose"
    dep = doc["files"][0]["deployments"][0]
    assert dep["name"] == "service vllm" and dep["gpu"] == "a10g"  # `# kvplan: gpu=A10G`
    assert ("fp8-kv-unsupported-gpu", 13) in found(doc, "warning")
    assert run_cli("check", f, "--strict")[0] == 1


def test_compose_gpu_count_and_weights_that_do_not_fit():
    code, doc, _ = check(str(DATA / "fail/docker-compose.yml"))
    assert code == 1
    # TP 2 needs 2 GPUs; the service reserves `count: 1` (line 17).
    d = diag(doc, "gpu-count")
    assert d["line"] == 17 and "needs 2" in d["message"]
    # Qwen2.5-14B in bf16 is >= 14e9 params x 2 B = 28e9 B, more than an L4's 24 GB in total.
    w = diag(doc, "weights-fit")
    assert w["line"] == 22 and w["deployment"] == "service qwen14b"


# --- Kubernetes and kvplan.yaml ----------------------------------------------------------------


def test_k8s_deployment_gpu_from_node_selector_mapping_and_gpu_count():
    code, doc, _ = check(str(DATA / "repo/k8s/vllm-deployment.yaml"))
    assert code == 1
    assert doc["files"][0]["kind"] == "k8s"
    dep = doc["files"][0]["deployments"][0]
    assert dep["name"] == "Deployment/llama-70b container vllm"
    assert dep["gpu"] == "h100-sxm"  # nodeSelector NVIDIA-H100-80GB-HBM3 -> H100-80GB (kvplan.yaml)
    d = diag(doc, "gpu-count")
    assert (d["line"], d["key"]) == (43, "resources.limits.nvidia.com/gpu")
    assert "needs 4" in d["message"]


def test_k8s_args_only_with_the_vllm_image_and_env_expansion():
    code, doc, _ = check(str(DATA / "repo/k8s/llama8b-l4.yaml"))
    assert code == 0, doc["diagnostics"]
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "meta-llama/Llama-3.1-8B-Instruct"  # --model=$(MODEL_ID)
    assert dep["gpu"] == "l4"  # cloud.google.com/gke-accelerator: nvidia-l4
    assert dep["figures"]["max_model_len"] == 8192


def test_k8s_without_a_gpu_mapping_says_which_label_to_map(tmp_path):
    f = write(
        tmp_path,
        "k8s/pod.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: solo}
        spec:
          nodeSelector:
            nvidia.com/gpu.product: NVIDIA-A800-SXM4-80GB
          containers:
            - name: vllm
              image: vllm/vllm-openai:latest
              command: ["/bin/sh", "-c"]
              args:
                - |
                  vllm serve meta-llama/Llama-3.1-8B-Instruct \\
                    --max-model-len 8192
        """,
    )
    code, doc, _ = check(f)
    assert code == 2
    d = diag(doc, "gpu-missing")
    assert "nvidia.com/gpu.product=NVIDIA-A800-SXM4-80GB" in d["hint"]  # a GPU kvplan has no profile for
    code, doc, _ = check(f, "--gpu", "A100-80GB")
    assert code == 0
    assert doc["files"][0]["deployments"][0]["line"] == 13  # the `vllm serve` line inside sh -c


def test_manifest_lists_deployments_of_every_form():
    code, doc, _ = check(str(DATA / "repo/kvplan.yaml"))
    assert code == 1
    names = [d["name"] for d in doc["files"][0]["deployments"]]
    assert names == ["chat", "batch-qwen", "tiny"]
    d = diag(doc, "max-gpu-memory-utilization")
    assert (d["line"], d["deployment"]) == (24, "tiny")
    # vLLM 0.34.0's default utilization with the extensible KV cache (0.92 before)
    assert "1.0 is above the target 0.85" in d["message"]
    chat = doc["files"][0]["deployments"][0]
    assert chat["figures"]["max_model_len"] == 16384 and chat["figures"]["request_len"] == 8192
    # the chat deployment's own findings point into deploy/chat.yaml
    seqs = diag(doc, "max-num-seqs")
    assert seqs["file"].endswith("repo/deploy/chat.yaml") and seqs["line"] == 3


# --- malformed input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, line, words",
    [
        ("bad/syntax-error.yaml", 3, "not valid YAML"),
        ("bad/latin1.yaml", 2, "not UTF-8"),
        ("bad/alias-bomb.yaml", None, "alias bomb"),
        ("repo/k8s/broken.yaml", 11, "not valid YAML"),
        ("bad/docker-compose.yml", 3, "not valid YAML"),  # tab indentation
        ("bad/serve-unclosed-quote.sh", 2, "quote is never closed"),
    ],
)
def test_malformed_files_exit_2_with_a_parse_error(name, line, words):
    code, doc, _ = check(str(DATA / name), "--gpu", "H100")
    assert code == 2
    d = diag(doc, "parse-error")
    assert words in d["message"]
    if line is not None:
        assert d["line"] == line


def test_missing_directory_huge_and_binary_files(tmp_path):
    huge = tmp_path / "huge.yaml"
    huge.write_text("model: x\n" + "# padding\n" * 300_000)
    binary = tmp_path / "model.sh"
    binary.write_bytes(b"\x7fELF\x00\x00vllm serve")
    code, doc, _ = check(str(tmp_path / "missing.yaml"), str(tmp_path), str(huge), str(binary))
    assert code == 2
    msgs = [d["message"] for d in doc["diagnostics"]]
    assert msgs[0] == "no such file" and "directory" in msgs[1]
    assert "kvplan reads at most" in msgs[2] and "binary" in msgs[3]


def test_parse_error_wins_over_failed_checks_and_both_are_reported():
    code, doc, _ = check(str(DATA / "fail/serve-multi.sh"), str(DATA / "bad/syntax-error.yaml"))
    assert code == 2
    assert ("tp-divisibility", 5) in found(doc) and ("parse-error", 3) in found(doc)


def test_unknown_gpu_is_an_input_error(tmp_path):
    f = write(tmp_path, "g.sh", "# kvplan: gpu=H1000\nvllm serve meta-llama/Llama-3.1-8B-Instruct\n")
    code, doc, _ = check(f)
    assert code == 2
    d = diag(doc, "gpu-unknown")
    assert (d["line"], d["key"]) == (1, "kvplan.gpu")
    assert "unknown GPU 'H1000'" in d["message"] and "did you mean h100" in d["message"] + str(d["hint"])


def test_yaml_without_a_deployment_fails(tmp_path):
    # (more shapes in test_check_documents.py) a Helm values file given to check is no pass
    f = write(tmp_path, "values.yaml", "replicaCount: 2\nimage: {repository: nginx}\n")
    code, doc, _ = check(f)
    assert code == 1
    assert diag(doc, "no-deployment")["severity"] == "error"


def test_specs_are_loaded_once_per_model_and_plans_reused(tmp_path):
    from kvplan.check.checker import Checker

    files = []
    for i in range(3):
        files.append(write(tmp_path, f"c{i}.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"))
    files.append(write(tmp_path, "c3.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 4096\n"))
    report = Checker(gpu="H100").check_paths(files)
    assert report.stats["spec_loads"] == 1 and report.stats["spec_cache_hits"] == 3
    assert report.stats["plans"] == 2 and report.stats["plan_cache_hits"] == 2


def test_docker_run_with_the_vllm_image_and_an_unmodelled_block_size(tmp_path):
    f = write(
        tmp_path,
        "run.sh",
        """
        # kvplan: gpu=H100
        docker run --gpus all -p 8000:8000 --ipc=host --name vllm-openai \\
          vllm/vllm-openai:v0.26.0 \\
          --model mistralai/Mistral-7B-Instruct-v0.3 --max-model-len 16k --block-size 24
        """,
    )
    code, doc, _ = check(f)
    assert code == 0
    dep = doc["files"][0]["deployments"][0]
    assert dep["model"] == "mistralai/Mistral-7B-Instruct-v0.3" and dep["figures"] is None
    d = diag(doc, "not-modelled")
    assert (d["line"], d["key"], d["severity"]) == (4, "--block-size", "warning")


def test_switch_with_a_value_and_a_model_given_twice(tmp_path):
    f = write(
        tmp_path,
        "x.sh",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --model meta-llama/Llama-3.1-8B --enforce-eager=true\n",
    )
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 1
    msgs = {d["message"] for d in doc["diagnostics"] if d["check_id"] == "invalid-value"}
    assert any("given twice" in m for m in msgs) and any("is a switch" in m for m in msgs)


def test_random_input_never_raises(tmp_path):
    """Whatever a file holds, check returns diagnostics (no exception, no traceback)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kvplan.check.checker import Checker

    checker = Checker(gpu="H100")
    pieces = st.sampled_from(
        [
            "vllm serve ", "meta-llama/Llama-3.1-8B-Instruct ", "--max-model-len ", "32k ", "-tp ", "3 ",
            "--tensor-parallel-size=", "\\\n", '"', "'", "$MODEL ", "${X:-y} ", "# kvplan: gpu=H100\n",
            "model: ", "kvplan:\n  gpu: L4\n", "- ", "&a ", "*a ", "{", "}", "[", "]", ": ", "\n", "  ",
            "--no-enable-prefix-caching ", "--swap-space 4 ", "-O3 ", "--compilation-config.mode 3 ",
            "apiVersion: v1\nkind: Pod\n", "services:\n", "containers:\n", "\t", "\x85", "é",
        ]
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=st.lists(pieces, max_size=30).map("".join), suffix=st.sampled_from([".yaml", ".sh", ".yml", ""]))
    def run(text, suffix):
        p = tmp_path / f"f{suffix}"
        if suffix == "":
            p = tmp_path / "Dockerfile"
        p.write_text(text, encoding="utf-8")
        report = checker.check_paths([str(p)])
        assert report.exit_code() in (0, 1, 2)

    run()


def test_kv_cache_memory_bytes_that_cannot_sit_next_to_the_weights(tmp_path):
    # Llama-3.1-8B weights 16,060,522,496 B + 10G (10 x 2^30 = 10,737,418,240 B) of KV cache
    # = 26.8e9 B, more than an L4's < 24e9 B in total: vLLM runs out of memory.
    f = write(
        tmp_path,
        "l4.sh",
        """
        # kvplan: gpu=L4
        vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 \\
            --kv-cache-memory-bytes 10G
        """,
    )
    code, doc, _ = check(f)
    assert code == 1
    d = diag(doc, "weights-fit")
    assert (d["line"], d["key"]) == (3, "--kv-cache-memory-bytes") and "out of memory" in d["message"]
    # 4G (4,294,967,296 B) + 16.06e9 B = 20.4e9 B leaves > 3e9 B on an L4 for the rest: no error.
    g = write(tmp_path, "l4b.sh", "# kvplan: gpu=L4\nvllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --kv-cache-memory-bytes 4G\n")
    code, doc, _ = check(g)
    assert "weights-fit" not in {x["check_id"] for x in doc["diagnostics"]}


# --- exit codes shared with `kvplan estimate` (review item 30) ----------------------------------


def test_vllm_refusals_fail_the_check_while_estimate_calls_them_bad_options(tmp_path):
    """The mapping docs/ci.md documents: a value vLLM refuses is exit 2 for estimate (its own
    option is bad, nothing to estimate) and exit 1 for check (the file under test fails);
    "does not fit" is 1 for both; an unknown model or GPU is 2 for both."""
    over = write(tmp_path, "over.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 300000\n")
    bf16 = write(tmp_path, "bf16.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\ndtype: bfloat16\nmax-model-len: 8192\n")
    big = write(tmp_path, "big.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 131072\n")
    unknown = write(tmp_path, "gpu.yaml", "model: meta-llama/Llama-3.1-8B-Instruct\nkvplan: {gpu: H1000}\n")
    m = "meta-llama/Llama-3.1-8B-Instruct"
    cases = [
        # (check args, estimate args, check exit, estimate exit)
        ((over, "--gpu", "H100"), (m, "--gpu", "H100", "--max-model-len", "300000"), 1, 2),
        ((bf16, "--gpu", "V100"), (m, "--gpu", "V100", "--dtype", "bfloat16", "--max-model-len", "8192"), 1, 2),
        ((big, "--gpu", "L4"), (m, "--gpu", "L4", "--max-model-len", "131072"), 1, 1),
        ((unknown,), (m, "--gpu", "H1000"), 2, 2),
    ]
    for check_args, est_args, check_exit, est_exit in cases:
        assert check(*check_args)[0] == check_exit, check_args
        assert run_cli("estimate", *est_args)[0] == est_exit, est_args


def test_every_check_id_is_documented_with_its_exit_code():
    """docs/ci.md's table lists every check id; those marked "(exit 2)" are exactly the ids
    whose errors make check exit 2."""
    import kvplan.check.diagnostics as ck

    doc = (Path(__file__).parents[2] / "docs" / "ci.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|", doc, re.M)
    documented: dict[str, str] = {}
    for ids, severity in rows:
        for cid in re.findall(r"`([a-z0-9-]+)`", ids):
            documented[cid] = severity
    ids = {v for k, v in vars(ck).items() if k.isupper() and isinstance(v, str) and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", v)}
    assert ids - set(documented) == set()
    assert {cid for cid, sev in documented.items() if "exit 2" in sev} == set(ck.INPUT_ERROR_IDS)
