"""`kvplan check` regressions from docs/review/fresh-eyes-3.md (old items refer to fresh-eyes-2).

Every expected value is worked out by hand in the comments; fixtures are in
tests/data/check/review3/ (and tests/data/check/repo/ for the kvplan.yaml case).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import run_cli

DATA = Path(__file__).parent / "data" / "check"
R3 = DATA / "review3"


def _json(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "json")
    return code, json.loads(out)


def _diags(doc: dict, check_id: str) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == check_id]


def _figures(doc: dict) -> dict:
    deps = [d for f in doc["files"] for d in f["deployments"]]
    assert len(deps) == 1, deps
    return deps[0]["figures"]


# -- old 8: a file that a kvplan.yaml of the same run covers takes the manifest's gpu ------------


def test_file_covered_by_manifest_in_same_run_takes_its_gpu(monkeypatch):
    monkeypatch.chdir(DATA / "repo")
    code, doc = _json("deploy/chat.yaml", "kvplan.yaml")
    # deploy/chat.yaml has no GPU of its own; kvplan.yaml says `config: deploy/chat.yaml, gpu: H100`
    assert _diags(doc, "gpu-missing") == []
    # ... and it is checked once, as the manifest's deployment "chat", not again as a bare file
    assert [f["file"] for f in doc["files"]] == ["kvplan.yaml"]
    chat = next(d for d in doc["files"][0]["deployments"] if d["name"] == "chat")
    assert chat["gpu"] == "h100-sxm"
    # the only error left is kvplan.yaml's own `tiny` target (line 24: max_gpu_memory_utilization 0.85)
    errors = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert [(e["file"], e["line"], e["check_id"]) for e in errors] == [("kvplan.yaml", 24, "max-gpu-memory-utilization")]
    assert code == 1


def test_manifest_given_first_also_covers_the_file(monkeypatch):
    monkeypatch.chdir(DATA / "repo")
    code, doc = _json("kvplan.yaml", "deploy/chat.yaml")
    assert _diags(doc, "gpu-missing") == [] and [f["file"] for f in doc["files"]] == ["kvplan.yaml"]
    assert code == 1


# -- old 9: shell parsing -----------------------------------------------------------------------


def test_redirections_end_the_argument_list():
    # `--max-model-len 2048 > log 2>&1`: 2048 is the value; `>` starts a redirection
    code, doc = _json(str(R3 / "redirect.sh"))
    assert _diags(doc, "invalid-value") == []
    assert _figures(doc)["max_model_len"] == 2048
    assert code == 0


def test_script_arguments_are_an_unresolved_warning():
    # `exec vllm serve M --max-model-len 4096 "$@"`: the script's arguments are unknown here
    code, doc = _json(str(R3 / "exec-args.sh"))
    assert _diags(doc, "invalid-value") == []
    (w,) = _diags(doc, "unresolved-value")
    assert w["severity"] == "warning" and w["line"] == 3 and w["key"] == "$@"
    assert "unresolved argument" in w["message"]
    assert _figures(doc)["max_model_len"] == 4096
    assert code == 0


def test_env_assignment_prefix_is_honoured():
    # Qwen2.5-7B-Instruct: max_position_embeddings 32768; 65536 is over it, but the command sets
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, so vLLM accepts it (with a warning): not an error.
    code, doc = _json(str(R3 / "env-prefix.sh"))
    (d,) = _diags(doc, "max-model-len-over-limit")
    assert d["severity"] == "warning" and d["line"] == 3 and d["key"] == "--max-model-len"
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in d["message"]
    assert code == 0


def test_backtick_comment_in_a_continuation_is_skipped():
    # line 4 is `# comment` inside backticks (expands to nothing); line 6 `-tp 3` is still read:
    # Qwen2.5-7B has 28 attention heads, 28 % 3 != 0 -> tp-divisibility error at line 6
    code, doc = _json(str(R3 / "backtick-comment.sh"))
    assert _diags(doc, "invalid-value") == []
    (tp,) = _diags(doc, "tp-divisibility")
    assert (tp["line"], tp["key"], tp["severity"]) == (6, "-tp", "error")
    assert code == 1


# -- old 10: `vllm serve --config FILE` in a script ----------------------------------------------


def test_script_reads_the_config_file_and_flags_override_it():
    # serve.sh: `vllm serve --config deploy/chat.yaml -tp 3` (relative to the script's directory);
    # chat.yaml gives the model (Qwen2.5-7B, line 1) and tensor-parallel-size 2 (line 3); the
    # command line's -tp 3 wins, and 28 heads % 3 != 0 -> tp-divisibility at serve.sh:3.
    code, doc = _json(str(R3 / "script-config" / "serve.sh"))
    assert _diags(doc, "model-missing") == []
    deps = doc["files"][0]["deployments"]
    assert deps[0]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    (tp,) = _diags(doc, "tp-divisibility")
    assert tp["file"].endswith("serve.sh") and tp["line"] == 3 and tp["key"] == "-tp"
    assert _diags(doc, "duplicate-flag") == []  # a command-line flag over the file is vLLM's precedence
    assert code == 1


def test_script_config_findings_point_into_the_config_file(tmp_path):
    (tmp_path / "c.yaml").write_text("model: Qwen/Qwen2.5-7B-Instruct\nmax-modl-len: 8192\n")
    (tmp_path / "s.sh").write_text("# kvplan: gpu=H100\nvllm serve --config c.yaml\n")
    code, doc = _json(str(tmp_path / "s.sh"))
    (u,) = _diags(doc, "unknown-flag")
    assert u["file"].endswith("c.yaml") and u["line"] == 2 and u["key"] == "max-modl-len"
    assert code == 1


def test_script_config_file_missing_is_reported_at_the_flag(tmp_path):
    (tmp_path / "s.sh").write_text("# kvplan: gpu=H100\nvllm serve --config nowhere.yaml\n")
    code, doc = _json(str(tmp_path / "s.sh"))
    errs = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert any(d["line"] == 2 and d["key"] == "--config" and "nowhere.yaml" in d["message"] for d in errs)


# -- old 11: vLLM 0.26.0 load_config_file drops `false` (utils/argparse_utils.py:573-575) --------


def test_false_is_dropped_as_vllm_0_26_0_does(tmp_path):
    # 0.26.0: `if isinstance(value, bool): if value: processed_args.append("--" + key)` -> a false
    # value adds nothing, so a default-on switch stays on.
    (tmp_path / "c.yaml").write_text("# kvplan: gpu=H100\nmodel: meta-llama/Llama-3.1-8B-Instruct\nenable-prefix-caching: false\n")
    code, doc = _json(str(tmp_path / "c.yaml"))
    (w,) = _diags(doc, "false-dropped")
    assert w["line"] == 3 and code == 0


# -- old 18: no "fp8 KV cache" hint when the KV cache is fp8 already ----------------------------


def test_min_concurrency_hint_does_not_suggest_fp8_when_already_fp8():
    code, doc = _json(str(R3 / "fp8-min-concurrency.yaml"))
    (d,) = _diags(doc, "min-concurrency")
    assert d["line"] == 4 and d["severity"] == "error"
    assert "fp8" not in (d["hint"] or "")
    assert code == 1


# -- old 25 leftovers ---------------------------------------------------------------------------


def test_empty_yaml_is_not_labelled_command():
    code, out, _ = run_cli("check", str(R3 / "empty" / "empty.yaml"))
    first = out.splitlines()[0]
    assert "(command)" not in first and first.endswith("(yaml)")
    assert code == 1


def test_header_and_info_line_use_the_same_concurrency():
    # A10G, Llama-3.1-8B, max-model-len 8192: 2,317 blocks x 16 = 37,072 tokens;
    # 37,072 / 8,192 = 4.5254 -> "4.52" (truncated to 2 decimals) in the header and in the note
    code, out, _ = run_cli("check", str(R3 / "a10g-seqs2.yaml"))
    assert "37,072 tokens, 4.52 x 8192-token requests" in out
    info = next(x for x in out.splitlines() if "max-num-seqs 2 caps" in x)
    assert "below the 4.52 requests" in info
    assert code == 0


# -- new 3: utilization above the free memory at start-up ---------------------------------------


def test_utilization_1_reports_free_memory_at_the_utilization_line():
    code, doc = _json(str(R3 / "util-1.yaml"))
    assert _diags(doc, "max-model-len-fits") == []
    (d,) = _diags(doc, "gpu-memory-utilization-range")
    assert d["line"] == 2 and d["key"] == "gpu-memory-utilization" and d["severity"] == "error"
    assert "is free when vLLM starts" in d["message"] and "\n" not in d["message"]
    assert code == 1


# -- new 22: duplicate keys in a --config YAML --------------------------------------------------


def test_duplicate_key_in_config_yaml_warns_with_both_lines():
    # `model:` on lines 2 and 4; yaml.safe_load (vLLM's loader) keeps the last one
    code, doc = _json(str(R3 / "duplicate-model.yaml"))
    (d,) = _diags(doc, "duplicate-flag")
    assert d["severity"] == "warning" and d["line"] == 4 and d["key"] == "model"
    assert "line 2" in d["message"] and "line 4" in d["message"]
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert code == 0


# -- new 18/19: --junit-xml to a file descriptor or through a dangling symlink ---------------------


@pytest.mark.parametrize("target", ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/1"])
def test_junit_xml_refuses_standard_streams(target):
    code, out, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", target)
    assert code == 2 and out == ""
    assert err.startswith("error: --junit-xml: ") and target in err and "standard" in err


def test_junit_xml_refuses_a_dangling_symlink(tmp_path):
    gone = tmp_path / "missing-dir" / "report.xml"
    link = tmp_path / "link.xml"
    link.symlink_to(gone)
    code, out, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2
    assert f"is a broken symbolic link (-> {gone})" in err
    assert not gone.exists() and not gone.parent.exists()


def test_junit_xml_dangling_symlink_into_existing_dir_is_not_created(tmp_path):
    gone = tmp_path / "report.xml"
    link = tmp_path / "link.xml"
    link.symlink_to(gone)
    code, _, err = run_cli("check", str(DATA / "pass/chat-llama8b.yaml"), "--gpu", "H100", "--junit-xml", str(link))
    assert code == 2 and "broken symbolic link" in err and not gone.exists()


# -- old 23: the --config schema is as strict as check ------------------------------------------


def _schema_errors(instance: dict) -> list:
    jsonschema = pytest.importorskip("jsonschema")
    code, out, _ = run_cli("schema")
    assert code == 0
    validator = jsonschema.Draft202012Validator(json.loads(out))
    return list(validator.iter_errors(instance))


@pytest.mark.parametrize(
    "instance",
    [
        {"model": "m", "bogus-flag": 1},  # check: unknown-flag error
        {"model": "m", "max-model-len": "abc"},  # check: invalid-value
        {"model": "m", "gpu-memory-utilization": 1.5},  # check: outside (0, 1]
        {"model": "m", "gpu-memory-utilization": 0},
        {"model": "m", "tensor-parallel-size": -3},
        {"model": "m", "max-num-seqs": 0},
    ],
)
def test_schema_rejects_what_check_rejects(instance):
    assert _schema_errors(instance)


@pytest.mark.parametrize(
    "instance",
    [
        {"model": "m", "max-model-len": 8192, "gpu-memory-utilization": 1.0, "tensor-parallel-size": 2},
        {"model": "m", "max-model-len": "32k"},  # vLLM reads human-readable sizes
        {"model": "m", "max-model-len": -1},  # -1: fit the largest length (vLLM 0.26.0)
        {"model": "m", "max_model_len": 8192},  # vLLM turns underscores into dashes
        {"model": "m", "no-enable-prefix-caching": True, "kvplan": {"gpu": "H100"}},
    ],
)
def test_schema_accepts_valid_configs(instance):
    assert _schema_errors(instance) == []


def test_script_positional_model_wins_over_the_config_files_model(tmp_path):
    # vLLM 0.26.0 entrypoints/cli/serve.py: `args.model = args.model_tag` -> the positional wins,
    # no exit; so this is no "model given twice" error, and the model is the positional one.
    (tmp_path / "c.yaml").write_text("model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 8192\n")
    (tmp_path / "s.sh").write_text("# kvplan: gpu=H100\nvllm serve meta-llama/Llama-3.1-8B-Instruct --config c.yaml\n")
    code, doc = _json(str(tmp_path / "s.sh"))
    assert [d for d in doc["diagnostics"] if d["severity"] == "error"] == []
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert code == 0
