"""The web API (issue 24): each endpoint answers the document the CLI prints for the same inputs
(the CLI's own output is the oracle, run in the same test), bad input gets the CLI's one line and
a 4xx, and what reads the server's disk or runs long is bounded.

Hand-written expectations: the serve line of Llama-3.1-70B on 4 A100s at 8192 tokens carries
exactly the two flags given that differ from vLLM's defaults (-tp 4, --max-model-len 8192).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from web_client import Client, start
from helpers import run_cli
from hf_server import fake_hub  # noqa: F401 - a fixture

from kvplan.cli.web.api import Policy

LLAMA70 = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "A100-80GB", "tensor_parallel_size": 4, "max_model_len": "8192"}
LLAMA70_ARGV = ["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192"]


def cli_json(*args: str):
    code, out, err = run_cli(*args)
    assert code in (0, 1), err
    return code, json.loads(out)


def cli_error(*args: str) -> tuple[str, str | None]:
    code, out, err = run_cli(*args)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    hint = lines[1].strip()[len("hint: "):] if len(lines) > 1 else None
    return lines[0][len("error: "):], hint


# ----------------------------------------------------------------------------- same documents


def test_estimate_is_the_cli_document(client):
    status, headers, doc = client.post("/api/v1/estimate", LLAMA70)
    code, expected = cli_json("estimate", *LLAMA70_ARGV, "--format", "json")
    assert status == 200 and headers["X-Kvplan-Exit-Code"] == str(code) == "0"
    assert doc == expected
    assert doc["serve_command"] == "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192"


def test_estimate_with_curves_and_workload_is_the_cli_document(client):
    body = LLAMA70 | {"curves": True, "workload": "prompt=1000,3000 output=200,500"}
    _, _, doc = client.post("/api/v1/estimate", body)
    _, expected = cli_json("estimate", *LLAMA70_ARGV, "--curves", "--workload", "prompt=1000,3000 output=200,500", "--format", "json")
    assert doc == expected
    # the curve re-plans at the plan's own length gives the plan's own concurrency
    here = [p for p in doc["curves"]["by_max_model_len"] if p["x"] == 8192]
    assert here and here[0]["max_concurrency"] == doc["kv_cache"]["max_concurrency"]


@pytest.mark.parametrize("fmt", ["yaml", "serve"])
def test_estimate_yaml_and_serve_are_the_cli_text(client, fmt):
    status, headers, text = client.post(f"/api/v1/estimate?format={fmt}", LLAMA70)
    code, out, _ = run_cli("estimate", *LLAMA70_ARGV, "--format", fmt)
    assert status == 200 and code == 0 and text == out


def test_estimate_that_does_not_start_is_200_with_exit_code_1(client):
    body = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "A100-80GB"}  # 140 GB of bf16 weights on one 80 GB GPU
    status, headers, doc = client.post("/api/v1/estimate", body)
    code, expected = cli_json("estimate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100-80GB", "--format", "json")
    assert status == 200 and code == 1 and headers["X-Kvplan-Exit-Code"] == "1"
    assert doc == expected and doc["fits"] is False


def test_estimate_document_matches_the_published_schema(client):
    import jsonschema

    from kvplan.render.schema import EstimateDocument, estimate_json_schema

    _, _, doc = client.post("/api/v1/estimate", LLAMA70 | {"curves": True, "workload": "prompt=1000 output=100"})
    jsonschema.validate(doc, estimate_json_schema())
    EstimateDocument.model_validate(doc)
    broken = json.loads(json.dumps(doc))
    broken["curves"]["by_max_model_len"][0]["fits"] = "yes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, estimate_json_schema())


def test_plan_is_the_cli_document(client):
    body = {"model": "meta-llama/Meta-Llama-3-8B", "max_model_len": "8192", "concurrency": 16, "gpus": "h200,l4"}
    status, headers, doc = client.post("/api/v1/plan", body)
    code, expected = cli_json("plan", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "8192", "--concurrency", "16",
                              "--gpus", "h200,l4", "--format", "json")
    assert status == 200 and headers["X-Kvplan-Exit-Code"] == str(code)
    for d in (doc, expected):  # the search's wall time differs between two runs
        d["search"].pop("elapsed_s")
    assert doc == expected


def test_perf_is_the_cli_document(client):
    body = {"model": "meta-llama/Meta-Llama-3-8B", "gpu": "H200", "input_len": 256, "output_len": 32,
            "concurrency": 8, "num_requests": 40, "saturation": False}
    status, _, doc = client.post("/api/v1/perf", body)
    code, expected = cli_json("perf", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--input-len", "256",
                              "--output-len", "32", "--concurrency", "8", "--num-requests", "40", "--no-saturation",
                              "--format", "json")
    assert status == 200 and doc == expected


def test_perf_takes_num_prompts_as_num_requests(client):
    # --num-prompts is --num-requests on the command line (vllm bench serve's name); the API takes
    # its key too, and the oracle is the CLI run with the other spelling
    body = {"model": "meta-llama/Meta-Llama-3-8B", "gpu": "H200", "input_len": 256, "output_len": 32,
            "concurrency": 8, "num_prompts": 40, "saturation": False}
    status, _, doc = client.post("/api/v1/perf", body)
    code, expected = cli_json("perf", "meta-llama/Meta-Llama-3-8B", "--gpu", "H200", "--input-len", "256",
                              "--output-len", "32", "--concurrency", "8", "--num-requests", "40", "--no-saturation",
                              "--format", "json")
    assert status == 200 and doc == expected and doc["workload"]["num_requests"] == 40
    status, _, doc = client.post("/api/v1/perf", {**body, "num_prompts": 0})
    assert status == 400 and doc["error"] == "--num-requests/--num-prompts: must be >= 1, got 0"
    status, _, doc = client.post("/api/v1/perf", {**body, "num_requests": 40})
    assert status == 400 and doc["error"].startswith("num_prompts/num_requests: the same parameter twice")


SERVE_SH = "vllm serve meta-llama/Meta-Llama-3-8B --max-model-len 8192 --gpu-memory-utilization 0.9\n"


def test_check_of_a_posted_file_is_the_cli_document(client):
    status, headers, doc = client.post("/api/v1/check", {"name": "serve.sh", "content": SERVE_SH, "gpu": "H200"})
    done = subprocess.run([sys.executable, "-m", "kvplan", "check", "-", "--stdin-name", "serve.sh", "--gpu", "H200",
                           "--format", "json"], input=SERVE_SH, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    assert status == 200 and headers["X-Kvplan-Exit-Code"] == str(done.returncode)
    expected = json.loads(done.stdout)
    for d in (doc, expected):  # the run's wall time differs between two runs
        d["stats"].pop("seconds")
    assert doc == expected


def test_gpus_and_models_are_the_cli_lists(client):
    _, _, gpus = client.get("/api/v1/gpus")
    assert gpus == cli_json("gpus", "--format", "json")[1]
    _, _, models = client.get("/api/v1/models")
    from kvplan.sources.bundled import bundled_ids

    assert models == {"bundled": list(bundled_ids()), "local_paths_allowed": False}
    assert "meta-llama/Llama-3.1-70B-Instruct" in models["bundled"]


def test_openapi_refs_resolve_and_name_every_endpoint(client):
    status, _, doc = client.get("/api/v1/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert {"/api/v1/estimate", "/api/v1/plan", "/api/v1/perf", "/api/v1/check", "/api/v1/gpus", "/api/v1/models"} <= set(doc["paths"])
    schemas = doc["components"]["schemas"]

    def refs(node):
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for v in node.values():
                yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    found = list(refs(doc))
    assert found and all(r.startswith("#/components/schemas/") and r.rsplit("/", 1)[1] in schemas for r in found)
    # the request body names each of estimate's flags by the CLI parameter's name
    assert {"model", "gpu", "tensor_parallel_size", "max_model_len", "kv_cache_dtype"} <= set(schemas["EstimateRequest"]["properties"])
    assert schemas["EstimateRequest"]["properties"]["tensor_parallel_size"]["type"] == ["integer", "null"]


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "body, argv",
    [
        ({"tensor_parallel_size": 0}, ["-tp", "0"]),
        ({"tensor_parallel_size": "x"}, ["--tensor-parallel-size", "x"]),
        ({"max_model_len": "lots"}, ["--max-model-len", "lots"]),
        ({"gpu": "Z9000"}, ["--gpu", "Z9000"]),
        ({"gpu_memory_utilization": 1.5}, ["--gpu-memory-utilization", "1.5"]),
        ({"kv_cache_dtype": "int3"}, ["--kv-cache-dtype", "int3"]),
    ],
)
def test_bad_estimate_input_is_the_cli_message_and_400(client, body, argv):
    status, headers, doc = client.post("/api/v1/estimate", {"model": "meta-llama/Meta-Llama-3-8B", **body})
    message, hint = cli_error("estimate", "meta-llama/Meta-Llama-3-8B", *argv)
    assert status == 400 and doc["error"] == message and doc["hint"] == hint and doc["exit_code"] == 2
    assert "Traceback" not in json.dumps(doc)


def test_bad_perf_input_is_the_cli_message_and_400(client):
    status, _, doc = client.post("/api/v1/perf", {"model": "meta-llama/Meta-Llama-3-8B", "input_len": 10, "output_len": 10,
                                                  "concurrency": 2, "request_rate": 1.0})
    message, _ = cli_error("perf", "meta-llama/Meta-Llama-3-8B", "--input-len", "10", "--output-len", "10",
                           "--concurrency", "2", "--request-rate", "1.0")
    assert status == 400 and doc["error"] == message


@pytest.mark.parametrize(
    "body, words",
    [
        ({"model": "meta-llama/Meta-Llama-3-8B", "color": "red"}, "color: not a parameter"),
        ({"model": "meta-llama/Meta-Llama-3-8B", "plot": "/tmp/x.png"}, "plot: not a parameter"),
        ({"model": "meta-llama/Meta-Llama-3-8B", "tensor_parallel_size": [1, 2]}, "--tensor-parallel-size: expected a single value"),
        ({"model": "meta-llama/Meta-Llama-3-8B", "enforce_eager": "yes"}, "--enforce-eager: expected true or false"),
        ({"model": 7}, "model: expected a string"),
        ({"model": ""}, "MODEL: empty model name"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_bodies_are_one_line_400s(client, body, words):
    status, _, doc = client.post("/api/v1/estimate", body)
    assert status == 400 and words in doc["error"]


def test_not_json_wrong_type_and_too_large(client):
    status, _, doc = client.request("/api/v1/estimate", raw=b"{not json", headers={"Content-Type": "application/json"})
    assert status == 400 and doc["error"].startswith("request body: not JSON")
    status, _, doc = client.request("/api/v1/estimate", raw=b"model=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415
    from kvplan.cli.web.server import MAX_BODY_BYTES

    status, _, doc = client.request("/api/v1/check", raw=b" " * (MAX_BODY_BYTES + 1))
    assert status == 413 and "over the limit" in doc["error"]


def test_unknown_paths_and_methods(client):
    assert client.get("/api/v1/estimate")[0] == 405
    assert client.get("/api/v2/estimate")[0] == 404
    assert client.get("/static/../../../etc/passwd")[0] == 404
    assert client.get("/static/app.js")[0] == 200
    assert client.post("/api/v1/nothing", {})[0] == 404


def test_a_foreign_host_header_is_refused(client):
    status, _, doc = client.get("/api/v1/models", headers={"Host": "evil.example:80"})
    assert status == 403


# ----------------------------------------------------------------------------- the server's disk


def test_local_paths_are_refused_unless_the_server_allows_them(client, tmp_path):
    from helpers import TINY_LLAMA

    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    status, _, doc = client.post("/api/v1/estimate", {"model": str(tmp_path)})
    assert status == 400 and "not readable from the web API" in doc["error"] and "--allow-local-paths" in doc["hint"]
    for key, value in [("gpu_profiles", [str(tmp_path / "config.json")]), ("workload", str(tmp_path / "config.json"))]:
        status, _, doc = client.post("/api/v1/estimate", {"model": "meta-llama/Meta-Llama-3-8B", key: value})
        assert status == 400 and "not readable from the web API" in doc["error"], key
    # a posted deployment naming a local model directory: the check command itself refuses to read it
    status, headers, doc = client.post("/api/v1/check", {"name": "serve.sh", "content": f"vllm serve {tmp_path}\n", "gpu": "H200"})
    assert status == 422 and headers["X-Kvplan-Exit-Code"] == "2" and doc["exit_code"] == 2
    unresolved = [d for d in doc["diagnostics"] if d["check_id"] == "model-unresolved"]
    assert unresolved and "local model paths are not readable through kvplan web" in unresolved[0]["message"]
    assert doc["files"][0]["deployments"][0]["figures"] is None  # nothing was read from tmp_path

    server = start(Policy(allow_local_paths=True))
    try:
        status, _, doc = Client(server.url).post("/api/v1/estimate", {"model": str(tmp_path), "gpu": "H200"})
        code, expected = cli_json("estimate", str(tmp_path), "--gpu", "H200", "--format", "json")
        assert status == 200 and doc == expected
    finally:
        server.shutdown()
        server.server_close()


def test_sources_refuse_local_paths_under_the_servers_switch(monkeypatch, tmp_path):
    from helpers import TINY_LLAMA

    from kvplan.errors import KvplanError
    from kvplan.sources import DENY_LOCAL_ENV, resolve_model

    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    assert resolve_model(str(tmp_path)).origin == "local"
    monkeypatch.setenv(DENY_LOCAL_ENV, "1")
    with pytest.raises(KvplanError, match="not readable through kvplan web"):
        resolve_model(str(tmp_path))
    assert resolve_model("meta-llama/Meta-Llama-3-8B").origin == "bundled"


# ----------------------------------------------------------------------------- time and load


def test_a_perf_request_over_the_limit_is_stopped_with_504():
    server = start(Policy(timeout_s=0.2))
    try:
        status, _, doc = Client(server.url).post("/api/v1/perf", {"model": "meta-llama/Meta-Llama-3-8B", "input_len": 1024,
                                                                  "output_len": 256, "concurrency": 64})
        assert status == 504 and "limit of 0.2 s" in doc["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_no_free_job_slot_is_503_and_estimate_still_answers():
    server = start(Policy(max_jobs=0))
    try:
        c = Client(server.url)
        status, _, doc = c.post("/api/v1/plan", {"model": "meta-llama/Meta-Llama-3-8B"})
        assert status == 503 and doc["error"].startswith("busy")
        assert c.post("/api/v1/estimate", {"model": "meta-llama/Meta-Llama-3-8B"})[0] == 200  # in-process, no slot needed
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- the command


def _start_cli(*args):
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "web", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    return proc, line


def test_kvplan_web_prints_its_url_and_serves_the_page():
    proc, line = _start_cli()
    try:
        assert line.startswith("kvplan web: serving on http://127.0.0.1:"), line
        url = line.split()[4]
        status, _, html = Client(url).get("/")
        assert status == 200 and "<title>kvplan</title>" in html
        assert "http" not in html.replace("http://www.w3.org", "")  # no CDN: every asset is served here
    finally:
        proc.terminate()
        proc.wait(10)


def test_binding_beyond_localhost_warns():
    proc, line = _start_cli("--host", "0.0.0.0")
    try:
        assert "serving on http://0.0.0.0:" in line
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "warning: --host 0.0.0.0: the server is reachable from other machines" in err


@pytest.mark.parametrize("args, words", [(["--port", "70000"], "--port: must be in 0..65535"), (["--timeout", "0"], "--timeout: must be > 0")])
def test_bad_web_flags_are_one_line(args, words):
    code, out, err = run_cli("web", *args)
    assert code == 2 and err.startswith("error: " + words) and "Traceback" not in err


def test_static_files_ship_in_the_package():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "kvplan.cli.web" in data["packages"] and data["package-data"]["kvplan.cli.web"] == ["static/*"]
    from kvplan.cli.web.server import STATIC, STATIC_FILES

    for name in [*STATIC_FILES, "index.html"]:
        text = (STATIC / name).read_text()
        assert "https://" not in text and "//cdn" not in text, name


def test_estimate_imports_nothing_web_related():
    script = ("import sys, io, contextlib; sys.argv = ['kvplan', 'estimate', 'meta-llama/Meta-Llama-3-8B', '--format', 'json']\n"
              "from kvplan import cli\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    try: cli.main()\n"
              "    except SystemExit: pass\n"
              "print(sorted(m for m in sys.modules if m.startswith(('kvplan.cli.web', 'http.server', 'socketserver', 'selenium'))))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_hub_model_is_fetched_as_the_cli_fetches_it(fake_hub, client):
    """A Hub id (on tests/hf_server.py's Hub on 127.0.0.1) through the API equals the CLI's document."""
    from helpers import TINY_LLAMA

    fake_hub.add_repo("acme/web-tiny", {"config.json": json.dumps(TINY_LLAMA).encode()})
    status, _, doc = client.post("/api/v1/estimate", {"model": "acme/web-tiny", "gpu": "L4"})
    code, expected = cli_json("estimate", "acme/web-tiny", "--gpu", "L4", "--format", "json")
    assert status == 200 and doc == expected and doc["model"]["source"]["origin"] == "hub"
