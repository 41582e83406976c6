"""`vllm serve` calls in a Dockerfile: ENV/ARG per build stage, exec and shell form,
how ENTRYPOINT and CMD combine (Dockerfile reference)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from kvplan.check.diagnostics import INVALID_VALUE
from kvplan.check.sources.shell import (
    _VLLM_IMAGE,
    Invocation,
    _locate,
    _split_shell,
    expand_vars,
    serve_calls_in_argv,
    serve_calls_in_text,
)


_DOCKER_ENV = re.compile(r"^\s*(ENV|ARG)\s+(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass
class DockerEnv:
    """The variables of one Dockerfile build stage.

    ``env`` (ENV) is what the running container sees; ``args`` (ARG) exist only while building.
    ENV values are expanded at build time from both. ARGs declared before the first FROM are
    visible in a stage only when it declares them again (``ARG NAME``).
    Rule source: Dockerfile reference, ENV / ARG / "Environment replacement" / "Understand how
    ARG and FROM interact".
    """

    env: dict = field(default_factory=dict)
    args: dict = field(default_factory=dict)
    global_args: dict = field(default_factory=dict)
    in_stage: bool = False

    def build(self) -> dict:
        return {**self.args, **self.env}

    def new_stage(self) -> None:
        self.env, self.args, self.in_stage = {}, {}, True

    def instruction(self, text: str) -> bool:
        """Apply an ENV/ARG line; False when ``text`` is neither."""
        m = _DOCKER_ENV.match(text)
        if not m:
            return False
        try:
            words = shlex.split(m.group(2), comments=True)
        except ValueError:
            return True
        is_env = m.group(1).upper() == "ENV"
        target = self.env if is_env else (self.args if self.in_stage else self.global_args)
        if is_env and len(words) >= 2 and "=" not in words[0]:  # legacy `ENV NAME value`
            target[words[0]] = expand_vars(" ".join(words[1:]), self.build())[0]
            return True
        for w in words:
            if "=" in w:
                k, v = w.split("=", 1)
                target[k] = expand_vars(v, self.build() if self.in_stage else self.global_args)[0]
            elif not is_env and self.in_stage and w in self.global_args:
                self.args[w] = self.global_args[w]  # `ARG NAME` re-declares a global ARG
        return True

    def notes(self) -> dict:
        """$NAME -> why it is unset in the running container (a build-only ARG)."""
        return {
            k: f"${k} is a build argument (ARG): the running container sees only ENV variables"
            for k in self.args
            if k not in self.env
        }


_DOCKER_EXEC = re.compile(r"^\s*(CMD|ENTRYPOINT|RUN)\s+(\[.*\])\s*$", re.IGNORECASE | re.DOTALL)


_DOCKER_SHELL = re.compile(r"^\s*(CMD|ENTRYPOINT)\s+(.*)$", re.IGNORECASE | re.DOTALL)


_DOCKER_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE)


def _docker_entry_calls(entry_cmd: dict, base_image: str, denv: DockerEnv) -> list[Invocation]:
    """The `vllm serve` call a Dockerfile's last ENTRYPOINT and CMD make (Dockerfile reference,
    "Understand how CMD and ENTRYPOINT interact"): a shell-form ENTRYPOINT ignores CMD; an
    exec-form ENTRYPOINT (the vLLM image's is ``["vllm", "serve"]``) gets CMD as arguments, and
    a shell-form CMD arrives there as ``/bin/sh -c "<CMD>"``."""
    ent = entry_cmd.get("ENTRYPOINT")
    cmd = entry_cmd.get("CMD")
    implicit = ent is None and bool(_VLLM_IMAGE.search(base_image))
    notes = denv.notes()
    issues = []
    if ent and ent[3]:
        words, wl, syntax = ent[0], ent[1], "shell"  # shell-form ENTRYPOINT ignores CMD
    elif cmd and cmd[3] and (ent is not None or implicit):
        # `/bin/sh -c` is not run: its words would be arguments of the exec-form ENTRYPOINT.
        words, wl, syntax = list((ent[0] if ent else []) + cmd[0]), list((ent[1] if ent else []) + cmd[1]), "shell"
        issues.append(
            (
                INVALID_VALUE,
                cmd[2],
                "CMD",
                "shell-form CMD after an exec-form ENTRYPOINT"
                + ("" if ent else f" (the {base_image} image's `vllm serve`)")
                + ": Docker appends `/bin/sh -c '...'` to the ENTRYPOINT, so `vllm serve` gets '/bin/sh' "
                "as the model and exits",
                'write CMD in exec (JSON) form: CMD ["--model", "...", "--max-model-len", "..."]',
            )
        )
    else:
        words, wl = [], []
        for part in (ent, cmd):
            if part:
                words += part[0]
                wl += part[1]
        syntax = "shell" if (ent is None and cmd and cmd[3]) else "exec"
    line = (ent or cmd)[2]  # type: ignore[index]
    calls = serve_calls_in_argv(words, wl, line, implicit=implicit, env=denv.env, syntax=syntax, notes=notes)
    for inv in calls:
        inv.issues += issues
    return calls


class _Dockerfile:
    """What a Dockerfile's instructions set while serve_calls_in_text reads it line by line:
    the stage's variables, its base image and its last CMD / ENTRYPOINT."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.denv = DockerEnv()
        self.base_image = ""
        self.base_line: int | None = None
        self.entry_cmd: dict[str, tuple[list[str], list[int | None], int, bool]] = {}

    def instruction(self, first: int, last: int, text: str, calls: list[Invocation]) -> bool:
        """Apply one logical line (0-based first..last) if it is FROM, ENV/ARG, an exec-form
        CMD/ENTRYPOINT/RUN or a shell-form CMD/ENTRYPOINT; False leaves it to the shell scan
        (a shell-form RUN line with `vllm serve`)."""
        denv, lines = self.denv, self.lines
        m = _DOCKER_FROM.match(text)
        if m:
            self.base_image = expand_vars(m.group(1), denv.global_args)[0]
            self.base_line = first + 1
            self.entry_cmd.clear()
            denv.new_stage()
            return True
        if denv.instruction(text):
            return True
        m = _DOCKER_EXEC.match(text)
        if m:
            try:
                words = json.loads(m.group(2))
            except ValueError:
                words = None
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                kind = m.group(1).upper()
                wl: list[int | None] = list(_locate(words, lines, first, last))
                if kind == "RUN":  # at build time: a `sh -c` inside sees ARG and ENV
                    calls += serve_calls_in_argv(words, wl, first + 1, env=denv.build(), syntax="exec")
                else:
                    self.entry_cmd[kind] = (words, wl, first + 1, False)
                return True
        m = _DOCKER_SHELL.match(text)
        if m:
            try:
                words = _split_shell(m.group(2))
            except ValueError:
                return True
            self.entry_cmd[m.group(1).upper()] = (words, list(_locate(words, lines, first, last)), first + 1, True)
            return True
        return False


def dockerfile_calls(lines: list[str], problems: list | None = None) -> tuple[list[Invocation], dict]:
    """Every `vllm serve` call in a Dockerfile.

    Exec-form (JSON) CMD/ENTRYPOINT are combined as Docker does; a ``vllm/vllm-openai`` base
    image without ENTRYPOINT runs CMD as `vllm serve` arguments. Variables follow Docker: the
    exec form expands none; the shell form of CMD/ENTRYPOINT is expanded by ``/bin/sh`` in the
    running container, from ENV (not ARG); each FROM starts a stage with its own variables; a
    RUN line runs at build time and sees ARG and ENV.

    Returns:
        (invocations, the last stage's ENV); a `vllm` line that cannot be split is appended to
        ``problems`` as (line, message), as serve_calls_in_text does.
    Rule source: Dockerfile reference (FROM, ENV, ARG, RUN, CMD, ENTRYPOINT, shell and exec form).
    """
    reader = _Dockerfile(lines)
    calls, _ = serve_calls_in_text(lines, {}, problems=problems, instruction=reader.instruction, line_env=reader.denv.build)
    if reader.entry_cmd:
        entry = _docker_entry_calls(reader.entry_cmd, reader.base_image, reader.denv)
        for inv in entry:  # CMD/ENTRYPOINT run in the last stage's image
            inv.image, inv.image_line = reader.base_image or None, reader.base_line
        calls += entry
    return calls, reader.denv.env
