"""A minimal asyncio HTTP/1.1 client on the standard library (for ``kvplan verify --bench``).

Only what talking to vLLM's OpenAI server on 127.0.0.1 needs: GET a small document, POST a JSON
body and read a ``text/event-stream`` answer line by line (chunked transfer decoding, or a body
delimited by Content-Length or by the connection closing). One connection per request
(``Connection: close``), like a benchmark client that does not share sockets between streams.
No TLS (``http://`` only). No aiohttp/httpx: the measuring side must run wherever kvplan runs.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import AsyncIterator, Optional
from urllib.parse import urlsplit

from kvplan.errors import KvplanError

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    """host, port and path prefix of an ``http://host:port[/prefix]`` server address."""

    host: str
    port: int
    prefix: str = ""

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{self.prefix}{path}"


def parse_endpoint(text: str) -> Endpoint:
    """``http://HOST:PORT`` (optional path prefix) -> Endpoint.

    Raises:
        KvplanError: not an http:// address with a host (exit 2), naming --endpoint.
    """
    parts = urlsplit(text.strip())
    if parts.scheme != "http" or not parts.hostname:
        raise KvplanError(
            f"--endpoint: {text!r} is not an http://HOST:PORT address",
            hint="e.g. --endpoint http://127.0.0.1:8000 (the server vLLM's api_server started)",
        )
    try:
        port = parts.port or 80
    except ValueError:
        raise KvplanError(f"--endpoint: {text!r} has a port that is not a number from 0 to 65535") from None
    return Endpoint(parts.hostname, port, parts.path.rstrip("/"))


class HttpError(Exception):
    """A connection that failed or an answer that is not HTTP/1.x."""


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise HttpError("response headers too long") from None
    except asyncio.IncompleteReadError:
        raise HttpError("connection closed before the response headers") from None
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
        raise HttpError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(status_line[1]), headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body as it arrives: chunked, by Content-Length, or until the connection closes."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        # decoded from bulk reads: one wake-up per read however many chunks it holds (a
        # streaming client at 256 concurrent streams reads ~10^4 chunks per second)
        buf = b""
        while True:
            data = await reader.read(65536)
            if not data:
                return
            buf += data
            out = []
            while True:
                eol = buf.find(b"\r\n")
                if eol < 0:
                    break
                try:
                    size = int(buf[:eol].split(b";", 1)[0].strip() or b"0", 16)
                except ValueError:
                    raise HttpError(f"bad chunk size line {buf[:eol][:40]!r}") from None
                if size == 0:
                    if out:
                        yield b"".join(out)
                    return  # the last chunk (trailers, if any, are not read)
                end = eol + 2 + size
                if len(buf) < end + 2:
                    break
                out.append(buf[eol + 2:end])
                buf = buf[end + 2:]
            if out:
                yield b"".join(out)
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 65536))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


class Response:
    """An open response: ``status``, ``headers``; ``lines()`` or ``read()`` the body, then ``close()``."""

    def __init__(self, reader, writer, status: int, headers: dict[str, str]):
        self.reader, self.writer, self.status, self.headers = reader, writer, status, headers

    async def lines(self) -> AsyncIterator[bytes]:
        """The body split at ``\\n`` (each line without it), as the bytes arrive."""
        buf = b""
        async for data in _body_chunks(self.reader, self.headers):
            buf += data
            while True:
                i = buf.find(b"\n")
                if i < 0:
                    break
                line, buf = buf[:i], buf[i + 1:]
                yield line.rstrip(b"\r")
        if buf:
            yield buf

    async def read(self) -> bytes:
        out = bytearray()
        async for data in _body_chunks(self.reader, self.headers):
            out += data
            if len(out) > MAX_BODY_BYTES:
                raise HttpError("response body too large")
        return bytes(out)

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


async def request(endpoint: Endpoint, method: str, path: str, body: Optional[dict] = None, timeout_s: float = 30.0) -> Response:
    """Open a connection, send one request (JSON ``body`` for POST), return the open Response.

    Raises:
        HttpError: cannot connect, or the answer is not HTTP/1.x (OSError is wrapped).
        asyncio.TimeoutError: no response headers within ``timeout_s``.
    """
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(endpoint.host, endpoint.port, limit=MAX_HEADER_BYTES * 16), timeout_s
        )
    except OSError as exc:
        raise HttpError(f"cannot connect to {endpoint.host}:{endpoint.port}: {exc.strerror or exc}") from None
    payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"{method} {endpoint.prefix}{path} HTTP/1.1\r\nHost: {endpoint.host}:{endpoint.port}\r\n"
        f"User-Agent: kvplan-bench\r\nAccept: */*\r\nConnection: close\r\n"
    )
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    try:
        writer.write(head.encode("latin-1") + b"\r\n" + payload)
        await writer.drain()
        status, headers = await asyncio.wait_for(_read_head(reader), timeout_s)
    except OSError as exc:
        writer.close()
        raise HttpError(f"connection to {endpoint.host}:{endpoint.port} failed: {exc}") from None
    except BaseException:
        writer.close()
        raise
    return Response(reader, writer, status, headers)


async def get_json(endpoint: Endpoint, path: str, timeout_s: float = 10.0):
    """GET ``path`` and decode its JSON body. Raises HttpError (also for a non-200 status)."""
    resp = await request(endpoint, "GET", path, timeout_s=timeout_s)
    try:
        body = await asyncio.wait_for(resp.read(), timeout_s)
    finally:
        resp.close()
    if resp.status != 200:
        raise HttpError(f"GET {path}: HTTP {resp.status}")
    try:
        return json.loads(body)
    except ValueError:
        raise HttpError(f"GET {path}: not JSON") from None


async def get_text(endpoint: Endpoint, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
    """GET ``path``: (status, body text)."""
    resp = await request(endpoint, "GET", path, timeout_s=timeout_s)
    try:
        body = await asyncio.wait_for(resp.read(), timeout_s)
    finally:
        resp.close()
    return resp.status, body.decode("utf-8", errors="replace")
