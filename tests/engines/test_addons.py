"""Speculative decoding, LoRA, weight offload and KV offload in the exact pool (issue 21).

Every expected number is hand arithmetic written here from the model's config.json (never read
back from the code under test): Llama-3-8B / Llama-3.1-8B have hidden 4096, 32 query and 8 KV
heads of 128, intermediate 14336, vocab 128256, 32 layers; Llama-3.1-70B hidden 8192, 64 query and
8 KV heads of 128, intermediate 28672, 80 layers. bf16 = 2 bytes.
"""

from __future__ import annotations

import json

import pytest

from kvplan.capacity.options import plan_from_options
from tests.check.common import check, diag, write
from tests.helpers import run_cli
from tests.hf_server import fake_hub  # noqa: F401  (the local Hub fixture)

EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"  # bundled: one decoder layer, draft_vocab_size 32000
GiB = 2**30


def _plan(model="meta-llama/Meta-Llama-3-8B", gpu="H200", **kw):
    # the hand arithmetic below uses 16-token blocks: vLLM 0.33.0's rules unless a test names a version
    kw.setdefault("vllm_version", "0.33.0")
    return plan_from_options(model=model, gpu=gpu, gpu_memory=None, gpu_profiles=None, revision=None, **kw)[0]


def _eagle3(k=3):
    return json.dumps({"method": "eagle3", "model": EAGLE3, "num_speculative_tokens": k})


# -- speculative decoding ---------------------------------------------------------------------

@pytest.mark.parametrize("version", ["0.26.0", "0.33.0"])
def test_one_layer_eagle3_makes_33_layers_a_block(version):
    # page of one layer: 16 tokens x 8 KV heads x 128 x (K + V) x 2 bytes = 65,536 B;
    # the draft's one attention layer has the same page, so it joins the one group: 33 layers
    page = 16 * 8 * 128 * 2 * 2
    assert page == 65_536
    plain = _plan(max_model_len=8192, vllm_version=version)
    spec = _plan(max_model_len=8192, vllm_version=version, speculative_config=_eagle3())
    assert plain.layout.bytes_per_block == 32 * page
    assert spec.layout.bytes_per_block == 33 * page == 2_162_688
    assert [g.num_layers for g in spec.layout.groups] == [33]
    # fewer blocks than the page alone explains (draft weights and profile come off too)
    assert spec.num_gpu_blocks < plain.num_gpu_blocks * 32 // 33
    assert spec.addons.draft_layers == 1


def test_eagle3_draft_shares_the_embedding_but_brings_its_own_draft_vocab_head():
    p = _plan(max_model_len=8192, speculative_config=_eagle3())
    parts = p.addons.parts
    assert "draft_embed_tokens" not in parts  # the target's embed_tokens is shared
    # own lm_head: 32,000 rows (already a multiple of 64) x 4096 x 2 B; d2t: 32,000 int64
    assert parts["draft_lm_head"] == 32_000 * 4096 * 2 == 262_144_000
    assert parts["draft_id_to_target_id"] == 32_000 * 8
    # fc: 3 auxiliary hidden states x 4096 -> 4096; the first layer's qkv reads 2 x hidden:
    # the extra 4096 input rows x (32 + 2 x 8) heads x 128
    assert parts["draft_fc"] == 3 * 4096 * 4096 * 2
    assert parts["draft_qkv_2x_input"] == 4096 * (32 + 16) * 128 * 2
    # one decoder layer: qkv 4096 x 6144 + o 4096 x 4096, gate_up 4096 x 28672 + down 14336 x 4096
    assert parts["draft_attn"] == (4096 * 6144 + 4096 * 4096) * 2
    assert parts["draft_mlp"] == (4096 * 28672 + 14336 * 4096) * 2


