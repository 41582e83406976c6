"""`kvplan check --format sarif`: the Report as a SARIF 2.1.0 log (OASIS Static Analysis Results
Interchange Format, the format GitHub code scanning and other CI viewers ingest).

One run of one tool ("kvplan"): a rule per check id that occurs (tool.driver.rules; the ids are
described in docs/ci.md "Checks"), a result per
finding (error -> "error", warning -> "warning", info -> "note"), each at the file and line the
finding names, with the flag or key and the hint in its message; the run's exit code in
invocations[0]. Paths below the working directory are relative URIs against ``%SRCROOT%`` (run
kvplan from the repository root, as for ``--format github``); others are ``file://`` URIs.

Validated in tests/check/test_sarif.py against the published schema
(tests/data/sarif/sarif-schema-2.1.0.json, with its source).
"""

from __future__ import annotations

import os
from urllib.parse import quote

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"

# kvplan's severities as SARIF levels (SARIF 2.1.0 section 3.27.10: error, warning, note, none).
LEVELS = {"error": "error", "warning": "warning", "info": "note"}

# Files that are no path on disk: their findings carry no physical location.
_NOT_A_FILE = {"<stdin>"}


def sarif_log(report, strict: bool) -> dict:
    """The SARIF 2.1.0 log of ``report`` (a kvplan.check.report.Report) as a JSON-ready dict.

    ``strict`` decides the exit code recorded in invocations[0] (warnings fail under it); each
    result's level is the finding's own severity.
    """
    from kvplan import __version__

    diags = report.diagnostics
    rule_ids = list(dict.fromkeys(d.check_id for d in diags))
    index = {rid: i for i, rid in enumerate(rule_ids)}
    code = report.exit_code(strict)
    run = {
        "tool": {
            "driver": {
                "name": "kvplan",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule(rid, diags) for rid in rule_ids],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(os.getcwd())}},
        "invocations": [{"executionSuccessful": code != 2, "exitCode": code}],
        "results": [_result(d, index[d.check_id]) for d in diags],
        "properties": {"vllmVersion": report.vllm_version, "strict": strict},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rule(rule_id: str, diags) -> dict:
    """The reportingDescriptor of a check id; its default level is its most severe finding's."""
    order = ("error", "warning", "info")
    worst = min((d.severity for d in diags if d.check_id == rule_id), key=order.index)
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("-")),
        "defaultConfiguration": {"level": LEVELS[worst]},
    }


def _result(d, rule_index: int) -> dict:
    text = (f"{d.key}: " if d.key else "") + d.message + (f" (hint: {d.hint})" if d.hint else "")
    result: dict = {
        "ruleId": d.check_id,
        "ruleIndex": rule_index,
        "level": LEVELS[d.severity],
        "message": {"text": text},
    }
    if d.file not in _NOT_A_FILE:
        location: dict = {"artifactLocation": _artifact(d.file)}
        if d.line:
            location["region"] = {"startLine": d.line}
        result["locations"] = [{"physicalLocation": location}]
    if d.deployment:
        result["properties"] = {"deployment": d.deployment}
    return result


def _artifact(path: str) -> dict:
    """An artifactLocation: a relative URI against %SRCROOT%, or a file:// URI for an absolute path."""
    if os.path.isabs(path):
        return {"uri": "file://" + quote(path.replace(os.sep, "/"))}
    return {"uri": quote(path.replace(os.sep, "/")), "uriBaseId": SRCROOT}


def _directory_uri(path: str) -> str:
    """A file:// URI of directory ``path`` with the trailing slash SARIF requires of a base."""
    uri = "file://" + quote(os.path.abspath(path).replace(os.sep, "/"))
    return uri if uri.endswith("/") else uri + "/"
