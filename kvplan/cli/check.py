"""`kvplan check` and `kvplan schema` (registered by kvplan.cli through ``register(app)``).

`kvplan check FILE...` reads vLLM deployment files (``vllm serve --config`` YAML, shell scripts,
Dockerfiles, docker-compose and Kubernetes YAML, kvplan.yaml) and reports what vLLM 0.26.0 would
refuse or what misses the declared targets. Output: human (rich, default), ``--format json``,
``--format github`` (workflow-command annotations); ``--junit-xml FILE`` is written atomically
after all checks. Exit codes: 0 all pass (warnings too unless ``--strict``), 1 a check failed,
2 a file could not be read/parsed (or its GPU/model could not be resolved).

Everything heavy (pydantic models, the planner, rich) is imported inside the commands so that
`kvplan --version` stays fast.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Optional

import typer

FORMATS = ("human", "json", "github")


def register(app: typer.Typer) -> None:
    """Add the ``check`` and ``schema`` commands to kvplan's typer app."""

    @app.command("check")
    def check(
        files: list[str] = typer.Argument(..., help="Deployment files: vLLM --config YAML, scripts, Dockerfiles, compose, k8s, kvplan.yaml."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU profile for deployments that declare none (see `kvplan gpus`)."),
        gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", help="Extra GPU profile YAML file(s)."),
        vllm_version: str = typer.Option("0.26.0", "--vllm-version", help="vLLM version whose flags and rules to check against."),
        fmt: str = typer.Option("human", "--format", help="human, json or github (workflow annotations)."),
        junit_xml: Optional[str] = typer.Option(None, "--junit-xml", help="Also write a JUnit XML report to this file."),
        strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) on warnings too."),
        stdin_name: Optional[str] = typer.Option(
            None, "--stdin-name", metavar="NAME",
            help="File name that - (standard input) stands for; it decides how the text is read (deploy.yaml, serve.sh, Dockerfile).",
        ),
    ) -> None:
        """Check vLLM deployment files before a GPU is rented (exit 0 pass, 1 fail, 2 unreadable input)."""
        from kvplan.errors import KvplanError

        try:
            code = run_check(
                files=files,
                gpu=gpu,
                gpu_profiles=gpu_profiles,
                vllm_version=vllm_version,
                fmt=fmt,
                junit_xml=junit_xml,
                strict=strict,
                stdin_name=stdin_name,
            )
        except KvplanError as e:
            from kvplan.cli import fail

            fail(e.message, e.hint, e.exit_code)
            return
        raise typer.Exit(code)

    @app.command("schema")
    def schema(
        kind: str = typer.Argument("config", help="config (a `vllm serve --config` YAML file) or manifest (kvplan.yaml)."),
        vllm_version: str = typer.Option("0.26.0", "--vllm-version", help="vLLM version whose flags to describe."),
    ) -> None:
        """Print the JSON Schema of the config format (for editors: yaml-language-server)."""
        from kvplan.check import json_schema
        from kvplan.errors import KvplanError

        try:
            doc = json_schema(kind, vllm_version)
        except KvplanError as e:
            from kvplan.cli import fail

            fail(e.message, e.hint, e.exit_code)
            return
        try:
            print(json.dumps(doc, indent=2))
            sys.stdout.flush()
        except BrokenPipeError:  # `kvplan schema | head`: the schema was asked for; not a failure
            _drop_stdout()


def run_check(*, files, gpu, gpu_profiles, vllm_version, fmt, junit_xml, strict, stdin_name=None) -> int:
    """Run the checks, write ``junit_xml``, print the report in ``fmt``; return the exit code.

    Order: every option is validated first (nothing is printed or written when one is bad),
    then the files are checked, then the JUnit file is written, then the report is printed. A
    reader that goes away while the report is printed (``| head``) does not change the exit
    code: it stays the checks' own (0, 1 or 2), never a made-up 1.

    Raises:
        KvplanError: unknown --format / --vllm-version, unusable --junit-xml path (one that is
            an input of the check included: check_not_an_input), unreadable --gpu-profiles,
            or the JUnit file cannot be written (exit 2).
    """
    from kvplan.check import check_files
    from kvplan.errors import KvplanError

    if fmt not in FORMATS:
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use human, json or github")
    from kvplan.safe_io import record_inputs

    named = named_inputs([*files, *(gpu_profiles or [])])
    target = check_junit_path(junit_xml) if junit_xml is not None else None
    if target is not None:
        check_not_an_input(junit_xml, target, named)
    with record_inputs() as read:
        report = check_files(files, gpu=gpu, gpu_profiles=gpu_profiles, vllm_version=vllm_version, stdin_name=stdin_name)
    code = report.exit_code(strict)
    if junit_xml is not None:
        # the files the check read (kvplan.yaml, `config:` / --config files, GPU profiles)
        # are known only now: the report must not replace one of them either
        check_not_an_input(junit_xml, target, {**read, **named})
        write_junit(report, junit_xml, strict, target=target)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # text from input files on an ASCII CI log: escape, never crash
        reconfigure(errors="backslashreplace")
    try:
        if fmt == "json":
            print(json.dumps(report.to_dict(strict), indent=2))
        elif fmt == "github":
            print_github(report, strict)
        else:
            print_human(report, strict)
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    return code


