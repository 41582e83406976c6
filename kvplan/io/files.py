"""Guarded reading and writing of user files.

Reading (configs, profiles, deployment files, logs, batch files, model JSON): only regular
files (a FIFO, device or directory is refused before a byte is read: /dev/zero and a named pipe
neither run forever nor hang), a size cap checked on ``stat`` and again while reading (at most
cap + 1 bytes are read even when ``stat`` says 0), NUL/UTF-8 checks, and YAML with safe_load
semantics plus an alias-expansion budget ("billion laughs"), a nesting guard and key line
numbers. Writing (--junit-xml, --plot): the target is checked before anything is printed, a
symbolic link is followed to its file, and only a regular file is ever replaced.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.io.limits import MAX_FILE_BYTES, MAX_YAML_NODES


class InputError(Exception):
    """A file cannot be read or parsed (becomes a parse-error Diagnostic).

    Attributes:
        message: what is wrong, without the file name (callers add it).
        line: 1-based line, when the problem has one.
        kind: "missing", "not-regular" (a directory, FIFO, device, socket), "too-large",
            "unreadable", or "content" (binary, not UTF-8, not YAML, ...).
        size: the file's size in bytes for "too-large" (None when it was not known in advance).
    """

    def __init__(self, message: str, line: int | None = None, *, kind: str = "content", size: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.kind = kind
        self.size = size


_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)", "a character device", ...), from its
    ``st_mode``; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _NOT_REGULAR:
        if test(mode):
            return name
    return "not a regular file"


def shown_name(text: str, limit: int = 80) -> str:
    """``text`` for a one-line message: as is up to ``limit`` characters, else its start and
    its length (a 5,000-character model name must not fill the terminal)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}... ({len(text):,} characters)"


def probe_path(path: Path | str) -> os.stat_result | None:
    """``lstat`` of ``path``, or None when nothing is there (missing, or a parent is not a
    directory). Every other failure the kernel reports on the name itself (a name or a part
    over the file system's limit: ENAMETOOLONG; a parent that may not be searched: EACCES)
    becomes an InputError, so a path check never ends in a traceback.

    Raises:
        InputError: kind "unreadable", message "cannot read: <reason>" (no file name: callers
            add it, shortened with shown_name).
    """
    import errno

    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a loop among the parents: callers name the link
            return None
        raise InputError(f"cannot read: {exc.strerror or exc}", kind="unreadable") from None
    except ValueError:  # an embedded NUL byte
        raise InputError("cannot read: the name contains a NUL byte", kind="unreadable") from None


def _not_regular(kind: str) -> InputError:
    if kind == "a directory":
        return InputError("is a directory, not a file", kind="not-regular")
    return InputError(f"is {kind}, not a regular file; kvplan reads only regular files", kind="not-regular")


# (st_dev, st_ino) -> path of every regular file opened for reading while a record_inputs()
# block runs (one dict per active block): `kvplan check --junit-xml` must never overwrite one.
_RECORDERS: list[dict[tuple[int, int], str]] = []


class record_inputs:  # noqa: N801 - used as a context manager, like contextlib's
    """Collect the files open_regular opens (read_text, read_bytes, load_yaml callers) while
    the block runs: ``with record_inputs() as seen: ...`` gives ``seen`` as a dict
    (st_dev, st_ino) -> the path as opened. Blocks may nest; each sees every file."""

    def __enter__(self) -> dict[tuple[int, int], str]:
        self.seen: dict[tuple[int, int], str] = {}
        _RECORDERS.append(self.seen)
        return self.seen

    def __exit__(self, *exc) -> None:
        _RECORDERS.remove(self.seen)


