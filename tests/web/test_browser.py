"""The page in a real headless Chromium (the system's chromium + chromium-driver, driven by
selenium; .ci/run installs them): fill the form, read the numbers, reopen the shared link, take a
screenshot. The expected numbers are the CLI's own output for the same inputs, run in the test.

Skipped (with the reason) only where no Chromium is installed, unless KVPLAN_REQUIRE_BROWSER=1
(set by .ci/run), where that is a failure. Set KVPLAN_WEB_SCREENSHOT=FILE.png to keep the
acceptance view's screenshot (docs/web.png is made so).
"""

from __future__ import annotations

import json
import os
import shutil
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers import run_cli

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def driver():
    missing = [what for what, ok in (("chromium", CHROMIUM), ("chromedriver (chromium-driver)", DRIVER)) if not ok]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if missing:
        reason = "no browser to drive: missing " + ", ".join(missing) + " (apt-get install chromium chromium-driver)"
        if os.environ.get("KVPLAN_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1900",
              "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)  # the given driver: selenium downloads nothing
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def wait(d, predicate, timeout=60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(d, timeout, poll_frequency=0.1).until(lambda _: predicate())


def load(d, url):
    d.get(url)
    wait(d, lambda: d.execute_script("return document.body.dataset.ready === '1'"))


def stats(d) -> dict:
    """{label: value} of the result cards."""
    return d.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#stats div')]"
        ".map(e => [e.dataset.key, e.querySelector('dd').textContent]))"
    )


def field(d, name):
    return d.find_element("css selector", f"#form [name={name}]")


def type_into(d, name, text):
    el = field(d, name)
    el.clear()
    el.send_keys(text)


def run_estimate(d):
    before = d.execute_script("return document.querySelector('#json').textContent")
    d.find_element("id", "run").click()
    wait(d, lambda: d.execute_script(
        "return !document.querySelector('#run').disabled && "
        "(document.querySelector('#json').textContent !== arguments[0] || !document.querySelector('#error').hidden)", before))


def cli_json(*args):
    code, out, err = run_cli(*args)
    assert code in (0, 1), err
    return json.loads(out)


def test_the_page_shows_the_cli_numbers_and_the_link_reopens_them(driver, web_server, tmp_path):
    d = driver
    load(d, web_server.url)
    type_into(d, "model", "meta-llama/Llama-3.1-70B-Instruct")
    from selenium.webdriver.support.ui import Select

    Select(field(d, "gpu")).select_by_value("a100-80gb-sxm")
    type_into(d, "tensor_parallel_size", "4")
    type_into(d, "max_model_len", "8192")
    run_estimate(d)
    assert d.find_element("id", "error").get_attribute("hidden"), d.find_element("id", "error").text

    argv = ["meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192"]
    doc = cli_json("estimate", *argv, "--format", "json")
    _, yaml_text, _ = run_cli("estimate", *argv, "--format", "yaml")
    shown = stats(d)
    assert shown["num_gpu_blocks"] == f"{doc['kv_cache']['num_gpu_blocks']:,}"
    assert shown["GPU KV cache size (tokens)"] == f"{doc['kv_cache']['gpu_kv_cache_tokens']:,}"
    assert shown["max concurrency at 8,192 tokens"] == f"{doc['kv_cache']['max_concurrency']:.2f}x"
    assert shown["binding limit"].startswith("KV cache: ") and doc["binding_limit"] == "kv_cache"
    serve = d.find_element("id", "serve").text
    assert serve == doc["serve_command"] == "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 8192"
    assert d.find_element("id", "yaml").text == yaml_text.strip()
    assert doc["evidence"]["label"] in d.find_element("id", "evidence").text
    assert d.find_element("id", "verdict").text == "starts"
    # the memory bar and the concurrency curve are drawn from the document
    labels = d.execute_script("return [...document.querySelectorAll('#membar rect')].map(r => r.dataset.label)")
    assert labels[0] == "weights" and "KV cache" in labels
    points = d.execute_script("return document.querySelectorAll('#curve circle').length")
    assert points == len(cli_json("estimate", *argv, "--curves", "--format", "json")["curves"]["by_max_model_len"])

    # the inputs are in the URL: a fresh load of it shows the same view
    link = d.current_url
    q = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert q["model"] == "meta-llama/Llama-3.1-70B-Instruct" and q["tensor_parallel_size"] == "4"
    assert q["max_model_len"] == "8192" and q["gpu"] == "a100-80gb-sxm"
    d.get("about:blank")
    load(d, link)
    assert stats(d)["num_gpu_blocks"] == shown["num_gpu_blocks"]
    assert d.find_element("id", "serve").text == serve
    assert field(d, "tensor_parallel_size").get_attribute("value") == "4"
    assert field(d, "model").get_attribute("value") == "meta-llama/Llama-3.1-70B-Instruct"

    shot = tmp_path / "page.png"
    assert d.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    keep = os.environ.get("KVPLAN_WEB_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)


def test_bad_input_shows_the_cli_message(driver, web_server):
    d = driver
    load(d, web_server.url + "?model=meta-llama/Meta-Llama-3-8B")
    type_into(d, "max_model_len", "lots")
    run_estimate(d)
    code, _, err = run_cli("estimate", "meta-llama/Meta-Llama-3-8B", "--max-model-len", "lots")
    assert code == 2
    box = d.find_element("id", "error")
    assert not box.get_attribute("hidden") and box.text == err.strip()


def test_perf_curve_on_request(driver, web_server):
    d = driver
    inputs = "model=meta-llama/Meta-Llama-3-8B&gpu=h200&input_len=256&output_len=32&concurrency=8&num_requests=60"
    load(d, web_server.url + "?" + inputs + "&perf=1")
    wait(d, lambda: d.execute_script("return !document.querySelector('#perf').hidden"))
    perf = cli_json("perf", "meta-llama/Meta-Llama-3-8B", "--gpu", "h200", "--input-len", "256", "--output-len", "32",
                    "--concurrency", "8", "--num-requests", "60", "--format", "json")
    summary = d.find_element("id", "perf-summary").text
    assert f"TTFT p50 {perf['metrics']['ttft_s']['p50'] * 1000:.1f} ms" in summary
    assert f"saturation {perf['saturation']['rate']:.2f} req/s" in summary
    n = len(perf["saturation"]["points"])
    assert n >= 2 and d.execute_script("return document.querySelectorAll('#perf-ttft circle').length") == 2 * n
    assert perf["calibration"]["label"] in d.find_element("id", "perf-label").text


def test_parallelism_fields_follow_what_the_api_takes(driver, web_server):
    d = driver
    load(d, web_server.url)
    from web_client import Client

    _, _, options = Client(web_server.url).get("/api/v1/options")
    takes = options["commands"]["estimate"]
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_expert_parallel"):
        assert field(d, name).is_enabled() == (name in takes), name
    assert field(d, "tensor_parallel_size").is_enabled()


def test_a_link_naming_a_gpu_alias_opens_the_acceptance_view(driver, web_server):
    d = driver
    load(d, web_server.url + "?model=meta-llama/Llama-3.1-70B-Instruct&gpu=A100-80GB&tensor_parallel_size=4&max_model_len=8192")
    doc = cli_json("estimate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "A100-80GB", "-tp", "4", "--max-model-len", "8192",
                   "--format", "json")
    assert field(d, "gpu").get_attribute("value") == doc["gpu"]["name"]  # the profile that lists the alias
    assert stats(d)["num_gpu_blocks"] == f"{doc['kv_cache']['num_gpu_blocks']:,}"
    assert d.find_element("id", "serve").text == doc["serve_command"]
