"""`kvplan check` (registered by kvplan.cli through ``register(app)``; `kvplan schema` is kvplan.cli.schema).

`kvplan check FILE...` reads vLLM deployment files (``vllm serve --config`` YAML, shell scripts,
Dockerfiles, docker-compose and Kubernetes YAML, kvplan.yaml) and reports what the selected vLLM version
would refuse or what misses the declared targets. Output: human (rich, default), ``--format json``,
``--format github`` (workflow-command annotations), ``--format sarif`` (SARIF 2.1.0);
``--junit-xml FILE`` is written atomically after all checks, and a Markdown summary is appended to
``$GITHUB_STEP_SUMMARY`` when it is set. Exit codes: 0 all pass (warnings too unless ``--strict``), 1 a check failed,
2 a file could not be read/parsed (or its GPU/model could not be resolved).

Everything heavy (pydantic models, the planner, rich) is imported inside the commands so that
`kvplan --version` stays fast. What is not command-line handling lives in kvplan.check (the
checks, the Report and its human / github / JUnit formats in kvplan.check.report).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer

FORMATS = ("human", "json", "github", "sarif")


def register(app: typer.Typer) -> None:
    """Add the ``check`` command to kvplan's typer app."""
    from kvplan.engines.vllm.versions import DEFAULT_HELP

    @app.command("check")
    def check(
        files: list[str] = typer.Argument(..., help="Deployment files: vLLM --config YAML, scripts, Dockerfiles, compose, k8s, kvplan.yaml."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU profile for deployments that declare none (see `kvplan gpus`)."),
        gpu_profiles: Optional[list[str]] = typer.Option(None, "--gpu-profiles", help="Extra GPU profile YAML file(s)."),
        vllm_version: Optional[str] = typer.Option(
            None, "--vllm-version",
            help="vLLM version whose flags and rules to check every deployment against. Without it, each deployment's "
            "kvplan.yaml vllm_version, else its vLLM image tag, else the default. " + DEFAULT_HELP,
        ),
        fmt: str = typer.Option(
            "human", "--format", help="human, json, github (workflow annotations) or sarif (SARIF 2.1.0, for code scanning)."
        ),
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
    from kvplan.check.checker import check_files
    from kvplan.check.report import print_github, print_human
    from kvplan.errors import KvplanError

    if fmt not in FORMATS:
        raise KvplanError(f"--format: unknown value {fmt!r}", hint="use human, json, github or sarif")
    from kvplan.io.files import record_inputs

    named = named_inputs([*files, *(gpu_profiles or [])])
    target = check_junit_path(junit_xml) if junit_xml is not None else None
    if target is not None:
        check_not_an_input(junit_xml, target, named)
    summary = step_summary_target(named)
    with record_inputs() as read:
        report = check_files(files, gpu=gpu, gpu_profiles=gpu_profiles, vllm_version=vllm_version, stdin_name=stdin_name)
    code = report.exit_code(strict)
    if junit_xml is not None:
        # the files the check read (kvplan.yaml, `config:` / --config files, GPU profiles)
        # are known only now: the report must not replace one of them either
        check_not_an_input(junit_xml, target, {**read, **named})
        write_junit(report, junit_xml, strict, target=target)
    if summary is not None:
        append_step_summary(report, strict, summary, {**read, **named})
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # text from input files on an ASCII CI log: escape, never crash
        reconfigure(errors="backslashreplace")
    try:
        if fmt == "json":
            print(json.dumps(report.to_dict(strict), indent=2))
        elif fmt == "sarif":
            from kvplan.check.sarif import sarif_log

            print(json.dumps(sarif_log(report, strict), indent=2))
        elif fmt == "github":
            print_github(report, strict)
        else:
            print_human(report, strict)
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    return code


def step_summary_target(inputs: dict[tuple[int, int], str]):
    """Where the Markdown summary goes: ``$GITHUB_STEP_SUMMARY`` when it is set and not empty
    (GitHub Actions sets it to a file per step), else None. Checked before anything is checked or
    printed, as --junit-xml is (kvplan.io.files.output_target: a regular file in a writable
    directory, no standard stream, no input of the check).

    Raises:
        KvplanError: the path cannot be written or is an input of the check (names the variable).
    """
    from kvplan.check.summary import ENV_VAR
    from kvplan.io.files import output_target

    path = os.environ.get(ENV_VAR)
    if not path:
        return None
    target = output_target(path, f"${ENV_VAR}", "step-summary.md")
    check_not_an_input(path, target, inputs, what=f"${ENV_VAR}")
    return target


def append_step_summary(report, strict: bool, target, inputs: dict[tuple[int, int], str]) -> None:
    """Append the Markdown summary (kvplan.check.summary) to ``target`` (step_summary_target's
    file), after the files read during the check are known (none of them is appended to).

    Raises:
        KvplanError: the file is an input of the check or cannot be appended to (exit 2).
    """
    from kvplan.check.summary import ENV_VAR, markdown_summary
    from kvplan.errors import KvplanError

    check_not_an_input(os.environ.get(ENV_VAR, str(target)), target, inputs, what=f"${ENV_VAR}")
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(markdown_summary(report, strict))
    except OSError as exc:
        raise KvplanError(f"${ENV_VAR}: cannot append the summary to {target}: {exc.strerror or exc}") from None


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


def check_not_an_input(path: str, target, inputs: dict[tuple[int, int], str], what: str = "--junit-xml") -> None:
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
            f"{what}: {path} is an input of this check{same}; kvplan does not overwrite it",
            hint="give another file name such as kvplan-junit.xml" if what == "--junit-xml" else f"point {what} at another file",
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
            --junit-xml). See kvplan.io.files.output_target.
    """
    from kvplan.io.files import output_target

    return output_target(path, "--junit-xml", "kvplan-junit.xml")


def write_junit(report, path: str, strict: bool, target=None) -> None:
    """Write the JUnit XML atomically (temporary file in the same directory, then rename); the
    file gets the mode a normal write would give it (kvplan.io.files.new_file_mode).

    Args:
        target: the file check_junit_path returned for ``path`` (checked again when None).
    Raises:
        KvplanError: the path cannot be written (see check_junit_path), or something other
            than a regular file appeared there meanwhile (names --junit-xml).
    """
    from kvplan.io.files import write_file_atomically

    if target is None:
        target = check_junit_path(path)
    from kvplan.check.report import junit_xml_text

    text = junit_xml_text(report, strict)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    write_file_atomically(target, "--junit-xml", path, write, suffix=".xml")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `kvplan check`")
