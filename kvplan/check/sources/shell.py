"""Shell text as `vllm serve` gets it: word splitting, the platform's variable expansion
(shell, Docker exec form, Kubernetes ``$(NAME)``, compose), ``# kvplan:`` comments, and finding
`vllm serve` calls in argument vectors and text files.

vLLM files cited are those of the version whose rules kvplan holds (kvplan/engines/vllm/v0_26).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kvplan.io.files import InputError, read_text


from kvplan.io.limits import MAX_QUOTE_LINES as _MAX_QUOTE_LINES  # noqa: E402 - lines a quoted string may span


_DIRECTIVE = re.compile(r"#\s*kvplan:\s*(.*)$")


@dataclass
class Directive:
    """One ``# kvplan: gpu=H100-80GB gpu_count=2`` comment: its line and key=value pairs."""

    line: int
    values: dict[str, str]


def find_directives(lines: list[str]) -> tuple[list[Directive], list[tuple[int, str]]]:
    """The ``# kvplan:`` comments of a file, and (line, problem) for malformed ones."""
    out, bad = [], []
    for no, raw in enumerate(lines, 1):
        if "kvplan" not in raw:
            continue
        m = _DIRECTIVE.search(raw)
        if not m:
            continue
        values: dict[str, str] = {}
        try:
            words = shlex.split(m.group(1))
        except ValueError as exc:
            bad.append((no, f"cannot read the kvplan comment: {exc}"))
            continue
        for w in words:
            if "=" not in w:
                bad.append((no, f"expected key=value in the kvplan comment, got {w!r}"))
                continue
            k, v = w.split("=", 1)
            values[k.strip()] = v.strip()
        out.append(Directive(no, values))
    return out, bad



