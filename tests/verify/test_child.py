"""kvplan.verify.child against stand-in `torch` and `vllm` packages (no GPU here).

The stand-ins copy only the object paths the child reads in vLLM 0.26.0 (LLM.llm_engine ->
model_executor.driver_worker.worker, Worker.load_model / determine_available_memory /
compile_or_warm_up_model, model_runner.capture_model, vllm_config.*) and hold preset numbers.
The tests check that the child runs the protocol, finds the worker, reports those numbers
verbatim, and maps failures to its exit codes. They say nothing about vLLM's own arithmetic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvplan.verify.log import parse_log

ROOT = Path(__file__).resolve().parents[2]

FAKE_TORCH = '''
import os
__version__ = "2.11.0+fake"
class _Cuda:
    def is_available(self):
        return not os.environ.get("FAKE_NO_CUDA")
    def mem_get_info(self, *a):
        return (149557477376, 150109880320)
    def get_device_name(self, i=0):
        return "NVIDIA H200"
    def device_count(self):
        return 1
    def get_device_capability(self, i=0):
        return (9, 0)
    def memory_stats(self, *a):
        return {"allocated_bytes.all.current": 100, "reserved_bytes.all.current": 200}
cuda = _Cuda()
class version:
    cuda = "13.0"
'''

FAKE_WORKER = '''
class _Snapshot:
    free_memory = 149557477376
    total_memory = 150109880320

class _Group:
    def __init__(self, n):
        self.layer_names = [f"model.layers.{i}.self_attn.attn" for i in range(n)]
        class Spec:
            block_size = 16
            page_size_bytes = 65536
            sliding_window = None
            num_kv_heads = 8
            head_size = 128
            dtype = "torch.bfloat16"
        Spec.__name__ = "FullAttentionSpec"
        self.kv_cache_spec = Spec()

class _Tensor:
    def __init__(self, size):
        self.size = size
        self.shared_by = ["x"]

class _KVConfig:
    num_blocks = 57197
    kv_cache_groups = [_Group(32)]
    kv_cache_tensors = [_Tensor(57197 * 65536) for _ in range(32)]

class GPUModelRunner:
    model_memory_usage = 16063177687
    kv_cache_config = _KVConfig()
    def capture_model(self):
        return 1063004405

GPUModelRunner.__module__ = "vllm.v1.worker.gpu.model_runner"

class Worker:
    def __init__(self, enforce_eager):
        self.enforce_eager = enforce_eager
        self.use_v2_model_runner = True
        self.model_runner = GPUModelRunner()
    def load_model(self, *, load_dummy_weights=False):
        print("INFO 08-01 10:00:00 [model_runner.py:306] Model loading took 14.96 GiB and 1.8 seconds", flush=True)
    def determine_available_memory(self):
        self.init_snapshot = _Snapshot()
        self.requested_memory = 138101089895
        self.non_torch_memory = 236223201
        self.peak_activation_memory = 1846902784
        self.cudagraph_memory_estimate = 0
        self.available_kv_cache_memory_bytes = 119951721575
        return self.available_kv_cache_memory_bytes
    def compile_or_warm_up_model(self):
        if not self.enforce_eager:
            self.model_runner.capture_model()
'''

FAKE_VLLM_INIT = '''
import os
__version__ = os.environ.get("FAKE_VLLM_VERSION", "0.26.0")

class _NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)

class _Engine:
    def __init__(self, kw, usage):
        from vllm.v1.worker.gpu_worker import Worker
        eager = bool(kw.get("enforce_eager"))
        worker = Worker(eager)
        worker.load_model(load_dummy_weights=True)
        worker.determine_available_memory()
        if kw.get("max_model_len", 0) > 10**6:
            raise ValueError("To serve at least one request with the model's max seq len (2000000), (244.14 GiB KV cache is needed, which is larger than the available KV cache memory (111.71 GiB). Based on the available memory, the estimated maximum model length is 915152. Try increasing `gpu_memory_utilization`")
        worker.compile_or_warm_up_model()
        self.model_executor = _NS(driver_worker=_NS(worker=worker))
        mbt = 16384 if usage == "llm" else 8192
        self.vllm_config = _NS(
            cache_config=_NS(num_gpu_blocks=57197, block_size=16, gpu_memory_utilization=0.92, kv_cache_memory_bytes=None,
                             cache_dtype="auto", kv_cache_size_tokens=915152, kv_cache_max_concurrency=111.71),
            scheduler_config=_NS(max_num_seqs=1024, max_num_batched_tokens=kw.get("max_num_batched_tokens", mbt)),
            model_config=_NS(max_model_len=kw.get("max_model_len", 8192), dtype="torch.bfloat16", quantization=None, enforce_eager=eager),
            compilation_config=_NS(cudagraph_mode="NONE" if eager else "FULL_AND_PIECEWISE", mode="0", max_cudagraph_capture_size=512,
                                   cudagraph_capture_sizes=[1, 2, 4]),
        )
        print(f"KWARGS {sorted(kw.items())!r} usage={usage}", flush=True)

class LLM:
    def __init__(self, **kw):
        self.llm_engine = _Engine(kw, "llm")

class EngineArgs:
    def __init__(self, **kw):
        self.kw = kw

class LLMEngine:
    @classmethod
    def from_engine_args(cls, engine_args, usage_context=None):
        return _Engine(engine_args.kw, "serve" if usage_context == "OPENAI_API_SERVER" else "other")
'''


@pytest.fixture
def fake_site(tmp_path):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    for pkg in ("vllm", "vllm/v1", "vllm/v1/worker", "vllm/usage"):
        (site / pkg).mkdir(parents=True, exist_ok=True)
        (site / pkg / "__init__.py").write_text("")
    (site / "vllm" / "__init__.py").write_text(FAKE_VLLM_INIT)
    (site / "vllm" / "v1" / "worker" / "gpu_worker.py").write_text(FAKE_WORKER)
    (site / "vllm" / "usage" / "usage_lib.py").write_text("class UsageContext:\n    OPENAI_API_SERVER = 'OPENAI_API_SERVER'\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32}))
    return site, model


def run_child(site: Path, request: dict | None, extra_env: dict | None = None, with_vllm: bool = True):
    env = dict(os.environ)
    env.pop("KVPLAN_VERIFY_CHILD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    if not with_vllm:
        import shutil

        shutil.rmtree(site / "vllm")
    env.update(extra_env or {})
    args = [sys.executable, "-m", "kvplan.verify.child"] + ([json.dumps(request)] if request is not None else [])
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)


def request(model: Path, **kw) -> dict:
    req = {"name": "t", "model": str(model), "engine_args": {"max_model_len": 8192}, "usage": "llm", "dummy_weights": True, "expect_vllm": "0.26.0"}
    req.update(kw)
    return req


def test_child_reports_the_worker_figures(fake_site):
    site, model = fake_site
    res = run_child(site, request(model, engine_args={"max_model_len": 8192, "enforce_eager": True}))
    assert res.returncode == 0, res.stderr + res.stdout
    out = res.stdout
    stages = [s.split(" ", 1)[1] for s in out.splitlines() if s.startswith("KVPLAN_STAGE ")]
    assert stages[:2] == ["importing torch", "importing vllm"]
    for s in ("loading weights", "profiling memory", "allocating KV cache", "warming up", "measured"):
        assert s in stages
    assert "capturing CUDA graphs" not in stages  # eager
    assert "MEMINFO free=149557477376 total=150109880320 name=NVIDIA H200" in out
    assert "RESULT num_gpu_blocks=57197 block_size=16 max_num_seqs=1024 max_num_batched_tokens=16384" in out
    # the LLM class got the dummy-weight keywords, seed 0 and the engine arguments
    kwargs = next(s for s in out.splitlines() if s.startswith("KWARGS "))
    for part in ("('enforce_eager', True)", "('load_format', 'dummy')", "('max_model_len', 8192)", "('seed', 0)", "('skip_tokenizer_init', True)"):
        assert part in kwargs
    assert kwargs.endswith("usage=llm")
    log = parse_log(out)
    ex = log.exact
    assert ex["weights"] == 16063177687
    assert ex["peak_activation"] == 1846902784
    assert ex["non_torch"] == 236223201
    assert ex["available_kv_cache_memory_bytes"] == 119951721575
    assert ex["determine_available_memory_return"] == 119951721575
    assert ex["requested_memory"] == 138101089895
    assert ex["init_free_memory"] == 149557477376 and ex["init_total_memory"] == 150109880320
    assert ex["cudagraph_bytes"] == 0 and ex["cudagraph_memory_estimate"] == 0
    assert ex["num_gpu_blocks"] == 57197 and ex["block_size"] == 16
    assert ex["gpu_kv_cache_tokens"] == 915152 and ex["max_concurrency"] == 111.71
    assert ex["max_num_batched_tokens"] == 16384 and ex["max_model_len"] == 8192
    assert ex["model_runner"] == "vllm.v1.worker.gpu.model_runner.GPUModelRunner"
    assert ex["use_v2_model_runner"] is True
    layout = ex["kv_cache_layout"]
    assert layout["groups"][0] == {
        "spec": "FullAttentionSpec", "num_layers": 32, "first_layer": "model.layers.0.self_attn.attn", "block_size": 16,
        "page_size_bytes": 65536, "num_kv_heads": 8, "head_size": 128, "dtype": "torch.bfloat16",
    }
    assert layout["num_tensors"] == 32 and layout["padding_layers"] == 0
    assert ex["after_init_memory"]["torch_reserved"] == 200
    assert log.config == {"model_type": "llama", "num_hidden_layers": 32}
    assert log.case["engine_args"] == {"max_model_len": 8192, "enforce_eager": True}
    assert log.env["vllm"] == "0.26.0" and log.env["compute_capability"] == "9.0"


def test_child_records_captured_graph_bytes(fake_site):
    site, model = fake_site
    res = run_child(site, request(model))
    assert res.returncode == 0, res.stderr
    ex = parse_log(res.stdout).exact
    assert ex["cudagraph_bytes"] == 1063004405  # capture_model's return value
    assert "KVPLAN_STAGE capturing CUDA graphs" in res.stdout


def test_child_serve_usage_uses_the_api_server_context(fake_site):
    site, model = fake_site
    res = run_child(site, request(model, usage="serve"))
    assert res.returncode == 0, res.stderr
    assert "usage=serve" in res.stdout
    assert "max_num_batched_tokens=8192" in res.stdout


def test_child_refusal_keeps_the_profiling_figures(fake_site):
    site, model = fake_site
    res = run_child(site, request(model, engine_args={"max_model_len": 2_000_000}))
    assert res.returncode == 1
    log = parse_log(res.stdout + res.stderr)
    assert log.child_error["kind"] == "refused" and log.child_error["type"] == "ValueError"
    assert log.exact["partial"] is True
    assert log.exact["available_kv_cache_memory_bytes"] == 119951721575
    assert log.refusal is not None and log.refusal.estimated_max_model_len == 915152
    assert "Traceback" in res.stderr


@pytest.mark.parametrize(
    "env, with_vllm, needle",
    [
        ({"FAKE_NO_CUDA": "1"}, True, "no CUDA GPU"),
        ({"FAKE_VLLM_VERSION": "0.25.1"}, True, "vLLM 0.25.1 is installed"),
        ({}, False, "vLLM cannot be imported"),
    ],
)
def test_child_environment_failures_exit_3(fake_site, env, with_vllm, needle):
    site, model = fake_site
    res = run_child(site, request(model), env, with_vllm=with_vllm)
    assert res.returncode == 3
    err = parse_log(res.stdout).child_error
    assert err["kind"] == "environment" and needle in err["message"]


def test_child_bad_request_exits_2(fake_site):
    site, _ = fake_site
    assert run_child(site, None).returncode == 2
    res = subprocess.run([sys.executable, "-m", "kvplan.verify.child", "not json"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert res.returncode == 2 and "bad request" in res.stderr


def test_verify_end_to_end_with_the_real_child(fake_site, tmp_path):
    """`kvplan verify` -> python -m kvplan.verify.child -> (stand-in) vLLM -> comparison and record."""
    site, _ = fake_site
    model = tmp_path / "llama"
    model.mkdir()
    cal = json.loads((Path(__file__).parents[1] / "data" / "logs" / "vllm-0.26.0-h200" / "llama3-8b_eager.json").read_text())
    (model / "config.json").write_text(json.dumps(cal["config"]))
    env = dict(os.environ)
    env.pop("KVPLAN_VERIFY_CHILD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    res = subprocess.run(
        [sys.executable, "-m", "kvplan", "verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager",
         "--name", "e2e", "--record", str(tmp_path / "rec"), "--format", "json", "--vllm-version", "0.26.0"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["status"] == "pass"
    assert doc["measured"]["kv_cache_bytes"] == 119951721575
    assert doc["measured_source"]["kv_cache_bytes"] == "exact: worker"
    assert doc["measured"]["num_gpu_blocks"] == 57197
    assert doc["vllm_version"] == "0.26.0"
    rec = json.loads((tmp_path / "rec" / "e2e.json").read_text())
    assert rec["exact_bytes"]["weights"] == 16063177687
    assert rec["environment"]["torch"] == "2.11.0+fake"
