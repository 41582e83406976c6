"""The Markdown summary of a `kvplan check` run, appended to ``$GITHUB_STEP_SUMMARY`` when that
variable is set (GitHub Actions shows the file on the run's summary page).

Three parts: a heading with the verdict and the exit code; a table of deployments (file, name,
model, GPU, vLLM version, the KV-cache figures check prints, "approximate" where the model has no
kvplan family); a table of every finding, errors first, then warnings, then notes (a flag kvplan
does not model is a note or a warning: it is listed under a passing verdict too). Text from input
files is escaped so that it cannot break the table or inject Markdown/HTML. GitHub caps a step
summary at 1 MiB: findings past MAX_FINDINGS are counted, not listed.
"""

from __future__ import annotations

import re

from kvplan.check.diagnostics import APPROXIMATE
from kvplan.check.report import visible

ENV_VAR = "GITHUB_STEP_SUMMARY"
MAX_FINDINGS = 200

_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~])")


def cell(text: str) -> str:
    """``text`` for one Markdown table cell: control characters as \\xNN, one line, Markdown and
    HTML characters backslash-escaped (a ``|`` cannot end the cell, ``<b>`` is text)."""
    one_line = " ".join(visible(text).split())
    return _MARKDOWN.sub(r"\\\1", one_line.replace("&", "&amp;"))


def markdown_summary(report, strict: bool) -> str:
    """The summary of ``report`` (a kvplan.check.report.Report) as Markdown, ending in a newline.

    ``strict`` decides the verdict (warnings fail under it), as for the exit code.
    """
    diags = report.diagnostics
    counts = {s: sum(d.severity == s for d in diags) for s in ("error", "warning", "info")}
    code = report.exit_code(strict)
    verdict = {0: "passed", 1: "failed", 2: "could not read every input"}.get(code, "failed")
    n_dep = sum(len(f.deployments) for f in report.files)
    lines = [
        f"## kvplan check {verdict} (exit {code})",
        "",
        f"{len(report.files)} file(s), {n_dep} deployment(s): {counts['error']} error(s), "
        f"{counts['warning']} warning(s), {counts['info']} note(s)" + (" (--strict: warnings fail)" if strict else ""),
        "",
    ]
    lines += _deployments(report)
    order = ("error", "warning", "info")
    lines += _findings(sorted(diags, key=lambda d: order.index(d.severity)))  # stable: file order within a severity
    return "\n".join(lines) + "\n"


def _deployments(report) -> list[str]:
    rows = []
    for f in report.files:
        for dep in f.deployments:
            errors = any(d.severity == "error" for d in dep.diagnostics)
            fig = dep.figures or {}
            if fig.get("fits"):
                kv = (f"{fig['num_gpu_blocks']:,} blocks, {fig['gpu_kv_cache_tokens']:,} tokens, "
                      f"{fig['max_concurrency']:.2f} x {fig['max_model_len']}-token requests")
            else:
                kv = "-"
            if any(d.check_id == APPROXIMATE for d in dep.diagnostics):
                kv += " (approximate: kvplan has no exact rules for this model)"
            where = f.file + (f":{dep.line}" if dep.line else "")
            version = (dep.vllm or {}).get("version") or "-"
            rows.append(
                f"| {'fail' if errors else 'pass'} | {cell(where)} | {cell(dep.name)} | {cell(dep.model or '?')} "
                f"| {cell(dep.gpu or '?')} | {cell(version)} | {cell(kv)} |"
            )
    if not rows:
        return ["No deployment found.", ""]
    head = ["| result | file | deployment | model | GPU | vLLM | KV cache |", "|---|---|---|---|---|---|---|"]
    return head + rows + [""]


def _findings(diags) -> list[str]:
    if not diags:
        return []
    lines = ["| severity | check | where | finding |", "|---|---|---|---|"]
    for d in diags[:MAX_FINDINGS]:
        where = d.file + (f":{d.line}" if d.line else "")
        text = (f"{d.key}: " if d.key else "") + d.message + (f" (hint: {d.hint})" if d.hint else "")
        lines.append(f"| {d.severity} | {cell(d.check_id)} | {cell(where)} | {cell(text)} |")
    if len(diags) > MAX_FINDINGS:
        lines.append(f"\n{len(diags) - MAX_FINDINGS} more finding(s): see the job log.")
    return lines + [""]
