"""`kvplan estimate` takes a pasted `vllm serve` line whole (kvplan/cli/serve_extras.py): every flag
of the version's catalogue is accepted; those with no effect on sizing are listed once as ignored
(every format) and kept in the written serve line; those kvplan does not model make the estimate
approximate; --no-enable-chunked-prefill is sized as vLLM sizes it; a word that is no flag of that
vLLM is exit 2 with close names."""

from __future__ import annotations

import json

import yaml

from tests.helpers import run_cli, unwrapped

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # bundled; max_position_embeddings 131072
BASE = ("estimate", MODEL, "--gpu", "H200", "--vllm-version", "0.34.0")
PASTED = ("--port", "8000", "--host", "0.0.0.0", "--served-model-name", "chat", "llama", "--trust-remote-code",
          "--seed", "0", "--api-key", "k", "--tokenizer-mode", "auto")
IGNORED = ("ignored (no effect on memory or sizing): --port 8000, --host 0.0.0.0, --served-model-name chat llama, "
           "--trust-remote-code, --seed 0, --api-key k, --tokenizer-mode auto")


def _json(*args: str) -> dict:
    code, out, err = run_cli(*BASE, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_no_effect_flags_are_accepted_listed_once_and_kept_in_the_serve_line():
    plain, pasted = _json("--max-model-len", "8192"), _json("--max-model-len", "8192", *PASTED)
    assert pasted["kv_cache"] == plain["kv_cache"] and pasted["memory"] == plain["memory"]  # they size nothing
    assert pasted["exact"] is True
    assert [w for w in pasted["warnings"] if w.startswith("ignored")] == [IGNORED]
    assert pasted["serve_command"].endswith(" ".join(PASTED))
    assert {"flag": "--served-model-name", "value": "chat llama", "origin": "user"} in pasted["serve_flags"]
    from kvplan.render.schema import EstimateDocument

    EstimateDocument.model_validate(pasted)

    code, out, err = run_cli(*BASE, "--max-model-len", "8192", *PASTED, "--format", "serve")
    assert code == 0 and out.strip().endswith(" ".join(PASTED))
    assert err.count("ignored (no effect") == 1 and ("kvplan: " + IGNORED) in err.splitlines()
    code, out, err = run_cli(*BASE, "--max-model-len", "8192", *PASTED, "--format", "yaml")
    doc = yaml.safe_load(out)
    assert (doc["port"], doc["host"], doc["served-model-name"], doc["trust-remote-code"]) == (8000, "0.0.0.0", ["chat", "llama"], True)
    code, out, err = run_cli(*BASE, "--max-model-len", "8192", *PASTED)
    assert code == 0 and unwrapped(out).count("ignored (no effect on memory or sizing)") == 1


def test_a_flag_written_before_model_leaves_model_in_place():
    code, out, err = run_cli("estimate", "--port", "8000", MODEL, "--gpu", "H200", "--vllm-version", "0.34.0",
                             "--max-model-len", "8192", "--format", "serve")
    assert code == 0, err
    assert out.startswith(f"vllm serve {MODEL} ") and out.strip().endswith("--port 8000")


def test_no_chunked_prefill_raises_the_default_token_budget_to_max_model_len():
    # vLLM 0.34.0 engine/arg_utils.py: without chunked prefill a defaulted max_num_batched_tokens
    # becomes max(max_model_len, default) = max(131072, 8192) on an H200 `vllm serve`
    off = _json("--no-enable-chunked-prefill")
    assert off["engine"]["max_num_batched_tokens"] == 131072
    assert {"flag": "--no-enable-chunked-prefill", "value": True, "origin": "user"} in off["serve_flags"]
    assert _json("--enable-chunked-prefill")["engine"]["max_num_batched_tokens"] == 8192
    assert _json()["engine"]["max_num_batched_tokens"] == 8192
    # a bigger profiling batch leaves less for the KV cache
    assert off["kv_cache"]["num_gpu_blocks"] < _json()["kv_cache"]["num_gpu_blocks"]
    # config/scheduler.py verify_max_model_len: a given budget below max_model_len is refused
    code, out, err = run_cli(*BASE, "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096")
    assert code == 2 and out == ""
    assert err.startswith("error: --max-num-batched-tokens 4096: smaller than --max-model-len 131072 with "
                          "--no-enable-chunked-prefill; vLLM refuses it")


def test_a_flag_that_may_change_memory_makes_the_estimate_approximate_in_every_format():
    why = ("kvplan does not model --num-gpu-blocks-override (vLLM allocates exactly this many blocks); "
           "the figures assume it is unset")
    doc = _json("--max-model-len", "8192", "--num-gpu-blocks-override", "100")
    assert doc["exact"] is False and why in doc["approximate"]
    assert doc["serve_command"].endswith("--num-gpu-blocks-override 100")
    code, out, err = run_cli(*BASE, "--max-model-len", "8192", "--num-gpu-blocks-override", "100", "--format", "serve")
    assert code == 0 and "warning: approximate estimate, not exact: " + why in err
    code, out, _ = run_cli(*BASE, "--max-model-len", "8192", "--num-gpu-blocks-override", "100")
    assert "approximate, not exact: " + why in unwrapped(out)


def test_a_word_that_is_no_vllm_flag_is_exit_2_with_close_names():
    code, out, err = run_cli(*BASE, "--prot", "8000")
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == "error: --prot: neither an option of `kvplan estimate` nor a `vllm serve` flag of vLLM 0.34.0"
    assert "--port" in err.splitlines()[1] and "Traceback" not in err


def test_the_catalogue_is_the_chosen_versions():
    # --max-num-partial-prefills is a vLLM 0.26.0 flag (flag_catalogue.FLAGS) that 0.34.0's table lacks
    code, out, err = run_cli(*BASE, "--max-num-partial-prefills", "2")
    assert code == 2 and "--max-num-partial-prefills: neither an option of `kvplan estimate` nor a `vllm serve` flag of vLLM 0.34.0" in err
    code, out, err = run_cli("estimate", MODEL, "--vllm-version", "0.26.0", "--max-model-len", "8192",
                             "--max-num-partial-prefills", "2", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["exact"] is False


def test_perf_takes_the_serve_line_too():
    base = ("perf", MODEL, "--gpu", "H200", "--vllm-version", "0.34.0", "--max-model-len", "8192", "--input-len", "512",
            "--output-len", "64", "--concurrency", "4", "--num-requests", "12", "--no-saturation")
    code, out, err = run_cli(*base, "--port", "8000", "--num-gpu-blocks-override", "1000", "--format", "json")
    assert code == 0, err
    assert ("kvplan does not model --num-gpu-blocks-override (vLLM allocates exactly this many blocks); the figures "
            "assume it is unset") in json.loads(out)["approximate"]
    assert "kvplan: ignored (no effect on memory or sizing): --port 8000" in err.splitlines()
    code, out, err = run_cli(*base, "--prot", "8000")
    assert code == 2 and "--prot: neither an option of `kvplan perf` nor a `vllm serve` flag of vLLM 0.34.0" in err