def test_lookahead_slots_are_not_in_the_logged_tokens_but_in_a_max_length_request():
    plain = _plan(max_model_len=8192)
    p = _plan(max_model_len=8192, speculative_config=_eagle3(k=4))
    # logged tokens = blocks x 16 (one group, the concurrency rule): no lookahead in them
    assert p.gpu_kv_cache_tokens == p.num_gpu_blocks * 16
    assert p.addons.lookahead_tokens == 4
    # a max-length request occupies cdiv(8192 + 4, 16) = 513 blocks, not 512
    assert p.addons.blocks_per_max_len_request == 513
    assert plain.addons is None
    assert any("4 lookahead slots" in w for w in p.warnings)


def test_ngram_keeps_a_dense_token_history_on_033_not_on_026():
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})
    kw = dict(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=131072, max_num_seqs=1024, speculative_config=ngram)
    # 1024 requests x 131,072 tokens x 4 bytes (int32) = 536,870,912 B = 512 MiB
    assert 1024 * 131_072 * 4 == 512 * 2**20
    p33 = _plan(vllm_version="0.33.0", **kw)
    assert p33.addons.parts["ngram_token_history"] == 536_870_912
    plain33 = _plan(vllm_version="0.33.0", model=kw["model"], max_model_len=131072, max_num_seqs=1024)
    assert plain33.stages[0].budget.non_torch_bytes + 536_870_912 == p33.stages[0].budget.non_torch_bytes
    # 0.26.0: ngram runs on the V1 runner on the CPU token array; ngram_gpu keeps the GPU copy
    p26 = _plan(vllm_version="0.26.0", **kw)
    assert "ngram_token_history" not in p26.addons.parts and p26.runner == "v1"
    gpu = json.dumps({"method": "ngram_gpu", "num_speculative_tokens": 3})
    p26g = _plan(vllm_version="0.26.0", **{**kw, "speculative_config": gpu})
    assert p26g.addons.parts["ngram_token_history"] == 536_870_912


def test_mtp_names_become_mtp_and_need_mtp_layers():
    from kvplan.errors import KvplanError

    p = _plan(model="deepseek-ai/DeepSeek-V3", gpu="H200", tensor_parallel_size=8, max_model_len=4096,
              speculative_config=json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 1}))
    assert p.addons.features.speculative.method == "mtp"
    assert p.addons.draft_layers == 1  # num_nextn_predict_layers: one MLA layer joins the group
    assert p.addons.lookahead_tokens == 1
    with pytest.raises(KvplanError, match="num_nextn_predict_layers"):
        _plan(speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 1}))


def test_the_mtp_draft_keeps_its_checkpoint_quantization_not_the_targets_flag():
    # DeepSeek-V3's MTP layer is cut from the block-FP8 checkpoint's config: vLLM builds the draft
    # with quantization=None and reads quantization_config, so its experts are FP8. At TP 8 each
    # expert's intermediate is 2048 / 8 = 256: w13 2 x 256 x 7168 B + (512/128 x 7168/128) fp32
    # scales, w2 7168 x 256 B + (7168/128 x 256/128) scales; 256 experts.
    w13 = 2 * 256 * 7168 + (512 // 128) * (7168 // 128) * 4
    w2 = 7168 * 256 + (7168 // 128) * (256 // 128) * 4
    p = _plan(model="deepseek-ai/DeepSeek-V3", gpu="H200", tensor_parallel_size=8, max_model_len=4096,
              speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 1}))
    assert p.addons.parts["draft_experts"] == 256 * (w13 + w2) == 1_409_630_208
    # an online --quantization fp8 target: the draft's config has no quantization_config, its MTP
    # layer stays bf16: 512 experts x 3 x 2048 x 512 x 2 B (+ the shared expert, attention ...)
    p = _plan(model="Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="H200", max_model_len=32768, quantization="fp8",
              speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 2}))
    assert p.addons.parts["draft_experts"] == 512 * 3 * 2048 * 512 * 2


