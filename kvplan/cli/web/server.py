"""The HTTP server of `kvplan web`: Python's standard library (http.server's
ThreadingHTTPServer), one thread per request, serving the page (kvplan/cli/web/static/, shipped
in the package) and the versioned JSON API (kvplan.cli.web.api).

Routes:
    GET  /                      the page (index.html)
    GET  /static/NAME           its script and style (a fixed list; no path is looked up)
    GET  /api/v1/gpus           `kvplan gpus --format json`
    GET  /api/v1/models         the bundled model ids (and whether local paths are allowed)
    GET  /api/v1/options        each command's keys, vLLM versions, dtypes (builds the form)
    GET  /api/v1/openapi.json   the OpenAPI 3.1 description
    POST /api/v1/estimate[?format=json|yaml|serve]   body: estimate's parameters
    POST /api/v1/plan | /api/v1/perf                 body: the command's parameters
    POST /api/v1/check          body: {"name": "deploy.yaml", "content": "...", other check keys}

Limits: request bodies over MAX_BODY_BYTES are refused (413): read and dropped first up to
DRAIN_BYTES (so the sending client gets the answer, not a broken pipe), unread beyond; a client has
SOCKET_TIMEOUT_S per read; child commands are bounded by Policy.timeout_s and Policy.max_jobs;
a Host header that is not the address the server was bound to is refused (403: a web page
elsewhere cannot reach a local server through DNS rebinding); POST bodies must be JSON
(so a page on another origin cannot send one without a CORS preflight, which is never granted).
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from kvplan.cli.web import api

MAX_BODY_BYTES = 1 << 20  # 1 MiB: a deployment file or a request object, never more
DRAIN_BYTES = 8 * MAX_BODY_BYTES  # a body over the limit but under this is read and dropped before the 413
SOCKET_TIMEOUT_S = 15
STATIC = Path(__file__).with_name("static")
STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css", "charts.js": "text/javascript"}
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Server(ThreadingHTTPServer):
    """The kvplan web server: ThreadingHTTPServer plus the Policy and a job semaphore."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], policy: api.Policy, quiet: bool = False):
        self.address_family = _family(address[0])
        super().__init__(address, Handler)
        self.policy = policy
        self.jobs = threading.BoundedSemaphore(policy.max_jobs)
        self.quiet = quiet

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"


def _family(host: str):
    import socket

    return socket.AF_INET6 if ":" in host else socket.AF_INET


