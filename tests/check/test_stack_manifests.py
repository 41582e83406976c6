"""`kvplan check` on real published serving-stack manifests (tests/data/check/manifests, sources
and commits in its SOURCES.md): each gets the verdict a person checking vLLM's rules by hand
would give, with the arithmetic written here.

The hand rules used (vLLM 0.26.0/0.33.0; 0.33.0 when no image tag names one, the fixture below):
* vLLM starts tensor x pipeline x data-parallel-local workers, one GPU each
  (config/parallel.py world_size); fewer GPUs than that and it cannot start;
* the KV cache of a full-attention layer is 2 (K and V) x num_key_value_heads / tp x head_dim x
  dtype bytes per token per GPU (v1/kv_cache_interface.py FullAttentionSpec.page_size_bytes,
  block_size 16 tokens); the pool is at most gpu_memory_utilization x the GPU's bytes minus the
  weights' share (v1/worker/gpu_worker.py determine_available_memory); activations, CUDA graphs
  and non-torch memory take a few GiB more, so the pool lies below that bound and above it
  minus 8 GiB;
* num_gpu_blocks = pool bytes // (block bytes x layers) (v1/core/kv_cache_utils.py);
* a flag kvplan does not size (--kv-transfer-config, --speculative-config,
  --enable-expert-parallel) changes vLLM's memory: a warning, so `check --strict` fails;
* a manifest whose checkpoint or GPU cannot be read is bad input: exit 2 naming the key.
"""

from __future__ import annotations

import pytest

from tests.check.common import DATA, check


@pytest.fixture(autouse=True)
def _vllm_0_33_without_a_tag(monkeypatch):
    """The hand arithmetic above is vLLM 0.33.0's (16-token blocks, utilization 0.92): a manifest
    that names no vLLM version is checked as if vllm 0.33.0 were installed (0.34.0, the default
    now, sizes 64-token blocks with utilization 1.0; tests/engines/test_vllm_034.py)."""
    from kvplan.engines.vllm import versions

    monkeypatch.setattr(versions, "installed_vllm", lambda: "0.33.0")

M = DATA / "manifests"
GiB = 2**30
H100 = 85_017_755_648  # h100-sxm profile: bytes CUDA reports (`kvplan gpus`)
A10G = 23_696_375_808  # a10g profile


def _deps(doc: dict) -> dict:
    return {d["name"]: d for f in doc["files"] for d in f["deployments"]}


def _ids(doc: dict, dep: str | None = None, severity: str | None = None) -> set[tuple[str, str | None]]:
    return {(d["check_id"], d["key"]) for d in doc["diagnostics"]
            if (dep is None or d.get("deployment") == dep) and (severity is None or d["severity"] == severity)}


