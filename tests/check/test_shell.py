"""`vllm serve` in shell scripts: redirections, script arguments, NAME=value prefixes, comments in
continuations, a --config file the script names, which model wins, stray words.

Every expected value is worked out by hand in the comments; fixtures are in
tests/data/check/review3/ (and tests/data/check/repo/ for the kvplan.yaml case).
"""

from __future__ import annotations



from tests.check.common import MODEL, R3, _diags, _figures, _json, _write



# -- old 8: a file that a kvplan.yaml of the same run covers takes the manifest's gpu ------------


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


# -- old 18: no "fp8 KV cache" hint when the KV cache is fp8 already ----------------------------


# -- old 25 leftovers ---------------------------------------------------------------------------


# -- new 3: utilization above the free memory at start-up ---------------------------------------


# -- new 22: duplicate keys in a --config YAML --------------------------------------------------


# -- new 18/19: --junit-xml to a file descriptor or through a dangling symlink ---------------------


# -- old 23: the --config schema is as strict as check ------------------------------------------


def test_script_positional_model_wins_over_the_config_files_model(tmp_path):
    # vLLM 0.26.0 entrypoints/cli/serve.py: `args.model = args.model_tag` -> the positional wins,
    # no exit; so this is no "model given twice" error, and the model is the positional one.
    (tmp_path / "c.yaml").write_text("model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 8192\n")
    (tmp_path / "s.sh").write_text("# kvplan: gpu=H100\nvllm serve meta-llama/Llama-3.1-8B-Instruct --config c.yaml\n")
    code, doc = _json(str(tmp_path / "s.sh"))
    assert [d for d in doc["diagnostics"] if d["severity"] == "error"] == []
    assert doc["files"][0]["deployments"][0]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert code == 0


def test_unknown_key_in_a_config_file_is_not_a_second_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.yaml", "some_unknown_key: value-one\nmax-model-len: 8192\n")
    _write(tmp_path / "e.sh", f"vllm serve {MODEL} --config c.yaml\n")
    code, doc = _json("e.sh", "--gpu", "H100")
    texts = [d["message"] for d in doc["diagnostics"]]
    assert not any("given twice" in t for t in texts), texts
    assert not any("value-one" in t for t in texts), texts
    (u,) = _diags(doc, "unknown-flag")
    assert u["key"] == "some_unknown_key" and u["line"] == 1
    assert code == 1


def test_unknown_key_first_in_a_config_file_without_a_positional_model(tmp_path, monkeypatch):
    # `vllm serve --config c.yaml` where c.yaml names the model: the unknown key's value is
    # its value, not the positional model
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "c.yaml", f"some_unknown_key: value-two\nmodel: {MODEL}\nmax-model-len: 8192\n")
    _write(tmp_path / "e.sh", "vllm serve --config c.yaml\n")
    code, doc = _json("e.sh", "--gpu", "H100")
    texts = [d["message"] for d in doc["diagnostics"]]
    assert not any("given twice" in t for t in texts), texts
    assert doc["files"][0]["deployments"][0]["model"] == MODEL


def test_a_real_second_model_is_still_reported(tmp_path):
    sh = _write(tmp_path / "e.sh", f"vllm serve {MODEL} --model meta-llama/Meta-Llama-3-8B\n")
    code, doc = _json(str(sh), "--gpu", "H100")
    assert any("given twice" in d["message"] for d in doc["diagnostics"]), doc["diagnostics"]
    assert code == 1