class Handler(BaseHTTPRequestHandler):
    """One request: route it, answer it, never let an exception reach the client as a traceback."""

    server: Server
    timeout = SOCKET_TIMEOUT_S
    server_version = "kvplan-web"
    protocol_version = "HTTP/1.1"

    # -- plumbing

    def log_message(self, format, *args):  # noqa: A002 - http.server's signature
        if not self.server.quiet:
            sys.stderr.write("kvplan web: %s %s\n" % (self.address_string(), format % args))

    def _send(self, reply: api.Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        if reply.exit_code is not None:
            self.send_header("X-Kvplan-Exit-Code", str(reply.exit_code))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
        bound = self.server.server_address[0]
        if bound in ("0.0.0.0", "::"):
            return True  # bound to every address on purpose (--host): any name may reach it
        return host in LOOPBACK or host == bound

    def _guarded(self, answer) -> None:
        if not self._host_ok():
            self._send(api.error_reply(403, "Host header not accepted: this server answers its own address only", exit_code=None))
            return
        try:
            reply = answer()
        except Exception as e:  # noqa: BLE001 - the client gets one line, the log the rest
            import traceback

            traceback.print_exc(file=sys.stderr)
            reply = api.error_reply(500, f"internal error ({type(e).__name__}); the server's log has the details", exit_code=None)
        self._send(reply)

    # -- GET

    def do_GET(self):  # noqa: N802 - http.server's name
        self._guarded(self._get)

    def do_HEAD(self):  # noqa: N802
        self._guarded(self._get)

    def _get(self) -> api.Reply:
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            return _static("index.html", "text/html; charset=utf-8")
        if path.startswith("/static/"):
            name = path[len("/static/"):]
            if name in STATIC_FILES:
                return _static(name, STATIC_FILES[name] + "; charset=utf-8")
        if path == "/favicon.ico":
            return api.Reply(204, b"", "text/plain")
        policy = self.server.policy
        if path == "/api/v1/gpus":
            return api.json_reply(api.gpus_document(), exit_code=None)
        if path == "/api/v1/models":
            return api.json_reply(api.models_document(policy), exit_code=None)
        if path == "/api/v1/options":
            return api.json_reply(api.options_document(policy), exit_code=None)
        if path == "/api/v1/openapi.json":
            from kvplan.cli.web.openapi import openapi_document

            return api.json_reply(openapi_document(), exit_code=None)
        if path.rstrip("/") in {f"/api/v1/{n}" for n in api.FORMATS}:
            return api.error_reply(405, f"{path}: use POST with a JSON body", exit_code=None)
        return api.error_reply(404, f"{path}: no such page or endpoint", hint="see /api/v1/openapi.json", exit_code=None)

    # -- POST

    def do_POST(self):  # noqa: N802
        self._guarded(self._post)

    def _post(self) -> api.Reply:
        parts = urlsplit(self.path)
        name = parts.path.rstrip("/").rsplit("/", 1)[-1]
        if parts.path.rstrip("/") != f"/api/v1/{name}" or name not in api.FORMATS:
            return api.error_reply(404, f"{parts.path}: no such endpoint", hint="see /api/v1/openapi.json", exit_code=None)
        body, problem = self._read_json()
        if problem is not None:
            return problem
        fmt = parse_qs(parts.query).get("format", ["json"])[-1]
        stdin, extra = None, ()
        if name == "check":
            body, stdin, extra, problem = _check_body(body)
            if problem is not None:
                return problem
        return api.run(name, body, self.server.policy, fmt=fmt, stdin=stdin, jobs=self.server.jobs, extra_argv=extra)

    def _read_json(self):
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            self.close_connection = True
            return None, api.error_reply(415, "request body: send JSON (Content-Type: application/json)")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            return None, api.error_reply(411, "request body: Content-Length is required")
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            if length <= DRAIN_BYTES:
                # read (and drop) a body a little over the limit, so the client, still sending it,
                # gets the 413 instead of a broken pipe; a larger one is refused unread
                left = length
                while left > 0:
                    chunk = self.rfile.read(min(1 << 16, left))
                    if not chunk:
                        break
                    left -= len(chunk)
            return None, api.error_reply(413, f"request body: {length} bytes is over the limit of {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length)
        try:
            return json.loads(raw.decode("utf-8")), None
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            return None, api.error_reply(400, f"request body: not JSON ({str(e).splitlines()[0][:80]})")


def _check_body(body):
    """``check``'s body -> (the other check keys, the file's text for stdin, the command line's
    head ``- --stdin-name NAME``, None) or (None, None, None, a 400)."""
    if not isinstance(body, dict):
        return None, None, None, api.error_reply(400, "request body: expected a JSON object {\"name\": ..., \"content\": ...}")
    body = dict(body)
    content, name = body.pop("content", None), body.pop("name", None)
    if not isinstance(content, str):
        return None, None, None, api.error_reply(400, "content: expected the deployment file's text as a string")
    if not isinstance(name, str) or not name.strip() or "/" in name or "\\" in name:
        return None, None, None, api.error_reply(
            400, "name: expected the file's base name (deploy.yaml, serve.sh, Dockerfile): it decides how the text is read"
        )
    # `kvplan check - --stdin-name NAME`: the text comes on standard input, named NAME
    return body, content, ("-", f"--stdin-name={name}"), None


_CACHE: dict[str, bytes] = {}


def _static(name: str, kind: str) -> api.Reply:
    if name not in _CACHE:
        _CACHE[name] = (STATIC / name).read_bytes()
    return api.Reply(200, _CACHE[name], kind, headers={"Cache-Control": "no-cache"})


def make_server(host: str = "127.0.0.1", port: int = 0, policy: api.Policy | None = None, quiet: bool = False) -> Server:
    """A bound (not yet serving) Server; port 0 takes a free port (see Server.url).

    Raises:
        OSError: the address cannot be bound (in use, not this machine's).
    """
    return Server((host, port), policy or api.Policy(), quiet=quiet)


def warm_up() -> None:
    """Build the commands' parsers and run one estimate of a bundled model (imports the whole
    estimate path), so the first request does not pay for them (run in a thread after the
    server is listening; a request meanwhile waits for it at most once)."""
    api.run("estimate", {"model": "meta-llama/Meta-Llama-3-8B", "curves": True}, api.Policy())
    for name in api.FORMATS:
        api.parameters(name)
