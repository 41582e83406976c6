"""A stand-in for vLLM 0.26.0's OpenAI server on 127.0.0.1, for the ``verify --bench`` tests.

Answers GET /health, /version, /v1/models, /metrics and POST /v1/completions (streamed or not)
shaped like vLLM's (entrypoints/openai/completion/serving.py completion_stream_generator and
protocol.py): HTTP/1.1 with chunked transfer encoding, one ``data: {json}\\n\\n`` SSE event per
token, ``choices[0]`` with index/text/logprobs/finish_reason/stop_reason/prompt_token_ids/
token_ids (``text`` "" as under --skip-tokenizer-init), ``usage`` on every chunk when
``stream_options.continuous_usage_stats``, a final ``"choices": []`` usage chunk when
``include_usage``, then ``data: [DONE]``.

Timing is simulated, not batched: a request waits for one of ``max_num_seqs`` slots, its first
token comes ``ttft_s`` after it got one, each next token ``itl_s`` after the previous. So a
client's measured TTFT is ttft_s (plus queueing), its ITL itl_s.

In-process: ``FakeServer(ttft_s=..., itl_s=...).start()`` runs it on a thread and returns the
port. As a script it stands in for ``python -m vllm.entrypoints.openai.api_server`` (it takes
vLLM's flags; see $KVPLAN_BENCH_SERVER) and prints a few vLLM-like start-up log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time

VERSION = "0.26.0"


class FakeServer:
    def __init__(self, *, ttft_s=0.05, itl_s=0.01, max_num_seqs=256, max_model_len=4096, model="fake-model",
                 num_gpu_blocks=1000, block_size=16, port=0, chunked=True):
        self.ttft_s, self.itl_s, self.max_num_seqs = ttft_s, itl_s, max_num_seqs
        self.max_model_len, self.model, self.port = max_model_len, model, port
        self.num_gpu_blocks, self.block_size, self.chunked = num_gpu_blocks, block_size, chunked
        self.running = self.waiting = 0
        self.max_model_len_reported = True  # in /v1/models, as vLLM does (False: a server that does not)
        self.max_running = 0
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "request_success": 0, "num_preemptions": 0}
        self.requests: list[dict] = []  # what each completion asked for (for tests)
        self._loop = None
        self._thread = None
        self._ready = threading.Event()

    # -- HTTP -------------------------------------------------------------------------------
    async def _handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
            if method == "GET" and path == "/health":
                await self._send(writer, 200, b"", "text/plain")
            elif method == "GET" and path == "/version":
                await self._send_json(writer, 200, {"version": VERSION})
            elif method == "GET" and path == "/v1/models":
                card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm",
                        "root": self.model, "parent": None, "max_model_len": self.max_model_len, "permission": []}
                if not self.max_model_len_reported:
                    del card["max_model_len"]
                await self._send_json(writer, 200, {"object": "list", "data": [card]})
            elif method == "GET" and path == "/metrics":
                await self._send(writer, 200, self._metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")
            elif method == "POST" and path == "/v1/completions":
                await self._completion(writer, json.loads(body or b"{}"))
            else:
                await self._send_json(writer, 404, {"detail": "Not Found"})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _send(self, writer, status, body: bytes, ctype):
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "X")
        writer.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()

    async def _send_json(self, writer, status, doc):
        await self._send(writer, status, json.dumps(doc).encode(), "application/json")

    async def _event(self, writer, text: str):
        data = text.encode()
        if self.chunked:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        else:
            writer.write(data)
        await writer.drain()

    def _metrics(self) -> str:
        lab = f'engine="0",model_name="{self.model}"'
        out = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{lab}}} {float(self.running)}",
            f"vllm:num_requests_waiting{{{lab}}} {float(self.waiting)}",
            f"vllm:kv_cache_usage_perc{{{lab}}} {self.running / self.max_num_seqs}",
            f'vllm:cache_config_info{{block_size="{self.block_size}",cache_dtype="auto",engine="0",'
            f'gpu_memory_utilization="0.9",num_gpu_blocks="{self.num_gpu_blocks}",enable_prefix_caching="True"}} 1.0',
        ]
        for k, v in self.counters.items():
            out += [f"# TYPE vllm:{k} counter", f"vllm:{k}_total{{{lab}}} {float(v)}", f"vllm:{k}_created{{{lab}}} 1.7e9"]
        return "\n".join(out) + "\n"

    async def _completion(self, writer, req):
        prompt = req.get("prompt")
        n_out = req.get("max_tokens", 16)
        self.requests.append({k: v for k, v in req.items() if k != "prompt"} | {"prompt_len": len(prompt or [])})
        if not isinstance(prompt, list) or not all(isinstance(i, int) and i >= 0 for i in prompt):
            return await self._send_json(writer, 400, {"error": {"message": "prompt must be token ids here", "type": "BadRequestError", "param": None, "code": 400}})
        if len(prompt) + n_out > self.max_model_len:
            msg = (f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                   f"{len(prompt) + n_out} tokens ({len(prompt)} in the messages, {n_out} in the completion).")
            return await self._send_json(writer, 400, {"error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}})
        opts = req.get("stream_options") or {}
        usage_on, continuous = bool(opts.get("include_usage")), bool(opts.get("include_usage") and opts.get("continuous_usage_stats"))
        rid, created, model = f"cmpl-fake{len(self.requests)}", int(time.time()), req.get("model") or self.model
        self.waiting += 1
        async with self._slots:
            self.waiting -= 1
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.counters["prompt_tokens"] += len(prompt)
            try:
                if not req.get("stream"):
                    await asyncio.sleep(self.ttft_s + self.itl_s * (n_out - 1))
                    self.counters["generation_tokens"] += n_out
                    return await self._send_json(writer, 200, {
                        "id": rid, "object": "text_completion", "created": created, "model": model,
                        "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "length", "stop_reason": None}],
                        "usage": {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + n_out, "completion_tokens": n_out}})
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                             + (b"transfer-encoding: chunked\r\n" if self.chunked else b"connection: close\r\n") + b"\r\n")
                start = time.perf_counter()
                for k in range(1, n_out + 1):
                    due = start + self.ttft_s + self.itl_s * (k - 1)
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                    choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": "length" if k == n_out else None,
                              "stop_reason": None, "prompt_token_ids": None, "token_ids": None}
                    chunk = {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [choice]}
                    if continuous:
                        chunk["usage"] = {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + k, "completion_tokens": k}
                    self.counters["generation_tokens"] += 1
                    await self._event(writer, f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n")
                if usage_on:
                    final = {"id": rid, "object": "text_completion", "created": created, "model": model, "choices": [],
                             "usage": {"prompt_tokens": len(prompt), "total_tokens": len(prompt) + n_out, "completion_tokens": n_out}}
                    await self._event(writer, f"data: {json.dumps(final, separators=(',', ':'))}\n\n")
                await self._event(writer, "data: [DONE]\n\n")
                if self.chunked:
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                self.counters["request_success"] += 1
            finally:
                self.running -= 1

    # -- lifecycle --------------------------------------------------------------------------
    async def _main(self, stop: asyncio.Event | None = None):
        self._slots = asyncio.Semaphore(self.max_num_seqs)
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, limit=1 << 24)
        self.port = server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._ready.set()
        async with server:
            await self._stop.wait()

    def start(self) -> int:
        """Run on a daemon thread; the port."""
        def run():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._main())
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self.port

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(5)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def main(argv=None) -> None:
    """Stand in for vLLM's api_server: take its flags, print vLLM-like log lines, serve."""
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--fake-ttft", type=float, default=0.02)
    p.add_argument("--fake-itl", type=float, default=0.005)
    args, _ = p.parse_known_args(argv)
    import os
    env = {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}
    print(f"INFO 12-01 12:00:00 [api_server.py:1] vLLM API server version {VERSION}", flush=True)
    print(f"INFO 12-01 12:00:00 [api_server.py:2] FAKE_ENV {json.dumps(env)}", flush=True)
    print("INFO 12-01 12:00:01 [kv_cache_utils.py:1] GPU KV cache size: 16,000 tokens", flush=True)
    print("INFO 12-01 12:00:01 [kv_cache_utils.py:2] Maximum concurrency for 4,096 tokens per request: 3.91x", flush=True)
    fake = FakeServer(ttft_s=args.fake_ttft, itl_s=args.fake_itl, max_num_seqs=args.max_num_seqs,
                      max_model_len=args.max_model_len, model=args.model or "fake-model", port=args.port)
    try:
        asyncio.run(fake._main())
    except KeyboardInterrupt:
        print("INFO 12-01 12:00:09 [launcher.py:1] Shutting down FastAPI HTTP server.", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