def test_qwen3_next_mtp_is_one_layer_when_its_config_names_none():
    # Qwen3-Next's config.json has no num_nextn_predict_layers; vLLM's Qwen3NextMultiTokenPredictor
    # builds getattr(config, "num_nextn_predict_layers", 1) = 1 layer: one full-attention layer
    # (2 KV heads x 256) joins the full-attention group; lookahead = num_speculative_tokens = 2.
    p = _plan(model="Qwen/Qwen3-Next-80B-A3B-Instruct", gpu="H200", max_model_len=32768, quantization="fp8",
              speculative_config=json.dumps({"method": "qwen3_next_mtp", "num_speculative_tokens": 2}))
    assert p.addons.features.speculative.method == "mtp"
    assert p.addons.draft_layers == 1
    assert p.addons.lookahead_tokens == 2


def test_shorthand_and_json_key_together_are_refused_like_vllm():
    code, out, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--speculative-config", _eagle3(),
                             "--spec-tokens", "2")
    assert code == 2 and "--spec-tokens and --speculative-config['num_speculative_tokens'] are mutually exclusive" in err
    assert "Traceback" not in err


def test_an_unsized_method_is_approximate():
    p = _plan(max_model_len=8192, speculative_config=json.dumps({"method": "suffix", "num_speculative_tokens": 3}))
    assert not p.exact and "suffix" in p.approximations[0].reason


# -- LoRA ---------------------------------------------------------------------------------------

def test_lora_slots_of_llama3_8b_at_4_x_rank_64():
    # per layer, sum over wrapped slices of (in + out): q 4096+4096, k 4096+1024, v 4096+1024,
    # o 4096+4096, gate 4096+14336, up 4096+14336, down 14336+4096 = 81,920
    per_layer = (4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 2 * (4096 + 14336) + (14336 + 4096)
    assert per_layer == 81_920
    expected = 4 * 64 * per_layer * 32 * 2  # max_loras x rank x sum x layers x bf16
    assert expected == 1_342_177_280
    p = _plan(max_model_len=8192, enable_lora=True, max_loras=4, max_lora_rank=64)
    parts = p.addons.parts
    assert parts["lora_attention"] + parts["lora_mlp"] == 1_342_177_280
    # embed_tokens lora_a [4, 128256, 64] + lora_b [4, 1, 4096, 64]; lm_head the transpose
    assert parts["lora_embed_tokens"] == parts["lora_lm_head"] == 4 * 64 * (128_256 + 4096) * 2
    plain = _plan(max_model_len=8192)
    added = p.stages[0].budget.weights_bytes - plain.stages[0].budget.weights_bytes
    assert added == 1_342_177_280 + 2 * 4 * 64 * (128_256 + 4096) * 2


def test_lora_doubles_the_graph_estimate_and_cpu_adapters_cost_nothing():
    plain = _plan(max_model_len=8192)
    a = _plan(max_model_len=8192, enable_lora=True, max_loras=2, max_cpu_loras=2)
    b = _plan(max_model_len=8192, enable_lora=True, max_loras=2, max_cpu_loras=64)
    assert a.stages[0].budget.cudagraph_bytes == 2 * plain.stages[0].budget.cudagraph_bytes
    assert a.num_gpu_blocks == b.num_gpu_blocks


def test_lora_flags_vllm_refuses():
    code, _, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--enable-lora", "--max-lora-rank", "48")
    assert code == 2 and "--max-lora-rank 48" in err
    code, _, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--enable-lora", "--max-loras", "4",
                           "--max-cpu-loras", "2")
    assert code == 2 and "--max-cpu-loras 2" in err


# -- weight offload ---------------------------------------------------------------------------

