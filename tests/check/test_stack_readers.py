"""The serving-stack readers' rules on small manifests written here (the real published ones are
in test_stack_manifests.py): what each stack passes to vLLM, GPU counts per pod and per group,
a checkpoint or file kvplan cannot read, the host-memory rule."""

from __future__ import annotations

from tests.check.common import check, write

KSERVE_HEAD = """
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata:
  name: x
spec:
"""


def _ids(doc: dict, severity: str | None = None) -> set[tuple[str, str | None]]:
    return {(d["check_id"], d["key"]) for d in doc["diagnostics"] if severity is None or d["severity"] == severity}


def test_offload_buffer_above_the_container_memory_limit(tmp_path):
    # kvCacheOffloading cpu 40Gi -> cpu_bytes_to_use 40 x 2**30 = 42,949,672,960 B, allocated in
    # the container at start; its memory limit is 32 x 2**30: 40 GiB > 32 GiB -> OOM-killed
    f = write(tmp_path, "x.yaml", KSERVE_HEAD + """
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
  kvCacheOffloading:
    cpu: 40Gi
  template:
    containers:
      - name: main
        resources:
          limits:
            memory: 32Gi
            nvidia.com/gpu: "1"
""")
    code, doc, _ = check(f, "--gpu", "H100")
    hm = [d for d in doc["diagnostics"] if d["check_id"] == "host-memory"]
    assert code == 1 and [(d["severity"], d["key"]) for d in hm] == [("error", "spec.kvCacheOffloading")]
    assert "40.00 GiB" in hm[0]["message"] and "32.00 GiB" in hm[0]["message"]
    # the finding sits on the manifest key that asked for the pool; the limit's key is in the message
    offload_line = open(f).read().splitlines().index("  kvCacheOffloading:") + 1
    assert hm[0]["line"] == offload_line and "resources.limits.memory" in hm[0]["message"]
    # 40Gi under a 64Gi limit: no error or warning (vLLM's own memory comes on top; kvplan does not
    # guess it), only the sized need said as info, still on spec.kvCacheOffloading. The template's
    # own dshm (48Gi) replaces KServe's 1Gi one, so the /dev/shm region fits too (check.rules.shm)
    f2 = write(tmp_path, "y.yaml", open(f).read().replace("memory: 32Gi", "memory: 64Gi") + """\
    volumes:
      - name: dshm
        emptyDir: {medium: Memory, sizeLimit: 48Gi}
""")
    code, doc, _ = check(f2, "--gpu", "H100")
    hm = [d for d in doc["diagnostics"] if d["check_id"] == "host-memory"]
    assert code == 0 and [(d["severity"], d["key"]) for d in hm] == [("info", "spec.kvCacheOffloading")]
    assert [d["severity"] for d in doc["diagnostics"] if d["check_id"] == "shm-size"] == ["info"]


