"""`kvplan check --format sarif`: a SARIF 2.1.0 log that validates against the published schema
(tests/data/sarif/sarif-schema-2.1.0.json, OASIS errata01, source in SOURCE.md), one result per
finding of --format json at the same file and line."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.check.common import DATA, check
from tests.helpers import run_cli

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads((Path(__file__).parents[1] / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
FAIL = str(DATA / "fail" / "llama70b-long-context.yaml")


def _validator():
    return jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def sarif(*args: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *args, "--format", "sarif")
    assert "Traceback" not in out + err
    return code, json.loads(out)


CASES = [
    (FAIL, "--gpu", "H100"),  # errors, a warning, a note
    (str(DATA / "pass" / "chat-llama8b.yaml"), "--gpu", "H100"),
    (str(DATA / "bad" / "syntax-error.yaml"), "--gpu", "H100"),  # parse-error, exit 2
    (str(DATA / "fail" / "docker-compose.yml"), "--gpu", "L4"),
    (str(DATA / "fail" / "serve-multi.sh"), "--gpu", "L4"),
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: Path(a[0]).name)
def test_the_log_validates_against_the_published_schema(args):
    code, log = sarif(*args)
    errors = sorted(_validator().iter_errors(log), key=str)
    assert errors == [], errors[0].message if errors else ""
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    assert run["invocations"][0]["exitCode"] == code
    assert run["invocations"][0]["executionSuccessful"] is (code != 2)


def test_the_validator_can_fail():
    _, log = sarif(*CASES[0])
    bad = copy.deepcopy(log)
    bad["runs"][0]["results"][0]["level"] = "fatal"  # not a SARIF level
    assert list(_validator().iter_errors(bad))
    bad = copy.deepcopy(log)
    bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0  # lines start at 1
    assert list(_validator().iter_errors(bad))


def test_one_result_per_finding_at_its_line_and_level():
    code, log = sarif(*CASES[0])
    json_code, doc, _ = check(*CASES[0])
    assert code == json_code == 1
    run = log["runs"][0]
    level = {"error": "error", "warning": "warning", "info": "note"}
    got = [(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"].get("region", {}).get("startLine"))
           for r in run["results"]]
    want = [(d["check_id"], level[d["severity"]], d["line"]) for d in doc["diagnostics"]]
    assert got == want
    # the file itself says where each key is: line 3 is max-model-len, line 5 swap_space
    lines = Path(FAIL).read_text(encoding="utf-8").splitlines()
    by_rule = {r["ruleId"]: r for r in run["results"]}
    line = by_rule["max-model-len-fits"]["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert lines[line - 1].startswith("max-model-len:")
    assert by_rule["max-model-len-fits"]["message"]["text"].startswith("max-model-len: ")
    line = by_rule["removed-flag"]["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert lines[line - 1].startswith("swap_space:")
    # every result's rule is declared, and ruleIndex points at it
    rules = run["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
    assert run["tool"]["driver"]["name"] == "kvplan"


def test_paths_below_the_working_directory_are_relative_to_srcroot(tmp_path, monkeypatch):
    (tmp_path / "deploy").mkdir()
    target = tmp_path / "deploy" / "my chat.yaml"  # a space: percent-encoded in the URI
    target.write_text(Path(FAIL).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    _, log = sarif("deploy/my chat.yaml", "--gpu", "H100")
    run = log["runs"][0]
    loc = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "deploy/my%20chat.yaml", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
    assert not list(_validator().iter_errors(log))


def test_standard_input_has_no_location_and_still_validates(monkeypatch):
    import io
    import sys

    data = Path(FAIL).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, log = sarif("-", "--gpu", "H100")
    assert code == 1
    assert all("locations" not in r for r in log["runs"][0]["results"])
    assert not list(_validator().iter_errors(log))


def test_an_unknown_format_names_sarif_in_the_hint():
    code, _, err = run_cli("check", FAIL, "--gpu", "H100", "--format", "sarf")
    assert code == 2 and "sarif" in err