def test_cpu_offload_80_gib_on_llama_3_1_70b_moves_decoder_parameters_one_past_the_budget():
    h, q, kv, inter = 8192, 64 * 128, 8 * 128, 28672
    qkv = h * (q + 2 * kv) * 2          # 167,772,160
    o = q * h * 2                        # 134,217,728
    gate_up = h * 2 * inter * 2          # 939,524,096
    down = inter * h * 2                 # 469,762,048
    norms = 2 * h * 2                    # input + post-attention layernorm
    layer = qkv + o + gate_up + down + norms
    assert layer == 1_711_308_800
    budget = 80 * GiB                    # 85,899,345,920
    # 50 whole layers = 85,565,440,000 < budget; layer 50: + qkv, + o still below, + gate_up past it
    moved = 50 * layer + qkv + o + gate_up
    assert 50 * layer + qkv + o < budget <= moved
    assert moved == 86_806_953_984 and moved - budget < gate_up  # one parameter past at most
    p = _plan(model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100", max_model_len=8192, cpu_offload_gb=80)
    assert p.addons.parts["cpu_offloaded"] == -86_806_953_984
    plain = _plan(model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100", max_model_len=8192)
    assert not plain.fits and p.fits
    assert p.stages[0].budget.weights_bytes == plain.stages[0].budget.weights_bytes - 86_806_953_984
    # host: every moved parameter pinned, rounded up to a power of two (vLLM issue #56410)
    pinned = 51 * (2**28 + 2**27 + 2**30) + 50 * (2**29 + 2 * 2**14)
    assert p.addons.host_bytes == pinned


def test_cpu_offload_params_restricts_the_walk():
    p = _plan(model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100", max_model_len=8192, cpu_offload_gb=1,
              cpu_offload_params="down_proj")
    # only down_proj (469,762,048 B each) are eligible: three pass 1 GiB (2 x 469.8e6 < 2^30)
    assert p.addons.parts["cpu_offloaded"] == -3 * 469_762_048


def test_prefetch_offload_keeps_step_copies_of_one_layer():
    # every 4th layer of Llama-3-8B's 32 (layers 3, 7, ... 31: 8 of them) leaves the GPU;
    # one layer = (4096 x 6144 + 4096 x 4096 + 4096 x 28672 + 14336 x 4096) x 2 + 2 x 4096 x 2
    layer = (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096) * 2 + 2 * 4096 * 2
    p = _plan(max_model_len=8192, offload_group_size=4, offload_num_in_group=1, offload_prefetch_step=2)
    assert p.addons.parts["prefetch_offloaded"] == -8 * layer
    assert p.addons.parts["prefetch_buffers"] == 2 * layer


# -- KV offloading ----------------------------------------------------------------------------

@pytest.mark.parametrize("version,host", [
    # 0.26.0: one pinned tensor per layer per worker, each rounded to a power of two:
    # 100 GiB // (32 x 65,536 B a block) = 51,200 blocks; 51,200 x 65,536 = 3.125 GiB -> 4 GiB x 32
    ("0.26.0", 32 * 4 * GiB),
    # 0.33.0: one /dev/shm region of 51,200 chunks x 2,097,152 B (already page-aligned) = 100 GiB
    ("0.33.0", 100 * GiB),
])
def test_kv_offloading_cpu_pool_and_host_memory(version, host):
    p = _plan(max_model_len=8192, kv_offloading_size=100, vllm_version=version)
    plain = _plan(max_model_len=8192, vllm_version=version)
    assert p.num_gpu_blocks == plain.num_gpu_blocks  # the connector is built after sizing
    kvo = p.addons.kv_offload
    assert kvo.cpu_blocks == 100 * GiB // (32 * 65_536) == 51_200
    assert kvo.cpu_tokens == 51_200 * 16
    assert p.addons.host_bytes == host


def test_check_compares_kv_offload_host_memory_with_the_pod_limit(tmp_path):
    f = write(tmp_path, "deploy.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: llama}
        spec:
          template:
            spec:
              nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.33.0
                args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192",
                       "--kv-offloading-size", "100"]
                resources:
                  limits: {nvidia.com/gpu: 1, memory: 64Gi}
        """)
    code, doc, _ = check(f)
    d = diag(doc, "host-memory")
    assert code == 1 and d["severity"] == "error"
    assert "100.00 GiB" in d["message"] and "64.00 GiB" in d["message"]


# -- check verdicts -----------------------------------------------------------------------------

def test_eagle3_on_l4_at_the_length_that_fills_the_pool_without_the_draft_fails(tmp_path):
    fill = _plan(model="meta-llama/Llama-3.1-8B-Instruct", gpu="L4", max_model_len=-1).effective["max_model_len"]
    f = write(tmp_path, "eagle.yaml", f"""
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: eagle}}
        spec:
          template:
            spec:
              nodeSelector: {{nvidia.com/gpu.product: NVIDIA-L4}}
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.33.0
                args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "{fill}",
                       "--speculative-config", '{_eagle3()}']
                resources:
                  limits: {{nvidia.com/gpu: 1}}
        """)
    code, doc, _ = check("--strict", f)
    assert code == 1
    assert diag(doc, "max-model-len-fits")["severity"] == "error"


def test_llama_70b_with_cpu_offload_80_on_an_h100_passes(tmp_path):
    f = write(tmp_path, "offload.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: big}
        spec:
          template:
            spec:
              nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
              containers:
              - name: vllm
                image: vllm/vllm-openai:v0.33.0
                args: ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--max-model-len", "8192",
                       "--cpu-offload-gb", "80"]
                resources:
                  limits: {nvidia.com/gpu: 1}
        """)
    code, doc, _ = check(f)
    assert code == 0
    texts = " ".join(d["message"] for d in doc["diagnostics"])
    assert "refuse to start" not in texts and "not model" not in texts


