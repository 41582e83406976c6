"""A client for a kvplan web server, and a server on 127.0.0.1 (a free port) in a thread."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request


class Client:
    """GET/POST against one server; returns (status, headers, parsed body)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def request(self, path: str, body=None, *, raw: bytes | None = None, headers: dict | None = None, method=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, headers=hdrs, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, h, payload = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, h, payload = e.code, e.headers, e.read()
        kind = h.get("Content-Type", "")
        return status, h, json.loads(payload) if kind.startswith("application/json") else payload.decode()

    def get(self, path, **kw):
        return self.request(path, **kw)

    def post(self, path, body, **kw):
        return self.request(path, body, **kw)


def start(policy=None):
    from kvplan.cli.web.server import make_server

    server = make_server("127.0.0.1", 0, policy, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server