_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_vars(text: str, env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """Expand ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (shell, compose) and ``$(NAME)``
    (Kubernetes) from ``env``; returns the text and the names left unexpanded."""
    if "$" not in text:
        return text, ()
    missing: list[str] = []

    def rep(m: re.Match) -> str:
        name = m.group(1) or m.group(4) or m.group(5)
        if name in env and (env[name] != "" or not m.group(2) or not m.group(2).startswith(":")):
            return env[name]
        if m.group(2) is not None:
            return m.group(3) or ""
        missing.append(name)
        return m.group(0)

    return _VAR.sub(rep, text), tuple(missing)


_POSITIONAL = re.compile(r"\$(?:[@*0-9]|\{[@*0-9]+\})")


_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


_SHELL_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")


_COMPOSE_VAR = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


# How a platform rewrites an argv before the process starts (see expand_word).
Syntax = Literal["shell", "exec", "k8s", "compose"]


LITERAL_REASONS = {
    "exec": "Docker runs the exec form (a JSON array) of CMD/ENTRYPOINT/RUN without a shell, so no variable is expanded",
    "k8s": "Kubernetes expands only $(NAME) in command and args, and leaves it as it is when NAME is not in "
    "the container's env; no shell runs them",
    "compose": "`$$` in a compose file is a literal `$`, and no shell runs the command",
}


def _refs(text: str) -> tuple[str, ...]:
    """The $NAME / ${NAME...} references a shell would expand in ``text``."""
    return tuple(m.group(1) or m.group(2) for m in _SHELL_REF.finditer(text))


def expand_word(
    text: str, syntax: str, env: dict[str, str], runtime: frozenset[str] | None = None
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """One argv word after the platform's own variable handling.

    Args:
        syntax: "shell" (a shell line: ``$NAME``, ``${NAME:-default}``, ``$(NAME)`` from ``env``),
            "exec" (Docker exec form: nothing is expanded), "k8s" (only ``$(NAME)`` from the
            container's ``env``; ``$$`` is a literal ``$``), "compose" (``${NAME}``, ``$NAME``,
            ``${NAME:-default}`` from ``env`` = the .env file; ``$$`` is a literal ``$``).
        runtime: k8s only: the names the container's env defines with values kvplan cannot
            know (``valueFrom``); "*" in it: any name may be defined (``envFrom``). A ``$(NAME)``
            of such a name is unresolved; one of another name not in ``env`` is left as it is by
            Kubernetes, so it reaches the process as text (literal). None: every ``$(NAME)``
            not in ``env`` is unresolved.
    Returns:
        (text, unresolved names: unknown where kvplan runs, literal names: reach vLLM as text).
    Rule sources: Dockerfile reference (shell and exec form), Kubernetes "Define dependent
        environment variables" ($(VAR), $$ escape), Compose "Interpolation" (.env, $$ escape).
    """
    if "$" not in text:
        return text, (), ()
    if syntax == "shell":
        new, missing = expand_vars(text, env)
        # the script's own arguments ("$@", "$1", ...): unknown where kvplan runs
        missing += tuple(m.group(0) for m in _POSITIONAL.finditer(new))
        return new, missing, ()
    if syntax == "exec":
        return text, (), _refs(text)
    missing: list[str] = []
    escaped: list[tuple[int, int]] = []
    out: list[str] = []
    pos = 0
    pattern = _K8S_VAR if syntax == "k8s" else _COMPOSE_VAR
    for m in pattern.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        if m.group(0) == "$$":
            start = sum(len(x) for x in out)
            out.append("$")
            escaped.append((start, start + 1))
            continue
        if syntax == "k8s":
            name = m.group(1)
            if name in env:
                out.append(env[name])
            elif runtime is None or name in runtime or "*" in runtime:
                missing.append(name)  # set in the pod, to a value kvplan cannot read
                out.append(m.group(0))
            else:  # Kubernetes leaves a reference to an undefined name as it is
                start = sum(len(x) for x in out)
                out.append(m.group(0))
                escaped.append((start, start + len(m.group(0))))
            continue
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3) or ""
        value = env.get(name)
        unset = value is None or (value == "" and op is not None and op.startswith(":"))
        if op and op.endswith("-"):
            out.append(word if unset else value)
        elif op and op.endswith("+"):
            out.append("" if unset else word)
        elif not unset:
            out.append(value)
        else:  # compose substitutes "" (with a warning) or stops (${NAME?err}); kvplan cannot know
            missing.append(name)
            out.append(m.group(0))
    out.append(text[pos:])
    new = "".join(out)
    literal: list[str] = []
    if syntax == "k8s":
        literal = [n for n in _refs(new) if n not in missing]
        literal += [_K8S_VAR.match(new, a).group(1) for a, b in escaped if b - a > 1]
    else:
        for m in _SHELL_REF.finditer(new):
            if any(a <= m.start() < b for a, b in escaped):
                literal.append(m.group(1) or m.group(2))
    return new, tuple(missing), tuple(literal)


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a compose ``.env`` file (comments, ``export``, quotes); {} when
    there is none or it cannot be read. Rule source: Compose "Use an environment file"."""
    try:
        text = read_text(path)
    except InputError:
        return {}
    env: dict[str, str] = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
            env[key] = value
    return env


_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")  # kept for kvplan.check's re-export


_ASSIGN_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


_DECLARE = ("export", "local", "readonly", "declare", "typeset")


def _assignments(line: str, env: dict[str, str], exported: dict[str, int] | None = None, line_no: int = 0) -> None:
    """Record the shell assignments of one logical line in ``env``: ``NAME=value`` commands
    and ``export NAME=value`` (also local/readonly/declare), each command of the line in turn.

    A command ends at ``;``, ``&&``, ``||``, ``&`` or ``|``, which is never part of the value
    (``MODEL=x; vllm serve $MODEL`` sets MODEL to ``x``). ``NAME=value cmd`` sets NAME for
    ``cmd`` only, not for the shell (POSIX shell "Simple Commands"; _command_env reads those).
    ``exported``: NAME -> 1-based line of the ``export`` that put NAME in the environment of
    the commands after it (an assignment to an exported name keeps it exported)."""
    if "=" not in line:
        return
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        words = list(lex)
    except ValueError:
        return
    commands: list[list[str]] = [[]]
    for w in words:
        if _is_operator(w):
            commands.append([])
        else:
            commands[-1].append(w)
    for cmd in commands:
        keyword = None
        if cmd and cmd[0] in _DECLARE:
            keyword, cmd = cmd[0], [w for w in cmd[1:] if not w.startswith("-")]
        pairs = []
        for w in cmd:
            m = _ASSIGN_NAME.match(w)
            if m is None:
                if keyword == "export" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w) and exported is not None:
                    exported[w] = line_no  # `export NAME`: exports the value it has
                    continue
                if keyword is None:  # `NAME=value cmd`: for cmd only
                    pairs = []
                    break
                continue
            pairs.append((m.group(1), m.group(2)))
        for name, value in pairs:
            env[name] = expand_vars(value, env)[0]
            if exported is not None and (keyword == "export" or name in exported):
                exported[name] = line_no


_API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server",)


_VLLM_OPENAI_IMAGE = re.compile(r"/vllm-openai([:@]|$)|^vllm-openai[:@]")


# Container images whose entrypoint is `vllm serve` (vLLM's published image and a plain
# ".../vllm:TAG"), so a container with only args passes them to `vllm serve`.
_VLLM_IMAGE = re.compile(r"vllm-openai|(^|/)vllm([:@]|$)", re.IGNORECASE)


_SHELLS = ("sh", "bash", "dash", "zsh", "ash")


def _is_operator(word: str) -> bool:
    return bool(word) and all(c in "();<>|&" for c in word)


def find_serve(words: list[str]) -> tuple[int, str] | None:
    """Where the `vllm serve` arguments start in an argv, and the entry point.

    Returns:
        (index of the first argument, "serve" or "api_server"), or None.
    """
    for i, w in enumerate(words):
        base = w.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return i + 2, "serve"
        if w == "-m" and i + 1 < len(words):
            mod = words[i + 1]
            if mod in _API_SERVER_MODULES:
                return i + 2, "api_server"
            if mod == "vllm.entrypoints.cli.main" and i + 2 < len(words) and words[i + 2] == "serve":
                return i + 3, "serve"
    # `docker run [options] vllm/vllm-openai:TAG [args]`: the image's entrypoint is `vllm serve`
    at = container_run_image(words)
    if at is not None:
        return at + 1, "serve"
    return None


def container_run_image(words: list[str]) -> int | None:
    """Index of the vLLM image in a ``docker run`` / ``podman run`` / ``nerdctl run`` argv
    (``docker run --gpus all -e X=Y vllm/vllm-openai:v0.26.0 --model ...``), or None. The words
    after it are the image's `vllm serve` arguments (vLLM's image has ENTRYPOINT vllm serve)."""
    for i, w in enumerate(words[:-1]):
        if w.rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl") and words[i + 1] == "run":
            for j in range(i + 2, len(words)):
                if _is_operator(words[j]):
                    break
                if _VLLM_OPENAI_IMAGE.search(words[j]) and not words[j].startswith("-"):
                    return j
    return None


def _cut_at_operator(words: list[str], lines: list[int | None]) -> tuple[list[str], list[int | None]]:
    """The words before the first shell operator (``>``, ``2>&1`` after _split_shell, ``|``,
    ``;``, ``&&`` ...): a redirection or the next command ends the argument list."""
    for j, w in enumerate(words):
        if _is_operator(w):
            return words[:j], lines[:j]
    return words, lines


_ASSIGN_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


_PREFIX_COMMANDS = ("exec", "env", "nohup", "command", "time", "sudo")


def _command_env(words: list[str], start: int) -> dict[str, str]:
    """``NAME=value`` words in front of the command whose arguments start at ``start``
    (``VLLM_X=1 vllm serve``, ``env VLLM_X=1 exec vllm serve``): the environment that one process
    gets on top of the shell's. Rule source: POSIX shell "Simple Commands" (variable assignments
    before the command name are exported to it)."""
    j = start - 1
    while j >= 0 and not (
        words[j].rsplit("/", 1)[-1] == "vllm" or words[j].rsplit("/", 1)[-1].startswith("python")
    ):
        j -= 1
    env: dict[str, str] = {}
    j -= 1
    while j >= 0 and not _is_operator(words[j]):
        m = _ASSIGN_WORD.match(words[j])
        if m:
            env.setdefault(m.group(1), m.group(2))
        elif words[j] not in _PREFIX_COMMANDS:
            break
        j -= 1
    return env


def _locate(words: list[str], lines: list[str], first: int, last: int) -> list[int]:
    """1-based line of each word, searching forward through physical lines first..last (0-based)."""
    out: list[int] = []
    li, col = first, 0
    for w in words:
        needle = w[:60] if w else w
        found = None
        if needle:
            for j in range(li, min(last, len(lines) - 1) + 1):
                pos = lines[j].find(needle, col if j == li else 0)
                if pos >= 0:
                    found = (j, pos)
                    break
        if found:
            li, col = found[0], found[1] + len(needle)
        out.append(li + 1)
    return out


_INLINE_COMMENT = re.compile(r"`\s*#[^`]*`|\$\(\s*#[^)]*\)")


_FD_REDIRECT = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[;&|]))[0-9]+(?=[<>])")


def _split_shell(text: str) -> list[str]:
    """Words and operators of a shell line, as sh would split them: a `` `# comment` `` or
    ``$(# comment)`` (a comment inside a continued command) expands to nothing, and the file
    descriptor of a redirection (``2>&1``) belongs to the operator, not to the arguments."""
    text = _INLINE_COMMENT.sub(" ", text)
    text = _FD_REDIRECT.sub("", text)
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


@dataclass
class Invocation:
    """A `vllm serve` call found somewhere: its arguments, their lines, the variables set
    before it, and where it starts.

    ``syntax`` says how the platform expands variables in ``words`` (see expand_word) and
    ``env`` holds the values it uses; ``notes`` says why a name is unset at runtime;
    ``issues`` are (check id, line, key, message, hint) errors found while reading the call.
    """

    words: list[str]
    lines: list[int | None]
    line: int
    entry: str  # "serve" or "api_server"
    env: dict[str, str] = field(default_factory=dict)
    syntax: str = "shell"
    notes: dict[str, str] = field(default_factory=dict)
    issues: list = field(default_factory=list)
    process_env: dict[str, str] = field(default_factory=dict)  # the process's environment (_process_env)
    runtime: frozenset[str] | None = None  # k8s: names set to values kvplan cannot read (expand_word)
    # CUDA_VISIBLE_DEVICES as the process gets it: (value or None when unknown, line, why unknown)
    visible_devices: tuple[str | None, int | None, str] | None = None
    background: bool = False  # a shell command ended by `&`: the script goes on while it runs
    # the container image the call runs in (Dockerfile FROM, a `docker run` image), its line and
    # key: check reads the vLLM version from its tag (kvplan.check.version)
    image: str | None = None
    image_line: int | None = None
    image_key: str | None = None
    shm: Any = None  # a `docker run`'s /dev/shm (check.sources.shm ShmSize)



_SEPARATORS = frozenset({";", ";;", "&&", "||", "|", "|&", "&"})


def _in_background(words: list[str]) -> bool:
    """Whether the command starting at ``words[0]`` is ended by ``&`` (POSIX "Asynchronous
    Lists": the shell does not wait for it) rather than by ``;``, ``&&``, ``|`` ... or the line's
    end; redirections (``>``, ``>&`` ...) before the separator are skipped."""
    for w in words:
        if _is_operator(w) and w in _SEPARATORS:
            return w == "&"
    return False


CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"


def nvidia_visible(value: str | None) -> tuple[str, ...] | None:
    """The host GPUs an NVIDIA_VISIBLE_DEVICES value gives a container (NVIDIA Container
    Toolkit: "all", a comma list of indices or UUIDs, "none"/"void"/empty for none); () when
    unset (no GPU without a device reservation), None for all."""
    if value is None:
        return ()
    v = str(value).strip()
    if v == "all":
        return None
    if v in ("", "none", "void"):
        return ()
    return tuple(e.strip() for e in v.split(",") if e.strip())




def _visible_devices(
    words: list[str], start: int, syntax: str, env: dict[str, str], exported: dict[str, int] | None,
    runtime: frozenset[str] | None, line: int | None, argv_env: dict[str, str] | None = None,
) -> tuple[str | None, int | None, str] | None:
    """CUDA_VISIBLE_DEVICES in the environment of the `vllm serve` process whose arguments start
    at ``start``: (value, line, "") when known, (None, line, why) when set to a value kvplan
    cannot read, None when not set.

    A shell command gets its ``NAME=value`` prefix and the exported variables (``exported``:
    NAME -> line of the export; None: every name of ``env`` is in the environment, as in a
    container's env, Dockerfile ENV or compose environment:). Rule source: POSIX shell
    "Simple Commands" / "export"; CUDA reads the variable when the process starts."""
    if syntax == "shell":
        prefix = _command_env(words, start)
        if CUDA_VISIBLE in prefix:
            value, missing = expand_vars(prefix[CUDA_VISIBLE], env)
            if missing:
                return None, line, f"${missing[0]}, which is not set in this file"
            return value, line, ""
    if runtime is not None and CUDA_VISIBLE in runtime:
        return None, line, "set from valueFrom, which kvplan cannot read"
    if CUDA_VISIBLE not in env or (exported is not None and CUDA_VISIBLE not in exported):
        return None
    value = env[CUDA_VISIBLE]
    where = (exported or {}).get(CUDA_VISIBLE) or line
    if syntax == "compose" and "$" in value:
        value, missing, _ = expand_word(value, "compose", argv_env or {})
        if missing:
            return None, where, f"${{{missing[0]}}}, which kvplan finds no .env value for"
    elif "$" in value and _VAR.search(value):
        return None, where, f"{value}, which kvplan cannot expand"
    return value, where, ""


def _process_env(
    words: list[str], start: int, syntax: str, env: dict[str, str], exported: dict[str, int] | None,
    runtime: frozenset[str] | None, argv_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment variables (with values kvplan can read) of the `vllm serve` process whose
    arguments start at ``start``: the variables of ``env`` it inherits (a container's env,
    compose environment:, Dockerfile ENV: all of them; a shell script: the exported ones, see
    _visible_devices), then a shell command's own ``NAME=value`` prefix on top. A value kvplan
    cannot read (Kubernetes valueFrom, a variable it cannot expand) is left out. Rule source:
    POSIX shell "Simple Commands" / "export"; vLLM envs.py reads its variables from the process
    environment."""
    out: dict[str, str] = {}
    for name, value in env.items():
        if (exported is not None and name not in exported) or (runtime is not None and name in runtime):
            continue
        value = str(value)
        if syntax == "compose" and "$" in value:
            value, missing, _ = expand_word(value, "compose", argv_env or {})
            if missing:
                continue
        elif "$" in value and _VAR.search(value):
            continue
        out[name] = value
    if syntax == "shell":
        out.update(_command_env(words, start))
    return out


def serve_calls_in_argv(
    words: list[str],
    lines: list[int | None],
    line: int,
    *,
    implicit: bool = False,
    env: dict[str, str] | None = None,
    raw: list[str] | None = None,
    spans: list[tuple[int, int] | None] | None = None,
    syntax: str = "shell",
    argv_env: dict[str, str] | None = None,
    notes: dict[str, str] | None = None,
    runtime: frozenset[str] | None = None,
    exported: dict[str, int] | None = None,
) -> list[Invocation]:
    """`vllm serve` calls in one argv (a k8s/compose command, a Dockerfile exec form, a shell
    line).

    Args:
        words / lines: the argv and each word's 1-based line.
        implicit: the argv goes to an image whose entrypoint is `vllm serve` (vllm/vllm-openai).
        env: the variables the running process (and a ``sh -c`` script) sees.
        raw / spans: the file's lines and each word's (first, last) line, to place the words of
            an ``sh -c "script"`` on the lines they are written on.
        syntax: how the platform expands variables in the argv itself before starting it
            ("shell", "exec", "k8s", "compose"; see expand_word).
        argv_env: the values that expansion uses when they are not ``env`` (compose: .env).
        notes: $NAME -> why it is unset at runtime, for messages.
        runtime: k8s: names the pod sets to values kvplan cannot read (see expand_word).
        exported: shell: the names of ``env`` in the process environment (NAME -> line of the
            export); None: all of ``env`` (a container's environment).

    Kubernetes expands ``$(NAME)`` in a ``sh -c`` script before the shell runs it (so the
    shell never sees ``$(NAME)`` of a defined name); a ``$(NAME)`` left in the script (an
    undefined name, or ``$$(NAME)``) is a command substitution for the shell: its output is
    unknown to kvplan.
    """
    env = dict(env or {})
    direct_env = dict(argv_env) if argv_env is not None else env
    notes = dict(notes or {})
    found = find_serve(words)
    if found is not None:
        start, entry = found
        args, arg_lines = _cut_at_operator(words[start:], lines[start:])
        inv = Invocation(args, arg_lines, lines[start - 1] or line, entry, direct_env, syntax, notes, runtime=runtime)
        inv.background = syntax == "shell" and _in_background(words[start:])
        inv.process_env = _process_env(words, start, syntax, env, exported, runtime, argv_env)
        inv.visible_devices = _visible_devices(words, start, syntax, env, exported, runtime, inv.line, argv_env)
        at = container_run_image(words) if syntax == "shell" else None
        if at is not None and at == start - 1:  # `docker run ... IMAGE args`: the image names the version
            inv.image, inv.image_line = expand_vars(words[at], env)[0], lines[at] or inv.line
            runner = next(w.rsplit("/", 1)[-1] for k, w in enumerate(words[:at]) if words[k + 1] == "run"
                          and w.rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl"))
            inv.image_key = f"{runner} run image"
            from kvplan.check.sources.shm import docker_run_shm

            run = next(k for k in range(at) if words[k + 1] == "run" and words[k].rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl"))
            inv.shm = docker_run_shm(words[run + 2:at], lines[run + 2:at], inv.line)
        return [inv]
    for i, w in enumerate(words[:-1]):
        if w == "-c" and i > 0 and words[i - 1].rsplit("/", 1)[-1] in _SHELLS:
            script = words[i + 1]
            shell_env = env
            if syntax == "compose":  # compose rewrites the script before the shell sees it
                script, missing, _ = expand_word(script, "compose", direct_env)
                shell_env = {k: v for k, v in env.items() if k not in missing}
                for name in missing:
                    notes.setdefault(name, _COMPOSE_NOTE.format(name=name))
            elif syntax == "k8s":
                script, shell_env = _k8s_script(script, direct_env, runtime, notes)
            item_line = lines[i + 1] if lines[i + 1] is not None else line
            out = []
            for inv in serve_calls_in_text(script.split("\n"), shell_env)[0]:
                span = spans[i + 1] if spans else None
                if raw is not None and span is not None:
                    wl: list[int | None] = list(_locate(inv.words, raw, span[0] - 1, span[1] - 1))
                else:
                    wl = [item_line] * len(inv.words)
                out.append(
                    Invocation(inv.words, wl, wl[0] if wl and wl[0] else item_line, inv.entry, inv.env, "shell", notes,
                               process_env=inv.process_env, visible_devices=_placed(inv.visible_devices, wl, item_line),
                               background=inv.background)
                )
            return out
    if implicit and words:
        inv = Invocation(list(words), list(lines), lines[0] or line, "serve", direct_env, syntax, notes, runtime=runtime)
        inv.process_env = _process_env(words, 0, syntax, env, exported, runtime, argv_env)
        inv.visible_devices = _visible_devices(words, 0, syntax, env, exported, runtime, inv.line, argv_env)
        return [inv]
    return []


def _placed(visible, word_lines: list[int | None], line: int | None):
    """visible_devices of a call in a ``sh -c`` script, on the line of the script's call."""
    if visible is None:
        return None
    return visible[0], (word_lines[0] if word_lines and word_lines[0] else line), visible[2]


_K8S_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


_PAREN_NAME = re.compile(r"\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _k8s_script(
    script: str, env: dict[str, str], runtime: frozenset[str] | None, notes: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """A ``sh -c`` script of a Kubernetes container as the shell gets it, and the variables the
    shell sees (the container's env).

    Kubernetes first replaces ``$(NAME)`` of a name in the container's env by its value and
    ``$$`` by ``$``; the rest is left as it is. What the shell then reads as ``$(NAME)`` (an
    undefined name, or an escaped ``$$(NAME)``) is a command substitution; a name the pod sets
    from ``valueFrom``/``envFrom`` has a value kvplan cannot read. Both are written ``${NAME}``
    for the shell parser, with NAME out of the shell's variables and a note saying why, so
    they come out unresolved (not split at the parenthesis).

    Rule source: Kubernetes "Define a command and arguments for a container" / "Define
    dependent environment variables" (``$(VAR)``, ``$$`` escape, undefined references kept).
    """
    out: list[str] = []
    hidden: set[str] = set()
    pos = 0
    for m in _K8S_REF.finditer(script):
        if m.start() < pos:  # the $(NAME) of a $$(NAME), already written
            continue
        out.append(script[pos : m.start()])
        pos = m.end()
        if m.group(0) == "$$":
            nxt = _PAREN_NAME.match(script, m.end())
            out.append("$")
            if nxt is not None:  # $$(NAME): the shell runs NAME as a command
                name = nxt.group(1)
                out.append("{" + name + "}")
                pos = nxt.end()
                hidden.add(name)
                notes.setdefault(name, f"$$({name}) reaches the shell as $({name}), which runs `{name}` as a command")
            continue
        name = m.group(1)
        if name in env:
            out.append(env[name])
            continue
        out.append("${" + name + "}")
        hidden.add(name)
        if runtime is not None and name in runtime:
            notes.setdefault(name, f"$({name}) comes from the container's env valueFrom, which kvplan cannot read")
        elif runtime is not None and "*" in runtime:
            notes.setdefault(name, f"$({name}) is not in the container's env; it may come from envFrom, which kvplan does not read")
        else:
            notes.setdefault(
                name,
                f"$({name}) is not in the container's env: Kubernetes leaves it as it is and the shell runs "
                f"`{name}` as a command",
            )
    out.append(script[pos:])
    return "".join(out), {k: v for k, v in env.items() if k not in hidden}


_COMPOSE_NOTE = (
    "docker compose substitutes ${{{name}}} from the shell or the .env file where it runs, not from "
    "the service's environment:, and kvplan finds no .env value for it"
)


def _logical_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first, last, text) of each logical line (0-based): backslash-newline joins lines."""
    out = []
    i, n = 0, len(lines)
    while i < n:
        first = i
        text = lines[i]
        while text.endswith("\\") and (len(text) - len(text.rstrip("\\"))) % 2 == 1 and i + 1 < n:
            i += 1
            text = text[:-1] + lines[i]
        out.append((first, i, text))
        i += 1
    return out


def serve_calls_in_text(
    lines: list[str], env: dict[str, str], *, problems: list | None = None, instruction=None, line_env=None
):
    """Every `vllm serve` call in a text file (shell, CI YAML, Markdown; Dockerfiles through
    kvplan.check.sources.dockerfile.dockerfile_calls, which passes the two hooks).

    Lines are joined at backslash-newline; a quoted string left open continues onto the next
    lines (up to _MAX_QUOTE_LINES); words are split with shlex (shell operators end a command).
    Shell assignments (``NAME=value``, ``export NAME=value``) are recorded in ``env`` as they
    come, so later lines expand them.

    Args:
        instruction: ``instruction(first, last, text, calls) -> bool`` is offered every logical
            line (0-based first/last physical line) first; True means it consumed the line (and
            appended any calls it makes to ``calls``). With a hook, shell assignments are not
            recorded (a Dockerfile sets variables with ENV/ARG).
        line_env: ``line_env()`` gives the variables a `vllm serve` line sees (default ``env``).
    Returns:
        (invocations, env): ``env`` holds the variables assigned in the file. A `vllm` line that
        cannot be split (a quote never closed) is appended to ``problems`` as (line, message).
    """
    calls: list[Invocation] = []
    exported: dict[str, int] = {k: 0 for k in env}  # the environment it starts with is exported
    logical = _logical_lines(lines)
    k = 0
    while k < len(logical):
        first, last, text = logical[k]
        k += 1
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if instruction is not None:
            if instruction(first, last, text, calls):
                continue
        else:
            _assignments(text, env, exported, first + 1)
        if "vllm" not in text and "api_server" not in text:
            continue
        words = None
        while True:
            try:
                words = _split_shell(text)
                break
            except ValueError:
                if k >= len(logical) or last - first >= _MAX_QUOTE_LINES:
                    break
                _, last, more = logical[k]
                k += 1
                text = text + "\n" + more
        if words is None:
            if problems is not None and re.search(r"\bvllm\b.*\bserve\b|api_server", text):
                problems.append((first + 1, "cannot split this `vllm serve` command: a quote is never closed"))
            continue
        seen = line_env() if line_env is not None else env  # a Dockerfile RUN line runs at build time
        calls += serve_calls_in_argv(
            words, list(_locate(words, lines, first, last)), first + 1, env=seen,
            exported=None if line_env is not None else exported,
        )
    return calls, env
