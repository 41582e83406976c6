"""``kvplan verify --bench``: start vLLM's server once (or use a running one), run a grid of
workload points against it, write the record.

Order of one run: read the model's config.json (vocab size, MoE or not) -> start the server
(kvplan.verify.bench.server) and wait for /health -> GET /version, /v1/models, /metrics ->
for each point: scrape /metrics, run the point (kvplan.verify.bench.workload) while sampling
the KV-cache usage gauge, wait until the server is idle, scrape again -> stop the server ->
read its start-up log with kvplan.verify.log (num_gpu_blocks, KV tokens, ...) -> the record
(kvplan.verify.bench.record). The record file is rewritten (atomically) after every point, so
a run cut short still leaves the points it finished, marked ``complete: false`` in ``notes``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import datetime as _dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import kvplan
from kvplan.errors import EnvironmentMissing, KvplanError
from kvplan.verify.bench import metrics as prom
from kvplan.verify.bench.http import Endpoint, HttpError, get_json, get_text
from kvplan.verify.bench.record import BenchRecord, PointRecord, RequestRecord, Workload, summarize
from kvplan.verify.bench.server import SERVER_OVERRIDE_ENV, Server, start_server, wait_ready
from kvplan.verify.bench.workload import DEFAULT_TOKEN_LIMIT, PointRun, grid, resolve_rate, run_point, warmup_points

SAMPLE_EVERY_S = 0.5
# vLLM refreshes its gauges at each engine step: after an abort (a cancelled request) an idle
# engine may leave num_requests_running stale, so the wait for idle is capped
IDLE_WAIT_S = 10.0
DEFAULT_START_TIMEOUT_S = 900.0
# start-up figures copied from the parsed server log into the record (kvplan.verify.log.VllmLog)
LOG_FIELDS = (
    "vllm_version", "num_gpu_blocks", "block_size", "gpu_kv_cache_tokens", "max_concurrency", "kv_cache_bytes",
    "weights_bytes", "activation_peak_bytes", "non_torch_bytes", "cudagraph_bytes", "max_num_seqs",
    "max_num_batched_tokens", "max_model_len", "attention_backend", "init_engine_s", "startup_s",
)


def event_loop_name() -> str:
    """"uvloop" when it is importable (vLLM depends on it; its event loop halves the client's
    cost per streamed chunk) on Python >= 3.11, else "asyncio" (the standard library's)."""
    if sys.version_info < (3, 11) or os.environ.get("KVPLAN_BENCH_LOOP") == "asyncio":
        return "asyncio"
    return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"


def run_async(coro):
    """Run ``coro`` to completion on a fresh event loop (event_loop_name's kind)."""
    if event_loop_name() == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    return asyncio.run(coro)


def vocab_size_of(config: dict) -> int:
    """config.json's vocab_size (top level, else text_config / llm_config).

    Raises:
        KvplanError: no positive integer vocab_size (the prompts' token ids need it).
    """
    for part in (config, config.get("text_config"), config.get("llm_config")):
        if isinstance(part, dict):
            v = part.get("vocab_size")
            if isinstance(v, int) and not isinstance(v, bool) and v > 200:
                return v
    raise KvplanError("config.json: no vocab_size (an integer > 200) to draw prompt token ids from")


def raise_open_files_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: an open loop above saturation holds hundreds of
    connections (one per request in flight), past the usual soft limit of 1024 with the server's."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass


def gpu_info() -> tuple[Optional[str], Optional[int]]:
    """(GPU name, GPU count) from ``nvidia-smi``; (None, None) without it."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None, None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None, None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return (names[0], len(names)) if names else (None, None)


def request_records(run: PointRun) -> list[RequestRecord]:
    """The client's perf_counter timings -> the record's compact per-request fields."""
    out = []
    for t in run.timings:
        gaps, prev = [], t.sent
        for c in t.chunk_times:
            gaps.append(round((c - prev) * 1e6))
            prev = c
        tokens = list(t.chunk_tokens) if any(n != 1 for n in t.chunk_tokens) else []
        out.append(RequestRecord(
            index=t.index, prompt_tokens=t.prompt_tokens, max_tokens=t.max_tokens, sent_s=round(t.sent - run.start, 6),
            gaps_us=gaps, chunk_tokens=tokens, done_us=None if t.finished is None else round((t.finished - t.sent) * 1e6),
            output_tokens=t.output_tokens, server_prompt_tokens=t.server_prompt_tokens, error=t.error,
        ))
    return out


async def _scrape(endpoint: Endpoint) -> tuple[dict, dict]:
    try:
        status, text = await get_text(endpoint, "/metrics", timeout_s=10.0)
    except (HttpError, asyncio.TimeoutError, OSError):
        return {}, {}
    if status != 200:
        return {}, {}
    return prom.parse_prometheus(text)


async def _sampler(endpoint: Endpoint, t0: float, samples: list, stop: asyncio.Event) -> None:
    while not stop.is_set():
        values, _ = await _scrape(endpoint)
        if values:
            samples.append([
                round(time.perf_counter() - t0, 3),
                values.get("vllm:kv_cache_usage_perc"),
                values.get("vllm:num_requests_running"),
                values.get("vllm:num_requests_waiting"),
            ])
        try:
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
        except asyncio.TimeoutError:
            pass


async def _wait_idle(endpoint: Endpoint, limit_s: float) -> None:
    """Until the server reports no running or waiting request (at most ``limit_s``)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        values, _ = await _scrape(endpoint)
        if not values or (values.get("vllm:num_requests_running", 0) + values.get("vllm:num_requests_waiting", 0)) == 0:
            return
        await asyncio.sleep(0.25)


def _read_server_log(path: Path) -> dict:
    """The start-up figures kvplan.verify.log reads from the server's log (LOG_FIELDS), and the
    log's path; a log it cannot read gives only the path and why (the record is still written)."""
    from kvplan.verify.log import parse_log

    out: dict = {"path": str(path)}
    try:
        log = parse_log(path.read_text(encoding="utf-8", errors="replace"))
    except Exception as exc:  # a figure-less record beats no record after a long run
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out.update({k: getattr(log, k) for k in LOG_FIELDS if getattr(log, k, None) is not None})
    return out


def _write(record: BenchRecord, path: Optional[Path]) -> None:
    """Write ``record`` to ``path`` atomically (a temporary file in the same folder, renamed)."""
    if path is None:
        return
    fd, tmp = tempfile.mkstemp(prefix=".kvplan-bench-", suffix=".json", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(record.to_json())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


async def _bench(
    *, record: BenchRecord, endpoint: Endpoint, grid_name: str, seconds: Optional[float], token_limit: int, seed: int,
    record_path: Optional[Path], say: Callable[[str], None],
) -> None:
    try:
        record.vllm_version = (await get_json(endpoint, "/version")).get("version")
    except (HttpError, asyncio.TimeoutError, AttributeError):
        record.notes.append("GET /version failed: vllm_version unknown")
    max_len = None
    try:
        models = await get_json(endpoint, "/v1/models")
        record.served_model = models["data"][0]["id"]
        max_len = models["data"][0].get("max_model_len")
    except (HttpError, asyncio.TimeoutError, KeyError, IndexError, TypeError):
        record.notes.append("GET /v1/models failed: requests name the model directory")
    _, infos = await _scrape(endpoint)
    record.cache_config = prom.cache_config(infos)
    points, skipped = grid(grid_name, seconds, token_limit)
    if isinstance(max_len, int) and max_len > 0:  # vLLM would refuse these requests (HTTP 400)
        too_long = {p.name for p in points if p.input_len + p.output_len > max_len}
        for p in points:
            if p.name in too_long or p.rate_of in too_long:
                why = f"input + output = {p.input_len + p.output_len:,} tokens > the server's max_model_len {max_len:,}"
                skipped.append({"name": p.name, "reason": why if p.name in too_long else f"its reference point {p.rate_of} is skipped"})
        points = [p for p in points if p.name not in too_long and p.rate_of not in too_long]
    record.skipped = list(skipped)
    for s in skipped:
        say(f"skip {s['name']}: {s['reason']}")
    for spec in warmup_points(points):
        run = await run_point(spec, endpoint, record.served_model, record.vocab_size, seed=seed + 1_000_000)
        failed = [t.error for t in run.timings if t.error]
        record.warmup.append({"name": spec.name, "sent": len(run.timings), "failed": len(failed), "wall_s": round(run.end - run.start, 3),
                              "first_error": failed[0] if failed else None})
        say(f"warm-up {spec.name}: {len(run.timings)} sent, {len(failed)} failed, {run.end - run.start:.1f} s" + (f" ({failed[0]})" if failed else ""))
        await _wait_idle(endpoint, IDLE_WAIT_S)
    req_s: dict[str, float] = {}
    for spec in points:
        resolved, why = resolve_rate(spec, req_s)
        if resolved is None:
            record.skipped.append({"name": spec.name, "reason": why or ""})
            say(f"skip {spec.name}: {why}")
            continue
        spec = resolved
        before, _ = await _scrape(endpoint)
        samples: list = []
        stop = asyncio.Event()
        t0 = time.perf_counter()
        sampler = asyncio.ensure_future(_sampler(endpoint, t0, samples, stop))
        run = await run_point(spec, endpoint, record.served_model, record.vocab_size, seed=seed)
        stop.set()
        await sampler
        await _wait_idle(endpoint, IDLE_WAIT_S)
        after, _ = await _scrape(endpoint)
        reqs = request_records(run)
        summary = summarize(reqs)
        for row in samples:
            row[0] = round(row[0] - (run.start - t0), 3)
        workload = Workload(
            mode=spec.mode, input_len=spec.input_len, output_len=spec.output_len, concurrency=spec.concurrency,
            rate=None if spec.rate is None else round(spec.rate, 6), rate_of=spec.rate_of, rate_factor=spec.rate_factor,
            seconds=spec.seconds, min_requests=spec.min_requests, drain_s=spec.drain_s, seed=seed, sent=len(run.timings),
            sending_s=round(run.send_stop - run.start, 6), cancelled=run.cancelled,
        )
        record.points.append(PointRecord(
            name=spec.name, workload=workload, summary=summary, metrics_before=prom.kept(before), metrics_after=prom.kept(after),
            metrics_delta=prom.counter_deltas(before, after), samples=samples, requests=reqs,
        ))
        req_s[spec.name] = summary.req_s
        say(
            f"{spec.name}: {summary.completed} done, {summary.failed} failed, {summary.output_tok_s:,.0f} out tok/s, "
            f"{summary.req_s:.2f} req/s, TTFT p50 {summary.ttft_ms.p50} ms, TPOT p50 {summary.tpot_ms.p50} ms, "
            f"preemptions {prom.counter_deltas(before, after).get('num_preemptions', 'n/a')}"
        )
        _write(record, record_path)


def run_bench(
    *,
    model_dir: str,
    config: dict,
    engine_args: dict,
    serve_flags: list[str],
    endpoint: Optional[Endpoint] = None,
    grid_name: str = "full",
    seconds: Optional[float] = None,
    token_limit: int = DEFAULT_TOKEN_LIMIT,
    seed: int = 0,
    record_path: Optional[Path] = None,
    log_path: Optional[Path] = None,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    say: Callable[[str], None] = lambda s: print(f"[kvplan bench] {s}", file=sys.stderr, flush=True),
) -> BenchRecord:
    """Benchmark the server (started here unless ``endpoint`` is given) on ``grid_name``.

    Args:
        model_dir: directory with config.json (what the server loads, with dummy weights).
        config: that config.json (vocab size for the prompts; MoE detection; recorded).
        engine_args: vLLM keyword names -> values (recorded); serve_flags: the same as
            `vllm serve` flags (passed to the server).
        seconds: sending budget per point (None: the grid's default).
        record_path: the JSON record, rewritten after each point; log_path: the server log.
    Returns:
        the BenchRecord (also written to ``record_path``).
    Raises:
        KvplanError: bad input (exit 2); EnvironmentMissing: the server did not start (exit 3).
        KeyboardInterrupt: after the server is stopped.
    """
    vocab = vocab_size_of(config)
    raise_open_files_limit()
    gpu_name, gpu_count = gpu_info()
    server: Optional[Server] = None
    if endpoint is None:
        if not os.environ.get(SERVER_OVERRIDE_ENV) and importlib.util.find_spec("vllm") is None:
            raise EnvironmentMissing(
                "vLLM is not installed (python -m vllm.entrypoints.openai.api_server cannot start)",
                hint="put vLLM on PYTHONPATH, or benchmark a running server with --endpoint http://HOST:PORT",
            )
        log_path = log_path or (record_path.with_suffix(".log") if record_path else Path(tempfile.mkstemp(prefix="kvplan-bench-", suffix=".log")[1]))
        server = start_server(model_dir, serve_flags, config, log_path)
        say(f"starting vLLM: {' '.join(server.command)} (log: {log_path})")
    record = BenchRecord(
        kvplan_version=kvplan.__version__, gpu_name=gpu_name, gpu_count=gpu_count, model=model_dir, served_model=model_dir,
        model_config=config, vocab_size=vocab, engine_args=engine_args, serve_command=server.command if server else None,
        env=server.env if server else {}, endpoint=(server.endpoint if server else endpoint).url(""), started_server=server is not None,
        grid=grid_name, seed=seed, token_limit=token_limit, started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        notes=["complete: false (the run has not finished)"], client_event_loop=event_loop_name(),
    )
    t0 = time.monotonic()
    complete = False
    try:
        if server is not None:
            record.startup_s = round(run_async(wait_ready(server, start_timeout_s, lambda s: None)), 3)
            say(f"vLLM ready after {record.startup_s:.1f} s")
        run_async(_bench(
            record=record, endpoint=server.endpoint if server else endpoint, grid_name=grid_name, seconds=seconds,
            token_limit=token_limit, seed=seed, record_path=record_path, say=say,
        ))
        record.notes = [n for n in record.notes if not n.startswith("complete:")]
        complete = True
    finally:
        if server is not None:
            code = server.stop()
            say(f"vLLM stopped (exit status {code})")
            record.server_log = _read_server_log(server.log_path)
        record.wall_s = round(time.monotonic() - t0, 3)
        if complete or record.points:  # a server that never started leaves no record file
            _write(record, record_path)
    return record