def open_regular(path: Path | str):
    """Open a regular file for binary reading; refuse anything else before reading a byte.

    The path is checked with ``stat`` first (a device node is never opened: opening some has
    side effects), then opened with O_NONBLOCK (a FIFO swapped in meanwhile cannot block the
    open) and checked again on the open descriptor.

    Returns:
        a binary file object (blocking reads).
    Raises:
        InputError: missing, unreadable, or a directory, FIFO, device or socket (the message
            does not name the file: callers add it).
    """
    try:
        kind = file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        raise InputError("no such file", kind="missing") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", kind="unreadable") from None
    if kind is not None:
        raise _not_regular(kind)
    nonblock = getattr(os, "O_NONBLOCK", 0)
    flags = os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError("no such file", kind="missing") from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", kind="unreadable") from None
    try:
        st = os.fstat(fd)
        kind = file_kind(st.st_mode)
        if kind is not None:
            raise _not_regular(kind)
        for seen in _RECORDERS:
            seen.setdefault((st.st_dev, st.st_ino), str(path))
        if nonblock:
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~nonblock)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def too_large(size: int | None, limit: int) -> str:
    """The message for a file over ``limit`` bytes (``size`` None: its size is not known)."""
    what = f"file is {size:,} bytes" if size is not None else f"file is over {limit:,} bytes"
    mib = f" ({limit / 2**20:g} MiB)" if limit >= 2**20 and limit != MAX_FILE_BYTES else ""
    return f"{what}; kvplan reads at most {limit:,} bytes{mib} per file"


