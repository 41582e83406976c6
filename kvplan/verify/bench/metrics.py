"""vLLM's Prometheus ``/metrics``: the few series the benchmark keeps, read before and after
each point and sampled while it runs.

Names from vLLM's v1/metrics/loggers.py (PrometheusStatLogger; the version of kvplan.verify.versions); the Prometheus client adds
``_total`` to counters. Series carry labels (``model_name``, ``engine``); values are summed over
them (one engine per server here).

    counters  vllm:num_preemptions_total, vllm:prompt_tokens_total, vllm:generation_tokens_total,
              vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
              vllm:request_success_total
    gauges    vllm:kv_cache_usage_perc (fraction 0..1 of the KV blocks in use),
              vllm:num_requests_running, vllm:num_requests_waiting
    info      vllm:cache_config_info{num_gpu_blocks="...", block_size="...", ...} = 1
"""

from __future__ import annotations

import math
import re
from typing import Optional

COUNTERS = (
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:request_success_total",
)
GAUGES = ("vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting")
CACHE_INFO = "vllm:cache_config_info"

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> tuple[dict[str, float], dict[str, dict[str, str]]]:
    """Prometheus text exposition -> (series name -> value summed over its labels, info series
    name -> the labels of its first sample). Comment lines and unparsable values are skipped."""
    values: dict[str, float] = {}
    infos: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, raw = m.group(1), m.group(3), m.group(4)
        try:
            v = float(raw)
        except ValueError:
            continue
        if math.isnan(v):
            continue
        values[name] = values.get(name, 0.0) + v
        if name.endswith("_info") and labels and name not in infos:
            infos[name] = dict(_LABEL.findall(labels))
    return values, infos


def kept(values: dict[str, float]) -> dict[str, float]:
    """Only the series this module keeps (COUNTERS and GAUGES) that the server exposes."""
    return {k: values[k] for k in COUNTERS + GAUGES if k in values}


def counter_deltas(before: Optional[dict], after: Optional[dict]) -> dict[str, float]:
    """after - before for each counter both scrapes have (name without ``vllm:``/``_total``)."""
    if not before or not after:
        return {}
    out = {}
    for k in COUNTERS:
        if k in before and k in after:
            out[k.removeprefix("vllm:").removesuffix("_total")] = after[k] - before[k]
    return out


def cache_config(infos: dict[str, dict[str, str]]) -> dict:
    """vllm:cache_config_info's labels, with the integer ones (num_gpu_blocks, block_size, ...)
    as ints; {} when the server does not expose it."""
    out: dict = {}
    for k, v in infos.get(CACHE_INFO, {}).items():
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out
