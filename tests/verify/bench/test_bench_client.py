"""The benchmark client against the fake vLLM server (tests/verify/fake_vllm_server.py): it
measures the engine's known TTFT and ITL, counts tokens from vLLM's usage fields, decodes
chunked and unchunked streams, and sends the request fields vLLM 0.26 reads."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_vllm_server import FakeServer  # noqa: E402

from kvplan.verify.bench.client import completion_body, random_prompt, send_completion
from kvplan.verify.bench.http import Endpoint, get_json, parse_endpoint
from kvplan.verify.bench.metrics import cache_config, counter_deltas, parse_prometheus
from kvplan.errors import KvplanError


@pytest.fixture
def fake():
    servers = []

    def make(**kw):
        s = FakeServer(**kw)
        s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.mark.parametrize("chunked", [True, False])
def test_client_measures_the_fake_engines_ttft_and_itl(fake, chunked):
    # the fake sends the first token 80 ms after the request, then one every 20 ms
    s = fake(ttft_s=0.08, itl_s=0.02, chunked=chunked)
    ep = Endpoint("127.0.0.1", s.port)
    t = asyncio.run(send_completion(ep, "fake-model", [101] * 50, 10, 0))
    assert t.error is None
    assert t.output_tokens == 10 and t.chunk_tokens == [1] * 10
    assert t.server_prompt_tokens == 50
    ttft = t.chunk_times[0] - t.sent
    gaps = [b - a for a, b in zip(t.chunk_times, t.chunk_times[1:])]
    # the loaded 2-core machine adds scheduling delay, never removes time
    assert 0.08 <= ttft < 0.08 + 0.06, ttft
    mean_itl = sum(gaps) / len(gaps)
    assert 0.018 <= mean_itl < 0.02 + 0.01, mean_itl
    # E2E = ttft + 9 gaps of 20 ms = 260 ms
    assert 0.26 <= t.finished - t.sent < 0.26 + 0.08


def test_request_body_has_the_fields_vllm_reads(fake):
    s = fake(ttft_s=0.0, itl_s=0.0)
    asyncio.run(send_completion(Endpoint("127.0.0.1", s.port), "m", [5, 6, 7], 4, 0))
    (req,) = s.requests
    assert req["prompt_len"] == 3
    assert req["max_tokens"] == 4 and req["min_tokens"] == 4
    assert req["ignore_eos"] is True and req["stream"] is True
    assert req["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert completion_body("m", [1], 2)["model"] == "m"


def test_a_request_vllm_rejects_is_a_failed_timing_not_an_exception(fake):
    s = fake(max_model_len=100)
    t = asyncio.run(send_completion(Endpoint("127.0.0.1", s.port), "m", [200] * 90, 20, 3))
    assert t.error.startswith("HTTP 400") and "maximum context length is 100" in t.error
    assert t.index == 3 and t.output_tokens == 0


def test_a_closed_port_is_a_failed_timing():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t = asyncio.run(send_completion(Endpoint("127.0.0.1", port), "m", [1], 1, 0, timeout_s=2))
    assert t.error and "cannot connect" in t.error


def test_prompts_are_seeded_and_stay_inside_the_margins():
    a = random_prompt(random.Random(7), 5000, 1000)
    b = random_prompt(random.Random(7), 5000, 1000)
    assert a == b
    assert min(a) >= 100 and max(a) < 900
    with pytest.raises(ValueError):
        random_prompt(random.Random(0), 1, 200)


def test_get_json_reads_version_and_models(fake):
    s = fake(model="/models/x")
    ep = Endpoint("127.0.0.1", s.port)
    assert asyncio.run(get_json(ep, "/version")) == {"version": "0.26.0"}
    assert asyncio.run(get_json(ep, "/v1/models"))["data"][0]["id"] == "/models/x"


@pytest.mark.parametrize("text", ["127.0.0.1:8000", "https://h:1", "http://:80", "http://h:99999"])
def test_bad_endpoints_are_refused(text):
    with pytest.raises(KvplanError) as e:
        parse_endpoint(text)
    assert e.value.message.startswith("--endpoint: ")


def test_endpoint_keeps_a_path_prefix():
    ep = parse_endpoint("http://10.0.0.1:8080/proxy/")
    assert (ep.host, ep.port, ep.prefix) == ("10.0.0.1", 8080, "/proxy")


PROM = """\
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e9
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:generation_tokens_total{engine="0",model_name="m"} 10.0
vllm:generation_tokens_total{engine="1",model_name="m"} 5.0
vllm:cache_config_info{block_size="16",num_gpu_blocks="27305",cache_dtype="auto"} 1.0
vllm:odd NaN
"""


def test_prometheus_text_is_summed_over_labels():
    values, infos = parse_prometheus(PROM)
    assert values["vllm:num_preemptions_total"] == 3.0
    assert values["vllm:generation_tokens_total"] == 15.0
    assert values["vllm:kv_cache_usage_perc"] == 0.25
    assert "vllm:odd" not in values
    assert cache_config(infos) == {"block_size": 16, "num_gpu_blocks": 27305, "cache_dtype": "auto"}
    after = dict(values, **{"vllm:num_preemptions_total": 10.0})
    assert counter_deltas(values, after) == {"num_preemptions": 7.0, "generation_tokens": 0.0}