def _drop_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so the interpreter's final flush cannot
    fail again (the Python docs' recipe for SIGPIPE-less platforms)."""
    try:
        target = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return
    try:
        os.dup2(devnull, target)
    except OSError:
        pass
    finally:
        os.close(devnull)


def named_inputs(paths: list[str]) -> dict[tuple[int, int], str]:
    """(st_dev, st_ino) -> path for the files named on the command line that exist (symbolic
    links followed), whether or not they can be read as deployments."""
    found: dict[tuple[int, int], str] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        found.setdefault((st.st_dev, st.st_ino), p)
    return found


def check_not_an_input(path: str, target, inputs: dict[tuple[int, int], str]) -> None:
    """Refuse a --junit-xml target that is one of the check's inputs: the same file (st_dev,
    st_ino: a symbolic or hard link to it included) as a file named on the command line or
    read during the check (fresh-eyes-5 H3: `--junit-xml in.yaml` replaced in.yaml).

    Args:
        path: --junit-xml as given; target: check_junit_path's result for it;
        inputs: (st_dev, st_ino) -> the input's path as given or opened.
    Raises:
        KvplanError: the target is an input (names --junit-xml and the input; exit 2).
    """
    from kvplan.errors import KvplanError

    try:
        st = os.stat(target)
    except OSError:
        return  # nothing there yet: no input can be overwritten
    name = inputs.get((st.st_dev, st.st_ino))
    if name is not None:
        same = "" if name == path else f" ({name})"
        raise KvplanError(
            f"--junit-xml: {path} is an input of this check{same}; kvplan does not overwrite it",
            hint="give another file name such as kvplan-junit.xml",
        )


def check_junit_path(path: str):
    """Refuse a --junit-xml path that cannot be written, before anything is checked or printed.

    A symbolic link is followed: the report goes to the file it points to (the link stays).
    A directory, FIFO, device node or socket is refused, never replaced.

    Returns:
        the file to write (absolute, symbolic links resolved).
    Raises:
        KvplanError: the path is empty, is (or points to) a directory or another non-regular
            file, its directory does not exist or no file can be created in it (names
            --junit-xml). See kvplan.safe_io.output_target.
    """
    from kvplan.safe_io import output_target

    return output_target(path, "--junit-xml", "kvplan-junit.xml")


# ---------------------------------------------------------------------------------------------
# Renderers
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
    from rich.markup import escape as _escape

    safe = _encodable(con)

    def escape(text: str) -> str:
        return _escape(safe(text))

    for d in diags:
        where = (f"{d.file}:" if d.file != group_file else "") + (f"{d.line}" if d.line else "-")
        key = f"{escape(d.key)}: " if d.key else ""
        style = _STYLE[d.severity]
        con.print(f"    {escape(where):>5}  [{style}]{d.severity:<7}[/{style}] [dim]{d.check_id}[/dim]  {key}{escape(d.message)}")
        if d.hint:
            con.print(f"           [dim]hint: {escape(d.hint)}[/dim]")


def print_human(report, strict: bool, console=None) -> None:
    """Per file: its problems, then each deployment's figures and diagnostics (line, severity,
    check id, key, message, hint); then a summary line with the exit code."""
    from rich.console import Console
    from rich.markup import escape

    con = console or Console(highlight=False, soft_wrap=True)
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
            con.print(f"  {mark} {escape(safe(dep.name))}: {escape(safe(what))}")
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

    from kvplan.check import INPUT_ERROR_IDS

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


def write_junit(report, path: str, strict: bool, target=None) -> None:
    """Write the JUnit XML atomically (temporary file in the same directory, then rename); the
    file gets the mode a normal write would give it (safe_io.new_file_mode).

    Args:
        target: the file check_junit_path returned for ``path`` (checked again when None).
    Raises:
        KvplanError: the path cannot be written (see check_junit_path), or something other
            than a regular file appeared there meanwhile (names --junit-xml).
    """
    from kvplan.safe_io import write_file_atomically

    if target is None:
        target = check_junit_path(path)
    text = junit_xml_text(report, strict)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    write_file_atomically(target, "--junit-xml", path, write, suffix=".xml")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `kvplan check`")