def test_a_flag_kvplan_does_not_model_fails_strict(tmp_path):
    f = write(tmp_path, "deploy.sh", "vllm serve meta-llama/Llama-3.1-8B-Instruct --num-gpu-blocks-override 1000\n"
                                     "# kvplan: gpu=H200\n")
    code, doc, _ = check("--strict", f)
    d = diag(doc, "not-modelled")
    assert d["severity"] == "warning" and d["message"].startswith("approximate")
    assert code == 1


def test_addon_rules_are_labelled_unchecked_in_every_output():
    p = _plan(max_model_len=8192, enable_lora=True)
    assert "LoRA slots" in p.evidence.label() and "derived from the source" in p.evidence.label()
    code, out, _ = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--enable-lora",
                           "--vllm-version", "0.33.0", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and any("LoRA" in u for u in doc["evidence"]["unchecked"])
    assert doc["addons"]["bytes"]["lora_attention"] > 0
    # vLLM 0.34.0: the LoRA rule was checked on a real start (v0_34/addons.py CHECKED_FEATURES)
    code, out, _ = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--enable-lora",
                           "--vllm-version", "0.34.0", "--format", "json")
    assert code == 0 and not any("LoRA" in u for u in json.loads(out)["evidence"]["unchecked"])


# -- perf ---------------------------------------------------------------------------------------

