"""``kvplan verify --bench`` end to end against the fake vLLM server: through --endpoint, and
through the launcher (the fake stands in for vLLM's api_server via $KVPLAN_BENCH_SERVER);
the record validates and round-trips; bad flags are one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import TINY_LLAMA, error_line, run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_vllm_server import FakeServer  # noqa: E402

from kvplan.verify.bench.record import SCHEMA_VERSION, BenchRecord, load_record, summarize
from kvplan.verify.bench.server import MOE_ROUTING_ENV, is_moe

FAKE_SCRIPT = str(Path(__file__).resolve().parents[1] / "fake_vllm_server.py")
DOCS = Path(__file__).resolve().parents[3] / "docs" / "errors.md"


def _model(tmp_path: Path, **over) -> Path:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({**TINY_LLAMA, **over}))
    return d


@pytest.fixture
def fake():
    s = FakeServer(ttft_s=0.02, itl_s=0.004, max_num_seqs=16, num_gpu_blocks=1234)
    s.start()
    yield s
    s.stop()


def test_endpoint_run_writes_a_valid_record(tmp_path, fake):
    rec = tmp_path / "bench.json"
    code, out, err = run_cli("verify", "--bench", str(_model(tmp_path)), "--endpoint", fake.url(), "--grid", "quick",
                             "--bench-seconds", "0.3", "--record", str(rec))
    assert code == 0, err
    assert f"record: {rec}" in out and "closed-c4-32x8" in out
    r = load_record(rec)
    assert r.schema_version == SCHEMA_VERSION and r.kind == "kvplan-bench"
    assert r.vllm_version == "0.26.0" and r.served_model == "fake-model" and r.vocab_size == 1000
    assert r.cache_config["num_gpu_blocks"] == 1234 and r.cache_config["block_size"] == 16
    assert r.model_config_json == TINY_LLAMA and not r.started_server
    assert [p.name for p in r.points] == ["closed-c1-32x8", "closed-c4-32x8", "open-0.5x-32x8", "open-2x-32x8"]
    assert not any(n.startswith("complete:") for n in r.notes)
    assert len(r.warmup) == 2 and all(w["failed"] == 0 for w in r.warmup)
    closed4 = r.points[1]
    assert closed4.summary.max_in_flight == 4 and closed4.workload.sent == len(closed4.requests)
    # the open loop's rates are 0.5x and 2x the req/s measured at closed-c4-32x8 in this run
    assert r.points[2].workload.rate == pytest.approx(0.5 * closed4.summary.req_s, rel=1e-3)
    assert r.points[3].workload.rate == pytest.approx(2 * closed4.summary.req_s, rel=1e-3)
    for p in r.points:
        assert p.summary.failed == 0 and p.summary.completed == len(p.requests)
        # a request's prompt tokens as vLLM counted them are what was sent
        assert all(q.server_prompt_tokens == 32 and q.output_tokens == 8 for q in p.requests)
        # the stored summary is the one recomputed from the stored timestamps
        assert summarize(p.requests) == p.summary
        assert p.metrics_delta["generation_tokens"] == 8 * len(p.requests)
        # the fake's tokens are due 20 ms + k x 4 ms after it took the request: the last (k = 7)
        # never before 48 ms (delays only add; TPOT alone can dip below 4 ms after a late first token)
        assert p.summary.ttft_ms.p50 >= 20.0 and p.summary.e2e_ms.p50 >= 48.0
    # round trip: JSON -> model -> JSON is the same document
    again = BenchRecord.model_validate_json(r.to_json())
    assert again == r


def test_json_format_prints_the_summaries(tmp_path, fake):
    code, out, err = run_cli("verify", "--bench", str(_model(tmp_path)), "--endpoint", fake.url(), "--grid", "quick",
                             "--bench-seconds", "0.2", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["record"] is None and len(doc["points"]) == 4
    assert doc["points"][0]["summary"]["completed"] >= 1


def test_failed_requests_exit_1_and_are_recorded(tmp_path):
    s = FakeServer(ttft_s=0.0, itl_s=0.0, max_model_len=30)  # 32-token prompts are refused
    s.max_model_len_reported = False  # so kvplan cannot skip the points beforehand
    s.start()
    try:
        rec = tmp_path / "b.json"
        code, out, err = run_cli("verify", "--bench", str(_model(tmp_path)), "--endpoint", s.url(), "--grid", "quick",
                                 "--bench-seconds", "0.1", "--record", str(rec))
    finally:
        s.stop()
    assert code == 1
    r = load_record(rec)
    assert r.points[0].summary.completed == 0
    assert "maximum context length is 30" in r.points[0].requests[0].error
    assert "no request rate measured" in json.dumps(r.skipped)


def test_launcher_starts_and_stops_the_server_and_reads_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPLAN_BENCH_SERVER", FAKE_SCRIPT)
    monkeypatch.delenv(MOE_ROUTING_ENV, raising=False)
    rec = tmp_path / "moe.json"
    model = _model(tmp_path, num_local_experts=8, num_experts_per_tok=2, architectures=["MixtralForCausalLM"], model_type="mixtral")
    code, out, err = run_cli("verify", "--bench", str(model), "--grid", "quick", "--bench-seconds", "0.2",
                             "--max-model-len", "2048", "--max-num-seqs", "8", "--record", str(rec),
                             "--serve-args", "--async-scheduling --max-num-partial-prefills 2")
    assert code == 0, err
    r = load_record(rec)
    assert r.started_server and r.startup_s is not None
    cmd = r.serve_command
    assert cmd[1] == FAKE_SCRIPT
    for flag in ("--load-format", "--skip-tokenizer-init", "--disable-uvicorn-access-log"):
        assert flag in cmd
    assert cmd[cmd.index("--max-model-len") + 1] == "2048" and cmd[cmd.index("--max-num-seqs") + 1] == "8"
    assert r.engine_args == {"max_model_len": 2048, "max_num_seqs": 8}
    assert cmd[-3:] == ["--async-scheduling", "--max-num-partial-prefills", "2"]
    assert r.env[MOE_ROUTING_ENV] == "uniform_random"
    log = (tmp_path / "moe.log").read_text()
    # the server saw the variable, and was stopped with SIGINT (its shutdown line)
    assert '"VLLM_MOE_ROUTING_SIMULATION_STRATEGY": "uniform_random"' in log
    assert "Shutting down FastAPI HTTP server." in log
    assert r.server_log["gpu_kv_cache_tokens"] == 16000 and r.server_log["vllm_version"] == "0.26.0"
    # the fake server held 8 slots (--max-num-seqs 8): the 2x open loop queues, measured TTFT rises
    assert max(p.summary.max_in_flight for p in r.points) >= 4


def test_server_that_exits_at_start_is_environment_missing_and_writes_nothing(tmp_path, monkeypatch):
    bad = tmp_path / "crash.py"
    bad.write_text("import sys\nprint('ERROR boom: no GPU')\nsys.exit(1)\n")
    monkeypatch.setenv("KVPLAN_BENCH_SERVER", str(bad))
    rec = tmp_path / "x.json"
    code, out, err = run_cli("verify", "--bench", str(_model(tmp_path)), "--grid", "quick", "--record", str(rec))
    assert code == 3 and "Traceback" not in err
    assert "the vLLM server exited with status 1 before it was ready" in err and "ERROR boom: no GPU" in err
    assert not rec.exists()


def test_moe_detection():
    assert is_moe({"num_local_experts": 8}) and is_moe({"text_config": {"num_experts": 128}})
    assert is_moe({"n_routed_experts": 64})
    assert not is_moe(TINY_LLAMA) and not is_moe({"num_experts": 1}) and not is_moe(None)


# -- bad input: one line, exit 2, nothing written; each row is in docs/errors.md ----------------

BAD = [
    ("bench-grid-unknown", ["--grid", "huge"], "error: --grid: unknown grid 'huge'"),
    ("bench-endpoint-not-http", ["--endpoint", "localhost:8000"], "error: --endpoint: 'localhost:8000' is not an http://HOST:PORT address"),
    ("bench-record-directory", ["--record", "{tmp}"], "is a directory; with --bench it names the record file"),
    ("bench-record-no-folder", ["--record", "{tmp}/no/such/b.json"], "/no/such does not exist"),
    ("bench-seconds-not-positive", ["--bench-seconds", "0"], "error: --bench-seconds: must be a number of seconds > 0 and <= 3600, got 0.0"),
    ("bench-token-limit-not-positive", ["--bench-token-limit", "0"], "error: --bench-token-limit: must be a number of prompt tokens > 0, got 0"),
    ("bench-with-from-log", ["--from-log", "x.log"], "error: --from-log: not used with --bench"),
    ("bench-serve-args-port", ["--serve-args", "--port 9"], "error: --serve-args: --port is set by kvplan verify --bench; leave it out"),
    ("bench-no-vocab-size", None, "error: config.json: no vocab_size (an integer > 200) to draw prompt token ids from"),
]


@pytest.mark.parametrize("row,args,message", BAD, ids=[b[0] for b in BAD])
def test_bad_bench_flags_exit_2(tmp_path, monkeypatch, row, args, message):
    monkeypatch.setenv("KVPLAN_BENCH_SERVER", str(tmp_path / "never-started.py"))
    if args is None:
        cfg = dict(TINY_LLAMA)
        del cfg["vocab_size"]
        model, args = _model(tmp_path), ["--endpoint", "http://127.0.0.1:9"]
        (model / "config.json").write_text(json.dumps(cfg))
    else:
        model = _model(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_cli("verify", "--bench", str(model), *args)
    line = error_line(code, out, err)
    assert message in line, line
    assert out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_bench_flags_without_bench_exit_2(tmp_path):
    code, out, err = run_cli("verify", str(_model(tmp_path)), "--grid", "quick")
    assert error_line(code, out, err) == "error: --grid: only with --bench"
    code, out, err = run_cli("verify", str(_model(tmp_path)), "--endpoint", "http://127.0.0.1:1")
    assert error_line(code, out, err) == "error: --endpoint: only with --bench"


def test_bench_without_model_exit_2():
    code, out, err = run_cli("verify", "--bench", "--grid", "quick")
    assert error_line(code, out, err) == "error: MODEL: missing"


def test_every_bench_row_is_in_docs_errors_md():
    text = DOCS.read_text(encoding="utf-8")
    for row, _, message in BAD:
        assert f"`{row}`" in text, row
        assert message.replace("{tmp}", "") in text, row


def test_points_longer_than_the_servers_max_model_len_are_skipped(tmp_path):
    # quick grid requests are 32 + 8 = 40 tokens: a server with max_model_len 39 takes none
    s = FakeServer(ttft_s=0.0, itl_s=0.0, max_model_len=39)
    s.start()
    try:
        rec = tmp_path / "b.json"
        code, out, err = run_cli("verify", "--bench", str(_model(tmp_path)), "--endpoint", s.url(), "--grid", "quick",
                                 "--bench-seconds", "0.1", "--record", str(rec))
    finally:
        s.stop()
    assert code == 1, err  # nothing measured is not a pass
    r = load_record(rec)
    assert r.points == [] and r.warmup == [] and s.requests == []
    reasons = {x["name"]: x["reason"] for x in r.skipped}
    assert set(reasons) == {"closed-c1-32x8", "closed-c4-32x8", "open-0.5x-32x8", "open-2x-32x8"}
    assert set(reasons.values()) == {"input + output = 40 tokens > the server's max_model_len 39"}
