"""What one `kvplan check` run found (``Report``: files, deployments, diagnostics) and its
formats: the --format json document, the human report (rich), GitHub workflow commands and
JUnit XML."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kvplan.check.diagnostics import APPROXIMATE, INPUT_ERROR_IDS, PARSE_ERROR, Diagnostic, exit_code_for


@dataclass
class DeploymentResult:
    """The outcome for one deployment: which checks ran, what they found, and the plan figures."""

    name: str
    file: str
    line: int | None
    kind: str
    model: str | None
    gpu: str | None
    checks: list[str]
    diagnostics: list[Diagnostic]
    figures: dict | None = None
    vllm: dict | None = None  # {"version", "reason", ["requested"]} (versions.VersionChoice.to_dict)
    evidence: dict | None = None  # rules.Evidence.to_dict(); None when no estimate was made


@dataclass
class FileResult:
    """One input file: its kind, its deployments, and file-level diagnostics."""

    file: str
    kind: str | None
    deployments: list[DeploymentResult] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


@dataclass
class Report:
    """Everything one `kvplan check` run found."""

    files: list[FileResult]
    stats: dict
    vllm_version: str

    @property
    def diagnostics(self) -> list[Diagnostic]:
        out = []
        for f in self.files:
            out += f.diagnostics
            for d in f.deployments:
                out += d.diagnostics
        return out

    def exit_code(self, strict: bool = False) -> int:
        return exit_code_for(self.diagnostics, strict)

    def to_dict(self, strict: bool = False) -> dict:
        """The --format json document."""
        from kvplan import __version__

        diags = self.diagnostics
        return {
            "kvplan_version": __version__,
            "vllm_version": self.vllm_version,
            "exit_code": self.exit_code(strict),
            "summary": {
                "files": len(self.files),
                "deployments": sum(len(f.deployments) for f in self.files),
                "errors": sum(d.severity == "error" for d in diags),
                "warnings": sum(d.severity == "warning" for d in diags),
                "infos": sum(d.severity == "info" for d in diags),
            },
            "files": [
                {
                    "file": f.file,
                    "kind": f.kind,
                    "deployments": [
                        {
                            "name": d.name,
                            "line": d.line,
                            "kind": d.kind,
                            "model": d.model,
                            "gpu": d.gpu,
                            "checks": d.checks,
                            "vllm": d.vllm,
                            "evidence": d.evidence,
                            "figures": d.figures,
                        }
                        for d in f.deployments
                    ],
                }
                for f in self.files
            ],
            "diagnostics": [d.model_dump() | {"text": d.text()} for d in diags],
            "stats": self.stats,
        }


def add_parse_error(fr: FileResult, message: str, line: int | None = None, file: str | None = None) -> FileResult:
    """Append a parse-error finding to ``fr`` (in ``file`` when it is another file than
    ``fr``'s own) and return ``fr``."""
    fr.diagnostics.append(
        Diagnostic(check_id=PARSE_ERROR, severity="error", file=file or fr.file, line=line, message=message)
    )
    return fr


# ---------------------------------------------------------------------------------------------
# Formats (--format json is Report.to_dict)
# ---------------------------------------------------------------------------------------------

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# Control characters a file's value may carry into a message (C0 but tab, DEL, C1): printed as
# they are, ESC [ 31 m would colour the terminal or the CI log, and a CR would overwrite the line.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters written as ``\\xNN`` (\\x1b for ESC), as repr() does."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _encodable(con):
    """A function making text printable on the console's encoding (ASCII CI logs included),
    with control characters escaped (see visible)."""
    enc = (getattr(con, "encoding", None) or "utf-8").lower()
    if enc.replace("-", "").startswith("utf"):
        return visible
    return lambda text: visible(text).encode(enc, "backslashreplace").decode(enc)


def _print_diags(con, diags, group_file: str) -> None:
    """One finding a line: line, severity, check id, then the key and message wrapped at the
    console width under their first character (so is the hint, under its text)."""
    from rich.markup import escape as _escape
    from rich.text import Text

    from kvplan.render.table import hanging

    safe = _encodable(con)

    def escape(text: str) -> str:
        return _escape(safe(text))

    for d in diags:
        where = (f"{d.file}:" if d.file != group_file else "") + (f"{d.line}" if d.line else "-")
        key = f"{safe(d.key)}: " if d.key else ""
        style = _STYLE[d.severity]
        head = Text.from_markup(f"    {escape(where):>5}  [{style}]{d.severity:<7}[/{style}] [dim]{d.check_id}[/dim]  ", emoji=False)
        # fold=False: a model id, path or flag longer than the room left stays whole (copyable)
        con.print(hanging(head, key + safe(d.message), fold=False))
        if d.hint:
            con.print(hanging(Text("           hint: ", style="dim"), Text(safe(d.hint), style="dim"), fold=False))


def print_human(report, strict: bool, console=None) -> None:
    """Per file: its problems, then each deployment's figures and diagnostics (line, severity,
    check id, key, message, hint); then a summary line with the exit code."""
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    from kvplan.render.table import hanging

    # emoji=False: a file name, model or flag value with ":fire:" or ":1234:" in it is echoed as
    # written, not as rich's emoji (and the emoji table, 3 ms of every check, is not loaded)
    con = console or Console(highlight=False, soft_wrap=True, emoji=False)
    safe = _encodable(con)
    ok_mark, bad_mark = ("✓", "✗") if safe("✓") == "✓" else ("ok", "FAIL")
    for f in report.files:
        con.print(f"[bold]{escape(safe(f.file))}[/bold]" + (f" [dim]({f.kind})[/dim]" if f.kind else ""))
        _print_diags(con, f.diagnostics, f.file)
        for dep in f.deployments:
            errors = [d for d in dep.diagnostics if d.severity == "error"]
            mark = f"[red]{bad_mark}[/red]" if errors else f"[green]{ok_mark}[/green]"
            what = f"{dep.model or '?'} on {dep.gpu or '?'}"
            fig = dep.figures
            if fig and fig.get("fits"):
                what += (
                    f": {fig['num_gpu_blocks']:,} blocks, {fig['gpu_kv_cache_tokens']:,} tokens, "
                    f"{fig['max_concurrency']:.2f} x {fig['max_model_len']}-token requests"
                )
                if fig.get("engines"):  # a multi-GPU layout (check/rules/memory.py _parallel_figures)
                    what += (
                        f" per engine, {len(fig['engines'])} engine(s) on {fig['gpus']} GPUs = "
                        f"{fig['cluster_max_concurrency']:.2f} requests ({fig['multi_gpu']})"
                    )
            if any(d.check_id == APPROXIMATE for d in dep.diagnostics):
                what += " (approximate: kvplan has no exact rules for this model)"
            con.print(hanging(Text.from_markup(f"  {mark} {escape(safe(dep.name))}: ", emoji=False), safe(what),
                              fold=False))
            _print_diags(con, dep.diagnostics, f.file)
    diags = report.diagnostics
    n_err = sum(d.severity == "error" for d in diags)
    n_warn = sum(d.severity == "warning" for d in diags)
    n_info = sum(d.severity == "info" for d in diags)
    n_dep = sum(len(f.deployments) for f in report.files)
    code = report.exit_code(strict)
    colour = "green" if code == 0 else "red"
    con.print(
        f"[{colour}]{len(report.files)} file(s), {n_dep} deployment(s): {n_err} error(s), {n_warn} warning(s), "
        f"{n_info} note(s) -> exit {code}[/{colour}]"
    )


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def print_github(report, strict: bool) -> None:
    """GitHub Actions workflow commands: ``::error file=F,line=L,title=ID::message`` (warnings as
    ::warning, infos as ::notice), then a summary line."""
    level = {"error": "error", "warning": "warning", "info": "notice"}
    for d in report.diagnostics:
        props = [f"file={_gh_prop(visible(d.file))}"]
        if d.line:
            props.append(f"line={d.line}")
        props.append(f"title={_gh_prop('kvplan ' + d.check_id)}")
        msg = (f"{d.key}: " if d.key else "") + d.message + (f" (hint: {d.hint})" if d.hint else "")
        print(f"::{level[d.severity]} {','.join(props)}::{_gh_data(visible(msg))}")
    diags = report.diagnostics
    print(
        f"kvplan check: {len(report.files)} file(s), {sum(d.severity == 'error' for d in diags)} error(s), "
        f"{sum(d.severity == 'warning' for d in diags)} warning(s) -> exit {report.exit_code(strict)}"
    )


# Characters XML 1.0 cannot hold (control characters copied from an input file).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml_safe(text: str) -> str:
    return _XML_BAD.sub("\ufffd", text)


def junit_xml_text(report, strict: bool) -> str:
    """The JUnit XML document: one <testsuite> per file, one <testcase> per deployment and check
    (input problems as <error>, failed checks as <failure>, warnings under --strict as <failure>)."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="kvplan check")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for f in report.files:
        suite = ET.SubElement(root, "testsuite", name=_xml_safe(f.file))
        counts = {"tests": 0, "failures": 0, "errors": 0}
        groups = [(f.file, [], f.diagnostics)]  # file-level findings: one testcase per check id
        groups += [(dep.name, dep.checks, dep.diagnostics) for dep in f.deployments]
        for name, checks, diags in groups:
            ids = list(dict.fromkeys(list(checks) + [d.check_id for d in diags]))
            for cid in ids:
                case = ET.SubElement(suite, "testcase", classname=_xml_safe(f.file), name=_xml_safe(f"{name} :: {cid}"))
                counts["tests"] += 1
                mine = [d for d in diags if d.check_id == cid]
                bad = [d for d in mine if d.severity == "error" or (strict and d.severity == "warning")]
                if bad:
                    tag = "error" if any(d.check_id in INPUT_ERROR_IDS for d in bad) else "failure"
                    counts["errors" if tag == "error" else "failures"] += 1
                    el = ET.SubElement(case, tag, message=_xml_safe(bad[0].message), type=cid)
                    el.text = _xml_safe("\n".join(d.text() + (f"\n  hint: {d.hint}" if d.hint else "") for d in bad))
                others = [d for d in mine if d not in bad]
                if others:
                    ET.SubElement(case, "system-out").text = _xml_safe("\n".join(d.text() for d in others))
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
