"""Every release 0.20.0 to 0.34.x (docs/versions.md "Every release"): the fingerprints of the
vLLM functions kvplan's rules restate, the verdict per release, the per-release flag tables,
and the committed data and docs table agreeing with the tool that wrote them."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from kvplan.engines.vllm import versions
from kvplan.engines.vllm.serve_flags import catalogue
from kvplan.errors import KvplanError
from tests.check.common import check, write
from tests.helpers import run_cli

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fingerprint_core as fc  # noqa: E402
import vllm_fingerprints as tool  # noqa: E402

MODEL = "meta-llama/Meta-Llama-3-8B"


# --- the fingerprint of one function ---------------------------------------------------------------

WORKER = '''
class Worker:
    def determine_available_memory(self) -> int:
        """Profile, then give the rest to the KV cache."""
        used = self.profile()  # peak of the profiling run
        return self.requested - used
'''


def fp(text: str, name: str = "Worker.determine_available_memory"):
    return fc.fingerprint_source(textwrap.dedent(text), name)


def test_comments_docstrings_and_formatting_do_not_change_a_fingerprint():
    reformatted = '''
    # a new comment above the class
    class Worker:

        def determine_available_memory(
            self,
        ) -> int:
            """A rewritten docstring."""
            used = self.profile()
            return (self.requested
                    - used)  # same arithmetic
    '''
    assert fp(WORKER) == fp(reformatted)


def test_a_changed_body_changes_the_fingerprint_and_another_function_does_not_count():
    changed = WORKER.replace("self.requested - used", "self.requested - used - self.graph_bytes")
    assert fp(changed) != fp(WORKER)
    other = WORKER + "\n    def init_device(self):\n        return 1\n"
    assert fp(other) == fp(WORKER)  # a new method beside it is not the function


def test_an_absent_function_has_no_fingerprint_and_names_look_inside_classes_and_assignments():
    assert fp(WORKER, "Worker.init_device") is None
    assert fc.fingerprint_source(None, "anything") is None
    text = 'from typing import Literal\nCacheDType = Literal["auto", "fp8"]\nclass C:\n    block_size: int = 16\n'
    assert fc.fingerprint_source(text, "CacheDType") is not None
    assert fc.fingerprint_source(text, "C.block_size") != fc.fingerprint_source(text.replace("16", "64"), "C.block_size")
    assert fc.literal_values(fc.TreeFiles(Path("/nonexistent")), "x.py", "X") is None


def test_serve_flags_follow_vllms_kwargs_rules(tmp_path):
    # a two-file release: arity by the rules of engine/arg_utils.py _compute_kwargs, worked out by hand
    (tmp_path / "config").mkdir()
    (tmp_path / "engine").mkdir()
    (tmp_path / "config" / "cache.py").write_text(textwrap.dedent('''
        from typing import Literal
        CacheDType = Literal["auto", "fp8"]
        @config
        class Sub:
            x: int = 0
        @config
        class CacheConfig:
            block_size: int | None = None            # value
            enable_prefix_caching: bool = True      # --x / --no-x
            cache_dtype: CacheDType = "auto"         # Literal -> value
            sizes: list[int] | None = None           # nargs +
            sub: Sub | None = None                   # a dataclass -> JSON
            hf_token: bool | str | None = None       # optional value
        '''))
    (tmp_path / "engine" / "arg_utils.py").write_text(textwrap.dedent('''
        class EngineArgs:
            @staticmethod
            def add_cli_args(parser):
                cache_kwargs = get_kwargs(CacheConfig)
                g = parser.add_argument_group("cache")
                g.add_argument("--block-size", **cache_kwargs["block_size"])
                g.add_argument("--enable-prefix-caching", **{**cache_kwargs["enable_prefix_caching"], "default": None})
                g.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                g.add_argument("--sizes", **cache_kwargs["sizes"])
                g.add_argument("--sub", "-s", **cache_kwargs["sub"])
                g.add_argument("--hf-token", **cache_kwargs["hf_token"])
                g.add_argument("--headless", action="store_true")
                return parser
        '''))
    arities, shorts = fc.serve_flags(fc.TreeFiles(tmp_path))
    assert arities == {"block-size": "value", "enable-prefix-caching": "negatable", "kv-cache-dtype": "value",
                       "sizes": "list", "sub": "json", "hf-token": "optional", "headless": "bool"}
    assert shorts == {"-s": "sub"}
    assert fc.literal_values(fc.TreeFiles(tmp_path), "config/cache.py", "CacheDType") == ["auto", "fp8"]


def test_the_stored_0_26_flags_are_the_hand_made_table():
    # the hand-pasted table of engines/vllm/v0_26/flag_catalogue.py is an independent reading of
    # vLLM 0.26.0; the one difference: quantization_config is typed `dict | QuantizationConfigArgs
    # | None` in 0.26.0 config/model.py, a config dataclass, which _compute_kwargs reads as JSON
    from kvplan.engines.vllm.v0_26 import flag_catalogue as hand

    expected = {n: k for k, names in hand.FLAGS.items() for n in names.split()}
    expected["quantization-config"] = "json"
    stored = {n: k for k, names in versions.release_flag_tables()["0.26.0"].items() for n in names.split()}
    assert stored == expected
    assert versions.release_data()["releases"]["0.26.0"]["short"] == {k: v for k, v in hand.SHORT.items() if k != "-h"}
    assert tuple(versions.release_data()["releases"]["0.26.0"]["cache_dtypes"]) == hand.CACHE_DTYPES


# --- the verdict per release -------------------------------------------------------------------------

def _fake_data(monkeypatch, rows: dict, modelled: dict):
    keys = ["a.py::f", "a.py::g", "b.py::Worker.determine_available_memory"]
    data = {"keys": keys, "modelled": modelled,
            "releases": {v: {"fingerprints": r, "flags": {}} for v, r in rows.items()}}
    monkeypatch.setattr(versions, "release_data", lambda: data)
    return data


def test_identical_fingerprints_serve_a_release_as_the_modelled_one(monkeypatch):
    _fake_data(monkeypatch, {"0.26.0": ["1", "2", "3"], "0.27.1": ["1", "2", "3"], "0.33.0": ["9", "9", "9"]},
               {"0.26.0": ["a.py::f", "a.py::g", "b.py::Worker.determine_available_memory"], "0.33.0": ["a.py::f"]})
    choice = versions.release_choice("0.27.1")
    assert (choice.version, choice.wanted, choice.identical, choice.substituted) == ("0.26.0", "0.27.1", True, False)
    assert versions.release_verdict("0.27.1") == "sizing source identical to vLLM 0.26.0"
    assert choice.warning() is None and choice.evidence_note() is None


def test_a_changed_function_is_named_and_the_fewest_changes_win(monkeypatch):
    _fake_data(monkeypatch, {"0.26.0": ["1", "2", "3"], "0.30.0": ["1", "7", "3"], "0.33.0": ["5", "6", "8"]},
               {"0.26.0": ["a.py::f", "a.py::g", "b.py::Worker.determine_available_memory"],
                "0.33.0": ["a.py::f", "a.py::g", "b.py::Worker.determine_available_memory"]})
    choice = versions.release_choice("0.30.0")  # nearer to 0.33.0, but one change against 0.26.0 and three against 0.33.0
    assert (choice.version, choice.basis, choice.changed) == ("0.26.0", "derived", ("a.py::g",))
    assert choice.substituted and "differs from 0.30.0's in 1 function (g)" in choice.warning()
    assert "vLLM 0.30.0 itself, approximated by the rules of 0.26.0" in choice.evidence_note()


def test_a_tie_goes_to_the_nearer_release_and_a_missing_budget_function_refuses(monkeypatch):
    both = ["a.py::f", "a.py::g", "b.py::Worker.determine_available_memory"]
    _fake_data(monkeypatch, {"0.26.0": ["1", "2", "3"], "0.31.0": ["1", "x", "3"], "0.32.0": [None, None, None],
                             "0.33.0": ["1", "x", "y"]}, {"0.26.0": both, "0.33.0": both})
    assert versions.release_choice("0.31.0").version == "0.33.0"  # one change each; 0.33.0 is 2 minors away, 0.26.0 5
    assert versions.release_choice("0.32.0") is None
    assert versions.release_verdict("0.32.0").startswith("refused: vLLM 0.32.0 has no Worker.determine_available_memory")
    with pytest.raises(KvplanError, match="refuses vLLM 0.32.0"):
        versions.for_flag("0.32.0")


def test_the_stored_releases_map_as_their_sources_say():
    # 0.33.0 moved get_kv_cache_configs from v1/core/kv_cache_utils.py to kv_cache_planning.py
    # (read in /work/vllm-src): absent in one file, present in the other
    data = versions.release_data()
    fps = {v: dict(zip(data["keys"], r["fingerprints"])) for v, r in data["releases"].items()}
    assert fps["0.26.0"]["v1/core/kv_cache_utils.py::get_kv_cache_configs"] is not None
    assert fps["0.33.0"]["v1/core/kv_cache_utils.py::get_kv_cache_configs"] is None
    assert fps["0.33.0"]["v1/core/kv_cache_planning.py::get_kv_cache_configs"] is not None
    # every release 0.20.0 ... 0.34.0 was on the index; each is served, none refused
    assert sorted(data["releases"], key=versions._key)[0] == "0.20.0"
    for v in ("0.20.0", "0.22.1", "0.27.1", "0.30.0", "0.32.0", "0.34.0"):
        assert versions.release_choice(v) is not None, v
    assert versions.release_choice("0.26.0").wanted is None  # a modelled release is itself
    assert versions.release_choice("0.27.1").version == "0.26.0"
    assert versions.release_choice("0.32.0").version == "0.33.0"
    # a patch release with the same sources as its .0: identical once that .0 is modelled
    assert versions.changed_against("0.27.1", "0.26.0") == versions.changed_against("0.27.0", "0.26.0")


def test_a_release_identical_to_a_newly_modelled_one_is_served_as_it(monkeypatch):
    # 0.27.1's stored fingerprints equal 0.27.0's: were 0.27.0 modelled (with 0.26.0's tables),
    # 0.27.1 would be served by it as identical
    data = json.loads(json.dumps(versions.release_data()))
    data["modelled"]["0.27.0"] = data["modelled"]["0.26.0"]
    monkeypatch.setattr(versions, "release_data", lambda: data)
    monkeypatch.setitem(versions.SUPPORTED, "0.27.0", versions.SUPPORTED["0.26.0"])
    choice = versions.release_choice("0.27.1")
    assert (choice.version, choice.identical) == ("0.27.0", True)
    assert choice.label() == "vLLM 0.27.1, sizing source identical to vLLM 0.27.0 (--vllm-version)"
    from kvplan.engines.vllm.rules import Evidence

    evidence = choice.apply_to(Evidence("0.27.0", 3))
    assert evidence.checked and evidence.label() == ("sizing source identical to vLLM 0.27.0 (no start of 0.27.1 itself); "
                                                     "its rules: calibrated on 3 real vLLM 0.27.0 starts")


# --- the committed data and docs ---------------------------------------------------------------------

def test_the_stored_keys_are_the_rules_tables():
    # a VLLM_SOURCES table changed (or a modelled version was added) without re-running
    # `python benchmarks/vllm_fingerprints.py --refresh`
    data = versions.release_data()
    sources = tool.all_sources()
    assert data["modelled"] == sources
    assert data["keys"] == sorted({k for ks in sources.values() for k in ks})
    missing = {}
    for version, keys in sources.items():
        own = dict(zip(data["keys"], data["releases"][version]["fingerprints"]))
        missing[version] = {k for k in keys if own[k] is None}
    # every function a version's own modules name is in that release; 0.33.0 reuses two 0.26.0
    # modules whose sources are gone from it (read in /work/vllm-src/0.33.0): bitsandbytes.py
    # (v0_26/quantization.py's capability table) and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES
    # (v0_26/family_quirks.py; 0.33.0 runs every model on the V2 runner, v0_33/runner.py)
    assert missing == {
        "0.26.0": set(),
        "0.33.0": {"model_executor/layers/quantization/bitsandbytes.py::BitsAndBytesConfig.get_min_capability",
                   "config/vllm.py::DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"},
        # 0.34.0 reuses 0.26.0's family quirks too, and 0.33.0's add-on rules, whose runner choice
        # and V1 proposer are gone from 0.34.0 (it removed the V1 model runner: read in
        # /work/vllm-src/0.34.0, no _get_v2_model_runner_unsupported_features, no v1/spec_decode/
        # llm_base_proposer.py); its speculative-decoding rules are labelled derived, never checked
        "0.34.0": {"config/vllm.py::DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES",
                   "config/vllm.py::VllmConfig._get_v2_model_runner_unsupported_features",
                   "v1/spec_decode/llm_base_proposer.py::SpecDecodeBaseProposer.load_model"},
    }


def test_the_docs_table_is_the_tools():
    text = (ROOT / "docs" / "versions.md").read_text()
    table = text.split(tool.TABLE_BEGIN, 1)[1].split(tool.TABLE_END, 1)[0].strip()
    assert table == tool.docs_table()
    assert "| 0.27.1 | 0.26.0 | derived from vLLM 0.26.0's rules" in table


# --- the CLI ------------------------------------------------------------------------------------------

def test_vllm_version_0_30_0_is_served_by_0_33_0_labelled_approximate():
    code, out, err = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", "--vllm-version", "0.30.0",
                             "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["vllm"] == {"version": "0.33.0", "reason": "--vllm-version", "requested": "0.30.0"}
    ev = doc["evidence"]
    assert ev["checked"] is False
    assert ev["unchecked"][0].startswith("vLLM 0.30.0 itself, approximated by the rules of 0.33.0: its sizing source "
                                         "differs in ")
    assert ev["label"].startswith("derived from the source, not yet checked on hardware: vLLM 0.30.0 itself")
    (warning,) = [w for w in doc["warnings"] if w.startswith("vLLM 0.30.0")]
    assert "Worker.determine_available_memory" in warning and warning.endswith("the numbers are approximate")
    code, out, _ = run_cli("estimate", MODEL, "--gpu", "H200", "--max-model-len", "8192", "--vllm-version", "0.30.0")
    assert code == 0 and "approximated by vLLM 0.33.0's rules" in " ".join(out.split())


def test_vllm_version_outside_the_read_releases_is_refused():
    code, out, err = run_cli("estimate", MODEL, "--gpu", "H200", "--vllm-version", "0.19.1")
    assert code == 2 and "--vllm-version" in err and "0.20.0 to" in err and "Traceback" not in out + err


COMPOSE = '''
services:
  vllm:
    image: vllm/vllm-openai:{tag}
    command: ["{model}", "--max-model-len", "8192", "--swap-space", "16", "--disable-log-requests"{extra}]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
'''


def _flag_findings(doc):
    return {(d["check_id"], d["severity"]) for d in doc["diagnostics"] if d["check_id"] in ("removed-flag", "unknown-flag")}


def test_check_on_a_v0_10_2_compose_file_does_not_call_its_flags_errors(tmp_path):
    # v0.10.2 had --swap-space and --disable-log-requests; kvplan has no table for it (it reads
    # 0.20.0 on), so both are labelled warnings, and so is a flag no read release knows
    path = write(tmp_path, "docker-compose.yaml", COMPOSE.format(tag="v0.10.2", model=MODEL,
                                                                 extra=', "--max-modle-len", "4096"'))
    code, doc, _ = check(path, "--gpu", "H200")
    assert code == 0
    flags = [d for d in doc["diagnostics"] if d["check_id"] in ("removed-flag", "unknown-flag")]
    assert {d["severity"] for d in flags} == {"warning"} and len(flags) == 3
    swap = next(d for d in flags if d["key"] == "--swap-space")
    assert "kvplan has no flag table for vLLM 0.10.2" in swap["message"] and "may be valid in 0.10.2" in swap["message"]
    (dep,) = [d for f in doc["files"] for d in f["deployments"]]
    assert dep["vllm"]["requested"] == "0.10.2" and dep["vllm"]["version"] == "0.26.0"


def test_check_reads_flags_with_the_pinned_releases_table(tmp_path):
    # --calculate-kv-scales is a flag of vLLM 0.20.0 to 0.27.1 (read from their arg_utils.py) and
    # gone in 0.28.0; --swap-space is in none of them
    path = write(tmp_path, "docker-compose.yaml", COMPOSE.format(tag="v0.27.1", model=MODEL,
                                                                 extra=', "--calculate-kv-scales"'))
    code, doc, _ = check(path, "--gpu", "H200")
    errors = {d["key"] for d in doc["diagnostics"] if d["severity"] == "error"}
    assert code == 1 and errors == {"--swap-space", "--disable-log-requests"}
    path = write(tmp_path, "docker-compose.yaml", COMPOSE.format(tag="v0.28.0", model=MODEL,
                                                                 extra=', "--calculate-kv-scales"'))
    code, doc, _ = check(path, "--gpu", "H200")
    kv = next(d for d in doc["diagnostics"] if d["key"] == "--calculate-kv-scales")
    assert kv["severity"] == "error" and "a flag of vLLM 0.20.0 to 0.27.1" in kv["message"]


def test_a_catalogue_per_release():
    assert catalogue("0.27.1").resolve("--calculate-kv-scales").status == "ok"
    assert catalogue("0.33.0").resolve("--device-memory-utilization").status == "ok"  # new in 0.33.0's arg_utils.py
    assert catalogue("0.26.0").resolve("--device-memory-utilization").status == "removed"
    assert catalogue("0.26.0").exact and not catalogue("0.35.0").exact and catalogue("0.35.0").based_on == "0.34.0"


def test_every_stored_release_has_the_flags_every_vllm_serve_has():
    # flags documented for every `vllm serve` of these years, with the arity their argparse gives
    # them: a release whose extraction missed its parser (a moved cli_args.py) fails here
    core = {"model": "value", "max-model-len": "value", "gpu-memory-utilization": "value",
            "tensor-parallel-size": "value", "kv-cache-dtype": "value", "block-size": "value",
            "enforce-eager": "negatable", "enable-prefix-caching": "negatable", "port": "value",
            "host": "value", "api-key": "list", "served-model-name": "list", "headless": "bool", "config": "value"}
    for release, table in versions.release_flag_tables().items():
        arity = {n: k for k, names in table.items() for n in names.split()}
        assert {n: arity.get(n) for n in core} == core, release
        assert versions.release_data()["releases"][release]["short"]["-tp"] == "tensor-parallel-size", release


def test_plan_options_name_the_release_they_stand_for():
    code, out, err = run_cli("plan", MODEL, "--gpus", "H200", "--max-model-len", "8192", "--vllm-version", "0.27.1",
                             "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["vllm"]["requested"] == "0.27.1" and doc["vllm"]["version"] == "0.26.0"
    for option in doc["options"]:
        assert option["evidence"]["unchecked"][0].startswith("vLLM 0.27.1 itself, approximated by the rules of 0.26.0")
