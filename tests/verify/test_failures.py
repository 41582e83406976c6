"""`kvplan verify` on hostile or failing input: JSON nested too deeply, non-finite numbers in
flags and batch files, vLLM failing before it sized memory (setup failures), logs that
contradict themselves.

Expected values are worked out by hand in each test (from the fixture lines), never by calling
the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_cli
from kvplan.verify.log import parse_log
from test_verify import CAL, DATA, MEMINFO, config_dir, fake, from_log_llama3_8b, record, started_lines  # noqa: F401 - fake is a fixture

DEVICE = DATA / "device-h200-2026-11-29"
GEMMA3_REASON = "Can't load image processor for '/tmp/dc/gemma3-27b_eager'"
DEEP = 100_000  # far past Python's recursion limit (~1,000) and kvplan's 64-level JSON limit


def one_error_line(err: str) -> str:
    """The single `error: ...` line of a bad-input exit (an optional hint line may follow)."""
    lines = [s for s in err.splitlines() if s.strip()]
    assert "Traceback" not in err
    assert lines and lines[0].startswith("error: "), err
    assert all(s.lstrip().startswith("hint:") for s in lines[1:]), err
    return lines[0]


# --- new 1: deeply nested JSON in --from-log ------------------------------------------------------


def test_deep_json_record_is_bad_input(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * DEEP + "\n")
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --from-log: {p}: ") and "nested" in line


def test_deep_json_in_a_log_without_json_suffix_is_bad_input(tmp_path):
    p = tmp_path / "deep.log"
    p.write_text("{" * DEEP + "\n")  # starts with "{": read as a JSON record
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --from-log: {p}: ")


@pytest.mark.parametrize("kind", ["KVPLAN_EXACT", "KVPLAN_ENV", "KVPLAN_CONFIG", "KVPLAN_CASE", "KVPLAN_ERROR"])
def test_deep_kvplan_line_in_a_log_is_bad_input(tmp_path, kind):
    p = tmp_path / "deep.log"
    # line 1: a vLLM line; line 2: the hostile payload
    p.write_text("GPU KV cache size: 915,152 tokens\n" + kind + " " + "[" * DEEP + "\n")
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: --from-log: {p}:2: ") and kind in line and "nested" in line


def test_deep_case_line_in_a_log_is_bad_input(tmp_path):
    p = tmp_path / "deep.log"
    p.write_text("CASE {" + '"a": [' * DEEP + "}\n")  # RE_CASE wants a closing brace
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --from-log: {p}:1: ")


def test_deep_kvplan_line_inside_a_record_is_bad_input(tmp_path):
    p = tmp_path / "rec.json"
    p.write_text(json.dumps({"log_excerpt": ["GPU KV cache size: 915,152 tokens", "KVPLAN_EXACT " + "[" * DEEP]}))
    code, out, err = run_cli("verify", "--from-log", str(p))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --from-log: {p}: ")


def test_deep_non_default_args_line_gives_no_traceback(tmp_path):
    p = tmp_path / "deep.log"
    p.write_text("non-default args: {'a': " + "[" * DEEP + "}\n")
    code, out, err = run_cli("verify", "--from-log", str(p), "--gpu", "H200")
    assert code == 2 and out == ""
    one_error_line(err)


def test_parse_log_never_raises_on_a_deep_payload():
    # the live run parses the child's log too: a hostile line is set aside, not raised
    log = parse_log("KVPLAN_EXACT " + "[" * DEEP + "\nGPU KV cache size: 16 tokens\n")
    assert log.exact is None
    assert log.gpu_kv_cache_tokens == 16
    assert len(log.rejected_lines) == 1
    assert log.rejected_lines[0][0] == 1 and "KVPLAN_EXACT" in log.rejected_lines[0][1]


def test_skip_existing_with_a_deep_record_gives_no_traceback(fake, tmp_path):
    cases = tmp_path / "cases.yaml"
    cases.write_text("- name: ok\n  config: " + json.dumps(record("llama3-8b_eager")["config"]) + "\n  engine_args: {max_model_len: 8192, enforce_eager: true}\n")
    out_dir = tmp_path / "rec"
    out_dir.mkdir()
    (out_dir / "ok.json").write_text("[" * DEEP)
    code, out, err = run_cli("verify", "--batch", str(cases), "--record", str(out_dir), "--skip-existing")
    assert "Traceback" not in err
    assert code == 1  # an unreadable record is reported as not passing, not run again


# --- new 2: non-finite numbers in --batch engine_args ---------------------------------------------


@pytest.mark.parametrize(
    "args, where",
    [
        ("{max_model_len: .inf}", "cases.0.engine_args.max_model_len"),
        ("{max_model_len: -.inf}", "cases.0.engine_args.max_model_len"),
        ("{max_model_len: .nan}", "cases.0.engine_args.max_model_len"),
        ("{max_model_len: 1e400}", "cases.0.engine_args.max_model_len"),  # YAML 1.1: a string
        ("{max_model_len: 1.0e+400}", "cases.0.engine_args.max_model_len"),  # YAML float: inf
        ("{max_model_len: 8192.5}", "cases.0.engine_args.max_model_len"),  # not a whole number
        ("{max_num_seqs: .inf}", "cases.0.engine_args.max_num_seqs"),
        ("{gpu_memory_utilization: .nan}", "cases.0.engine_args.gpu_memory_utilization"),
        ("{gpu_memory_utilization: .inf}", "cases.0.engine_args.gpu_memory_utilization"),
    ],
)
def test_batch_non_finite_engine_arg_names_file_case_and_key(args, where, tmp_path, monkeypatch):
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)  # rejected before the environment check
    cases = tmp_path / "cases.yaml"
    cases.write_text(f"cases:\n  - {{name: a, model: x, engine_args: {args}}}\n")
    code, out, err = run_cli("verify", "--batch", str(cases))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --batch: {cases}: {where}: ")


def test_batch_non_finite_default_engine_arg_names_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    cases = tmp_path / "cases.yaml"
    cases.write_text("defaults: {engine_args: {max_model_len: .inf}}\ncases:\n  - {name: a, model: x}\n")
    code, out, err = run_cli("verify", "--batch", str(cases))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --batch: {cases}: defaults.engine_args.max_model_len: ")


@pytest.mark.parametrize(
    "defaults, key",
    [
        ("{tolerance: .inf}", "defaults.tolerance"),
        ("{tolerance: .nan}", "defaults.tolerance"),
        ("{tolerance: 1.0e+30}", "defaults.tolerance"),
        ("{timeout: .inf}", "defaults.timeout"),
        ("{timeout: .nan}", "defaults.timeout"),
    ],
)
def test_batch_non_finite_defaults(defaults, key, tmp_path, monkeypatch):
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    cases = tmp_path / "cases.yaml"
    cases.write_text(f"defaults: {defaults}\ncases:\n  - {{name: a, model: x}}\n")
    code, out, err = run_cli("verify", "--batch", str(cases))
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: --batch: {cases}: {key}: ")


# --- new 4: NaN, infinite and negative flags --------------------------------------------------------


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--tolerance", "nan"),
        ("--tolerance", "inf"),
        ("--tolerance", "1e30"),
        ("--tolerance", "-1"),
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--timeout", "0"),
        ("--timeout", "-5"),
    ],
)
def test_bad_number_flags_exit_2_before_the_environment(flag, value, monkeypatch):
    # without a stand-in child and without torch, a run that got past the flags would exit 3
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    code, out, err = run_cli("verify", "meta-llama/Meta-Llama-3-8B", flag, value)
    assert code == 2 and out == ""
    assert one_error_line(err).startswith(f"error: {flag}: ")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_bad_deadline_exits_2_before_the_environment(value, tmp_path, monkeypatch):
    monkeypatch.delenv("KVPLAN_VERIFY_CHILD", raising=False)
    cases = tmp_path / "cases.yaml"
    cases.write_text("cases:\n  - {name: a, model: meta-llama/Meta-Llama-3-8B}\n")
    code, out, err = run_cli("verify", "--batch", str(cases), "--deadline", value)
    assert code == 2 and out == ""
    assert one_error_line(err).startswith("error: --deadline: ")


def test_tolerance_nan_on_a_log_is_refused_not_a_mismatch(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(record("llama3-8b_eager")["log_excerpt"]) + "\n")
    model = config_dir(tmp_path, "llama3-8b_eager")
    code, out, err = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--tolerance", "nan")
    assert code == 2 and out == ""
    assert one_error_line(err).startswith("error: --tolerance: ")


def test_tolerance_zero_and_hundred_are_accepted(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(record("llama3-8b_eager")["log_excerpt"]) + "\n")
    model = config_dir(tmp_path, "llama3-8b_eager")
    for value in ("0", "100"):
        code, out, err = run_cli("verify", str(model), "--from-log", str(log), "--gpu", "H200", "--usage", "llm",
                                 "--max-model-len", "8192", "--enforce-eager", "--tolerance", value, "--format", "json")
        assert code in (0, 1), err
        assert json.loads(out)["tolerance_pct"] == float(value)


# --- new 15: a setup failure is not a memory mismatch ---------------------------------------------


def test_gemma3_missing_preprocessor_is_a_setup_failure():
    log = DEVICE / "gemma3-27b_eager.log"
    code, out, err = run_cli("verify", "--from-log", str(log))
    assert code == 3, (out, err)  # environment/setup (docs/verify.md), not kvplan's error (1)
    flat = " ".join(out.split())  # rich wraps long lines
    assert "FAILED: vLLM failed before sizing memory: " + GEMMA3_REASON in flat
    assert "not a memory prediction" in flat
    assert "kvplan predicted it would start" not in out and "REFUSED" not in out
    code, out, _ = run_cli("verify", "--from-log", str(log), "--format", "json")
    doc = json.loads(out)
    assert code == 3
    assert doc["status"] == "failed"
    assert doc["failure"].startswith("vLLM failed before sizing memory: " + GEMMA3_REASON)
    assert doc["failure"].endswith("; not a memory prediction")


def test_gemma3_record_json_is_a_setup_failure_too():
    code, out, _ = run_cli("verify", "--from-log", str(DEVICE / "gemma3-27b_eager.json"), "--format", "json")
    assert code == 3
    assert json.loads(out)["status"] == "failed"


@pytest.mark.parametrize(
    "error_type, message",
    [
        ("OSError", "Can't load tokenizer for '/tmp/m'. Make sure it is the correct path to a directory containing all relevant files"),
        ("ImportError", "cannot import name 'Foo' from 'transformers'"),
        ("ValueError", "Model architectures ['FooForCausalLM'] are not supported for now."),
    ],
)
def test_live_run_non_memory_failure_exits_3(fake, tmp_path, error_type, message):
    model = config_dir(tmp_path, "llama3-8b_eager")
    lines = [MEMINFO, "Traceback (most recent call last):", f"{error_type}: {message}",
             "KVPLAN_ERROR " + json.dumps({"kind": "refused", "type": error_type, "message": message})]
    fake("llama", lines, exit_code=1)
    code, out, err = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager",
                             "--name", "llama", "--format", "json")
    assert code == 3, (out, err)
    doc = json.loads(out)
    assert doc["status"] == "failed"
    assert doc["failure"] == f"vLLM failed before sizing memory: {message}; not a memory prediction"


@pytest.mark.parametrize(
    "message",
    [
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        "The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (100)",
        "max_model_len is larger than what fits",
    ],
)
def test_live_run_memory_refusal_stays_exit_1(fake, tmp_path, message):
    model = config_dir(tmp_path, "llama3-8b_eager")
    lines = [MEMINFO, "Traceback (most recent call last):", f"ValueError: {message}",
             "KVPLAN_ERROR " + json.dumps({"kind": "refused", "type": "ValueError", "message": message})]
    fake("llama", lines, exit_code=1)
    code, out, _ = run_cli("verify", str(model), "--dummy-weights", "--max-model-len", "8192", "--enforce-eager",
                           "--name", "llama", "--format", "json")
    assert code == 1
    assert json.loads(out)["status"] == "refused"


def test_batch_goes_on_after_a_setup_failure(fake, tmp_path):
    cfg = json.dumps(record("llama3-8b_eager")["config"])
    cases = tmp_path / "cases.yaml"
    cases.write_text(f"cases:\n  - name: broken\n    config: {cfg}\n  - name: ok\n    config: {cfg}\n"
                     "defaults: {engine_args: {max_model_len: 8192, enforce_eager: true}}\n")
    msg = "Can't load tokenizer for '/tmp/m'"
    fake("broken", [MEMINFO, "KVPLAN_ERROR " + json.dumps({"kind": "refused", "type": "OSError", "message": msg})], exit_code=1)
    fake("ok", started_lines("llama3-8b_eager"))
    code, out, _ = run_cli("verify", "--batch", str(cases), "--format", "json")
    docs = json.loads(out)
    assert [(d["name"], d["status"], d["exit_code"]) for d in docs] == [("broken", "failed", 3), ("ok", "pass", 0)]
    assert code == 1  # docs/verify.md: a batch exits 1 when any case did not pass


# --- new 20: a self-contradictory log ---------------------------------------------------------------


def _llama_log(tmp_path: Path, tokens_text: str) -> Path:
    lines = [s.replace("GPU KV cache size: 915,152 tokens", f"GPU KV cache size: {tokens_text} tokens")
             for s in record("llama3-8b_eager")["log_excerpt"]]
    p = tmp_path / "vllm.log"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("tokens_text", ["99,999,999,999,999,999,999,999,999", "1,000"])
def test_self_contradictory_log_is_not_silent(tmp_path, tokens_text):
    # RESULT num_gpu_blocks=57197 block_size=16: one attention group, so vLLM's "GPU KV cache
    # size" line must say 57,197 x 16 = 915,152 tokens.
    log = _llama_log(tmp_path, tokens_text)
    code, out, _ = from_log_llama3_8b(tmp_path, log, "--format", "json")
    doc = json.loads(out)
    assert doc["compared_on"] == "num_gpu_blocks"  # the block count wins
    assert doc["measured"]["num_gpu_blocks"] == 57_197
    notes = [n for n in doc["notes"] if "contradicts itself" in n]
    assert len(notes) == 1, doc["notes"]
    assert f"GPU KV cache size: {tokens_text} tokens" in notes[0]
    assert "57,197 blocks x 16 = 915,152 tokens" in notes[0]
    assert "num_gpu_blocks wins" in notes[0]
    assert doc["log_consistent"] is False
    code2, out2, _ = from_log_llama3_8b(tmp_path, log)
    assert code2 == code
    assert "contradicts itself" in " ".join(out2.split())


def test_consistent_logs_get_no_contradiction_note(tmp_path):
    code, out, _ = from_log_llama3_8b(tmp_path, _llama_log(tmp_path, "915,152"), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["log_consistent"] is True
    assert not [n for n in doc["notes"] if "contradicts itself" in n]


@pytest.mark.parametrize("name", ["gemma2-9b_eager", "mistral-7b_eager", "qwen3-next-80b_fp8_eager"])
def test_hybrid_and_sliding_window_logs_are_consistent(name):
    # vLLM reports fewer tokens than blocks x block_size when layers fall in several KV-cache
    # groups (gemma2: 340,707 tokens for 42,630 x 16 = 682,080, about one half for its 2 groups)
    code, out, err = run_cli("verify", "--from-log", str(CAL / f"{name}.json"), "--gpu", "H200", "--format", "json")
    doc = json.loads(out)
    assert doc["log_consistent"] is True, doc["notes"]
