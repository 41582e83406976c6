"""One streamed completion request against vLLM's OpenAI server, timed chunk by chunk.

What vLLM sends (the version of kvplan.verify.versions; entrypoints/openai/completion/serving.py
completion_stream_generator, protocol.py CompletionStreamResponse): an SSE stream of ``data: {json}`` events, one per engine
output of the request (``--stream-interval`` 1: one per engine step that produced a token),
each ``{"id", "object": "text_completion", "created", "model", "choices": [{"index", "text",
"logprobs", "finish_reason", "stop_reason", ...}], "usage": ...}``; with
``stream_options.include_usage`` and ``continuous_usage_stats`` every chunk carries
``usage.completion_tokens`` (the tokens so far), and a last chunk with ``"choices": []`` carries
the totals; then ``data: [DONE]``. Under ``--skip-tokenizer-init`` ``text`` is "" but a chunk
is still sent for each output that has token ids (vLLM drops only chunks with neither text nor
token ids before the first token: a chunked prefill step). So tokens are counted from
``usage.completion_tokens``, never from text. An error mid-stream is a ``data: {"error": ...}``
event.

Prompts are token ids (``"prompt": [ids]``): no tokenizer is needed on either side.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Optional

from kvplan.verify.bench.http import Endpoint, HttpError, request

# Token ids are drawn from [PROMPT_ID_MARGIN, vocab_size - PROMPT_ID_MARGIN): away from the
# special tokens most vocabularies put at either end.
PROMPT_ID_MARGIN = 100


def random_prompt(rng: random.Random, length: int, vocab_size: int) -> list[int]:
    """``length`` token ids uniform in [100, vocab_size - 100) from ``rng`` (seeded by the caller).

    Raises:
        ValueError: vocab_size too small for the margin (<= 200 + 1).
    """
    hi = vocab_size - PROMPT_ID_MARGIN
    if hi <= PROMPT_ID_MARGIN:
        raise ValueError(f"vocab_size {vocab_size} leaves no token ids between the margins")
    return [rng.randrange(PROMPT_ID_MARGIN, hi) for _ in range(length)]


@dataclass
class Timing:
    """One request as the client saw it. Times are ``time.perf_counter()`` seconds.

    Attributes:
        index: its number within the point (order of sending).
        prompt_tokens / max_tokens: what was asked (input length, output length).
        sent: when the request bytes were written.
        chunk_times: arrival time of each streamed chunk that carried tokens.
        chunk_tokens: tokens in each of those chunks (from usage.completion_tokens deltas).
        finished: when ``[DONE]`` (or the end of the stream) arrived; None if it never did.
        output_tokens: tokens received in all (usage totals when sent, else the chunk sum).
        server_prompt_tokens: usage.prompt_tokens as vLLM counted them (None: no usage chunk).
        error: why the request failed (HTTP status, an error event, a broken stream), else None.
    """

    index: int
    prompt_tokens: int
    max_tokens: int
    sent: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    finished: Optional[float] = None
    output_tokens: int = 0
    server_prompt_tokens: Optional[int] = None
    error: Optional[str] = None


_COMPLETION_TOKENS = re.compile(rb'"completion_tokens":\s*(\d+)')
_PROMPT_TOKENS = re.compile(rb'"prompt_tokens":\s*(\d+)')


def _int_of(rx: "re.Pattern[bytes]", data: bytes) -> Optional[int]:
    """The integer ``rx`` captures in ``data`` (JSON text), or None."""
    m = rx.search(data)
    return int(m.group(1)) if m else None


def _error_message(data: bytes) -> str:
    try:
        err = json.loads(data).get("error")
    except (ValueError, AttributeError):
        return data[:300].decode("utf-8", "replace")
    return str(err.get("message") if isinstance(err, dict) else err)[:300]


def completion_body(model: str, prompt: list[int], output_len: int) -> dict:
    """The /v1/completions JSON for one benchmark request (vLLM CompletionRequest fields):
    exactly ``output_len`` tokens (``ignore_eos``, ``min_tokens`` = ``max_tokens``), greedy,
    streamed with per-chunk usage."""
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": output_len,
        "min_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }


async def send_completion(
    endpoint: Endpoint, model: str, prompt: list[int], output_len: int, index: int, timeout_s: float = 600.0
) -> Timing:
    """Send one streamed completion and time every chunk. Never raises for a failed request:
    the Timing's ``error`` says what went wrong (the drivers count failures)."""
    t = Timing(index=index, prompt_tokens=len(prompt), max_tokens=output_len)
    body = completion_body(model, prompt, output_len)
    clock = time.perf_counter
    t.sent = clock()
    resp = None
    try:
        resp = await request(endpoint, "POST", "/v1/completions", body, timeout_s=timeout_s)
        if resp.status != 200:
            text = (await asyncio.wait_for(resp.read(), 10.0)).decode("utf-8", "replace")
            t.error = f"HTTP {resp.status}: {text[:300]}"
            return t
        seen = 0
        async for line in resp.lines():
            now = clock()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                t.finished = now
                break
            # read the counts without decoding the whole chunk (~10^4 chunks/s at high concurrency)
            if b'"error"' in data and b'"choices"' not in data:
                t.error = "server error: " + _error_message(data)
                break
            total = _int_of(_COMPLETION_TOKENS, data)
            if b'"choices":[]' in data or b'"choices": []' in data:  # the final usage chunk
                if total is not None:
                    seen = total
                t.server_prompt_tokens = _int_of(_PROMPT_TOKENS, data)
                continue
            n = (total - seen) if total is not None else 1
            if n > 0:
                t.chunk_times.append(now)
                t.chunk_tokens.append(n)
                seen += n
        t.output_tokens = seen if seen else sum(t.chunk_tokens)
        if t.finished is None and t.error is None:
            t.error = "stream ended without [DONE]"
    except (HttpError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
        t.error = f"{type(exc).__name__}: {exc}"
    finally:
        if resp is not None:
            resp.close()
    return t
