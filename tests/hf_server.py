"""A small, real Hugging Face Hub look-alike for tests: stdlib HTTP servers on 127.0.0.1.

huggingface_hub 2.4.0 talks to it through its ordinary code paths (no mocking). What it needs,
read from huggingface_hub 2.4.0 (file_download.py, hf_api.py, utils/_http.py):

* ``hf_hub_download`` / ``get_hf_file_metadata`` send ``HEAD {endpoint}/{repo}/resolve/{rev}/{file}``
  and need ``X-Repo-Commit`` (else FileMetadataError) and ``ETag`` (``X-Linked-Etag`` wins when
  present), plus ``Content-Length`` / ``X-Linked-Size`` for the size. Redirects to another origin
  are not followed by the HEAD: the metadata is read from the 3xx response itself and the file is
  then fetched from ``Location`` (that is how LFS files on a CDN look). Then a plain GET.
* ``HfApi.get_safetensors_metadata`` (2.4.0) uses only the resolve endpoint: ``file_exists``
  (a HEAD) for ``model.safetensors`` then ``model.safetensors.index.json``, ``hf_hub_download`` of
  the index, and for each file a GET with ``Range: bytes=0-100000`` (and a second ranged GET when
  the header is larger), following redirects. No ``/api/models`` call.
* Errors are told apart by the ``X-Error-Code`` header (utils/_http.py: hf_raise_for_status):
  ``GatedRepo`` (401 without a token, 403 with a token that has no access), ``RepoNotFound``
  (404), ``RevisionNotFound`` (404), ``EntryNotFound`` (404, with ``X-Repo-Commit``).

Two listening sockets: the Hub itself and a "CDN" on another port (another origin), where
``*.safetensors`` files are served from, like LFS files on huggingface.co.

Every request is recorded (method, path, headers) so tests can assert on what the client sent.

Environment: huggingface_hub reads HF_ENDPOINT, HF_HUB_OFFLINE, HF_HOME, HF_HUB_CACHE, the
timeouts and the token path once, into ``huggingface_hub.constants``, when it is first imported
(tests/conftest.py sets HF_HUB_OFFLINE=1 before that). Changing ``os.environ`` later does not
reach it. ``set_hf_env`` therefore sets the environment with ``monkeypatch`` and then re-derives
those constants by executing huggingface_hub's own ``constants.py`` afresh (a private copy) and
copying the values over with ``monkeypatch.setattr``, so the library's own rules decide the
values and everything is restored after the test. (HF_TOKEN is read at every request by
``get_token()``, so it needs no resync.)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

# ---------------------------------------------------------------------------------------------
# Building safetensors bytes by hand (8-byte little-endian header length, JSON header, data).


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]], *, metadata: dict | None = None) -> bytes:
    """A valid safetensors file: name -> (dtype, shape); the data bytes are zeros.

    Element sizes (bytes) used for the data offsets: F32/I32 4, BF16/F16 2, F8_*/I8/U8 1, F64/I64 8.
    """
    sizes = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1}
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        nbytes = n * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


def safetensors_index(weight_map: dict[str, str], total_size: int = 0) -> bytes:
    """A model.safetensors.index.json: tensor name -> shard file name."""
    return json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map}).encode()


# ---------------------------------------------------------------------------------------------
# The fake Hub.


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeRepo:
    """A model repo: commits (sha -> files) and refs (branch/tag -> sha), plus behaviour knobs."""

    repo_id: str
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    gated: bool = False
    fail_status: int | None = None  # answer every request with this status (e.g. 500)
    delay_s: float = 0.0  # wait this long before answering (the "slow" repo)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    server: str  # "hub" or "cdn"


_LFS_SUFFIXES = (".safetensors",)
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class FakeHub:
    """A Hub at ``self.url`` and its CDN at ``self.cdn_url``; use as a context manager or start/stop.

    ``granted_tokens``: tokens that may read gated repos.
    """

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.granted_tokens: set[str] = set()
        self.requests: list[RecordedRequest] = []
        self.blobs: dict[str, bytes] = {}  # sha256 -> bytes, served by the CDN
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.url = ""
        self.cdn_url = ""

    # -- repos --------------------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        branch: str = "main",
        gated: bool = False,
        fail_status: int | None = None,
        delay_s: float = 0.0,
    ) -> str:
        """Create (or extend) a repo with one commit holding ``files`` at ``branch``; returns the commit sha."""
        repo = self.repos.setdefault(repo_id, FakeRepo(repo_id))
        repo.gated = repo.gated or gated
        repo.fail_status = fail_status if fail_status is not None else repo.fail_status
        repo.delay_s = max(repo.delay_s, delay_s)
        digest = hashlib.sha1(repo_id.encode() + branch.encode())
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        sha = digest.hexdigest()
        repo.commits[sha] = dict(files)
        repo.refs[branch] = sha
        for name, data in files.items():
            if name.endswith(_LFS_SUFFIXES):
                self.blobs[hashlib.sha256(data).hexdigest()] = data
        return sha

    def requests_to(self, fragment: str, method: str | None = None) -> list[RecordedRequest]:
        """Recorded requests whose path contains ``fragment`` (optionally of one method)."""
        with self._lock:
            return [r for r in self.requests if fragment in r.path and (method is None or r.method == method)]

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> "FakeHub":
        for role in ("hub", "cdn"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
            server.daemon_threads = True
            server.fake_hub = self  # type: ignore[attr-defined]
            server.role = role  # type: ignore[attr-defined]
            server.handle_error = lambda request, client_address: None  # client gave up (timeouts): ignore
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)
        self.url = f"http://127.0.0.1:{self._servers[0].server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self._servers[1].server_address[1]}"
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes up the slow handlers
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeHub/1.0"

    def log_message(self, format, *args):  # noqa: A002 - keep test output quiet
        pass

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def hub(self) -> FakeHub:
        return self.server.fake_hub  # type: ignore[attr-defined]

    def _record(self) -> None:
        rec = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            server=self.server.role,  # type: ignore[attr-defined]
        )
        with self.hub._lock:
            self.hub.requests.append(rec)

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        headers.update(extra or {})
        self._send(status, headers, json.dumps({"error": message}).encode())

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch()

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        self._record()
        path = urlsplit(self.path).path
        if self.server.role == "cdn":  # type: ignore[attr-defined]
            return self._cdn(path)
        parts = path.lstrip("/").split("/")
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id = f"{parts[0]}/{parts[1]}"
            return self._resolve(repo_id, unquote(parts[3]), unquote("/".join(parts[4:])))
        self._error(404, None, "Sorry, we can't find the page you are looking for.")

    # -- the Hub's /{repo}/resolve/{revision}/{filename} ------------------------------------

    def _resolve(self, repo_id: str, revision: str, filename: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        if repo.delay_s:
            self.hub._stop.wait(repo.delay_s)
        if repo.fail_status is not None:
            return self._error(repo.fail_status, None, "Internal Error - We're working hard to fix this as soon as possible!")
        if repo.gated:
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            if token is None:
                return self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.",
                )
            if token not in self.hub.granted_tokens:
                return self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit {self.hub.url}/{repo_id} to ask for access.",
                )
        sha = repo.refs.get(revision) or (revision if revision in repo.commits else None)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        files = repo.commits[sha]
        if filename not in files:
            return self._error(404, "EntryNotFound", f"{filename} does not exist on \"{revision}\"", {"X-Repo-Commit": sha})
        data = files[filename]
        if filename.endswith(_LFS_SUFFIXES):
            # Like an LFS file on huggingface.co: a redirect to the CDN, the metadata on the redirect.
            sha256 = hashlib.sha256(data).hexdigest()
            return self._send(
                302,
                {
                    "Location": f"{self.hub.cdn_url}/cdn/{sha256}",
                    "X-Repo-Commit": sha,
                    "ETag": f'"{_git_blob_sha1(data)}"',
                    "X-Linked-Etag": f'"{sha256}"',
                    "X-Linked-Size": str(len(data)),
                    "Content-Length": "0",
                },
            )
        self._send_bytes(data, {"X-Repo-Commit": sha, "ETag": f'"{_git_blob_sha1(data)}"'})

    # -- the CDN ----------------------------------------------------------------------------

    def _cdn(self, path: str) -> None:
        m = re.fullmatch(r"/cdn/([0-9a-f]{64})", path)
        data = self.hub.blobs.get(m.group(1)) if m else None
        if data is None:
            return self._send(404, {"Content-Type": "text/plain"}, b"NoSuchKey")
        self._send_bytes(data, {"ETag": f'"{m.group(1)}"'})

    def _send_bytes(self, data: bytes, headers: dict[str, str]) -> None:
        """200 with the whole body, or 206 for a ``Range: bytes=a-b`` request (b clamped to the end)."""
        headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", **headers}
        rng = self.headers.get("Range")
        m = _RANGE.match(rng.strip()) if rng else None
        if m and (m.group(1) or m.group(2)):
            size = len(data)
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:  # suffix range: the last N bytes
                start, end = max(size - int(m.group(2)), 0), size - 1
            if start >= size or start > end:
                return self._send(416, {"Content-Range": f"bytes */{size}"})
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
            return self._send(206, headers, data[start : end + 1])
        self._send(200, headers, data)


# ---------------------------------------------------------------------------------------------
# Environment handling and the pytest fixture.

# huggingface_hub.constants values derived from the environment at import time that the Hub
# source depends on (endpoint, offline mode, cache and token locations, timeouts).
_SYNCED_CONSTANTS = (
    "ENDPOINT",
    "HUGGINGFACE_CO_URL_TEMPLATE",
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HUGGINGFACE_HUB_CACHE",
    "HF_HUB_CACHE",
    "HF_TOKEN_PATH",
    "HF_STORED_TOKENS_PATH",
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "AGENT_HARNESSES_PATH",  # huggingface_hub 2.4 caches a registry fetched from {ENDPOINT} here
)


def _fresh_hf_constants():
    """Execute huggingface_hub/constants.py again, privately, against the current os.environ."""
    import huggingface_hub.constants as live

    spec = importlib.util.spec_from_file_location("_kvplan_tests_hf_constants", live.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def set_hf_env(monkeypatch: pytest.MonkeyPatch, **env: str | None) -> None:
    """Set (or, with None, unset) environment variables, then resync huggingface_hub.constants.

    Both the environment and the constants are restored by ``monkeypatch`` after the test.
    """
    # Import first: a first import after the variables are set would compute the constants from
    # them, and monkeypatch would then "restore" the fake values after the test.
    import huggingface_hub.constants as live

    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)

    fresh = _fresh_hf_constants()
    for name in _SYNCED_CONSTANTS:
        monkeypatch.setattr(live, name, getattr(fresh, name))


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A running FakeHub, with huggingface_hub pointed at it and at an empty cache under tmp_path.

    Sets HF_ENDPOINT, HF_HOME and HF_HUB_CACHE; clears HF_HUB_OFFLINE (set by conftest.py),
    TRANSFORMERS_OFFLINE, tokens (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, OIDC) and timeout overrides,
    so the user's own token file or cache is never read. Then resyncs huggingface_hub.constants.
    """
    hub = FakeHub().start()
    home = tmp_path / "hf_home"
    set_hf_env(
        monkeypatch,
        HF_ENDPOINT=hub.url,
        HF_HOME=str(home),
        HF_HUB_CACHE=str(home / "hub"),
        HUGGINGFACE_HUB_CACHE=None,
        HF_TOKEN_PATH=None,
        HF_HUB_OFFLINE=None,
        TRANSFORMERS_OFFLINE=None,
        HF_TOKEN=None,
        HUGGING_FACE_HUB_TOKEN=None,
        HF_OIDC_RESOURCE=None,
        HF_HUB_ETAG_TIMEOUT=None,
        HF_HUB_DOWNLOAD_TIMEOUT=None,
        HF_HUB_DISABLE_IMPLICIT_TOKEN=None,
    )
    try:
        yield hub
    finally:
        hub.stop()
        # The library keeps one shared HTTP client; drop it so no connection outlives the server.
        from huggingface_hub import close_session

        close_session()


def closed_port_url() -> str:
    """An http://127.0.0.1:PORT URL where nothing listens (bound then closed at once)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