def test_single_node_template_passes_only_the_tensor_size(tmp_path):
    # no worker: KServe's config-llm-template writes only --tensor-parallel-size; data 2 would
    # need 2 GPUs but never reaches vLLM: a warning on the key, no gpu-count error on 1 GPU
    f = write(tmp_path, "x.yaml", KSERVE_HEAD + """
  model:
    uri: hf://Qwen/Qwen2.5-7B-Instruct
  parallelism:
    data: 2
    expert: true
  template:
    containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: "1"
""")
    code, doc, _ = check(f, "--gpu", "H100")
    # expert parallel is modelled now (ranks), but without a worker KServe never passes
    # --enable-expert-parallel either: still an ignored-flag warning on the key, not a sized EP
    assert {("ignored-flag", "spec.parallelism.data"), ("ignored-flag", "spec.parallelism.expert")} <= _ids(doc, "warning")
    assert not [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count" and d["severity"] == "error"]
    assert code == 0 and check(f, "--gpu", "H100", "--strict")[0] == 1


def test_data_parallel_worker_pods_need_tensor_times_local_ranks(tmp_path):
    # worker + data 4 / dataLocal 2 / tensor 2: every pod runs 2 local ranks of tensor 2 = 4
    # GPUs, the pod has 2 -> vLLM cannot start its workers. A pvc:// checkpoint named by a
    # `# kvplan: model=` comment is checked as that model.
    f = write(tmp_path, "x.yaml", "# kvplan: model=Qwen/Qwen2.5-7B-Instruct\n" + KSERVE_HEAD + """
  model:
    uri: pvc://models/qwen
  parallelism:
    tensor: 2
    data: 4
    dataLocal: 2
  template:
    containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: "2"
  worker:
    containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: "2"
""")
    code, doc, _ = check(f, "--gpu", "H100")
    gc = [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count" and d["severity"] == "error"]
    assert code == 1 and len(gc) == 1 and "2 x 1 x 2" in gc[0]["message"] and "needs 4" in gc[0]["message"]
    assert doc["files"][0]["deployments"][0]["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_a_pvc_checkpoint_without_a_model_comment_is_exit_2(tmp_path):
    f = write(tmp_path, "x.yaml", KSERVE_HEAD + """
  model:
    uri: s3://bucket/qwen
  template:
    containers:
      - name: main
""")
    code, doc, _ = check(f, "--gpu", "H100")
    assert code == 2 and ("model-unresolved", "spec.model.uri") in _ids(doc, "error")


def test_inference_service_worker_spec_is_one_ray_group(tmp_path):
    # huggingfaceserver + workerSpec tensorParallelSize 1 x pipelineParallelSize 2: two pods of
    # one GPU, -tp 1 -pp 2 over both: 2 GPUs for 2 workers
    f = write(tmp_path, "x.yaml", """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: hf
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
      storageUri: hf://meta-llama/Llama-3.1-8B-Instruct
      args:
        - --model_name=llama
        - --max-model-len=8192
    workerSpec:
      tensorParallelSize: 1
      pipelineParallelSize: 2
""")
    code, doc, _ = check(f, "--gpu", "H100")
    fig = doc["files"][0]["deployments"][0]["figures"]
    assert code == 0 and (fig["tensor_parallel_size"], fig["pipeline_parallel_size"], fig["max_model_len"]) == (1, 2, 8192)


def test_ray_serve_llm_config_path_that_cannot_be_read_fails_strict(tmp_path):
    f = write(tmp_path, "serve.yaml", """
applications:
  - name: app
    args:
      llm_configs:
        - ./missing.yaml
        - model_loading_config:
            model_id: m
            model_source: Qwen/Qwen2.5-7B-Instruct
          accelerator_type: L4
          engine_kwargs:
            max_model_len: 4096
            enable_prefix_caching: false
""")
    code, doc, _ = check(f)
    assert ("no-deployment", "applications[0].args.llm_configs[0]") in _ids(doc, "warning")
    deps = {d["name"]: d for d in doc["files"][0]["deployments"]}
    # the inline LLMConfig: accelerator_type L4 is its GPU; enable_prefix_caching false is
    # passed as --no-enable-prefix-caching (engine_kwargs go to AsyncEngineArgs as they are)
    assert deps["application app llm_configs[1]"]["gpu"] == "l4"
    assert code == 0 and check(f, "--strict")[0] == 1


def test_llm_d_accelerator_types_map_to_a_gpu_through_kvplan_yaml(tmp_path):
    write(tmp_path, "kvplan.yaml", """
node_selectors:
  gpu.nvidia.com/model:
    H200: H200
""")
    f = write(tmp_path, "values.yaml", """
modelArtifacts:
  name: Qwen/Qwen2.5-7B-Instruct
  uri: hf://Qwen/Qwen2.5-7B-Instruct
decode:
  replicas: 1
  acceleratorTypes:
    labelKey: gpu.nvidia.com/model
    labelValues:
      - H200
  parallelism:
    tensor: 2
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.26.0
      modelCommand: vllmServe
      args: ["--max-model-len", "8192"]
""")
    code, doc, _ = check(f)
    (dep,) = doc["files"][0]["deployments"]
    # the chart gives dataLocal 1 x tensor 2 = 2 nvidia.com/gpu and writes --tensor-parallel-size 2
    assert code == 0 and dep["gpu"] == "h200" and dep["figures"]["tensor_parallel_size"] == 2
    assert dep["vllm"]["version"] == "0.26.0"


def test_dynamo_connectors_are_a_kv_transfer_not_a_vllm_flag(tmp_path):
    f = write(tmp_path, "dgd.yaml", """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: g
spec:
  services:
    Worker:
      componentType: worker
      resources:
        limits:
          gpu: "1"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          command: [python3, -m, dynamo.vllm]
          args: [--model, Qwen/Qwen2.5-7B-Instruct, --connector, kvbm, nixl, --max-model-len, "8192"]
""")
    code, doc, _ = check(f, "--gpu", "H100")
    # --connector kvbm becomes --kv-transfer-config {"kv_connector": "kvbm"}: the GPU pool is sized,
    # but kvbm's own buffers and its host pool are not kvplan's to size -> approximate warnings on
    # the key the file wrote (figures and host memory), which --strict fails on
    assert {("approximate", "--connector"), ("host-memory", "--connector")} <= _ids(doc, "warning")
    assert not [d for d in doc["diagnostics"] if d["check_id"] == "unknown-flag"]
    assert doc["files"][0]["deployments"][0]["figures"]["max_model_len"] == 8192 and code == 0
    assert check(f, "--gpu", "H100", "--strict")[0] == 1


def test_inference_service_with_custom_containers_is_read_as_kubernetes(tmp_path):
    # a custom predictor container runs its own `vllm serve` (the image's entrypoint): the
    # Kubernetes reader reads it, not the huggingfaceserver rules
    f = write(tmp_path, "x.yaml", """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: custom
spec:
  predictor:
    containers:
      - name: kserve-container
        image: vllm/vllm-openai:v0.26.0
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
        resources:
          limits:
            nvidia.com/gpu: "1"
""")
    code, doc, _ = check(f, "--gpu", "H100")
    (dep,) = doc["files"][0]["deployments"]
    assert code == 0 and doc["files"][0]["kind"] == "k8s" and dep["figures"]["max_model_len"] == 8192


def test_prefill_and_decode_roles_are_sized_with_their_own_flags(tmp_path):
    # the prefill pool runs --enforce-eager (no CUDA graphs captured), the decode pool captures
    # them: vLLM reserves the graphs' memory before the KV cache only in the decode role
    # (v1/worker/gpu_worker.py determine_available_memory), so on the same GPU and model the
    # prefill role's pool is the larger one
    f = write(tmp_path, "pd.yaml", KSERVE_HEAD + """
  model:
    uri: hf://meta-llama/Llama-3.1-8B-Instruct
  template:
    containers:
      - name: main
        env:
          - name: VLLM_ADDITIONAL_ARGS
            value: "--max-model-len 8192"
        resources:
          limits:
            nvidia.com/gpu: "1"
  prefill:
    template:
      containers:
        - name: main
          env:
            - name: VLLM_ADDITIONAL_ARGS
              value: "--max-model-len 8192 --enforce-eager"
          resources:
            limits:
              nvidia.com/gpu: "1"
""")
    code, doc, _ = check(f, "--gpu", "H100")
    deps = {d["name"]: d["figures"] for d in doc["files"][0]["deployments"]}
    decode, prefill = deps["LLMInferenceService/x decode"], deps["LLMInferenceService/x prefill"]
    assert code == 0 and decode["max_model_len"] == prefill["max_model_len"] == 8192
    assert prefill["kv_cache_bytes"] > decode["kv_cache_bytes"]


def test_llm_d_multinode_ray_group_counts_every_pod(tmp_path):
    # multinode, parallelism workers 2 (no data parallel): a LeaderWorkerSet of 2 pods; the
    # chart gives each dataLocal 1 x tensor 1 = 1 GPU; the leader's `vllm serve -tp 1 -pp 2`
    # runs over Ray on both: 2 GPUs for 2 workers, no gpu-count error (the layout of
    # llm-d-modelservice examples/values-multinode.yaml, on a bundled model)
    f = write(tmp_path, "values.yaml", """
modelArtifacts:
  name: Qwen/Qwen2.5-7B-Instruct
  uri: hf://Qwen/Qwen2.5-7B-Instruct
multinode: true
decode:
  parallelism:
    tensor: 1
    workers: 2
  containers:
    - name: vllm
      modelCommand: custom
      command: [/bin/bash, -c]
      args:
        - |
          ray start --head --port=6379 && vllm serve Qwen/Qwen2.5-7B-Instruct \\
          --tensor-parallel-size 1 --pipeline-parallel-size 2 --max-model-len 8192 \\
          --distributed-executor-backend ray
""")
    code, doc, _ = check(f, "--gpu", "H100")
    (dep,) = doc["files"][0]["deployments"]
    assert code == 0 and dep["figures"]["pipeline_parallel_size"] == 2
    assert not [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count" and d["severity"] == "error"]
    # the same on one worker pod: 1 GPU for tensor x pipeline = 2 -> vLLM cannot start
    code, doc, _ = check(write(tmp_path, "one.yaml", open(f).read().replace("workers: 2", "workers: 1")), "--gpu", "H100")
    assert code == 1 and [d["severity"] for d in doc["diagnostics"] if d["check_id"] == "gpu-count"] == ["error"]
    # data 1 over workers 2: the chart's dataLocal = data / workers is not whole and `helm` fails
    # (llm-d-modelservice _helpers.tpl dataLocalParallelism)
    code, doc, _ = check(write(tmp_path, "bad.yaml", open(f).read().replace("workers: 2", "data: 1\n    workers: 2")), "--gpu", "H100")
    bad = [d for d in doc["diagnostics"] if d["check_id"] == "invalid-value"]
    assert code == 1 and [(d["key"], d["severity"]) for d in bad] == [("decode.parallelism.data", "error")]


def test_speculator_goes_to_the_decode_pods_only(tmp_path):
    # KServe injects --speculative-config into the decode/main pods' VLLM_ADDITIONAL_ARGS
    # (replacing one written there); prefill pods get none
    f = write(tmp_path, "x.yaml", KSERVE_HEAD + """
  model:
    uri: hf://meta-llama/Llama-3.1-8B-Instruct
  speculator:
    model:
      uri: hf://meta-llama/Llama-3.2-1B-Instruct
    config:
      method: draft_model
      num_speculative_tokens: "5"
  template:
    containers:
      - name: main
        env:
          - name: VLLM_ADDITIONAL_ARGS
            value: "--max-model-len 8192 --speculative-config '{\\"method\\": \\"ngram\\"}'"
        resources:
          limits:
            nvidia.com/gpu: "1"
  prefill:
    template:
      containers:
        - name: main
          env:
            - name: VLLM_ADDITIONAL_ARGS
              value: "--max-model-len 8192"
          resources:
            limits:
              nvidia.com/gpu: "1"
""")
    # the draft model (Llama-3.2-1B-Instruct) is not bundled and the tests run offline: kvplan cannot
    # read its config, so the decode pods (only they get the speculator) are bad input naming the
    # CR's key (exit 2); the prefill pods are sized as plain vLLM
    code, doc, _ = check(f, "--gpu", "H100")
    bad = [(d["deployment"], d["check_id"], d["key"]) for d in doc["diagnostics"] if d["severity"] == "error"]
    assert bad == [("LLMInferenceService/x decode", "model-unresolved", "spec.speculator")]  # one, the CR's
    assert not [d for d in doc["diagnostics"] if d["check_id"] == "duplicate-flag"]
    assert code == 2
    # a draft kvplan can read (the bundled EAGLE-3 of Llama-3.1-8B, one decoder layer) is sized in
    # the decode pods only. vLLM 0.33.0 (16-token blocks): per layer 16 x 2 x 8 kv heads x 128 x 2 B
    # = 65,536 B; decode 32 target + 1 draft layer = 33 x 65,536 per block, prefill 32 x 65,536
    f2 = write(tmp_path, "eagle.yaml", open(f).read().replace("hf://meta-llama/Llama-3.2-1B-Instruct",
               "hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").replace("method: draft_model", "method: eagle3"))
    code, doc, _ = check(f2, "--gpu", "H100", "--vllm-version", "0.33.0")
    figs = {d["name"]: d["figures"] for d in doc["files"][0]["deployments"]}
    dec, pre = figs["LLMInferenceService/x decode"], figs["LLMInferenceService/x prefill"]
    assert dec["num_gpu_blocks"] == dec["kv_cache_bytes"] // (33 * 65_536)
    assert pre["num_gpu_blocks"] == pre["kv_cache_bytes"] // (32 * 65_536)
    # the 5 lookahead slots are said for the decode pods only
    notes = [d["deployment"] for d in doc["diagnostics"] if "lookahead" in d["message"]]
    assert notes == ["LLMInferenceService/x decode"]
    assert not [d for d in doc["diagnostics"] if d["check_id"] == "duplicate-flag"]
    # sized, nothing approximate: --strict passes
    assert code == 0 and check(f2, "--gpu", "H100", "--vllm-version", "0.33.0", "--strict")[0] == 0


def test_lora_adapters_enable_lora_in_every_pool(tmp_path):
    # spec.model.lora.adapters -> --enable-lora --max-lora-rank=64 --lora-modules ... (KServe
    # addLoRAVLLMArgs)
    f = write(tmp_path, "x.yaml", KSERVE_HEAD + """
  model:
    uri: hf://facebook/opt-125m
    lora:
      adapters:
        - name: adapter-1
          uri: hf://edbeeching/opt-125m-lora
      maxRank: 64
  template:
    containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: "1"
""")
    # LoRA is now sized (the version's addons.py: slots for max_loras x max_lora_rank on each
    # linear layer, their profile, doubled CUDA graphs): the adapters' contents do not enter vLLM's
    # GPU memory plan, so nothing is approximate and --strict passes. The pool must be smaller than
    # the same manifest without spec.model.lora (the slots come out of it). The evidence note says
    # whether a real start checked the LoRA rule: under vLLM 0.34.0 (the default) one did (the
    # H100 LoRA 4 x 64 start, +0.11 %), under 0.33.0 none did.
    code, doc, _ = check(f, "--gpu", "H100")
    assert not [d for d in doc["diagnostics"] if d["severity"] in ("error", "warning")]
    assert not any("LoRA slots" in d["message"] for d in doc["diagnostics"] if d["check_id"] == "vllm-version")
    _, old, _ = check(f, "--gpu", "H100", "--vllm-version", "0.33.0")
    assert any("LoRA slots" in d["message"] for d in old["diagnostics"] if d["check_id"] == "vllm-version")
    assert code == 0 and check(f, "--gpu", "H100", "--strict")[0] == 0
    plain = write(tmp_path, "plain.yaml", open(f).read().split("    lora:")[0] + "  template:" + open(f).read().split("  template:")[1])
    _, pdoc, _ = check(plain, "--gpu", "H100")
    blocks = doc["files"][0]["deployments"][0]["figures"]["num_gpu_blocks"]
    assert blocks < pdoc["files"][0]["deployments"][0]["figures"]["num_gpu_blocks"]