def _hand_pool(figures: dict, *, gpu_bytes: int, util: float, weights: int, tp: int, layers: int, kv_heads: int,
               head_dim: int, dtype_bytes: int = 2, mml: int) -> None:
    """The hand arithmetic of the module doc against check's figures."""
    per_token = 2 * (kv_heads // tp) * head_dim * dtype_bytes * layers
    block = 16 * per_token
    ceiling = util * gpu_bytes - weights / tp
    assert ceiling - 8 * GiB < figures["kv_cache_bytes"] <= ceiling
    assert figures["num_gpu_blocks"] == figures["kv_cache_bytes"] // block
    assert figures["num_gpu_blocks"] >= -(-mml // 16)  # one max_model_len request fits
    assert figures["fits"] is True


def _qwen25_7b_on_h100(figures: dict) -> None:
    # Qwen2.5-7B-Instruct: 28 layers, 4 KV heads, head_dim 3584 / 28 = 128, bf16, 15,231,233,024
    # bytes of weights, max_position_embeddings 32768. Per token 2 x 4 x 128 x 2 x 28 = 57,344 B;
    # pool <= 0.92 x 85,017,755,648 - 15,231,233,024 = 62.98e9 B; 32768 tokens = 1.88e9 B: fits.
    assert (figures["tensor_parallel_size"], figures["max_model_len"]) == (1, 32768)
    _hand_pool(figures, gpu_bytes=H100, util=0.92, weights=15_231_233_024, tp=1, layers=28, kv_heads=4, head_dim=128, mml=32768)


def test_kserve_single_node_v1alpha2_passes_on_one_h100_and_needs_a_gpu():
    f = str(M / "kserve" / "llm-inference-service-qwen2-7b-gpu.yaml")
    code, doc, _ = check(f)  # the LLMInferenceService names no GPU model: bad input, naming it
    assert code == 2 and ("gpu-missing", "gpu") in _ids(doc, severity="error")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 0
    (dep,) = _deps(doc).values()
    assert dep["name"] == "LLMInferenceService/qwen2-7b-instruct-single" and dep["model"] == "Qwen/Qwen2.5-7B-Instruct"
    _qwen25_7b_on_h100(dep["figures"])
    assert not _ids(doc, severity="warning")
    assert ("replicas", "spec.replicas") in _ids(doc, severity="info")  # 3 pods of this engine, sized per pod
    assert check(f, "--gpu", "H100", "--strict")[0] == 0


def test_kserve_v1alpha1_reads_as_v1alpha2():
    # the same sample at its v1alpha1 commit: the same spec keys, the same numbers
    code, doc, _ = check(str(M / "kserve" / "v1alpha1-llm-inference-service-qwen2-7b-gpu.yaml"), "--gpu", "H100")
    assert code == 0
    (dep,) = _deps(doc).values()
    _qwen25_7b_on_h100(dep["figures"])


def test_kserve_prefill_decode_roles_each_with_their_kv_transfer_role():
    f = str(M / "kserve" / "llm-inference-service-pd-qwen2-7b-gpu.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    deps = _deps(doc)
    assert set(deps) == {"LLMInferenceService/qwen2-7b-instruct-pd decode", "LLMInferenceService/qwen2-7b-instruct-pd prefill"}
    for name, dep in deps.items():
        _qwen25_7b_on_h100(dep["figures"])  # 1 GPU each (nvidia.com/gpu "1"), tensor 1
        # VLLM_ADDITIONAL_ARGS --kv_transfer_config (NixlConnector): the connector's own buffers and
        # host memory are not sized (the GPU pool is, as without it) -> approximate warnings on that key
        assert {("approximate", "--kv_transfer_config"), ("host-memory", "--kv_transfer_config")} <= _ids(doc, name, "warning")
    roles = {d["deployment"]: d["line"] for d in doc["diagnostics"] if d["check_id"] == "approximate"}
    assert roles == {"LLMInferenceService/qwen2-7b-instruct-pd decode": 46,  # kv_consumer: the main template's env value
                     "LLMInferenceService/qwen2-7b-instruct-pd prefill": 100}  # kv_producer: spec.prefill's env value
    assert code == 0 and check(f, "--gpu", "H100", "--strict")[0] == 1


def test_kserve_dp_ep_with_a_pvc_checkpoint_is_bad_input_naming_the_uri():
    # spec.model.uri pvc://llm-test-pvc-deepseek: a checkpoint kvplan cannot read -> exit 2
    f = str(M / "kserve" / "llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 2
    d = next(d for d in doc["diagnostics"] if d["check_id"] == "model-unresolved")
    assert (d["key"], d["line"]) == ("spec.model.uri", 12) and "pvc://llm-test-pvc-deepseek" in d["message"]
    # the worker (multi-node data parallel) template: every pod runs vllm serve with
    # --enable-expert-parallel -tp 1 -dp 32 --data-parallel-size-local 8 on its 8 GPUs:
    # 1 x 8 local ranks = 8 <= 8, no gpu-count error. Expert parallel is modelled now (ranks) and the
    # worker template passes it to vLLM: no warning names spec.parallelism.expert (no not-modelled,
    # no ignored-flag); the pvc checkpoint is the only error
    assert not [d for d in doc["diagnostics"] if d["key"] == "spec.parallelism.expert" and d["severity"] != "info"]
    assert [d["check_id"] for d in doc["diagnostics"] if d["severity"] == "error"] == ["model-unresolved"]
    assert not any(d["check_id"] == "gpu-count" and d["severity"] == "error" for d in doc["diagnostics"])


def test_kserve_kv_cache_offloading_is_sized():
    # kvCacheOffloading cpu.size 10Gi -> KServe writes --kv-transfer-config OffloadingConnector
    # with cpu_bytes_to_use 10 x 2**30; vLLM's native offload is sized now: the GPU pool is as
    # without it, the host memory is 10 x 2**30 B said on spec.kvCacheOffloading against the 32Gi
    # limit: nothing approximate.
    # But vLLM 0.34.0 maps that pool as one /dev/shm file (v1/kv_offload/cpu/spec.py create_worker ->
    # SharedOffloadRegion, num_chunks x chunk bytes), and KServe's single-node template mounts an
    # emptyDir {medium: Memory, sizeLimit: 1Gi} there (config/llmisvcconfig/config-llm-template.yaml
    # at aaac4e29; the sample adds no dshm of its own). By hand: a 64-token block of Qwen2.5-7B is
    # 2 (K, V) x 28 layers x 4 KV heads x 128 x 2 B x 64 = 3,670,016 B (896 pages of 4096: aligned),
    # num_chunks = 10 x 2**30 // 3,670,016 = 2,925, region = 2,925 x 3,670,016 = 10,734,796,800 B
    # > 1Gi = 1,073,741,824 B: check_shm_free_space raises, vLLM does not start. The sample's image
    # (llm-d-cuda) names no vLLM release: a warning (an older vLLM pins host tensors instead); with
    # the release pinned (--vllm-version 0.34.0) the shm-size error.
    f = str(M / "kserve" / "llm-inference-service-kv-cache-offloading-cpu.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    shm = [d for d in doc["diagnostics"] if d["check_id"] == "shm-size"]
    assert [(d["severity"], d["key"]) for d in shm] == [("warning", "spec.kvCacheOffloading")]
    assert "names no vLLM release" in shm[0]["message"]
    (dep,) = _deps(doc).values()
    _qwen25_7b_on_h100(dep["figures"])
    assert [d["check_id"] for d in doc["diagnostics"] if d["severity"] == "warning"] == ["shm-size"]
    code, doc, _ = check(f, "--gpu", "H100", "--vllm-version", "0.34.0")
    hm = [d for d in doc["diagnostics"] if d["check_id"] == "host-memory"]
    assert [(d["severity"], d["key"]) for d in hm] == [("info", "spec.kvCacheOffloading")]
    assert "10.00 GiB" in hm[0]["message"]
    region = 2925 * (2 * 28 * 4 * 128 * 2 * 64)
    assert region == 10_734_796_800 and region > 2**30
    shm = [d for d in doc["diagnostics"] if d["check_id"] == "shm-size"]
    assert [(d["severity"], d["key"]) for d in shm] == [("error", "spec.kvCacheOffloading")]
    assert f"{region / 2**30:.2f} GiB" in shm[0]["message"] and "1.00 GiB" in shm[0]["message"]
    assert "sizeLimit 1Gi" in shm[0]["message"] and "sizeLimit: 10Gi" in shm[0]["hint"]
    assert code == 1


def test_kserve_draft_model_speculator_with_an_unread_draft_is_bad_input():
    # the speculator's draft_model Llama-3.2-1B-Instruct (in VLLM_ADDITIONAL_ARGS) is now sized like
    # any model from its config.json: it is not bundled and the tests run offline, so kvplan cannot
    # read it -> model-unresolved (exit 2) naming --speculative-config at its line, never a pool
    # without the draft's weights and KV layers
    f = str(M / "kserve" / "llm-inference-service-llama8b-draft-target.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    (dep,) = _deps(doc).values()
    assert code == 2 and dep["figures"] is None
    errs = [(d["check_id"], d["key"]) for d in doc["diagnostics"] if d["severity"] == "error"]
    assert errs == [("model-unresolved", "--speculative-config")]
    d = next(d for d in doc["diagnostics"] if d["check_id"] == "model-unresolved")
    assert "meta-llama/Llama-3.2-1B-Instruct" in d["message"]
    # the line is VLLM_ADDITIONAL_ARGS' `value: >-`; the flag is the block's first line
    lines = open(f).read().splitlines()
    assert lines[d["line"] - 1].strip() == "value: >-" and lines[d["line"]].strip().startswith("--speculative-config")


def test_kserve_multinode_serving_runtime_names_no_model():
    # a ClusterServingRuntime (workerSpec pipelineParallelSize 1, tensorParallelSize 1) is a
    # template: the InferenceService that uses it names the model -> exit 2 naming storageUri
    code, doc, _ = check(str(M / "kserve" / "kserve-huggingfaceserver-multinode.yaml"), "--gpu", "H100")
    assert code == 2 and ("model-unresolved", "storageUri") in _ids(doc, severity="error")


def test_llm_d_modelservice_prefill_and_decode_roles():
    f = str(M / "llm-d" / "values-pd.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    deps = _deps(doc)
    assert set(deps) == {"modelservice decode container vllm", "modelservice prefill container vllm"}
    for name, dep in deps.items():
        fig = dep["figures"]
        # opt-125m: 12 layers, 12 heads of 768 / 12 = 64, fp16, max 2048 tokens; the chart gives
        # dataLocal x tensor = 1 x 1 = 1 nvidia.com/gpu and CUDA_VISIBLE_DEVICES=0 shows 1:
        # 1 GPU for 1 worker. Per token 2 x 12 x 64 x 2 x 12 = 36,864 B; weights ~0.25e9 B.
        per_token = 2 * 12 * 64 * 2 * 12
        assert fig["num_gpu_blocks"] == fig["kv_cache_bytes"] // (16 * per_token)
        assert 0.92 * H100 - 8 * GiB < fig["kv_cache_bytes"] <= 0.92 * H100 - 0.25e9
        # the NIXL connector's own buffers and host memory are not sized: approximate warnings on
        # the flag (figures and host memory), which --strict fails on
        assert {("approximate", "--kv-transfer-config"), ("host-memory", "--kv-transfer-config")} <= _ids(doc, name, "warning")
        assert not any(d["check_id"] == "gpu-count" and d["severity"] == "error" and d["deployment"] == name
                       for d in doc["diagnostics"])
    assert code == 0 and check(f, "--gpu", "H100", "--strict")[0] == 1


def test_dynamo_workers_with_a_flag_vllm_removed():
    f = str(M / "dynamo" / "disagg_kvbm_tp2.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    deps = _deps(doc)
    # Frontend and ModelExpress run no dynamo.vllm: two workers only
    assert set(deps) == {"DynamoGraphDeployment/vllm-disagg-kvbm-tp2 service VllmDecodeWorker",
                         "DynamoGraphDeployment/vllm-disagg-kvbm-tp2 service VllmPrefillWorker"}
    # --disable-log-requests is not a flag of the vLLM checked (0.33.0): the parser exits
    assert code == 1 and ("removed-flag", "--disable-log-requests") in _ids(doc, severity="error")
    prefill = "DynamoGraphDeployment/vllm-disagg-kvbm-tp2 service VllmPrefillWorker"
    # --is-prefill-worker sets a kv_producer kv-transfer-config whose connector (kvbm) kvplan does not
    # size: approximate warnings (figures and host memory) on the key that turned it on
    assert {("approximate", "--is-prefill-worker"), ("host-memory", "--is-prefill-worker")} <= _ids(doc, prefill, "warning")
    decode = deps["DynamoGraphDeployment/vllm-disagg-kvbm-tp2 service VllmDecodeWorker"]["figures"]
    # Qwen3-8B, -tp 2 on gpu: "2", --gpu-memory-utilization 0.23, --max-model-len 32000:
    # 36 layers, 8 KV heads / 2 = 4 per GPU, head_dim 128, bf16: per token 2 x 4 x 128 x 2 x 36
    # = 73,728 B; weights ~16.4e9 / 2 = 8.2e9 B per GPU; pool <= 0.23 x 85.0e9 - 8.2e9 = 11.4e9 B
    per_token = 2 * 4 * 128 * 2 * 36
    assert decode["tensor_parallel_size"] == 2 and decode["gpu_memory_utilization"] == 0.23
    assert decode["num_gpu_blocks"] == decode["kv_cache_bytes"] // (16 * per_token)
    assert 0.23 * H100 - 16.4e9 / 2 - 8 * GiB < decode["kv_cache_bytes"] <= 0.23 * H100 - 16.0e9 / 2
    assert decode["num_gpu_blocks"] >= 32000 // 16


def test_production_stack_basic_config():
    f = str(M / "production-stack" / "values-02-basic-config.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    (dep,) = _deps(doc).values()
    # vllmConfig maxModelLen 4096, extraArgs --gpu-memory-utilization 0.8, requestGPU 1
    fig = dep["figures"]
    assert (fig["max_model_len"], fig["gpu_memory_utilization"]) == (4096, 0.8)
    _hand_pool(fig, gpu_bytes=H100, util=0.8, weights=16_060_522_496, tp=1, layers=32, kv_heads=8, head_dim=128, mml=4096)
    assert code == 0


def test_production_stack_disaggregated_prefill_with_lmcache():
    f = str(M / "production-stack" / "values-16-disagg-prefill.yaml")
    code, doc, _ = check(f, "--gpu", "H100")
    deps = _deps(doc)
    assert set(deps) == {"modelSpec llama-prefill", "modelSpec llama-decode"}
    for name, dep in deps.items():
        # maxModelLen 32000, no requestGPU: lmcacheConfig.cudaVisibleDevices shows one GPU
        _hand_pool(dep["figures"], gpu_bytes=H100, util=0.92, weights=16_060_522_496, tp=1, layers=32, kv_heads=8,
                   head_dim=128, mml=32000)
        # LMCache owns its buffers and CPU pool: not sized -> approximate warnings on lmcacheConfig
        key = f"servingEngineSpec.modelSpec[{0 if 'prefill' in name else 1}].lmcacheConfig"
        assert {("approximate", key), ("host-memory", key)} <= _ids(doc, name, "warning")
    assert code == 0 and check(f, "--gpu", "H100", "--strict")[0] == 1


def _llama_tp2_on_a10g(fig: dict) -> None:
    # accelerator_type A10G (23,696,375,808 B), tensor_parallel_size 2, max_model_len 8192:
    # per token per GPU 2 x (8 / 2) x 128 x 2 x 32 = 65,536 B; weights 16.06e9 / 2 = 8.03e9 B;
    # pool <= 0.92 x 23.70e9 - 8.03e9 = 13.77e9 B; one 8192-token request = 0.54e9 B: fits
    assert (fig["gpu"], fig["tensor_parallel_size"], fig["max_model_len"]) == ("a10g", 2, 8192)
    _hand_pool(fig, gpu_bytes=A10G, util=0.92, weights=16_060_522_496, tp=2, layers=32, kv_heads=8, head_dim=128, mml=8192)


def test_ray_serve_llm_config_names_its_gpu():
    code, doc, _ = check(str(M / "ray-serve" / "configs" / "model_config" / "llama_3dot1_8b_tp2.yaml"))
    (dep,) = _deps(doc).values()
    _llama_tp2_on_a10g(dep["figures"])
    assert code == 0


def test_ray_serve_config_reads_the_llm_config_file_it_names():
    code, doc, _ = check(str(M / "ray-serve" / "serve_llama_3dot1_8b_tp2.yaml"))
    (dep,) = _deps(doc).values()
    assert dep["name"] == "application llm-endpoint llm_configs[0]"
    _llama_tp2_on_a10g(dep["figures"])
    assert code == 0