def test_perf_needs_a_stated_acceptance():
    args = ("perf", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "--input-len", "500",
            "--output-len", "50", "--concurrency", "8", "--num-requests", "16", "--no-saturation")
    code, _, err = run_cli(*args, "--speculative-config", _eagle3())
    assert code == 2 and "--spec-acceptance" in err
    code, _, err = run_cli(*args, "--spec-acceptance", "2")
    assert code == 2 and "needs --speculative-config" in err
    code, _, err = run_cli(*args, "--speculative-config", _eagle3(), "--spec-acceptance", "5")
    assert code == 2 and "between 1 and K + 1 = 4" in err
    code, out, err = run_cli(*args, "--speculative-config", _eagle3(), "--spec-acceptance", "3", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    from kvplan.render.perf_schema import PerfDocument

    PerfDocument.model_validate(doc)  # the perf JSON schema knows the section
    s = doc["speculative"]
    # TPOT scales by (verify + draft step) / (acceptance x plain step): hand-checked from its terms
    assert s["tpot_factor"] == pytest.approx(s["spec_step_ms"] / (3 * s["plain_step_ms"]))
    assert s["throughput_factor"] == pytest.approx(1 / s["tpot_factor"])
    assert "not calibrated" in s["label"]


def test_the_draft_config_comes_from_the_hub_like_any_model(fake_hub):  # noqa: F811 (tests/hf_server.py fixture)
    # the published EAGLE-3 config under a Hub id the bundled specs do not have
    cfg = json.loads((__import__("pathlib").Path(__file__).parents[2] / "model_specs"
                      / "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json").read_text())["config"]
    fake_hub.add_repo("acme/eagle3-draft", {"config.json": json.dumps(cfg).encode()})
    sc = json.dumps({"method": "eagle3", "model": "acme/eagle3-draft", "num_speculative_tokens": 2})
    # pinned to vLLM 0.33.0 (16-token blocks), as _plan pins the rest of this file: 0.34.0 uses 64
    code, out, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192",
                             "--speculative-config", sc, "--vllm-version", "0.33.0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    # per block: 16 tokens x 2 (K, V) x 8 kv heads x 128 x 2 B = 65,536 B per layer; 32 target layers
    # + 1 EAGLE-3 draft layer share the block table -> 33 x 65,536
    assert doc["kv_cache"]["bytes_per_block"] == 33 * 65_536
    assert fake_hub.requests_to("acme/eagle3-draft", "GET")


def test_0_26_v2_runner_ignores_weight_offload():
    # vLLM 0.26.0 installs the offloader only in the V1 runner; Llama runs on V2 there, so
    # --cpu-offload-gb 70 moves nothing: 70,553,706,496 parameters x 2 B = 141,107,412,992 B of bf16
    # weights (plus buffers) cannot fit one H100's 85,017,493,504 B, and
    # vLLM ran out of memory while loading (tests/data/vllm-0.26.0-h100/README.md, session 6).
    # Under 0.33.0 the V2 runner installs it: 70 GiB leave the GPU and it starts.
    code, out, err = run_cli("estimate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--vllm-version", "0.26.0",
                             "--usage", "llm", "--max-model-len", "8192", "--enforce-eager", "--cpu-offload-gb", "70",
                             "--format", "json")
    doc = json.loads(out)
    assert doc["memory"]["weights_bytes"] >= 70_553_706_496 * 2 > 85_017_493_504
    assert code == 1 and any("never installs the weight offloader" in w for w in doc["warnings"])
    code, out, err = run_cli("estimate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--vllm-version", "0.33.0",
                             "--usage", "llm", "--max-model-len", "8192", "--enforce-eager", "--cpu-offload-gb", "70",
                             "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["memory"]["weights_bytes"] < 70_553_706_496 * 2 - 70 * 2**30 + 2**30


def test_0_26_ngram_carries_its_measured_miss_in_every_format():
    # a real 0.26.0 start measured 27,496 blocks against kvplan's 28,510 (+3.69 %, v0_26/addons.py):
    # the estimate must say approximate, in JSON too, and check --strict must fail on it
    flags = ("--gpu", "H100", "--vllm-version", "0.26.0", "--usage", "llm", "--max-model-len", "131072",
             "--enforce-eager", "--speculative-config",
             json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}))
    code, out, err = run_cli("estimate", "meta-llama/Llama-3.1-8B-Instruct", *flags, "--format", "json")
    doc = json.loads(out)
    assert doc["fully_modelled"] is False
    assert any("3.69 %" in a for a in doc["approximate"])
    assert round(100 * (28_510 - 27_496) / 27_496, 2) == 3.69


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_later_versions_carry_the_mtp_on_moe_miss_their_drafter_term_shares(version):
    # the drafter profile term kvplan uses for MTP is the same in every version; the 0.26.0 start
    # measured it 3.8 GiB short on a MoE MTP layer (457,704 vs 413,468 blocks: +10.7 %)
    assert round(100 * (457_704 - 413_468) / 413_468, 1) == 10.7
    p = _plan(model="deepseek-ai/DeepSeek-V3", gpu="H200", tensor_parallel_size=8, max_model_len=4096,
              vllm_version=version, speculative_config=json.dumps({"method": "mtp", "num_speculative_tokens": 1}))
    assert any("10.7 %" in a.reason for a in p.approximations)
