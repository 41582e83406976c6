"""vLLM 0.34.0's rules (kvplan/engines/vllm/v0_34): the extensible KV cache, the estimate path,
block size 64, the new log lines and the registry / quantization changes, each checked against
hand arithmetic written here or against the exact format strings of the vLLM 0.34.0 source.

No real 0.34.0 start is recorded yet: the synthetic logs below are built from vLLM 0.34.0's own
format strings (v1/worker/extensible_kv_cache.py, v1/core/kv_cache_utils.py, gpu_worker.py,
v1/executor/abstract.py) with figures chosen here, and test that kvplan READS them; they say
nothing about how close kvplan's prediction is (real starts decide that)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import run_cli
from kvplan.capacity.estimate import plan
from kvplan.engines.vllm import versions
from kvplan.engines.vllm.args import EngineArgs
from kvplan.gpus import find_gpu, load_profiles
from kvplan.sources import load_spec
from kvplan.verify.log import grammar_for, parse_log

GiB = 1 << 30
MiB = 1 << 20
DATA = Path(__file__).parents[1] / "data" / "vllm-0.34.0-h100"
REAL = [DATA / (s.split("/", 1)[1] + ".log") for s in versions.SUPPORTED["0.34.0"].real_starts.STARTS]
H200_TOTAL = 150_109_880_320  # torch.cuda.mem_get_info total of the lent H200 (tests/data logs)
LLAMA = "meta-llama/Meta-Llama-3-8B"
V34 = versions.SUPPORTED["0.34.0"]


def _plan(model: str, version: str = "0.34.0", gpu: str = "H200", **kw):
    spec, _ = load_spec(model)
    return plan(spec, find_gpu(gpu, load_profiles()), EngineArgs(vllm_version=version, **kw))


# --- the version table ------------------------------------------------------------------------


def test_0_34_is_the_default_and_names_its_starts():
    assert versions.DEFAULT_VERSION == "0.34.0"
    assert "0.33.0" in versions.SUPPORTED and "0.26.0" in versions.SUPPORTED
    assert len(V34.real_starts.STARTS) == len(REAL) == 8
    assert V34.evidence.startswith("derived from the vLLM 0.34.0 source and checked on 8 real H100 starts")


def test_acceptance_llama3_8b_h200_without_vllm_installed_uses_0_34_block_64(monkeypatch):
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "H200", "--max-model-len", "8192", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["engine"]["vllm_version"] == "0.34.0"
    assert doc["kv_cache"]["block_size"] == 64
    # 32 layers x 8 KV heads x 128 x (K, V) x 2 B x 64 tokens
    assert doc["kv_cache"]["bytes_per_block"] == 32 * 8 * 128 * 2 * 2 * 64 == 8 * MiB
    assert doc["engine"]["gpu_memory_utilization"] == 1.0  # unset: 1.0 with the extensible KV cache
    assert doc["memory"]["kv_cache_sizing"]["mode"] == "extensible"
    ev = doc["evidence"]
    # the 0.34.0 starts ran on an H100: the H200 itself is what no start checked
    assert ev["checked"] is False and ev["real_starts"] == 8
    assert ev["unchecked"] == ["the NVIDIA H200 SXM 141GB (every real start ran on the H100-SXM, not this GPU)"]
    assert ev["label"].endswith("(the rest calibrated on 8 real vLLM 0.34.0 starts)")
    # tokens = blocks x 64 (8,192 tokens = 128 blocks per request)
    kv = doc["kv_cache"]
    assert kv["gpu_kv_cache_tokens"] == int(kv["num_gpu_blocks"] / 128 * 8192) == kv["num_gpu_blocks"] * 64


def test_every_output_format_says_what_is_not_checked():
    # an MLA model on the H200: neither the GPU nor the model kind was checked by a 0.34.0 start
    args = ("deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H200", "--max-model-len", "8192", "--vllm-version", "0.34.0")
    code, out, err = run_cli("estimate", *args)
    assert code == 0, err
    text = " ".join(out.split())
    assert "not yet checked on hardware" in text and "of a MLA model" in text
    code, out, err = run_cli("estimate", *args, "--format", "yaml")
    assert code == 0 and "not yet checked on hardware" in " ".join(err.split())
    # the configuration the starts ran: calibrated
    code, out, err = run_cli("estimate", LLAMA, "--gpu", "H100", "--max-model-len", "8192", "--format", "json")
    assert json.loads(out)["evidence"]["label"] == "calibrated on 8 real vLLM 0.34.0 starts"


# --- the mode switch and the utilization default ------------------------------------------------


def test_the_mode_switch_and_the_utilization_default():
    d = V34.defaults
    unset = EngineArgs(vllm_version="0.34.0")
    assert d.extensible_kv_cache(unset) and d.resolved_gpu_memory_utilization(unset) == 1.0
    explicit = EngineArgs(vllm_version="0.34.0", gpu_memory_utilization=0.92)
    assert d.extensible_kv_cache(explicit) and d.resolved_gpu_memory_utilization(explicit) == 0.92
    fixed = EngineArgs(vllm_version="0.34.0", kv_cache_memory_bytes=20 * GiB)
    assert not d.extensible_kv_cache(fixed) and d.resolved_gpu_memory_utilization(fixed) == 0.92
    # 0.33.0 has no mode: 0.92 whatever is set
    assert versions.SUPPORTED["0.33.0"].defaults.DEFAULT_GPU_MEMORY_UTILIZATION == 0.92


def test_no_free_memory_refusal_at_util_1_on_the_extensible_path():
    # request_memory (v1/worker/utils.py 0.34.0): "the budget is only a cap" when extensible.
    p = _plan(LLAMA, max_model_len=8192, gpu_memory_utilization=1.0)
    assert p.fits and p.stages[0].budget.requested_bytes == H200_TOTAL
    # 0.33.0 refuses util 1.0 (the CUDA context is not free at the snapshot)
    q = _plan(LLAMA, "0.33.0", max_model_len=8192, gpu_memory_utilization=1.0)
    assert not q.fits and q.outcome.value == "utilization_refused"


# --- the extensible formula by hand ---------------------------------------------------------------


def test_measure_kv_cache_bytes_by_hand():
    m = V34.memory
    # util 1.0: requested - non_kv = 150,109,880,320 - 17,844,726,656 = 132,265,153,664;
    # F + C = 149,358,247,936 - 17,844,726,656 = 131,513,521,280; margin = max(1 GiB, 0.75 x
    # 1,380,450,304 = 1,035,337,728) = 1,073,741,824; min(...) = 130,439,779,456; minus
    # max(P, G) = 1,380,450,304 -> 129,059,329,152.
    kv, margin, headroom = m.extensible_kv_cache_bytes(
        requested=H200_TOTAL, non_kv_used=17_844_726_656, free_at_start=149_358_247_936, p=1_380_450_304, g=0
    )
    assert (kv, margin, headroom) == (129_059_329_152, 1_073_741_824, 131_513_521_280)
    # util 0.92: requested = ceil(0.92 x total) = 138,101,089,895 binds:
    # 138,101,089,895 - 17,844,726,656 - 1,380,450,304 = 118,875,912,935
    kv, _, _ = m.extensible_kv_cache_bytes(
        requested=138_101_089_895, non_kv_used=17_844_726_656, free_at_start=149_358_247_936, p=1_380_450_304, g=0
    )
    assert kv == 118_875_912_935
    # a large P: margin 0.75 P = 3 GiB, and G > P keeps G: 131,513,521,280 - 3 GiB - 5 GiB
    kv, margin, _ = m.extensible_kv_cache_bytes(
        requested=H200_TOTAL, non_kv_used=17_844_726_656, free_at_start=149_358_247_936, p=4 * GiB, g=5 * GiB
    )
    assert margin == 3 * GiB and kv == 131_513_521_280 - 8 * GiB


def test_granule_rounding_makes_llama_blocks_a_multiple_of_eight():
    # 32 layer segments of 64 tokens x 4,096 B = 262,144 B; a 2 MiB granule holds 8 of them.
    # 129,059,329,152 B / 32 = 4,033,104,036 B per segment -> 1,923 whole granules
    # = 15,384 blocks, where plain floor division gives 129,059,329,152 // 8,388,608 = 15,385.
    p = _plan(LLAMA, max_model_len=8192)
    layout = p.stages[0].layout
    assert layout.segment_strides() == (262_144,) * 32
    assert layout.blocks_within(129_059_329_152, 10**9) == 15_384
    assert 129_059_329_152 // layout.bytes_per_block == 15_385
    assert layout.physical_bytes_for(15_385) == 32 * 1_924 * 2 * MiB
    assert layout.blocks_within(129_059_329_152, 15_000) == 15_000  # the reserved capacity caps it
    assert p.num_gpu_blocks % 8 == 0


def test_the_plan_composes_the_extensible_budget_from_its_terms():
    p = _plan(LLAMA, max_model_len=8192)
    b = p.stages[0].budget
    assert b.extensible and b.requested_bytes == H200_TOTAL
    non_kv = b.weights_bytes + b.non_torch_bytes + b.cudagraph_bytes + b.warmup_persistent_bytes
    assert b.warmup_persistent_bytes > 0
    assert b.headroom_bytes == b.free_at_start_bytes - non_kv
    keep = max(b.sizing_peak_bytes, b.reserve_growth_bytes)
    assert b.margin_bytes == max(GiB, int(0.75 * b.sizing_peak_bytes))
    assert b.kv_cache_bytes == min(b.requested_bytes - non_kv, b.headroom_bytes - b.margin_bytes) - keep
    # the captured graph pool is taken from the cache (no separate estimate)
    assert b.cudagraph_applied_bytes == b.cudagraph_bytes > 0
    assert _plan(LLAMA, max_model_len=8192, enforce_eager=True).stages[0].budget.cudagraph_bytes == 0


def test_the_estimate_path_is_0_33_with_block_64():
    kw = dict(max_model_len=8192, kv_cache_memory_bytes=20 * GiB)
    p34, p33 = _plan(LLAMA, **kw), _plan(LLAMA, "0.33.0", **kw)
    assert not p34.stages[0].budget.extensible
    assert p34.effective["gpu_memory_utilization"] == 0.92
    # 20 GiB / 8 MiB = 2,560 blocks of 64 tokens; 0.33.0: 20 GiB / 2 MiB = 10,240 blocks of 16
    assert (p34.num_gpu_blocks, p34.block_size) == (2_560, 64)
    assert (p33.num_gpu_blocks, p33.block_size) == (10_240, 16)
    assert p34.gpu_kv_cache_tokens == p33.gpu_kv_cache_tokens == 163_840
    # without --kv-cache-memory-bytes the estimate path's budget equals 0.33.0's (same rule)
    e34 = V34.memory._estimate_budget(
        total_bytes=H200_TOTAL, gpu_memory_utilization=0.92, weights=10, activation_peak=20, non_torch=30,
        cudagraph=40, cudagraph_applied=50,
    )
    # ceil(0.92 x 150,109,880,320) = 138,101,089,895; minus 10 + 20 + 30 + 50
    assert e34.kv_cache_bytes == 138_101_089_895 - 110 and not e34.extensible


# --- block size 64 -----------------------------------------------------------------------------


def test_default_block_size_64_for_every_backend_kvplan_picks():
    d = V34.defaults
    for mla, kv, cc, idx in [(False, "auto", "9.0", False), (True, "auto", "9.0", False), (True, "fp8", "9.0", False),
                             (True, "auto", "10.0", False), (True, "auto", "8.0", False), (True, "auto", "9.0", True)]:
        assert d.default_block_size(uses_mla=mla, kv_cache_dtype=kv, compute_capability=cc, sparse_mla_indexer=idx) == 64
    # 0.33.0 (0.26.0's rule): FlashInfer-MLA on Blackwell took 32, FlashAttention 16
    d33 = versions.SUPPORTED["0.33.0"].defaults
    assert d33.default_block_size(uses_mla=True, kv_cache_dtype="auto", compute_capability="10.0") == 32
    assert d33.default_block_size(uses_mla=False, kv_cache_dtype="auto", compute_capability="9.0") == 16


def test_hybrid_alignment_starts_at_64():
    # Granite-4.0-H-Small (Mamba-2, no checkpoint alignment): attention 4 KV heads... per token
    # page on one GPU and the Mamba-2 state decide the block: 0.33.0 took 16 x cdiv(state, 16 x
    # attn) = 528; 0.34.0 aligns to 64: 64 x cdiv(state, 64 x attn), state = 528 x attn at most
    # and more than 512 x attn (0.33.0's 528 = 33 x 16 was the first fitting multiple of 16),
    # so 64 x 9 = 576.
    p33 = _plan("ibm-granite/granite-4.0-h-small", "0.33.0", max_model_len=32768, enforce_eager=True)
    p34 = _plan("ibm-granite/granite-4.0-h-small", max_model_len=32768, enforce_eager=True)
    assert (p33.block_size, p34.block_size) == (528, 576)
    # Qwen3-Next with FlashInfer GDN prefill was already aligned to 64: 576 in both
    q34 = _plan("Qwen/Qwen3-Next-80B-A3B-Instruct", max_model_len=32768, enforce_eager=True)
    assert q34.block_size == 576


def test_sm100_capture_grid_reaches_8192_tokens():
    r34, r33 = V34.runner, versions.SUPPORTED["0.33.0"].runner
    a = EngineArgs(vllm_version="0.34.0")
    assert r34.cuda_graph_max_tokens(a, "10.0") == 8192 and r33.cuda_graph_max_tokens(a, "10.0") == 1024
    assert r34.cuda_graph_max_tokens(a, "9.0") == r33.cuda_graph_max_tokens(a, "9.0") == 512
    # prefill grid top min(8192, MNBT) against the decode grid's min(max_num_seqs, 8192)
    assert r34.cuda_graph_max_tokens(EngineArgs(max_num_batched_tokens=2048, max_num_seqs=256), "10.0") == 2048
    assert r34.cuda_graph_max_tokens(EngineArgs(enforce_eager=True), "10.0") == 0


# --- registry and quantization ----------------------------------------------------------------


def test_quantization_registry_changes():
    q34, q33 = V34.quantization, versions.SUPPORTED["0.33.0"].quantization
    assert "fp_quant" in q33.VLLM_QUANTIZATION_METHODS and "fp_quant" not in q34.VLLM_QUANTIZATION_METHODS
    for m in ("w4afp8", "lut_b_moe", "mxfp4_hadamard32"):
        assert m in q34.VLLM_QUANTIZATION_METHODS and m not in q33.VLLM_QUANTIZATION_METHODS


def test_fp_quant_checkpoint_is_refused_by_0_34_only(tmp_path):
    cfg = json.loads(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp_quant"},
    }))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    code, _, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.34.0")
    assert code == 2 and "'fp_quant' is not a vLLM 0.34.0 quantization method" in err
    code, _, err = run_cli("estimate", str(tmp_path), "--gpu", "H200", "--vllm-version", "0.33.0")
    assert code == 0, err


def test_transformers_backend_families_are_labelled_approximate(tmp_path):
    gemma = tmp_path / "gemma-7b"  # google/gemma-7b's config.json (the keys kvplan reads)
    gemma.mkdir()
    (gemma / "config.json").write_text(json.dumps({
        "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
        "vocab_size": 256000, "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "hidden_act": "gelu",
        "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    }))
    for model in (str(gemma), "allenai/OLMoE-1B-7B-0924"):
        code, out, err = run_cli("estimate", model, "--gpu", "H200", "--format", "json", "--vllm-version", "0.34.0",
                                 "--max-model-len", "4096")
        assert code == 0, err
        doc = json.loads(out)
        assert doc["exact"] is False
        assert any("Transformers backend" in a for a in doc["approximate"]), doc["approximate"]
        code, out, err = run_cli("estimate", model, "--gpu", "H200", "--format", "json", "--vllm-version", "0.33.0",
                                 "--max-model-len", "4096")
        assert code == 0, err
        assert not any("Transformers backend" in a for a in json.loads(out).get("approximate") or [])


def test_keye_is_refused_naming_0_33():
    assert V34.removed_architectures["KeyeForConditionalGeneration"] == "0.33.0"
    assert "KeyeForConditionalGeneration" not in versions.SUPPORTED["0.33.0"].removed_architectures


# --- the 0.34.0 log grammar (synthetic logs from the source's format strings) -------------------

# vLLM 0.34.0 format strings, verbatim (file: function)
FMT_MEMORY_AFTER_WARMUP = (  # v1/worker/extensible_kv_cache.py: measure_kv_cache_blocks
    "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, "
    "%s GiB kept for transient activations (%s GiB allocated at peak, "
    "%s GiB of torch reservation growth); %d KV cache blocks (%s GiB) "
    "fit within the requested %s GiB. Torch may reserve up to %s GiB."
)
FMT_EXTENDED = "Extended KV cache to %d blocks (%.2f GiB)."  # extensible_kv_cache.py: extend_kv_cache
FMT_KV_SIZE = "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"  # kv_cache_utils.py
FMT_GRAPHS = "Graph capturing finished in %.0f secs, took %.2f GiB"  # v1/worker/gpu/model_runner.py
FMT_DISABLE = (  # v1/executor/abstract.py: disable_extensible_kv_cache
    "Disabling the extensible KV cache: %s. The KV cache will be sized from profiling estimates "
    "instead of measured memory."
)
FMT_AVAILABLE = "Available KV cache memory: %s GiB"  # gpu_worker.py: determine_available_memory

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
          "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
          "tie_word_embeddings": False}


def _line(msg: str, where: str = "gpu_worker.py:1") -> str:
    return f"(EngineCore pid=7) INFO 12-06 17:00:00 [{where}] {msg}"


def _log(engine_args: dict, body: list[str]) -> str:
    head = [
        "KVPLAN_CASE " + json.dumps({"name": "synthetic", "model": "/tmp/llama3-8b", "engine_args": engine_args,
                                     "usage": "serve"}),
        "KVPLAN_CONFIG " + json.dumps(CONFIG),
        "MEMINFO free=149358247936 total=150109880320 name=NVIDIA H200",
        _line("Initializing a V1 LLM engine (v0.34.0) with config: model='/tmp/llama3-8b', dtype=torch.bfloat16, "
              "max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, "
              "enforce_eager=False, kv_cache_dtype=auto", "core.py:139"),
        _line("Model loading took 14.96 GiB memory and 7.0 seconds", "model_runner.py:428"),
    ]
    return "\n".join(head + body) + "\n"


def _extensible_log(blocks: int = 15_100) -> str:
    return _log({"max_model_len": 8192}, [
        _line(FMT_AVAILABLE % "122.85"),
        _line(FMT_GRAPHS % (9, 0.61), "model_runner.py:1240"),
        _line(FMT_MEMORY_AFTER_WARMUP % ("121.9", "0.06", "1.53", "1.53", "1.21", blocks, "117.97", "139.8", "121.31"),
              "extensible_kv_cache.py:694"),
        _line(FMT_KV_SIZE % ("GPU", f"{blocks * 64:,}", "8,192", blocks / 128), "kv_cache_utils.py:1169"),
        _line(FMT_EXTENDED % (blocks, blocks * 8 / 1024 + 0.01), "extensible_kv_cache.py:537"),
    ])


def test_the_0_34_grammar_reads_the_extensible_lines(tmp_path):
    text = _extensible_log()
    assert grammar_for(text).VERSION == "0.34.0"
    log = parse_log(text)
    assert log.vllm_version == "0.34.0"
    assert log.kv_cache_sizing == "extensible"
    # GiB figures are round(bytes / 2**30, 2) (format_gib): read as the nearest byte
    assert log.free_after_warmup_bytes == round(121.9 * GiB)
    assert log.kv_committed_bytes == round(0.06 * GiB)
    assert log.transient_kept_bytes == round(1.53 * GiB)
    assert log.transient_peak_bytes == round(1.53 * GiB)
    assert log.reserve_growth_bytes == round(1.21 * GiB)
    assert log.rank_kv_blocks == 15_100
    assert log.num_gpu_blocks == 15_100 and log.num_gpu_blocks_source == "Extended KV cache line"
    assert log.gpu_kv_cache_tokens == 15_100 * 64
    assert log.max_concurrency == pytest.approx(117.97, abs=0.01)
    # "Available KV cache memory" is the reserved capacity under the extensible cache: the cache is
    # the Extended line's GiB (15,100 blocks x 8 MiB = 117.97 GiB; the line here says 117.98)
    assert log.kv_cache_bytes == round(117.98 * GiB)


def test_verify_from_log_reads_an_extensible_0_34_log(tmp_path):
    path = tmp_path / "start.log"
    path.write_text(_extensible_log())
    code, out, err = run_cli("verify", "--from-log", str(path), "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert doc["vllm_version"] == "0.34.0"
    assert doc["measured"]["num_gpu_blocks"] == 15_100
    assert doc["measured"]["gpu_kv_cache_tokens"] == 15_100 * 64
    assert doc["predicted"]["block_size"] == 64
    assert not any("sized the KV cache by" in n or "sizing the KV cache by" in n for n in doc["notes"])
    # the extensible terms side by side: F + C = 121.9 + 0.06 GiB, P 1.53 GiB, G 1.21 GiB as logged
    sizing = doc["kv_cache_sizing"]
    assert sizing["predicted"]["mode"] == sizing["measured"]["mode"] == "extensible"
    assert sizing["measured"]["free_after_warmup_bytes"] == round(121.9 * GiB) + round(0.06 * GiB)
    assert sizing["measured"]["transient_peak_bytes"] == round(1.53 * GiB)
    assert sizing["measured"]["reserve_growth_bytes"] == round(1.21 * GiB)


def test_verify_from_log_reads_the_estimate_path_and_warns_when_vllm_turned_it_off(tmp_path):
    # a failed VMM probe: vLLM falls back to the estimate path although no argument says so
    body = [
        _line(FMT_DISABLE % "cuMemCreate is not supported on this device", "abstract.py:176"),
        _line(FMT_AVAILABLE % "110.71"),
        _line(FMT_KV_SIZE % ("GPU", "906,816", "8,192", 110.69), "kv_cache_utils.py:1169"),
        _line(FMT_GRAPHS % (4, 0.63), "model_runner.py:1240"),
        _line(FMT_GRAPHS % (9, 0.61), "model_runner.py:1240"),
    ]
    text = _log({"max_model_len": 8192}, body)
    log = parse_log(text)
    assert log.kv_cache_sizing == "estimate"
    assert log.extensible_disabled_reason == "cuMemCreate is not supported on this device"
    assert log.kv_cache_bytes == round(110.71 * GiB)
    path = tmp_path / "fallback.log"
    path.write_text(text)
    code, out, err = run_cli("verify", "--from-log", str(path), "--format", "json")
    doc = json.loads(out)
    assert doc["vllm_version"] == "0.34.0"
    assert any("sizing the KV cache by the estimate path (cuMemCreate" in n for n in doc["notes"]), doc["notes"]
    # with --kv-cache-memory-bytes the prediction takes the estimate path too: no warning
    text = _log({"max_model_len": 8192, "kv_cache_memory_bytes": 20 * GiB}, body[1:])
    path.write_text(text)
    code, out, err = run_cli("verify", "--from-log", str(path), "--format", "json")
    doc = json.loads(out)
    assert not any("sizing the KV cache by" in n for n in doc["notes"]), doc["notes"]


# --- item 4: the [verify] extra and the pre-commit hooks ----------------------------------------


def test_the_verify_extra_installs_the_default_versions_vllm_and_hooks_name_no_version():
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    pyproject = (root / "pyproject.toml").read_text()
    pins = re.findall(r'"vllm==([\d.]+)"', pyproject)
    assert pins == [versions.DEFAULT_VERSION]
    hooks = (root / ".pre-commit-hooks.yaml").read_text()
    assert not re.search(r"\b0\.\d+\.\d+\b", hooks), "the hook texts name a vLLM version"


# --- the real 0.34.0 starts (tests/data/vllm-0.34.0-h100) ------------------------------------------


EXTENSIBLE_REAL = [p for p in REAL if "Memory after warmup" in p.read_text()]


def _logged(text: str) -> dict:
    """The figures of a real log's lines, read here with plain regexes (not kvplan's grammar)."""
    m = re.search(r"Memory after warmup: ([\d.]+) GiB free, ([\d.]+) GiB committed to the KV cache, [\d.]+ GiB kept "
                  r"for transient activations \(([\d.]+) GiB allocated at peak, ([\d.]+) GiB of torch reservation "
                  r"growth\); (\d+) KV cache blocks", text)
    exact = json.loads(re.search(r"^KVPLAN_EXACT (.*)$", text, re.M).group(1))
    return {"F": float(m.group(1)), "C": float(m.group(2)), "P": float(m.group(3)), "G": float(m.group(4)),
            "rank_blocks": int(m.group(5)), "exact": exact,
            "blocks": int(re.search(r"Extended KV cache to (\d+) blocks", text).group(1))}


LLAMA_UTIL_1 = [p for p in EXTENSIBLE_REAL if p.name.startswith("llama3-8b") and "u092" not in p.name and "fp8" not in p.name]


@pytest.mark.parametrize("path", LLAMA_UTIL_1, ids=lambda p: p.stem)
def test_vllms_formula_on_the_logged_terms_gives_the_logged_blocks(path):
    # vLLM 0.34.0 measure_kv_cache_bytes + blocks_within, written out here for Llama-3-8B (bf16 KV):
    # util 1.0, so requested - non_kv_used = total - init_free + F + C never binds before
    # F + C - margin.
    t = _logged(path.read_text())
    f_c = round((t["F"] + t["C"]) * GiB)
    p, g = round(t["P"] * GiB), round(t["G"] * GiB)
    kv = f_c - max(GiB, int(0.75 * p)) - max(p, g)
    # 32 layer segments of 64 x 4,096 B = 262,144 B, committed in 2 MiB granules (8 blocks each)
    blocks = (kv // 32) // (2 * MiB) * 8
    assert blocks == t["blocks"] == t["rank_blocks"] == t["exact"]["num_gpu_blocks"]


def test_an_explicit_0_92_caps_the_extensible_cache_by_hand():
    # llama3-8b_eager_u092: requested = ceil(0.92 x 85,017,493,504) = 78,216,094,024 B; the
    # log's F + C and the exact init_free give non_kv_used; the first term of the min binds.
    t = _logged((DATA / "llama3-8b_eager_u092.log").read_text())
    init_free = t["exact"]["init_free_memory"]
    f_c = round((t["F"] + t["C"]) * GiB)
    non_kv = init_free - f_c
    p, g = round(t["P"] * GiB), round(t["G"] * GiB)
    kv = min(78_216_094_024 - non_kv, f_c - max(GiB, int(0.75 * p))) - max(p, g)
    assert kv == 78_216_094_024 - non_kv - max(p, g)
    # vLLM logs F, C to 0.01 GiB: within one granule round (8 blocks) of the logged count
    assert abs((kv // 32) // (2 * MiB) * 8 - t["blocks"]) <= 8


# stated, not hidden: the fit-set start outside 0.5 % (docs/versions.md): its logged G is 0.15 GiB
# above the allocation sequence kvplan restates (v0_34/reserve_growth.py), a part not yet found
OVER_HALF_PERCENT = {"qwen3-30b-a3b_eager": 0.55}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_the_real_starts_replay_through_verify_from_log(path, capsys):
    code, out, err = run_cli("verify", "--from-log", str(path), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    text = path.read_text()
    blocks = int(re.search(r"^RESULT num_gpu_blocks=(\d+)", text, re.M).group(1))
    assert doc["vllm_version"] == "0.34.0" and doc["predicted"]["block_size"] == 64
    assert doc["measured"]["num_gpu_blocks"] == blocks
    err_pct = 100.0 * (doc["predicted"]["num_gpu_blocks"] - blocks) / blocks
    assert abs(err_pct) <= OVER_HALF_PERCENT.get(path.stem, 0.5), (doc["predicted"]["num_gpu_blocks"], blocks)
    if "Memory after warmup" not in text:  # the estimate path (--kv-cache-memory-bytes)
        assert doc["kv_cache_sizing"] == {"predicted": {"mode": "estimate"}, "measured": None}
        return
    t = _logged(text)
    sizing = doc["kv_cache_sizing"]
    pred, meas = sizing["predicted"], sizing["measured"]
    with capsys.disabled():
        print(f"\n{path.stem}: blocks {doc['predicted']['num_gpu_blocks']} vs {t['blocks']} ({err_pct:+.3f} %); "
              f"F+C {(pred['free_after_warmup_bytes'] - meas['free_after_warmup_bytes']) / MiB:+.1f} MiB, "
              f"P {(pred['transient_peak_bytes'] - meas['transient_peak_bytes']) / MiB:+.1f} MiB, "
              f"G {(pred['reserve_growth_bytes'] - meas['reserve_growth_bytes']) / MiB:+.1f} MiB")
    # each term within 300 MiB of the log (Gemma-2's P: 0.33.0's profile rule is 336 MB high for it)
    for key in ("free_after_warmup_bytes", "transient_peak_bytes", "reserve_growth_bytes"):
        assert abs(pred[key] - meas[key]) <= 300 * MiB, key


def test_the_measured_kv_cache_is_the_extended_size_not_the_reservation():
    # llama3-8b_serve_graphs logs "Available KV cache memory: 62.73 GiB" (0.34.0's reservation, before
    # warm-up) and "Extended KV cache to 7672 blocks (59.94 GiB)": the cache is the second; 7,672
    # blocks x 64 tokens x 32 layers x 8 KV heads x 128 x (K + V) x 2 B = 64,357,400,576 B = 59.94 GiB
    assert 7672 * 64 * 32 * 8 * 128 * 2 * 2 == 64_357_400_576
    code, out, err = run_cli("verify", "--from-log", str(DATA / "llama3-8b_serve_graphs.log"), "--format", "json")
    assert code == 0, err
    measured = json.loads(out)["measured"]["kv_cache_bytes"]
    assert abs(measured - 64_357_400_576) <= 0.005 * 2**30


def test_the_held_out_graph_start_within_its_stated_errors():
    # P, G and the warm-up leftovers are fitted on llama3-8b_eager, qwen3-30b-a3b_eager and
    # gemma2-9b_eager; llama3-8b_serve_graphs is held out for them (not for the graph pool,
    # fitted on it: the only graph start)
    code, out, err = run_cli("verify", "--from-log", str(DATA / "llama3-8b_serve_graphs.log"), "--format", "json")
    doc = json.loads(out)
    pred, meas = doc["kv_cache_sizing"]["predicted"], doc["kv_cache_sizing"]["measured"]
    # P: the forward stage 836,782,592 B (0.33.0's rule at T = 8192) + 4,325 B x 8192 = 872,212,992 B,
    # above the sampler-bound profile peak 871,823,360 B; 0.84 GiB logged (-3.3 %). G, the eager allocation sequence at
    # T = max_model_len = 8192 (one step with prompt logprobs): embedding, norm copy, attention
    # output and o_proj output 64 MiB each, qkv 96, gate_up 448, activation 224 = 1,024 MiB; the
    # 1024 x 128,256 bf16 logits chunk (250.5 MiB) fits the freed gate_up block. Logged 1.18 GiB
    # (-15 %): under torch.compile the eager sequence is not the compiled one (one start).
    assert pred["transient_peak_bytes"] == 836_782_592 + 4_325 * 8192 and meas["transient_peak_bytes"] == round(0.84 * GiB)
    assert pred["reserve_growth_bytes"] == 1024 * MiB and meas["reserve_growth_bytes"] == round(1.18 * GiB)
    # blocks: 7,688 predicted vs 7,672 logged (+0.21 %)
    assert (doc["predicted"]["num_gpu_blocks"], doc["measured"]["num_gpu_blocks"]) == (7_688, 7_672)


def test_check_accepts_utilization_1_under_0_34_only():
    # the same deployment file: vLLM 0.33.0 refuses a budget above the free memory at start;
    # 0.34.0's extensible KV cache takes 1.0 as a cap only (v1/worker/utils.py request_memory)
    path = str(Path(__file__).parents[1] / "data" / "check" / "review3" / "util-1.yaml")
    ids = {}
    for version in ("0.33.0", "0.34.0"):
        code, out, err = run_cli("check", path, "--format", "json", "--vllm-version", version)
        ids[version] = {d["check_id"] for d in json.loads(out)["diagnostics"] if d["severity"] == "error"}
    assert "gpu-memory-utilization-range" in ids["0.33.0"]
    assert "gpu-memory-utilization-range" not in ids["0.34.0"]