def read_bytes(path: Path | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    The size ``stat`` reports refuses a large file before it is read; the read itself stops
    at ``limit + 1`` bytes, so a file whose size is not known in advance (under /proc, still
    growing) cannot make kvplan read more.

    Raises:
        InputError: see open_regular; larger than ``limit`` (the message says the limit).
    """
    with open_regular(path) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise InputError(too_large(size, limit), kind="too-large", size=size)
            data = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", kind="unreadable") from None
    if len(data) > limit:
        raise InputError(too_large(None, limit), kind="too-large")
    return data


def read_text(path: Path | str, limit: int = MAX_FILE_BYTES) -> str:
    """Read a UTF-8 text file of at most ``limit`` bytes (default MAX_FILE_BYTES).

    Raises:
        InputError: missing, not a regular file (a directory, FIFO, device), too large, binary
            or not UTF-8.
    """
    return decode_text(read_bytes(path, limit))


def decode_text(data: bytes, what: str = "file") -> str:
    """``data`` as UTF-8 text (a BOM dropped) with newlines made ``\\n``; ``what`` names the source
    in the NUL-byte message ("file", "input").

    Raises:
        InputError: binary (a NUL byte) or not UTF-8 (with the line of the first bad byte).
    """
    if b"\x00" in data:
        raise InputError(f"binary {what} (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})", line) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------------------------
# Output files (--junit-xml, --plot)
# ---------------------------------------------------------------------------------------------


def output_target(path: str, flag: str, example: str) -> Path:
    """Check an output file path before anything is computed or printed, and say where the
    file will be written.

    A symbolic link is followed (the file it points to is written, as ``open(path, "w")``
    would; the link stays), but a dangling link is refused (its target is not created), and so is
    a standard stream or descriptor (/dev/stdout, /dev/fd/N, /proc/PID/fd/N, or a link to one,
    also through a linked directory), and so is the very file standard output or standard error
    is written to (``--junit-xml r.txt > r.txt``: same st_dev and st_ino).
    What is there must be a regular file or nothing: a directory,
    FIFO, device or socket is refused, never replaced. The directory must exist and accept a
    new file: that is tried by creating and removing an empty probe file, because
    ``os.access`` says yes to root on a directory such as /sys where nothing can be created.

    Args:
        path: the path as given; flag: the option, for messages ("--junit-xml");
        example: a file name for the hint ("kvplan-junit.xml").
    Returns:
        the absolute path to write (symbolic links resolved).
    Raises:
        KvplanError: empty, not a regular file, a missing or unwritable directory (exit 2).
    """
    import re
    import tempfile

    from kvplan.errors import KvplanError

    if not str(path).strip():
        raise KvplanError(f"{flag}: the path is empty", hint=f"give a file name such as {example}")
    # Follow the link chain by hand: /dev/stdout -> /proc/self/fd/1 -> whatever stdout is. A
    # descriptor is not a file kvplan may replace (the report would vanish or the rename fail).
    # Each hop's directory is resolved in full first, so a link among the directories
    # (fdd -> /proc/self/fd, then fdd/1) cannot hide the descriptor.
    hop, hops = os.path.abspath(path), 0
    while True:
        hop = os.path.join(os.path.realpath(os.path.dirname(hop)), os.path.basename(hop))
        if re.match(r"^/dev/(stdin|stdout|stderr|fd(/|$))|^/proc/[^/]+/fd(/|$)", hop):
            raise KvplanError(
                f"{flag}: {path} is a standard stream or file descriptor, not a file; kvplan writes {flag} only to a regular file",
                hint=f"give a file name such as {example}",
            )
        if not os.path.islink(hop) or hops >= 40:
            break
        hop, hops = os.path.normpath(os.path.join(os.path.dirname(hop), os.readlink(hop))), hops + 1
    if os.path.islink(path) and not os.path.exists(path):
        raise KvplanError(
            f"{flag}: {path} is a broken symbolic link (-> {os.readlink(path)}); kvplan does not create its target",
            hint=f"fix or remove the link, or give another file name such as {example}",
        )
    target = Path(os.path.realpath(path))
    via = f" (a symbolic link to {target})" if os.path.islink(path) else ""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise KvplanError(f"{flag}: cannot write {path}: {exc.strerror or exc}") from None
    kind = None if mode is None else file_kind(mode)
    if mode is not None and kind is None:
        # `kvplan check ... --junit-xml r.txt > r.txt`: the file is the one standard output (or
        # error) already writes to; replacing it would drop the report.
        st = os.stat(target)
        for fd, stream in ((1, "standard output"), (2, "standard error")):
            try:
                out = os.fstat(fd)
            except OSError:
                continue
            if stat.S_ISREG(out.st_mode) and (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino):
                raise KvplanError(f"{flag}: {path} is the file {stream} is written to; kvplan does not replace it")
    if kind == "a directory":
        raise KvplanError(f"{flag}: {path} is a directory{via}", hint=f"give a file name, e.g. {os.path.join(path, example)}")
    if kind is not None:
        raise KvplanError(
            f"{flag}: {path} is {kind}{via}, not a regular file; kvplan writes only regular files",
            hint=f"give a file name such as {example}",
        )
    directory = target.parent
    if not directory.exists():
        raise KvplanError(f"{flag}: cannot write {path}: directory {directory} does not exist", hint="create it first (mkdir -p)")
    if not directory.is_dir():
        raise KvplanError(f"{flag}: cannot write {path}: {directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".kvplan-probe-", dir=directory)
    except OSError as exc:
        raise KvplanError(f"{flag}: cannot write {path}: directory {directory} is not writable ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    if mode is not None and not os.access(target, os.W_OK):
        raise KvplanError(f"{flag}: cannot write {path}: the file is not writable")
    return target


def replace_file(tmp: str | Path, target: Path, flag: str) -> None:
    """Rename a finished temporary file over ``target`` (see output_target), checking once more
    that nothing but a regular file has appeared there meanwhile.

    Raises:
        KvplanError: ``target`` is now a directory, FIFO, device or socket (nothing replaced).
        OSError: the rename failed (callers name the flag).
    """
    from kvplan.errors import KvplanError

    try:
        kind = file_kind(os.lstat(target).st_mode)
    except FileNotFoundError:
        kind = None
    if kind is not None and not os.path.islink(target):
        raise KvplanError(f"{flag}: {target} is {kind}, not a regular file; kvplan writes only regular files")
    os.replace(tmp, target)


def new_file_mode(path: str | Path) -> int:
    """The permission bits a plain ``open(path, "w")`` would leave: the existing file's own, or
    0o666 less the umask for a new file (mkstemp alone would give 0o600)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    mask = os.umask(0o022)  # reading the umask means setting it; put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def write_file_atomically(target: Path, flag: str, shown: str, write, *, suffix: str = "") -> None:
    """Write ``target`` through a temporary file in its directory, then rename it over the
    target (see replace_file): a failed write leaves the old file, never half a file.

    Args:
        target: the checked path (output_target's result); flag: the option, for messages;
        shown: the path as the user gave it; write: called with the temporary file's path,
            writes the content there; suffix: the temporary file's ending (some writers pick
            the format from it).
    Raises:
        KvplanError: the directory or file cannot be written, or something other than a
            regular file appeared at ``target`` meanwhile (the message names ``flag``).
    """
    import tempfile

    from kvplan.errors import KvplanError

    mode = new_file_mode(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
        os.close(fd)
        write(tmp)
        os.chmod(tmp, mode)
        replace_file(tmp, target, flag)
        tmp = None
    except OSError as exc:
        raise KvplanError(f"{flag}: cannot write {shown}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class YamlDoc:
    """One YAML document: its data (safe_load semantics) and where its keys are.

    ``lines[path]`` is the 1-based line of a mapping key or sequence item (path: tuple of keys
    as strings and list indices); ``spans[path]`` is (first, last) line of a scalar value.
    """

    data: Any
    lines: dict
    spans: dict
    line: int

    def line_of(self, path: tuple, default: int | None = None) -> int | None:
        """The line of ``path`` or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return default if default is not None else self.line


def _expanded_size(node, memo: dict, active: set) -> int:
    """Nodes ``node`` stands for once aliases are expanded; raises InputError past the budget."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise InputError("recursive YAML alias", node.start_mark.line + 1)
    active.add(key)
    total = 1
    value = node.value
    if isinstance(value, list):
        for item in value:
            if isinstance(item, tuple):
                total += _expanded_size(item[0], memo, active) + _expanded_size(item[1], memo, active)
            else:
                total += _expanded_size(item, memo, active)
            if total > MAX_YAML_NODES:
                raise InputError(
                    f"YAML document expands to more than {MAX_YAML_NODES:,} nodes (alias bomb?)", node.start_mark.line + 1
                )
    active.discard(key)
    memo[key] = total
    return total


def _collect_lines(node, path: tuple, lines: dict, spans: dict, budget: list) -> None:
    import yaml

    budget[0] += 1
    if budget[0] > MAX_YAML_NODES:
        return
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark.line)
            sub = path + (key,)
            lines.setdefault(sub, k.start_mark.line + 1)
            if isinstance(v, yaml.ScalarNode):
                spans.setdefault(sub, (v.start_mark.line + 1, v.end_mark.line + 1))
            _collect_lines(v, sub, lines, spans, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            sub = path + (i,)
            lines.setdefault(sub, item.start_mark.line + 1)
            if isinstance(item, yaml.ScalarNode):
                spans.setdefault(sub, (item.start_mark.line + 1, item.end_mark.line + 1))
            _collect_lines(item, sub, lines, spans, budget)


def load_yaml(text: str) -> list[YamlDoc]:
    """All documents of a YAML stream with safe_load semantics, plus key line numbers.

    Raises:
        InputError: a syntax error (with its line), a recursive alias, or a document whose
            aliases expand past MAX_YAML_NODES nodes (a "billion laughs" bomb).
    """
    import yaml

    loader = _yaml_loader()(text)
    docs: list[YamlDoc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _expanded_size(node, {}, set())
            data = loader.construct_document(node)
            lines: dict = {}
            spans: dict = {}
            _collect_lines(node, (), lines, spans, [0])
            docs.append(YamlDoc(data=data, lines=lines, spans=spans, line=node.start_mark.line + 1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"not valid YAML: {problem}", mark.line + 1 if mark is not None else None) from None
    except RecursionError:
        raise InputError("YAML nesting too deep") from None
    finally:
        loader.dispose()
    return docs
