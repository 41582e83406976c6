"""``kvplan verify --bench``: measure a real vLLM server's serving performance (docs/bench.md).

    http.py      a standard-library asyncio HTTP/1.1 client (chunked SSE streams)
    client.py    one streamed /v1/completions request with token-id prompts, timed per chunk
    workload.py  the grids, closed-loop (concurrency) and open-loop (Poisson rate) drivers
    metrics.py   vLLM's Prometheus /metrics (preemptions, KV-cache usage, cache_config_info)
    record.py    the record's pydantic models and the per-point summary (percentiles)
    server.py    start/stop ``vllm.entrypoints.openai.api_server`` with dummy weights
    runner.py    the whole run: server, grid, record

Nothing here imports vLLM, torch or an HTTP library beyond the standard library.
"""
